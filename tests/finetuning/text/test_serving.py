"""What a fine-tuned classifier or tagger serves: label names and probabilities (or a score on
the original scale) from text and from ids alike, per-word tags from text, and the same model's
LiteRT function."""

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.data.tokenization import ElectraTokenizer
from electra_tf.finetuning.text.models import ElectraClassifier, ElectraTokenClassifier
from electra_tf.models.config import ModelConfig
from electra_tf.models.device_inputs import LiteRTTokenizer
from electra_tf.models.encoders import build_discriminator
from electra_tf.models.preprocessing import ElectraTextPreprocessor, ElectraWordPreprocessor, pack_texts
from electra_tf.models.signatures import IDS_SIGNATURE, TEXT_SIGNATURE

TEXTS = ["The river rises in the hills.", "Bees visit the orchard."]


@pytest.fixture(scope="module")
def tokenizer(small_vocab):
    return ElectraTokenizer(small_vocab)


def backbone(tokenizer):
    return build_discriminator(ModelConfig(vocab_size=tokenizer.vocabulary_size, hidden_size=16, num_layers=1,
                                           num_heads=2, intermediate_size=32, embedding_size=16))


def test_a_classifier_serves_names_and_probabilities_from_text_ids_and_on_a_device(tokenizer):
    model = ElectraClassifier(backbone(tokenizer), 2, label_names=["nature", "town"],
                              preprocessor=ElectraTextPreprocessor(tokenizer, 12))
    endpoints = model.serving_endpoints(tokenizer, 12)
    by_text = endpoints[TEXT_SIGNATURE][0](tf.constant(TEXTS))
    packed = pack_texts(tokenizer, 12, TEXTS)
    by_ids = endpoints[IDS_SIGNATURE][0](packed["token_ids"], packed["segment_ids"], packed["padding_mask"])
    np.testing.assert_allclose(by_text["probabilities"], by_ids["probabilities"], atol=1e-6)
    assert by_text["label_names"].numpy().tolist() == [[b"nature", b"town"]] * 2
    assert [label.decode() for label in by_text["label"].numpy()] == \
        [["nature", "town"][i] for i in by_text["probabilities"].numpy().argmax(-1)]
    device, inputs = model.litert_endpoint(LiteRTTokenizer(tokenizer), 12)
    assert inputs == ["text"]
    np.testing.assert_allclose(device(tf.constant(TEXTS))["probabilities"], by_text["probabilities"], atol=1e-6)
    assert model.serving_task(12) == {"label_names": ["nature", "town"], "score_range": None, "text_pair": False}


def test_a_regression_serves_a_score_on_the_original_scale(tokenizer):
    model = ElectraClassifier(backbone(tokenizer), 1, score_range=(0.0, 5.0),
                              preprocessor=ElectraTextPreprocessor(tokenizer, 12))
    logits = model(pack_texts(tokenizer, 12, TEXTS)).numpy()[:, 0]
    score = model.serving_endpoints(tokenizer, 12)[TEXT_SIGNATURE][0](tf.constant(TEXTS))["score"]
    np.testing.assert_allclose(score, logits * 5.0, atol=1e-5)


def test_a_tagger_serves_a_tag_per_whitespace_word(tokenizer):
    tagger = ElectraTokenClassifier(backbone(tokenizer), 3, label_names=["DET", "NOUN", "VERB"],
                                    preprocessor=ElectraWordPreprocessor(tokenizer, 12))
    outputs = tagger.serving_endpoints(tokenizer, 12)[TEXT_SIGNATURE][0](tf.constant(["the rivers rise", ""]))
    assert outputs["words"].numpy()[0].tolist() == [b"the", b"rivers", b"rise"]
    assert all(tag in (b"DET", b"NOUN", b"VERB") for tag in outputs["tags"].numpy()[0])
    assert outputs["tags"].numpy()[1].tolist() == [b"", b"", b""] and "entity_text" not in outputs
