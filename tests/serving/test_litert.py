"""LiteRT files that take raw text: each kind (the discriminator, a classifier of classes, of
pairs, a regression, a tagger) is written, then run one text a call in a process that has only
LiteRT's interpreter and tensorflow-text's kernels, and agrees with the SavedModel export on real
text: the same ids and argmax, probabilities within 1e-4; long inputs truncated as the SavedModel
truncates them, an empty string answered. SentencePiece and cased vocabularies too; 8-bit weights
run and stay close; what has no LiteRT kernel is refused with nothing written."""

import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest

from electra_tf import export, finetune
from electra_tf.data.corpus import sample_paragraphs
from electra_tf.data.tokenization import UNICODE_WHITE_SPACE, ElectraTokenizer
from electra_tf.data.vocabulary_files import V1_RULE, TokenizerSettings
from electra_tf.finetuning.pretrained import load_pretrained
from electra_tf.finetuning.question_answering.model import ElectraQuestionAnswerer
from electra_tf.finetuning.text.models import ElectraClassifier, ElectraTokenClassifier
from electra_tf.serving.litert import LiteRTError, write_litert
from electra_tf.serving.publish import export_model
from tests.litert_only import run_litert_only
from tests.tokenization_corpus import EDGE_CASES, FRENCH, chinese_reviews, korean_constitution

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "huggingface"
pytestmark = pytest.mark.skipif(importlib.util.find_spec("ai_edge_litert") is None,
                                reason="needs LiteRT's interpreter: pip install -e \".[test]\" (ai-edge-litert)")


# Real text in several scripts, French typography, every character class where word splitting
# rules differ (NUL, Unicode spaces, format characters, "…"), an empty string, text past the
# sequence length: the SavedModel and the LiteRT file give the same ids on every one.
TEXTS = (sample_paragraphs(12) + ["", "Café in Zürich, naïve!  北京大学 opened.", "river " * 300] + FRENCH
         + EDGE_CASES + chinese_reviews(10) + korean_constitution(10))


def saved_model_outputs(export_path, **inputs):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the export's tokenizer ops)

    signature = tf.saved_model.load(str(export_path)).signatures["serving_default"]
    return {key: value.numpy() for key, value in signature(**{k: tf.constant(v) for k, v in inputs.items()}).items()}


@pytest.fixture(scope="module")
def backbone(pretrained_run):
    return load_pretrained(pretrained_run)


def both_ways(model, backbone, tmp_path, name, quantize="none"):
    """(the LiteRT file, the SavedModel export) of `model` over the pre-trained run's backbone."""
    lite = write_litert(model, backbone.tokenizer, backbone.config.max_seq_length, tmp_path / f"{name}.tflite",
                        quantize)
    saved = export_model(model, backbone.tokenizer, backbone.config, tmp_path / "exports", name)
    return lite, saved


def test_the_discriminator_gives_the_saved_models_ids_and_probabilities(pretrained_run, tmp_path, capsys):
    assert export.main(["--model_dir", str(pretrained_run), "--format", "litert", "--export_dir", str(tmp_path)]) == 0
    assert "checked: it runs" in capsys.readouterr().out
    theirs = run_litert_only(tmp_path / "electra_tiny.tflite", [{"text": t} for t in TEXTS], tmp_path / "out.npz")
    ours = saved_model_outputs(pretrained_run / "export" / "electra_tiny" / "1", text=TEXTS)
    np.testing.assert_array_equal(theirs["token_ids"], ours["token_ids"])
    np.testing.assert_array_equal(theirs["padding_mask"], ours["padding_mask"])
    np.testing.assert_allclose(theirs["replaced_probability"], ours["replaced_probability"], atol=1e-4)
    np.testing.assert_allclose(theirs["cls_hidden_state"], ours["cls_hidden_state"], atol=1e-4)
    assert theirs["padding_mask"][TEXTS.index("river " * 300)].sum() == 128
    assert list(theirs["token_ids"][TEXTS.index("")][:3]) == [2, 3, 0]
    np.testing.assert_array_equal(theirs["no_text"], ours["no_text"])
    assert [t for t, flag in zip(TEXTS, ours["no_text"]) if flag] == ["", "", "   ", "\u00a0\u2009\u3000", "\u200b\u200b"]
    assert export.main(["--model_dir", str(pretrained_run), "--format", "litert", "--export_dir", str(tmp_path)]) == 2
    assert "--overwrite" in capsys.readouterr().err


