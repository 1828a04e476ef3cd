"""keras-hub presets out and in: an exported preset loads in a process that has keras-hub but not
electra_tf and tokenizes as ours does (uncased, cased, SentencePiece); its hidden states differ
from ours only by the GELU form; presets keras-hub writes convert into model_dirs that give
keras-hub's outputs, fine-tune, export every way and continue pre-training; bad input is refused
with nothing written."""

import json
import os
from pathlib import Path

import numpy as np
import pytest

from electra_tf import convert, export, finetune, pretrain
from electra_tf.data.corpus import sample_paragraphs
from electra_tf.data.tokenization import ElectraTokenizer
from electra_tf.data.vocabulary_files import V1_RULE, TokenizerSettings
from electra_tf.finetuning.pretrained import load_pretrained
from electra_tf.interop.huggingface import ConversionError
from electra_tf.interop.keras_hub_presets import import_keras_hub, write_preset
from electra_tf.models.backbone import Backbone, BackboneConfig
from electra_tf.models.config import ModelConfig
from tests.keras_hub_only import LENGTH, run_keras_hub_only

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "huggingface"
CASED_TEXTS = ["The Apple in May, the apple in may.", "Café in Zürich is naïve!", "北京大学 opened in New York.",
               "São Paulo's Straße", "İstanbul and ISTANBUL", "", "CAFÉ  Cafés  cafe"]

