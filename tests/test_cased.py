"""Cased models end to end: `build_data --cased` learns a cased vocabulary, and the casing
travels with it through pre-training, fine-tuning and both export signatures without being
told again; a mismatch is a clear error."""

import json
from pathlib import Path

import pytest

from electra_tf import build_data, finetune, pretrain
from electra_tf.data.vocabulary_files import TokenizerSettings, read_tokenizer_settings

SEQ = 32


@pytest.fixture(scope="module")
def cased_run(corpus, tmp_path_factory):
    root = tmp_path_factory.mktemp("cased")
    text = corpus.write_sentence_file(root / "corpus.txt", repeat=10)
    assert build_data.main(["--input", str(text), "--cased", "--vocab_size", "400", "--output_dir",
                            str(root / "data"), "--max_seq_length", str(SEQ), "--num_shards", "1",
                            "--num_workers", "1"]) == 0
    assert pretrain.main(["--data", str(root / "data"), "--model_dir", str(root / "run"), "--steps", "2",
                          "--batch_size", "4", "--set", "num_layers=1", "--set", f"max_seq_length={SEQ}",
                          "--log_every", "1", "--eval_batches", "1"]) == 0
    return root


def test_the_data_and_the_run_are_cased(cased_run):
    metadata = json.loads((cased_run / "data" / "metadata.json").read_text())
    assert (metadata["lowercase"], metadata["strip_accents"], metadata["split_cjk"]) == (False, False, True)
    vocabulary = (cased_run / "data" / "vocab.txt").read_text().splitlines()
    assert "The" in vocabulary  # the corpus's sentences start with capitals
    for vocab in (cased_run / "data" / "vocab.txt", cased_run / "run" / "vocab.txt"):
        assert read_tokenizer_settings(vocab) == TokenizerSettings.cased(), vocab


def test_a_cased_vocabulary_read_without_its_casing_is_refused(cased_run, tmp_path, capsys):
    import shutil

    shutil.copytree(cased_run / "data", tmp_path / "data")
    metadata = json.loads((tmp_path / "data" / "metadata.json").read_text())
    metadata["vocab_file"] = str(tmp_path / "data" / "vocab.txt")
    (tmp_path / "data" / "metadata.json").write_text(json.dumps(metadata))
    (tmp_path / "data" / "tokenizer_config.json").unlink()  # the vocabulary copied without its casing
    assert pretrain.main(["--data", str(tmp_path / "data"), "--model_dir", str(tmp_path / "run"), "--steps", "1",
                          "--set", f"max_seq_length={SEQ}"]) == 2
    assert "holds 31 tokens with upper-case letters" in capsys.readouterr().err
    # settings that read the vocabulary, but not as the data was built
    (tmp_path / "data" / "tokenizer_config.json").write_text('{"do_lower_case": false, "strip_accents": true}')
    assert pretrain.main(["--data", str(tmp_path / "data"), "--model_dir", str(tmp_path / "run"), "--steps", "1",
                          "--set", f"max_seq_length={SEQ}"]) == 2
    assert "was built cased, but its vocabulary is read do_lower_case=False, strip_accents=True" in \
        capsys.readouterr().err
    # and --cased with a given uncased vocabulary is refused rather than ignored
    (tmp_path / "data" / "tokenizer_config.json").write_text('{"do_lower_case": true}')
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a"]))
    assert build_data.main(["--input", str(cased_run / "corpus.txt"), "--vocab", str(tmp_path / "v" / "vocab.txt"),
                            "--cased", "--output_dir", str(tmp_path / "d2")]) == 2
    assert "--cased, but" in capsys.readouterr().err


@pytest.mark.slow  # casing end to end; in the default suite: the cased data and run (above), a cased vocabulary in the exports' tokenizers (tests/serving/test_litert.py), casing in tests/data/test_tokenization.py
def test_fine_tuning_and_both_export_signatures_follow_the_casing(cased_run, run_python, tmp_path):
    sentences = [["The", "library", "opened", "in", "1902", "."], ["Bees", "visit", "the", "orchard", "."]] * 4
    tags = [["O" if w.islower() or not w.isalpha() else "B-X" for w in s] for s in sentences]
    conll = tmp_path / "train.conll"
    conll.write_text("".join("".join(f"{w}\t{t}\n" for w, t in zip(s, ts)) + "\n"
                             for s, ts in zip(sentences, tags)), encoding="utf-8")
    assert finetune.main(["--pretrained", str(cased_run / "run"), "--train", str(conll), "--eval", str(conll),
                          "--output_dir", str(tmp_path / "out"), "--tagging", "--epochs", "1", "--batch_size", "4",
                          "--log_every", "1"]) == 0
    assert read_tokenizer_settings(tmp_path / "out" / "vocab.txt") == TokenizerSettings.cased()
    summary = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert read_tokenizer_settings(
        Path(summary["export"]) / "assets.extra" / "vocab.txt") == TokenizerSettings.cased()

    discriminator_export = sorted((cased_run / "run" / "export").glob("*/*"))[-1]
    served = run_python(
        "import json, tensorflow as tf, tensorflow_text\n"
        f"serve = tf.saved_model.load({str(discriminator_export)!r}).signatures['serving_default']\n"
        "tokens = serve(text=tf.constant(['The the THE']))['tokens'].numpy()[0].tolist()\n"
        "import keras\nfrom electra_tf.finetuning.text import models\n"
        f"tagger = keras.saving.load_model({str(tmp_path / 'out' / 'best.keras')!r})\n"
        "ids = tagger.preprocessor(tf.ragged.constant([['The', 'the']]))['token_ids'].numpy()[0, :3].tolist()\n"
        "print(json.dumps({'tokens': [t.decode() for t in tokens if t], 'ids': ids}))")
    vocabulary = (cased_run / "run" / "vocab.txt").read_text().splitlines()
    assert served["tokens"][:3] == ["[CLS]", "The", "the"]  # cased: "The" is its own token
    assert served["ids"][1:] == [vocabulary.index("The"), vocabulary.index("the")]