# A classifier of pairs: tests/serving/test_bad_input.py compares its two files on these texts too
@pytest.mark.parametrize("kind", ["classes", "regression"])
def test_a_classifier_agrees_with_its_saved_model(backbone, tmp_path, kind):
    settings = {"classes": dict(num_classes=3, label_names=["negative", "neutral", "positive"]),
                "pairs": dict(num_classes=2, label_names=["different", "same"], text_pair=True),
                "regression": dict(num_classes=1, score_range=(0.0, 5.0))}[kind]
    model = ElectraClassifier(backbone.discriminator, **settings)
    lite, saved = both_ways(model, backbone, tmp_path, kind)
    inputs = {"text": TEXTS} if kind != "pairs" else {"text": TEXTS, "text_pair": TEXTS[::-1]}
    calls = [dict(zip(inputs, values)) for values in zip(*inputs.values())]
    theirs, ours = run_litert_only(lite, calls, tmp_path / "out.npz"), saved_model_outputs(saved, **inputs)
    if kind == "regression":
        np.testing.assert_allclose(theirs["score"], ours["score"], atol=1e-4)
        return
    np.testing.assert_allclose(theirs["probabilities"], ours["probabilities"], atol=1e-4)
    assert (theirs["probabilities"].argmax(-1) == ours["probabilities"].argmax(-1)).all()
    assert list(theirs["label_names"]) == settings["label_names"]


def test_a_tagger_gives_each_words_tags_and_its_place_in_the_text(backbone, tmp_path):
    tags = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    lite, saved = both_ways(ElectraTokenClassifier(backbone.discriminator, len(tags), label_names=tags), backbone,
                            tmp_path, "tagger")
    # Words are runs between Unicode spaces (the vocabulary splits as BERT does), found by the
    # same ops in both forms: every text, those with no-break, thin and ideographic spaces too.
    texts = TEXTS + ["10\u00a0000\u202fkm", "Paris\u3000Lyon \u2028Nice"]
    theirs = run_litert_only(lite, [{"text": t} for t in texts], tmp_path / "out.npz")
    ours = saved_model_outputs(saved, text=texts)
    words = ours["tag_probabilities"].shape[1]
    assert words == 300 and theirs["tag_probabilities"].shape[1] == 126  # one slot per position a word can start at
    kept = ours["tags"] != b""
    np.testing.assert_allclose(theirs["tag_probabilities"][:, :126][kept[:, :126]],
                               ours["tag_probabilities"][:, :126][kept[:, :126]], atol=1e-4)
    np.testing.assert_array_equal(theirs["no_text"], ours["no_text"])
    for row, text in enumerate(texts):
        n = int(kept[row].sum())
        assert (theirs["word_start"][row] >= 0).sum() == n
        spans = [text.encode()[s:e].decode() for s, e in zip(theirs["word_start"][row][:n], theirs["word_end"][row][:n])]
        assert spans == [w.decode() for w in ours["words"][row][:n]]
        assert spans == [w for w in re.split(f"[{UNICODE_WHITE_SPACE}]+", text) if w][:n]
    assert list(ours["words"][-2][:4]) == [b"10", b"000", b"km", b""]
    assert list(theirs["tag_names"]) == tags


