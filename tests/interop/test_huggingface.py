"""HuggingFace folders in and out: same weights, same outputs as transformers' PyTorch ELECTRA
(reference outputs made by tests/fixtures/make_reference.py), and exact round trips. No torch."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from electra_tf.interop.convert import export_huggingface, import_huggingface
from electra_tf.utils.run_dir import read_provenance
from electra_tf.interop.huggingface import ConversionError
from electra_tf.finetuning.pretrained import load_pretrained
from electra_tf.pretraining.restore import restore_pretrainer

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "huggingface"
REFERENCE = np.load(FIXTURE / "reference_outputs.npz")


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    output = tmp_path_factory.mktemp("hf") / "model"
    import_huggingface(FIXTURE / "discriminator", output, generator=FIXTURE / "generator")
    return output


def inputs():
    return {"token_ids": REFERENCE["input_ids"].astype("int32"),
            "segment_ids": REFERENCE["token_type_ids"].astype("int32"),
            "padding_mask": REFERENCE["attention_mask"].astype("int32")}


def test_outputs_equal_transformers_with_padding_and_two_segments(imported):
    pretrainer, tokenizer, config, _ = restore_pretrainer(imported)
    assert (config.model.hidden_size, config.model.num_layers, config.generator_model.hidden_size) == (32, 2, 16)
    disc = pretrainer.discriminator(inputs(), training=False)
    real = REFERENCE["attention_mask"] > 0  # HF computes padding rows too; they are not outputs
    np.testing.assert_allclose(disc["logits"].numpy()[real], REFERENCE["disc_logits"][real], atol=1e-4)
    np.testing.assert_allclose(disc["sequence_output"].numpy()[real], REFERENCE["disc_hidden"][real], atol=1e-4)
    gen = pretrainer.generator({**inputs(), "mask_positions": REFERENCE["masked_positions"].astype("int32")},
                               training=False)
    np.testing.assert_allclose(gen["logits"].numpy(), REFERENCE["gen_logits_at_masked"], atol=1e-4)
    assert tokenizer.vocabulary_size == config.model.vocab_size
    assert read_provenance(imported) == {
        "format": "huggingface", "discriminator": str(FIXTURE / "discriminator"),
        "generator": str(FIXTURE / "generator"), "rtd_head": True, "generator_weights": True}


def test_the_model_dir_is_a_pretrained_source(imported):
    pretrained = load_pretrained(imported)
    assert pretrained.config.max_seq_length == 64  # capped by max_position_embeddings


def test_round_trip_hf_ours_hf_keeps_every_tensor(imported, tmp_path):
    folders = export_huggingface(imported, tmp_path / "out")
    assert [f.name for f in folders] == ["discriminator", "generator"]
    for folder in folders:
        original = load_file(str(FIXTURE / folder.name / "model.safetensors"))
        written = load_file(str(folder / "model.safetensors"))
        assert set(written) == set(original), folder.name
        for key, value in original.items():
            np.testing.assert_array_equal(written[key], value, err_msg=key)
        config = json.loads((folder / "config.json").read_text())
        reference = json.loads((FIXTURE / folder.name / "config.json").read_text())
        for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "embedding_size",
                    "vocab_size", "max_position_embeddings", "layer_norm_eps", "hidden_act"):
            assert config[key] == reference[key], (folder.name, key)
        assert (folder / "vocab.txt").read_text().split("\n")[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    # and the exported folders convert back to the same model
    again = tmp_path / "again"
    import_huggingface(folders[0], again, generator=folders[1])
    first, _, _, _ = restore_pretrainer(imported)
    second, _, _, _ = restore_pretrainer(again)
    for a, b in zip(first.variables, second.variables):
        if "seed_generator" not in a.path:
            np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)


def copy_fixture(tmp_path, name="discriminator"):
    folder = tmp_path / name
    shutil.copytree(FIXTURE / name, folder)
    return folder


def test_an_electra_model_folder_and_a_vocab_txt_load_for_fine_tuning(tmp_path):
    folder = copy_fixture(tmp_path)
    tensors = load_file(str(folder / "model.safetensors"))
    bare = {key[len("electra."):]: value for key, value in tensors.items() if key.startswith("electra.")}
    save_file(bare, str(folder / "model.safetensors"))
    vocab = json.loads((folder / "tokenizer.json").read_text())["model"]["vocab"]
    (folder / "tokenizer.json").unlink()
    (folder / "vocab.txt").write_text("\n".join(sorted(vocab, key=vocab.get)) + "\n")
    output = import_huggingface(folder, tmp_path / "model").path
    assert read_provenance(output)["rtd_head"] is False and read_provenance(output)["generator_weights"] is False
    pretrained = load_pretrained(output)
    sequence = pretrained.discriminator(inputs(), training=False)["sequence_output"].numpy()
    real = REFERENCE["attention_mask"] > 0
    np.testing.assert_allclose(sequence[real], REFERENCE["disc_hidden"][real], atol=1e-4)
    exported = export_huggingface(output, tmp_path / "hf")
    assert [f.name for f in exported] == ["discriminator"]
    assert json.loads((exported[0] / "config.json").read_text())["architectures"] == ["ElectraModel"]
    assert set(load_file(str(exported[0] / "model.safetensors"))) == set(bare)


def test_bad_input_is_refused_naming_the_file_and_nothing_is_left(tmp_path):
    def refused(match, discriminator, generator=None):
        with pytest.raises(ConversionError, match=match):
            import_huggingface(discriminator, tmp_path / "out", generator=generator)
        assert not (tmp_path / "out").exists()
        assert not list(tmp_path.glob(".out.tmp-*"))

    refused("is not a folder", tmp_path / "missing")
    folder = copy_fixture(tmp_path)
    refused("is a generator", FIXTURE / "generator")
    refused("not an ElectraForMaskedLM", folder, generator=FIXTURE / "discriminator")

    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "bert"}))
    refused("not an ELECTRA checkpoint", folder)
    (folder / "config.json").write_text(json.dumps({**config, "hidden_act": "relu"}))
    refused("hidden_act = 'relu' cannot be represented", folder)
    (folder / "config.json").write_text(json.dumps({**config, "position_embedding_type": "relative_key"}))
    refused("position_embedding_type", folder)
    (folder / "config.json").write_text(json.dumps({**config, "hidden_size": 48}))
    refused("discriminator: tensor 'electra.embeddings_project.weight' has shape \\(32, 16\\)", folder)
    (folder / "config.json").write_text(json.dumps({**config, "vocab_size": 60}))
    refused("the vocabulary has 55 tokens but the model's embedding table has 60 rows", folder)
    (folder / "config.json").write_text(json.dumps(config))

    tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**tokenizer_config, "strip_accents": "yes"}))
    refused("tokenizer_config.json: strip_accents is 'yes'; expected true or false or null", folder)
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))

    weights = folder / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    refused("model.safetensors cannot be read .* damaged or truncated", folder)
    weights.unlink()
    (folder / "pytorch_model.bin").write_bytes(b"not read")
    refused("only pytorch_model.bin .* safe_serialization=True", folder)


def test_a_generator_not_trained_with_the_discriminator_is_refused(tmp_path):
    generator = copy_fixture(tmp_path, "generator")
    tensors = load_file(str(generator / "model.safetensors"))
    tensors["electra.embeddings.word_embeddings.weight"] = tensors["electra.embeddings.word_embeddings.weight"] + 1
    save_file(tensors, str(generator / "model.safetensors"))
    with pytest.raises(ConversionError, match="differs from the discriminator's"):
        import_huggingface(FIXTURE / "discriminator", tmp_path / "out", generator=generator)


def test_a_sentencepiece_run_is_refused_before_anything_is_written(sentencepiece_vocab, tmp_path):
    import keras

    from electra_tf.data.tokenization import ElectraTokenizer
    from electra_tf.interop.convert import write_huggingface_folders
    from electra_tf.pretraining.config import PretrainingConfig

    tokenizer = ElectraTokenizer(sentencepiece_vocab)
    config = PretrainingConfig.load("electra_tiny").replace(vocab_size=tokenizer.vocabulary_size)
    with pytest.raises(ConversionError, match="vocabulary is SentencePiece.*no HuggingFace folder was written"):
        write_huggingface_folders(keras.Model(), config, tokenizer, tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


def test_a_gdes_run_exports_the_summed_table_and_the_generator_its_own(small_vocab, tmp_path):
    """Under GDES embedding sharing the discriminator's folder holds stop_gradient(shared) +
    residual, summed, as an ordinary table (it computes what the run's discriminator computes);
    the generator's folder holds the shared tables; reading both back gives the same logits."""
    import tensorflow as tf

    from electra_tf.data.tokenization import ElectraTokenizer
    from electra_tf.interop.convert import write_huggingface_folders
    from electra_tf.pretraining.config import PretrainingConfig
    from electra_tf.pretraining.pretrainer import ElectraPretrainer

    tokenizer = ElectraTokenizer(small_vocab)
    config = PretrainingConfig.load("electra_tiny", {"vocab_size": tokenizer.vocabulary_size, "num_layers": 1,
                                                     "max_seq_length": 32, "embedding_sharing": "gdes"})
    pretrainer = ElectraPretrainer.from_pretraining_config(config)
    gdes = pretrainer.discriminator.embeddings
    gdes.word_embeddings.embeddings.assign(tf.random.normal(gdes.word_embeddings.embeddings.shape, stddev=0.05))
    write_huggingface_folders(pretrainer, config, tokenizer, tmp_path / "hf")
    disc = load_file(str(tmp_path / "hf" / "discriminator" / "model.safetensors"))
    gen = load_file(str(tmp_path / "hf" / "generator" / "model.safetensors"))
    shared = gdes.shared.word_embeddings.embeddings.numpy()
    np.testing.assert_allclose(disc["electra.embeddings.word_embeddings.weight"],
                               shared + gdes.word_embeddings.embeddings.numpy(), atol=1e-7)
    np.testing.assert_array_equal(gen["electra.embeddings.word_embeddings.weight"], shared)
    again = load_pretrained(import_huggingface(tmp_path / "hf" / "discriminator", tmp_path / "model").path)
    ids = np.array([[2, 10, 11, 12, 3, 0]], "int32")
    inputs = {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": (ids > 0).astype("int32")}
    np.testing.assert_allclose(again.discriminator(inputs)["logits"], pretrainer.discriminator(inputs)["logits"],
                               atol=1e-5)