def our_hidden_states(backbone, ids, mask):
    batch = {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": mask}
    return backbone.discriminator(batch, training=False)["sequence_output"].numpy()


def our_replaced_logits(backbone, ids, mask):
    batch = {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": mask}
    return backbone.discriminator(batch, training=False)["logits"].numpy()


def with_tanh_gelu(function, *args):
    """`function(*args)` with our transformer layer computing GELU in keras-hub's tanh form."""
    from electra_tf.models.transformer import gelu_form

    with gelu_form("tanh"):
        return function(*args)


def wide_backbone(tokenizer, initializer_range=0.5):
    """Random weights at a scale where the two GELU forms visibly differ (pre-activations of a
    few units, as in a trained model; at the 0.02 initialisation they are too small)."""
    config = BackboneConfig(ModelConfig(vocab_size=tokenizer.vocabulary_size, hidden_size=32, num_layers=2,
                                        num_heads=4, intermediate_size=64, embedding_size=16,
                                        max_position_embeddings=64, initializer_range=initializer_range),
                            max_seq_length=LENGTH)
    return Backbone.build(config, tokenizer, source="random")


@pytest.fixture(scope="module")
def presets(pretrained_run, sentencepiece_vocab, small_vocab, tmp_path_factory):
    """Presets exported by the command from a pre-training run, from a cased converted
    checkpoint, and from models with wide random weights (WordPiece and SentencePiece)."""
    root = tmp_path_factory.mktemp("keras_hub")
    assert export.main(["--model_dir", str(pretrained_run), "--format", "keras_hub", "--export_dir",
                        str(root / "uncased")]) == 0
    cased = import_huggingface_cased(root / "cased_model")
    assert export.main(["--model_dir", str(cased), "--format", "keras_hub", "--export_dir", str(root / "cased")]) == 0
    wide = wide_backbone(ElectraTokenizer(small_vocab))
    wide.save(root / "wide_backbone")
    write_preset(wide, root / "wide")
    sentencepiece = wide_backbone(ElectraTokenizer(sentencepiece_vocab), initializer_range=0.02)
    sentencepiece.save(root / "sentencepiece_backbone")
    write_preset(sentencepiece, root / "sentencepiece")
    sources = {"uncased": pretrained_run, "cased": cased, "wide": root / "wide_backbone",
               "sentencepiece": root / "sentencepiece_backbone"}
    return root, sources


def import_huggingface_cased(output: Path) -> Path:
    from electra_tf.interop.convert import import_huggingface

    return import_huggingface(FIXTURE / "cased", output).path


@pytest.fixture(scope="module")
def loaded_elsewhere(presets, corpus):
    root, sources = presets
    texts = sample_paragraphs(40) + CASED_TEXTS + [s for d in corpus.DOCUMENTS_ZH + corpus.DOCUMENTS_KO for s in d]
    return texts, run_keras_hub_only({name: root / name for name in sources}, texts, root / "outputs")


@pytest.mark.parametrize("name", ["uncased", "cased", "sentencepiece"])
def test_the_preset_tokenizes_as_ours(presets, loaded_elsewhere, name):
    _, sources = presets
    texts, outputs = loaded_elsewhere
    ours = load_pretrained(sources[name]).tokenizer
    ids, mask = outputs[name]["ids"], outputs[name]["mask"]
    expected = [[ours.cls_id] + row[: LENGTH - 2] + [ours.sep_id] for row in ours.tokenize(texts).to_list()]
    assert [list(row[m.astype(bool)]) for row, m in zip(ids, mask)] == expected
    assert sum(len(row) > 10 for row in expected) > 40  # real text: Wikipedia's paragraphs fill their rows


@pytest.mark.parametrize("name", ["uncased", "cased", "wide", "sentencepiece"])
def test_hidden_states_differ_only_by_the_gelu_form(presets, loaded_elsewhere, name):
    _, sources = presets
    theirs = loaded_elsewhere[1][name]
    ours = load_pretrained(sources[name])
    real = theirs["mask"].astype(bool)
    exact = np.abs(our_hidden_states(ours, theirs["ids"], theirs["mask"]) - theirs["sequence_output"])[real].max()
    tanh = np.abs(with_tanh_gelu(our_hidden_states, ours, theirs["ids"], theirs["mask"])
                  - theirs["sequence_output"])[real].max()
    assert tanh < 2e-5  # the same computation but for float rounding
    assert exact < 2e-2
    if name == "wide":  # weights large enough for the GELU forms to matter: the whole difference is theirs
        assert exact > 1e-3 and exact > 50 * tanh
    # The replaced-token head beside the backbone (a plain Keras model: exact GELU) on keras-hub's
    # hidden states gives a keras-hub user our logits (what prompting reads).
    hidden = with_tanh_gelu(our_hidden_states, ours, theirs["ids"], theirs["mask"])
    logits = ours.discriminator.head(hidden).numpy()
    np.testing.assert_allclose(theirs["replaced_logits"][real], logits[real], atol=1e-4)


def test_the_preset_says_what_it_holds(presets):
    root, _ = presets
    written = json.loads((root / "uncased" / "electra_tf.json").read_text())
    assert written["step"] == 4 and "tanh" in written["differences"][0]
    assert json.loads((root / "uncased" / "config.json").read_text())["registered_name"] == "keras_hub>ElectraBackbone"
    tokenizer = json.loads((root / "cased" / "tokenizer.json").read_text())["config"]
    assert tokenizer["lowercase"] is False and tokenizer["strip_accents"] is False


def test_the_printed_from_preset_path_is_absolute_for_a_relative_export_dir(presets, tmp_path, monkeypatch, capsys):
    _, sources = presets
    monkeypatch.chdir(tmp_path)
    assert export.main(["--model_dir", str(sources["wide"]), "--format", "keras_hub", "--export_dir", "out"]) == 0
    printed = capsys.readouterr().out
    path = printed.split("ElectraBackbone.from_preset(")[1].split(")")[0].strip("'\"")
    assert Path(path).is_absolute() and Path(path) == tmp_path / "out" and (Path(path) / "config.json").is_file()


def test_exported_and_converted_back_gives_our_outputs(presets, loaded_elsewhere, tmp_path):
    root, sources = presets
    for name in ("cased", "sentencepiece"):
        model_dir = import_keras_hub(root / name, tmp_path / name)
        original, again = load_pretrained(sources[name]), load_pretrained(model_dir.path)
        assert again.tokenizer.vocabulary == original.tokenizer.vocabulary
        assert again.tokenizer.settings == original.tokenizer.settings
        ids, mask = loaded_elsewhere[1][name]["ids"], loaded_elsewhere[1][name]["mask"]
        np.testing.assert_array_equal(our_hidden_states(again, ids, mask), our_hidden_states(original, ids, mask))
        np.testing.assert_array_equal(our_replaced_logits(again, ids, mask), our_replaced_logits(original, ids, mask))
        assert json.loads((model_dir.path / "imported_from.json").read_text())["rtd_head"] is True


def keras_hub_preset(folder: Path, vocabulary: list[str], lowercase: bool, **sizes) -> Path:
    """A preset as keras-hub itself writes one: random weights of `sizes`."""
    import keras_hub

    backbone = keras_hub.models.ElectraBackbone(**{"vocab_size": len(vocabulary), "num_layers": 2, "num_heads": 2,
                                                   "hidden_dim": 16, "embedding_dim": 16, "intermediate_dim": 32,
                                                   "max_sequence_length": 64, **sizes})
    backbone.save_to_preset(str(folder))
    keras_hub.models.ElectraTokenizer(vocabulary=vocabulary, lowercase=lowercase).save_to_preset(str(folder))
    return folder


@pytest.mark.parametrize("sizes,lowercase", [
    ({}, True),
    ({"hidden_dim": 32, "embedding_dim": 8, "num_heads": 4, "intermediate_dim": 48, "num_layers": 1}, False),
    ({"hidden_dim": 24, "num_heads": 3, "embedding_dim": 24, "num_layers": 3, "max_sequence_length": 40}, True),
])
def test_presets_keras_hub_writes_convert(small_vocab, tmp_path, sizes, lowercase):
    import keras_hub

    vocabulary = small_vocab.read_text().splitlines() + ([] if lowercase else ["The", "River", "Hills"])
    preset = keras_hub_preset(tmp_path / "preset", vocabulary, lowercase, **sizes)
    model_dir = import_keras_hub(preset, tmp_path / "model")
    ours = load_pretrained(model_dir.path)
    assert ours.tokenizer.settings.lowercase is lowercase and ours.config.max_seq_length == min(
        128, sizes.get("max_sequence_length", 64))
    texts = ["The River rises in the northern Hills.", "Bees visit the orchard every morning."]
    theirs_tokenizer = keras_hub.models.ElectraTokenizer.from_preset(str(preset))
    assert ours.tokenizer.tokenize(texts).to_list() == [list(row) for row in theirs_tokenizer(texts)]
    backbone = keras_hub.models.ElectraBackbone.from_preset(str(preset))
    ids = np.array([[2, 7, 9, 11, 3, 0], [2, 5, 6, 3, 0, 0]], "int32")
    mask = (np.arange(6) < np.array([[5], [4]])).astype("int32")
    theirs = backbone({"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": mask})
    theirs = np.asarray(theirs["sequence_output"])[mask.astype(bool)]
    np.testing.assert_allclose(with_tanh_gelu(our_hidden_states, ours, ids, mask)[mask.astype(bool)], theirs,
                               atol=2e-5)
    np.testing.assert_allclose(our_hidden_states(ours, ids, mask)[mask.astype(bool)], theirs, atol=1e-3)


# -m slow: 31 s of the suite. By default: presets keras-hub writes convert to keras-hub's outputs (above),
# fine-tune as they are (below), and --init_from continues any model_dir (tests/test_convert.py).
@pytest.mark.slow
def test_a_converted_preset_fine_tunes_exports_and_continues_pre_training(small_vocab, corpus, tmp_path, capsys):
    import keras_hub

    preset = keras_hub_preset(tmp_path / "preset", small_vocab.read_text().splitlines(), True)
    assert convert.main(["--from", "keras_hub", "--input", str(preset), "--output", str(tmp_path / "electra_kh"),
                         "--max_seq_length", "32"]) == 0
    printed = capsys.readouterr().out
    assert "no replaced-token head" in printed and "starts one of the config's size from scratch" in printed
    model_dir = tmp_path / "electra_kh"
    for fmt, written in (("saved_model", "export/electra_kh/1/saved_model.pb"),
                         ("huggingface", "export/electra_kh-huggingface/discriminator/model.safetensors"),
                         ("keras_hub", "export/electra_kh-keras_hub/model.weights.h5")):  # the default places
        assert export.main(["--model_dir", str(model_dir), "--format", fmt]) == 0
        assert (model_dir / written).is_file(), fmt

    rows = [(s, "a" if i % 2 else "b") for i, document in enumerate(corpus.DOCUMENTS) for s in document]
    (tmp_path / "topics").mkdir()
    data = tmp_path / "topics" / "train.csv"
    data.write_text("text,label\n" + "".join(f'"{t}",{label}\n' for t, label in rows))
    assert finetune.main(["--pretrained", str(model_dir), "--train", str(data), "--eval", str(data),
                          "--output_dir", str(tmp_path / "tuned"), "--epochs", "1", "--batch_size", "4"]) == 0
    tuned = tmp_path / "tuned" / "best.keras"  # a fine-tuned model's backbone goes out too
    assert export.main(["--model_dir", str(tuned), "--format", "keras_hub", "--export_dir",
                        str(tmp_path / "tuned_kh")]) == 0
    ids = np.array([[2, 7, 9, 11, 3]], "int32")
    mask = np.ones_like(ids)
    theirs = keras_hub.models.ElectraBackbone.from_preset(str(tmp_path / "tuned_kh"))(
        {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": mask})["sequence_output"]
    fine_tuned = load_pretrained(tuned)
    np.testing.assert_allclose(with_tanh_gelu(our_hidden_states, fine_tuned, ids, mask), np.asarray(theirs), atol=2e-5)
    before = our_hidden_states(load_pretrained(model_dir), ids, mask)
    assert not np.allclose(our_hidden_states(fine_tuned, ids, mask), before, atol=1e-6)  # the backbone was trained

    shards = corpus.build_test_shards(tmp_path, model_dir / "vocab.txt", 32, num_shards=1, repeat=5)
    assert pretrain.main(["--init_from", str(model_dir), "--data", str(shards), "--model_dir",
                          str(tmp_path / "continued"), "--export_dir", str(tmp_path / "x"), "--steps", "2",
                          "--batch_size", "2", "--log_every", "1", "--eval_batches", "1",
                          "--set", "max_seq_length=32"]) == 0
    printed = capsys.readouterr().out
    assert "holds no trained generator" in printed and "step 2/2" in printed


def test_a_keras_hub_preset_is_pretrained_as_it_is_without_a_convert_step(small_vocab, corpus, tmp_path):
    """`--pretrained PRESET` reads keras-hub's own preset through the one loader: the same
    encoder and tokenizer as the model_dir `convert` would write, and a fine-tuning run from it."""
    preset = keras_hub_preset(tmp_path / "preset", small_vocab.read_text().splitlines(), True)
    direct, converted = load_pretrained(preset), load_pretrained(import_keras_hub(preset, tmp_path / "model").path)
    assert direct.config.model == converted.config.model and direct.tokenizer.vocabulary == converted.tokenizer.vocabulary
    ids = np.array([[2, 7, 9, 11, 3]], "int32")
    mask = np.ones_like(ids)
    np.testing.assert_array_equal(our_hidden_states(direct, ids, mask), our_hidden_states(converted, ids, mask))
    rows = [(s, "a" if i % 2 else "b") for i, document in enumerate(corpus.DOCUMENTS) for s in document]
    data = tmp_path / "topics.csv"
    data.write_text("text,label\n" + "".join(f'"{t}",{label}\n' for t, label in rows))
    assert finetune.main(["--pretrained", str(preset), "--train", str(data), "--eval", str(data), "--max_seq_length",
                          "32", "--output_dir", str(tmp_path / "tuned"), "--epochs", "1", "--batch_size", "8"]) == 0
    assert json.loads((tmp_path / "tuned" / "metrics.json").read_text())["pretrained"] == str(preset.resolve())
    # export reads it through the same loader
    assert export.main(["--model_dir", str(preset), "--format", "keras_hub", "--export_dir", str(tmp_path / "again")]) == 0
    assert json.loads((tmp_path / "again" / "config.json").read_text())["config"]["hidden_dim"] == \
        json.loads((preset / "config.json").read_text())["config"]["hidden_dim"]


def test_bad_input_is_refused_and_nothing_is_written(small_vocab, tmp_path, capsys):
    import keras_hub

    def refused(argv, *phrases):
        assert convert.main(argv) == 2
        error = capsys.readouterr().err
        assert all(phrase in error for phrase in phrases), error

    out = ["--output", str(tmp_path / "out")]
    refused(["--from", "keras_hub", "--input", str(tmp_path / "none")] + out, "is not a folder")
    (tmp_path / "empty").mkdir()
    refused(["--from", "keras_hub", "--input", str(tmp_path / "empty")] + out, "config.json is missing")
    bert = tmp_path / "bert"
    keras_hub.models.BertBackbone(vocabulary_size=20, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                                  max_sequence_length=16).save_to_preset(str(bert))
    refused(["--from", "keras_hub", "--input", str(bert)] + out, "keras_hub>BertBackbone", "not a keras-hub ELECTRA")

    vocabulary = small_vocab.read_text().splitlines()
    good = keras_hub_preset(tmp_path / "good", vocabulary, True)
    no_weights = tmp_path / "no_weights"
    no_weights.mkdir()
    for name in ("config.json", "tokenizer.json", "assets"):
        os.symlink(good / name, no_weights / name)
    refused(["--from", "keras_hub", "--input", str(no_weights)] + out, "has no model.weights.h5")
    truncated = keras_hub_preset(tmp_path / "truncated", vocabulary, True)
    weights = truncated / "model.weights.h5"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    refused(["--from", "keras_hub", "--input", str(truncated)] + out, "model.weights.h5: cannot be loaded",
            "truncated")
    reshaped = keras_hub_preset(tmp_path / "reshaped", vocabulary, True)
    config = json.loads((reshaped / "config.json").read_text())
    config["config"]["intermediate_dim"] = 48
    (reshaped / "config.json").write_text(json.dumps(config))
    refused(["--from", "keras_hub", "--input", str(reshaped)] + out, "model.weights.h5: cannot be loaded")
    refused(["--from", "keras_hub", "--input", str(good), "--generator", str(good)] + out, "say it all")
    assert not (tmp_path / "out").exists()

    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    refused(["--from", "keras_hub", "--input", str(good)] + out, "exists and is not empty", "--overwrite")
    assert convert.main(["--from", "keras_hub", "--input", str(good), "--overwrite"] + out) == 0
    assert not (tmp_path / "out" / "keep.txt").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary folder left


def test_export_refuses_what_a_preset_cannot_hold(presets, small_vocab, tmp_path, capsys):
    root, sources = presets
    assert export.main(["--model_dir", str(sources["uncased"]), "--format", "keras_hub", "--export_dir",
                        str(root / "uncased")]) == 2
    assert "--overwrite" in capsys.readouterr().err
    keep_cjk = ElectraTokenizer(small_vocab.read_text().splitlines(), TokenizerSettings(split_cjk=False, rule=V1_RULE))
    with pytest.raises(ConversionError, match="split_on_cjk"):
        write_preset(wide_backbone(keep_cjk), tmp_path / "cjk")
    other_epsilon = wide_backbone(ElectraTokenizer(small_vocab))
    other_epsilon.config = other_epsilon.config.replace(model=other_epsilon.config.model.replace(
        layer_norm_epsilon=1e-6))
    with pytest.raises(ConversionError, match="layer_norm_epsilon"):
        write_preset(other_epsilon, tmp_path / "epsilon")
    assert not list(tmp_path.iterdir())
