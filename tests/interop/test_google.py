"""Official TF1 checkpoints in: a checkpoint written here with the official variable names (TF1's
name-based format, as `tf.compat.v1.train.Saver` writes it) from the HuggingFace fixture's
weights must give transformers' reference outputs."""

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from safetensors.numpy import load_file

from electra_tf.pretraining.config import PretrainingConfig
from electra_tf.interop.convert import import_google
from electra_tf.utils.run_dir import read_provenance
from electra_tf.interop.huggingface import ConversionError
from electra_tf.finetuning.pretrained import load_pretrained
from electra_tf.pretraining.restore import restore_pretrainer

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "huggingface"
REFERENCE = np.load(FIXTURE / "reference_outputs.npz")


def official_name(key: str, model: str) -> tuple[str, bool]:
    """The TF1 name of a HuggingFace key, spelled from the official code's scopes (not from our
    table), and whether the value is a transposed Linear weight."""
    scope = {"discriminator": "electra", "generator": "generator"}[model]
    name = key.replace("electra.embeddings.", "electra/embeddings/")  # shared by both networks
    name = name.replace("electra.", f"{scope}/").replace("discriminator_predictions.dense_prediction",
                                                         "discriminator_predictions/dense_1")
    name = name.replace("generator_lm_head.bias", "generator_predictions/output_bias")
    name = re.sub(r"layer\.(\d+)", r"layer_\1", name).replace(".", "/")
    is_layer_norm = "LayerNorm" in name
    if name.endswith("/weight"):
        if re.search(r"_embeddings/weight$", name):
            return name[: -len("/weight")], False
        return name[: -len("weight")] + ("gamma" if is_layer_norm else "kernel"), not is_layer_norm
    if name.endswith("/bias") and is_layer_norm:
        return name[: -len("bias")] + "beta", False
    return name, False