def test_sentencepiece_and_cased_vocabularies_tokenize_as_the_saved_model(sentencepiece_vocab, tmp_path, corpus):
    from electra_tf.interop.convert import import_huggingface
    from electra_tf.models.backbone import Backbone, BackboneConfig
    from electra_tf.models.config import ModelConfig

    texts = [s for d in corpus.DOCUMENTS_ZH + corpus.DOCUMENTS_KO for s in d] + TEXTS[:4] + [
        "The Apple in May, the apple in may.", "İstanbul and ISTANBUL", "CAFÉ  Cafés  cafe"]
    tokenizer = ElectraTokenizer(sentencepiece_vocab)
    sentencepiece = Backbone.build(BackboneConfig(ModelConfig(vocab_size=tokenizer.vocabulary_size, hidden_size=32,
                                                              num_layers=1, num_heads=2, intermediate_size=64,
                                                              embedding_size=32, max_position_embeddings=64), 64),
                                   tokenizer)
    cased = load_pretrained(import_huggingface(FIXTURE / "cased", tmp_path / "cased").path)
    assert cased.tokenizer.settings == TokenizerSettings.cased()
    for name, source in (("sentencepiece", sentencepiece), ("cased", cased)):
        lite = write_litert(source.discriminator, source.tokenizer, source.config.max_seq_length,
                            tmp_path / f"{name}.tflite")
        saved = export_model(source.discriminator, source.tokenizer, source.config, tmp_path / "exports", name)
        theirs = run_litert_only(lite, [{"text": t} for t in texts], tmp_path / f"{name}.npz")
        np.testing.assert_array_equal(theirs["token_ids"], saved_model_outputs(saved, text=texts)["token_ids"])


# -m slow: the V1 rule's documented differences; BERT_RULE's agreement runs by default (the sentencepiece
# and cased test above).
@pytest.mark.slow
def test_where_the_tokenizers_differ(tmp_path):
    """A vocabulary of BERT_RULE tokenizes in its LiteRT file as in its SavedModel; one written before
    it (V1_RULE) keeps its SavedModel's ids, and its LiteRT file splits words as BERT does where
    that SavedModel does not (a no-break space, a zero-width space): the documented differences."""
    from electra_tf.data.vocabulary_files import SPECIAL_TOKENS
    from electra_tf.models.backbone import Backbone, BackboneConfig
    from electra_tf.models.config import ModelConfig

    vocabulary = [*SPECIAL_TOKENS, "the", "river", "strasse", "fish", "cafe", "a", "b", "##b", "## ", "."]
    texts = ["The River", "Café", "Straße", "ﬁsh", "ＲＩＶＥＲ", "a b", "a\u200bb", "the\xa0river", "a\u2026"]
    same = [["the", "river"], ["cafe"], ["strasse"], ["fish"], ["river"], ["a", "b"]]
    for settings, ours_expected, lite_expected in (
            (TokenizerSettings(), same + [["a", "##b"], ["the", "river"], ["a", ".", ".", "."]], None),
            (TokenizerSettings(rule=V1_RULE), same + [["a", "b"], ["[UNK]"], ["a", "[UNK]"]],
             same + [["a", "##b"], ["the", "river"], ["a", ".", ".", "."]])):
        tokenizer = ElectraTokenizer(vocabulary, settings)
        model = Backbone.build(BackboneConfig(ModelConfig(vocab_size=len(vocabulary), hidden_size=16, num_layers=1,
                                                          num_heads=2, intermediate_size=32, embedding_size=16,
                                                          max_position_embeddings=16), 16), tokenizer)
        lite = write_litert(model.discriminator, tokenizer, 16, tmp_path / f"{settings.rule}.tflite")
        theirs = run_litert_only(lite, [{"text": t} for t in texts], tmp_path / "out.npz")["token_ids"]
        lite_tokens = [[vocabulary[i] for i in row[1: list(row).index(3)]] for row in theirs]
        our_tokens = [[vocabulary[i] for i in row] for row in tokenizer.tokenize(texts).to_list()]
        assert our_tokens == ours_expected
        assert lite_tokens == (lite_expected or ours_expected)


