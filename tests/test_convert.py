"""`python -m electra_tf.convert` and what it feeds: a converted HuggingFace model fine-tunes,
exports for TF Serving and back to HuggingFace, and continues pre-training with --init_from."""

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from electra_tf import convert, export, finetune, pretrain
from electra_tf.interop.convert import export_huggingface
from electra_tf.pretraining.restore import restore_pretrainer

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "huggingface"


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    output = tmp_path_factory.mktemp("convert") / "electra_hf"
    assert convert.main(["--from", "huggingface", "--input", str(FIXTURE / "discriminator"),
                         "--generator", str(FIXTURE / "generator"), "--output", str(output)]) == 0
    return output


def test_cli_refuses_bad_input_with_exit_2(tmp_path, capsys):
    assert convert.main(["--from", "huggingface", "--input", str(tmp_path / "none"), "--output",
                         str(tmp_path / "out")]) == 2
    assert "is not a folder" in capsys.readouterr().err
    assert convert.main(["--from", "google", "--input", str(tmp_path), "--generator", "x", "--output",
                         str(tmp_path / "out")]) == 2
    assert "--generator is for --from huggingface" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_converted_model_fine_tunes_and_exports_both_ways(converted, corpus, tmp_path, capsys):
    rows = [(s, "a" if i % 2 else "b") for i, document in enumerate(corpus.DOCUMENTS) for s in document]
    (tmp_path / "topics").mkdir()
    data = tmp_path / "topics" / "train.csv"  # the task (and export) is named after the folder
    data.write_text("text,label\n" + "".join(f'"{t}",{label}\n' for t, label in rows))
    assert finetune.main(["--pretrained", str(converted), "--train", str(data), "--eval", str(data),
                          "--output_dir", str(tmp_path / "tuned"), "--epochs", "1", "--batch_size", "4"]) == 0
    assert (tmp_path / "tuned" / "export" / "topics" / "1" / "saved_model.pb").is_file()

    assert export.main(["--model_dir", str(converted), "--export_dir", str(tmp_path / "exports")]) == 0
    assert (tmp_path / "exports" / "electra_hf" / "1" / "saved_model.pb").is_file()
    assert export.main(["--model_dir", str(converted), "--export_dir", str(tmp_path / "exports"),
                        "--format", "huggingface"]) == 0
    folder = tmp_path / "exports" / "electra_hf-huggingface"
    for model in ("discriminator", "generator"):
        written = load_file(str(folder / model / "model.safetensors"))
        original = load_file(str(FIXTURE / model / "model.safetensors"))
        assert all(np.array_equal(written[k], original[k]) for k in original) and set(written) == set(original)
    assert "generator" in capsys.readouterr().out
    assert export.main(["--model_dir", str(converted), "--export_dir", str(tmp_path / "exports"),
                        "--format", "huggingface"]) == 2  # never overwrites


def test_init_from_starts_a_new_run_from_the_weights(converted, corpus, tmp_path, capsys):
    data = corpus.build_test_shards(tmp_path, converted / "vocab.txt", 32, num_shards=1, repeat=5)
    argv = ["--init_from", str(converted), "--data", str(data), "--model_dir", str(tmp_path / "continued"),
            "--export_dir", str(tmp_path / "x"), "--steps", "2", "--batch_size", "2", "--log_every", "1",
            "--eval_batches", "1", "--set", "max_seq_length=32", "--set", "learning_rate=1e-9"]
    assert pretrain.main(argv) == 0
    printed = capsys.readouterr().out
    assert f"weights from {converted / 'checkpoints' / 'ckpt-0'}" in printed and "step 2/2" in printed
    source, _, _, _ = restore_pretrainer(converted)
    continued, tokenizer, config, _ = restore_pretrainer(tmp_path / "continued")
    assert tokenizer.vocabulary_size == 55 and config.model.hidden_size == 32  # the source's config and vocabulary
    word = "embeddings/word_embeddings/embeddings"
    before = {v.path: v.numpy() for v in source.variables}[word]
    after = {v.path: v.numpy() for v in continued.variables}[word]
    np.testing.assert_allclose(after, before, atol=1e-6)  # lr 1e-9: two steps barely move them

    mismatch = argv[:-2] + ["--model_dir", str(tmp_path / "other"), "--set", "num_layers=1"]
    assert pretrain.main(mismatch) == 2
    error = capsys.readouterr().err
    assert "sizes do not match" in error and "discriminator/transformer_layer_1" in error


def test_init_from_needs_the_generator(tmp_path, capsys):
    disc_only = tmp_path / "disc_only"
    assert convert.main(["--from", "huggingface", "--input", str(FIXTURE / "discriminator"),
                         "--output", str(disc_only)]) == 0
    assert "continued pre-training needs --generator" in capsys.readouterr().out
    assert pretrain.main(["--init_from", str(disc_only), "--data", str(tmp_path), "--model_dir",
                          str(tmp_path / "run")]) == 2


def test_transformers_loads_the_export_when_installed(converted, tmp_path):
    """Runs only where the optional `.[reference]` extra is installed (never in CI)."""
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    folders = export_huggingface(converted, tmp_path / "hf")
    model = transformers.ElectraForPreTraining.from_pretrained(str(folders[0])).eval()
    reference = np.load(FIXTURE / "reference_outputs.npz")
    with torch.no_grad():
        logits = model(torch.tensor(reference["input_ids"]), attention_mask=torch.tensor(reference["attention_mask"]),
                       token_type_ids=torch.tensor(reference["token_type_ids"])).logits.numpy()
    np.testing.assert_allclose(logits, reference["disc_logits"], atol=1e-5)
    generator = transformers.ElectraForMaskedLM.from_pretrained(str(folders[1]))
    assert json.loads((folders[1] / "config.json").read_text())["architectures"] == ["ElectraForMaskedLM"]
    assert generator.generator_lm_head.weight.data_ptr() == generator.electra.embeddings.word_embeddings.weight.data_ptr()
