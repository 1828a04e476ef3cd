"""The prompt classifier's scoring rule on known logits, and the model saved and loaded whole
(template, words and weights) answering as before."""

import keras
import numpy as np
import tensorflow as tf

from electra_tf.data.tokenization import SPECIAL_TOKENS
from electra_tf.finetuning.text.prompt_model import ElectraPromptClassifier, class_logits
from electra_tf.finetuning.text.prompts import PromptPreprocessor
from electra_tf.models.config import ModelConfig
from electra_tf.models.encoders import build_discriminator

VOCABULARY = [*SPECIAL_TOKENS, "it", "was", "good", "bad", "film", "very", ".", "terr", "##ible"]


def test_a_class_scores_the_mean_logit_over_its_pieces_and_its_words():
    logits = tf.constant([[[0.0, 4.0, 2.0, 9.0], [0.0, 1.0, 9.0, 9.0], [0.0, 9.0, 9.0, -3.0]]])  # [1, 3 variants, 4]
    mask = tf.constant([[[0, 1, 1, 0], [0, 1, 0, 0], [0, 0, 0, 1]]])
    averaging = [[0.5, 0.0], [0.5, 0.0], [0.0, 1.0]]  # variants 0 and 1 are class 0's words
    np.testing.assert_allclose(class_logits(logits, mask, averaging).numpy(), [[-(3.0 + 1.0) / 2, 3.0]])


def test_a_saved_prompt_classifier_loads_with_its_template_and_words(tmp_path):
    backbone = build_discriminator(ModelConfig(vocab_size=len(VOCABULARY), hidden_size=16, num_layers=1, num_heads=2,
                                               intermediate_size=32))
    model = ElectraPromptClassifier(backbone, PromptPreprocessor(
        VOCABULARY, 16, template="{{{text}}} it was {label} .", label_words="positive=very good|good; negative=terrible"))
    model.compile(optimizer="adam")
    texts = ["good film", "terrible film", ""]
    model.fit(texts, ["positive", "negative", "positive"], epochs=1, verbose=0)
    model.save(tmp_path / "prompt.keras")
    again = keras.saving.load_model(tmp_path / "prompt.keras")
    assert again.preprocessor.get_config()["template"] == "{{{text}}} it was {label} ."
    assert again.label_names == ["positive", "negative"] and again.layout == model.layout
    np.testing.assert_allclose(again.predict(texts, verbose=0), model.predict(texts, verbose=0), atol=1e-6)


def test_the_served_pair_signature_answers_as_predict():
    backbone = build_discriminator(ModelConfig(vocab_size=len(VOCABULARY), hidden_size=16, num_layers=1, num_heads=2,
                                               intermediate_size=32))
    model = ElectraPromptClassifier(backbone, PromptPreprocessor(
        VOCABULARY, 16, template="{text_a} ? {label} , {text_b}", label_words="yes=good; no=bad|terrible"))
    texts, pairs = ["good film", "", "film"], ["very bad", "film", ""]
    endpoint, inputs = model.serving_endpoints(model.preprocessor.tokenizer, 16)["serving_default"]
    assert [name for name, _, _ in inputs] == ["text", "text_pair"]
    served = endpoint(tf.constant(texts), tf.constant(pairs))
    expected = model.predict_labels((texts, pairs))
    np.testing.assert_allclose(served["probabilities"].numpy(), expected["probabilities"], atol=1e-6)
    assert served["label"].numpy().astype(str).tolist() == expected["label"].tolist()
    assert served["no_text"].numpy().tolist() == [False, True, True]