def test_8_bit_weights_run_and_stay_close(backbone, tmp_path):
    model = ElectraClassifier(backbone.discriminator, 3, label_names=["a", "b", "c"])
    float_file = write_litert(model, backbone.tokenizer, backbone.config.max_seq_length, tmp_path / "f.tflite")
    int8_file = write_litert(model, backbone.tokenizer, backbone.config.max_seq_length, tmp_path / "q.tflite",
                             "dynamic")
    assert int8_file.stat().st_size < float_file.stat().st_size
    calls = [{"text": t} for t in TEXTS[:24]]  # real paragraphs, the edge cases; the files run one text a call
    full = run_litert_only(float_file, calls, tmp_path / "f.npz")["probabilities"]
    eight = run_litert_only(int8_file, calls, tmp_path / "q.npz")["probabilities"]
    assert 0 < np.abs(full - eight).max() < 0.05  # quantized, and still the same model


def test_what_has_no_kernel_is_refused_and_nothing_is_written(backbone, small_vocab, tmp_path):
    lower_keep_accents = ElectraTokenizer(small_vocab, TokenizerSettings(lowercase=True, strip_accents=False, rule=V1_RULE))
    with pytest.raises(LiteRTError, match="no LiteRT kernel"):
        write_litert(backbone.discriminator, lower_keep_accents, 32, tmp_path / "a.tflite")
    with pytest.raises(LiteRTError, match="no LiteRT export \(its windows over a long context"):
        write_litert(ElectraQuestionAnswerer(backbone.discriminator), backbone.tokenizer, 32, tmp_path / "b.tflite")
    with pytest.raises(LiteRTError, match="--quantize"):
        write_litert(backbone.discriminator, backbone.tokenizer, 32, tmp_path / "c.tflite", "int4")
    assert not list(tmp_path.iterdir())


def test_a_fine_tuned_best_keras_exports_from_the_command(pretrained_run, corpus, tmp_path, capsys):
    rows = [(s, "bees" if "Bees" in s or "hive" in s else "other") for d in corpus.DOCUMENTS for s in d]
    (tmp_path / "topics").mkdir()
    data = tmp_path / "topics" / "train.csv"
    data.write_text("text,label\n" + "".join(f'"{t}",{label}\n' for t, label in rows))
    assert finetune.main(["--pretrained", str(pretrained_run), "--train", str(data), "--eval", str(data),
                          "--output_dir", str(tmp_path / "tuned"), "--epochs", "1", "--batch_size", "4",
                          "--max_seq_length", "32"]) == 0
    capsys.readouterr()
    assert export.main(["--model_dir", str(tmp_path / "tuned" / "best.keras"), "--format", "litert",
                        "--quantize", "dynamic"]) == 0
    assert "the classification run's ElectraClassifier" in capsys.readouterr().out
    lite = tmp_path / "tuned" / "export" / "topics-int8.tflite"
    theirs = run_litert_only(lite, [{"text": "Bees visit the orchard."}], tmp_path / "out.npz")
    assert sorted(theirs["label_names"]) == ["bees", "other"] and theirs["probabilities"].shape == (1, 2)


def test_a_failed_conversion_keeps_the_converters_message(backbone, tmp_path, monkeypatch):
    import tensorflow as tf

    class FailingConverter:
        """The converter's settings are taken; converting fails as it does for an op without a kernel."""

        target_spec = type("TargetSpec", (), {})()

        def convert(self):
            raise RuntimeError("'tf.SomeOp' op is neither a custom op nor a flex op")

    monkeypatch.setattr(tf.lite.TFLiteConverter, "from_saved_model", lambda *args, **kwargs: FailingConverter())
    with pytest.raises(LiteRTError, match="neither a custom op nor a flex op.*Nothing was written. Try"):
        write_litert(backbone.discriminator, backbone.tokenizer, 32, tmp_path / "d.tflite")
    assert not list(tmp_path.iterdir())


def test_a_fine_tuning_folder_without_its_model_is_refused(tmp_path, capsys):
    (tmp_path / "tuned").mkdir()
    (tmp_path / "tuned" / "metrics.json").write_text('{"task": "topics"}')
    assert export.main(["--model_dir", str(tmp_path / "tuned"), "--format", "litert"]) == 2
    assert "a fine-tuning run's folder without its model" in capsys.readouterr().err
    assert not list((tmp_path / "tuned").glob("**/*.tflite"))