def write_official_checkpoint(folder: Path) -> Path:
    tensors = {}
    for model in ("discriminator", "generator"):
        for key, value in load_file(str(FIXTURE / model / "model.safetensors")).items():
            name, transpose = official_name(key, model)
            tensors[name] = value.T if transpose else value
    assert "electra/encoder/layer_1/attention/output/LayerNorm/gamma" in tensors
    assert "generator/encoder/layer_0/intermediate/dense/kernel" in tensors
    tensors["global_step"] = np.array(1000000, np.int64)
    tensors["electra/embeddings/word_embeddings/adam_m"] = np.zeros_like(tensors["electra/embeddings/word_embeddings"])
    folder.mkdir(parents=True)
    names = sorted(tensors)
    tf.raw_ops.SaveV2(prefix=str(folder / "model.ckpt-1000000"), tensor_names=names,
                      shape_and_slices=[""] * len(names), tensors=[tensors[n] for n in names])
    (folder / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-1000000"\n')
    vocab = json.loads((FIXTURE / "discriminator" / "tokenizer.json").read_text())["model"]["vocab"]
    (folder / "vocab.txt").write_text("\n".join(sorted(vocab, key=vocab.get)) + "\n")
    return folder


@pytest.fixture(scope="module")
def official(tmp_path_factory):
    return write_official_checkpoint(tmp_path_factory.mktemp("google") / "electra_tiny")


def test_official_checkpoint_gives_the_reference_outputs(official, tmp_path):
    # Shapes cannot tell the head count (official sizes use 64 units a head); say it with --config.
    base = PretrainingConfig.from_dict(dict(num_heads=2, hidden_size=32, embedding_size=16, num_layers=2,
                                            intermediate_size=64, vocab_size=55, max_position_embeddings=64,
                                            max_seq_length=64))
    output = import_google(official, tmp_path / "model", config=base).path
    pretrainer, _, config, _ = restore_pretrainer(output)
    assert (config.generator_model.hidden_size, config.generator_model.num_layers) == (16, 2)
    inputs = {"token_ids": REFERENCE["input_ids"].astype("int32"),
              "segment_ids": REFERENCE["token_type_ids"].astype("int32"),
              "padding_mask": REFERENCE["attention_mask"].astype("int32")}
    real = REFERENCE["attention_mask"] > 0
    disc = pretrainer.discriminator(inputs, training=False)
    np.testing.assert_allclose(disc["logits"].numpy()[real], REFERENCE["disc_logits"][real], atol=1e-4)
    gen = pretrainer.generator({**inputs, "mask_positions": REFERENCE["masked_positions"].astype("int32")},
                               training=False)
    np.testing.assert_allclose(gen["logits"].numpy(), REFERENCE["gen_logits_at_masked"], atol=1e-4)
    assert read_provenance(output)["format"] == "google" and load_pretrained(output).config.model.num_heads == 2


def test_the_command_takes_a_config_file_for_what_shapes_cannot_tell(official, tmp_path):
    from electra_tf import convert

    config = tmp_path / "sizes.json"
    config.write_text(json.dumps({"model": {"num_heads": 2, "hidden_size": 32, "embedding_size": 16, "num_layers": 2,
                                            "intermediate_size": 64, "vocab_size": 55, "max_position_embeddings": 64},
                                  "run": {"max_seq_length": 64}}))
    assert convert.main(["--from", "google", "--input", str(official), "--config", str(config), "--output",
                         str(tmp_path / "model")]) == 0
    assert load_pretrained(tmp_path / "model").config.model.num_heads == 2


def test_sizes_are_inferred_from_the_shapes(official, tmp_path):
    config = load_pretrained(import_google(official / "model.ckpt-1000000", tmp_path / "m").path).config
    assert (config.model.vocab_size, config.model.embedding_size, config.model.hidden_size, config.model.num_layers) == (55, 16, 32, 2)
    assert config.model.num_heads == 1  # 32 // 64 rounds up to one head: hence --config for non-official sizes


def test_bad_checkpoints_are_refused(official, tmp_path):
    with pytest.raises(ConversionError, match="holds no TF1 checkpoint"):
        import_google(tmp_path, tmp_path / "out")
    with pytest.raises(ConversionError, match="does not match the checkpoint .*hidden_size: config 64, checkpoint 32"):
        import_google(official, tmp_path / "out", config=PretrainingConfig.from_dict(dict(hidden_size=64, num_heads=1)))
    bert = tmp_path / "bert"
    bert.mkdir()
    tf.raw_ops.SaveV2(prefix=str(bert / "bert_model.ckpt"), tensor_names=["bert/embeddings/word_embeddings"],
                      shape_and_slices=[""], tensors=[np.zeros((5, 4), np.float32)])
    with pytest.raises(ConversionError, match="BERT checkpoint"):
        import_google(bert / "bert_model.ckpt", tmp_path / "out")
    damaged = tmp_path / "damaged"
    shutil.copytree(official, damaged)
    data = next(damaged.glob("*.data-*"))
    data.write_bytes(data.read_bytes()[:1000])
    with pytest.raises(ConversionError, match="damaged or truncated|damaged or incomplete"):
        import_google(damaged, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_cased_release_is_converted_only_when_told(official, tmp_path):
    """A TF1 folder does not say how it tokenizes: uncased (the official default) unless told,
    and a plainly cased vocabulary is refused rather than read uncased."""
    from electra_tf.data.vocabulary_files import TokenizerSettings, read_tokenizer_settings

    folder = tmp_path / "electra_cased"
    shutil.copytree(official, folder)
    tokens = (folder / "vocab.txt").read_text().splitlines()
    (folder / "vocab.txt").write_text("\n".join(tokens[:5] + [t.capitalize() for t in tokens[5:]]) + "\n")
    with pytest.raises(ConversionError, match="read uncased .* If the model is cased, pass --do_lower_case false"):
        import_google(folder, tmp_path / "refused")
    assert not (tmp_path / "refused").exists()
    model_dir = import_google(folder, tmp_path / "model", tokenizer_settings={"do_lower_case": False}).path
    assert read_tokenizer_settings(model_dir / "vocab.txt") == TokenizerSettings.cased()
    assert read_tokenizer_settings(import_google(official, tmp_path / "uncased").path / "vocab.txt") == \
        TokenizerSettings()
