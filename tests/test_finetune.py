"""`python -m electra_tf.finetune` end to end: outputs, exports served by a TensorFlow-only
process, GLUE layouts, the random-init baseline, and bad input."""

import json
import re
import subprocess
import sys

import numpy as np
import pytest

from electra_tf import export, finetune
from electra_tf.finetuning.pretrained import load_pretrained
from electra_tf.models.encoders import model_weights
from tests.cli_runs import alarming_lines, environment, user_environment
from tests.conftest import SHORT_RUN_SEQ

SEQ = SHORT_RUN_SEQ  # the pre-training run fine-tuned here (conftest.short_run)
TOPICS = ["nature", "town", "nature", "town"]  # river, library, bees, market


@pytest.fixture(scope="module")
def pretrained_dir(short_run):
    return short_run / "run"


@pytest.fixture
def topic_csv(corpus):
    """Writes a text,label CSV: the given rows, or every test sentence labelled with its topic."""
    def write(path, rows=None):
        rows = rows or [(s, TOPICS[i]) for i, document in enumerate(corpus.DOCUMENTS) for s in document]
        lines = ["text,label"] + [f'"{text}",{label}' for text, label in rows]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return path
    return write


def run(pretrained_dir, output_dir, *extra, train=None, eval_file=None):
    return finetune.main(["--pretrained", str(pretrained_dir), "--train", str(train), "--eval", str(eval_file),
                          "--output_dir", str(output_dir), "--batch_size", "4", "--log_every", "2", *extra])


def test_classification_end_to_end(topic_csv, run_python, pretrained_dir, tmp_path, capsys):
    (tmp_path / "data").mkdir()
    data = topic_csv(tmp_path / "data" / "train.csv")  # names that say nothing: the task is named after out/
    assert run(pretrained_dir, tmp_path / "out", "--epochs", "2", "--learning_rate", "1e-3", "--test", str(data),
               train=data, eval_file=data) == 0
    printed = capsys.readouterr().out
    assert "examples/s" in printed and "ETA" in printed and "epoch 2: eval accuracy" in printed
    summary = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert set(summary["eval"]) == {"accuracy", "f1", "score"} and summary["best_epoch"] in (1, 2)
    # --test scores a file once with the best epoch: on the eval file itself, the best epoch's scores.
    assert summary["test"] == pytest.approx(summary["eval"], abs=1e-6)
    assert summary["labels"] == ["nature", "town"] and len(summary["epochs"]) == 2
    assert summary["eval"]["accuracy"] == max(e["accuracy"] for e in summary["epochs"])
    assert list((tmp_path / "out" / "logs" / "train").glob("events.out.tfevents.*"))
    # The given learning rate wins; the layer-wise decay comes from the (tiny) model's size.
    assert "2 epoch(s) (given), learning rate 0.001 (given), layer-wise decay 0.8; defaults for a tiny model" in printed
    # Counts name their unit; every path printed is absolute (the summary is read from anywhere).
    assert re.search(r"\d+ training examples / \d+ eval examples, 2 epoch\(s\)", printed)
    assert (summary["train_unit"], summary["eval_unit"]) == ("examples", "examples")
    assert f"metrics:     {(tmp_path / 'out' / 'metrics.json').resolve()}" in printed
    assert f"saved_model: {(tmp_path / 'out' / 'export' / 'out' / '1').resolve()}" in printed
    assert f"config:      {(tmp_path / 'out' / 'config.json').resolve()}" in printed
    assert (summary["settings"]["learning_rate"], summary["settings"]["layerwise_lr_decay"],
            summary["settings"]["size_defaults"]) == (1e-3, 0.8, "tiny")

    # The best checkpoint is a .keras file fine-tuning can start from again.
    again = load_pretrained(tmp_path / "out" / "best.keras")
    assert again.config.model.num_layers == 1 and again.tokenizer.vocabulary_size > 100

    # A fresh process with only TensorFlow and tf-text answers text requests, and agrees
    # with the Keras model.
    export_dir = tmp_path / "out" / "export" / "out" / "1"
    assert export_dir.is_dir() and summary["task"] == "out"
    texts = ["Bees visit the orchard.", "The library opened in 1902."]
    served = run_python(
        "import json, tensorflow as tf, tensorflow_text\n"
        f"serve = tf.saved_model.load({str(export_dir)!r}).signatures['serving_default']\n"
        f"out = serve(text=tf.constant({texts!r}))\n"
        "print(json.dumps({'p': out['probabilities'].numpy().tolist(),"
        " 'label': [x.decode() for x in out['label'].numpy()]}))")
    import keras

    from electra_tf.finetuning.text import models  # noqa: F401
    model = keras.saving.load_model(tmp_path / "out" / "best.keras")
    expected = keras.ops.softmax(model.predict(texts, verbose=0)).numpy()
    np.testing.assert_allclose(served["p"], expected, atol=1e-5)
    assert served["label"] == [summary["labels"][i] for i in expected.argmax(-1)]
    # In Python, the fine-tuned model names its labels as the export does.
    predicted = model.predict_labels(texts)
    assert model.label_names == ["nature", "town"] and predicted["label"].tolist() == served["label"]
    np.testing.assert_allclose(predicted["probabilities"], served["p"], atol=1e-5)

    # `export` on best.keras keeps the head: into the run's own export folder it adds nothing
    # (the same model), elsewhere it writes the same classifier signature.
    capsys.readouterr()
    assert export.main(["--model_dir", str(tmp_path / "out" / "best.keras")]) == 0
    printed = capsys.readouterr().out
    assert "already holds this model" in printed and "Exported" not in printed  # one line, no contradiction
    assert [p.name for p in (tmp_path / "out" / "export" / "out").iterdir()] == ["1"]
    assert export.main(["--model_dir", str(tmp_path / "out" / "best.keras"), "--export_dir", str(tmp_path / "x")]) == 0
    import tensorflow as tf
    import tensorflow_text  # noqa: F401
    again = tf.saved_model.load(str(tmp_path / "x" / "out" / "1")).signatures["serving_default"]
    assert again(text=tf.constant(texts))["label"].numpy().astype(str).tolist() == served["label"]
    # The fine-tuning folder itself means its best model; a format that does not take it names those that do.
    capsys.readouterr()
    assert export.main(["--model_dir", str(tmp_path / "out")]) == 0
    assert "already holds this model" in capsys.readouterr().out
    assert export.main(["--model_dir", str(tmp_path / "out"), "--format", "huggingface"]) == 2
    error = capsys.readouterr().err
    assert "--format huggingface does not take the classification run's ElectraClassifier" in error
    # keras_hub, litert, saved_model; onnx and openvino too where the .[runtimes] extra is installed
    listed = error.split("exports as: ")[1].rstrip().rstrip(".").split(", ")
    assert {"keras_hub", "litert", "saved_model"} <= set(listed) <= {"keras_hub", "litert", "onnx", "openvino",
                                                                     "saved_model"}


def test_glue_pair_regression_and_random_init(corpus, run_python, pretrained_dir, tmp_path):
    header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
    sentences = [s for document in corpus.DOCUMENTS for s in document]
    rows = [f"{i}\tg\tf\ty\t{i}\tn\tn\t{a}\t{b}\t{(i % 6) * 0.9:.3f}\n"
            for i, (a, b) in enumerate(zip(sentences, sentences[1:]))]
    stsb = tmp_path / "dev.tsv"
    stsb.write_text(header + "".join(rows), encoding="utf-8")
    assert run(pretrained_dir, tmp_path / "sts", "--task", "STS-B", "--epochs", "1", "--random_init",
               train=stsb, eval_file=stsb) == 0
    summary = json.loads((tmp_path / "sts" / "metrics.json").read_text())
    assert set(summary["eval"]) == {"pearson", "spearman", "score"} and summary["random_init"]
    assert summary["settings"]["learning_rate"] == 3e-3  # the tiny model's default
    assert summary["score_range"] == [0.0, 5.0]
    export_dir = tmp_path / "sts" / "export" / "stsb" / "1"
    served = run_python(
        "import json, tensorflow as tf, tensorflow_text\n"
        f"serve = tf.saved_model.load({str(export_dir)!r}).signatures['serving_default']\n"
        "out = serve(text=tf.constant(['A man.', 'A cat.']), text_pair=tf.constant(['A man.', 'A dog.']))\n"
        "print(json.dumps({k: v.numpy().tolist() for k, v in out.items()}))")
    assert sorted(served) == ["no_text", "score"] and len(served["score"]) == 2 and served["no_text"] == [False, False]

    # --random_init really starts from fresh weights: one epoch cannot bring the word
    # embeddings near the pre-trained ones.
    pretrained = model_weights(load_pretrained(pretrained_dir).discriminator)
    tuned = model_weights(load_pretrained(tmp_path / "sts" / "best.keras").discriminator)
    assert pretrained[0].path == tuned[0].path == "embeddings/word_embeddings/embeddings"
    assert np.abs(pretrained[0].numpy() - tuned[0].numpy()).max() > 0.05


def test_a_rerun_with_xla_compiles_nothing(topic_csv, pretrained_dir, tmp_path):
    """The same fine-tuning run twice (--overwrite) with XLA over one compile cache: the rerun
    loads every program the first compiled (training, evaluation, prediction) and trains to the
    same losses."""
    (tmp_path / "data").mkdir()
    train = topic_csv(tmp_path / "data" / "train.csv")
    argv = [sys.executable, "-m", "electra_tf.finetune", "--pretrained", str(pretrained_dir), "--train", str(train),
            "--eval", str(train), "--output_dir", str(tmp_path / "out"), "--overwrite", "--batch_size", "4",
            "--epochs", "1", "--xla", "--strategy", "one_device"]
    env = dict(environment(), ELECTRA_TF_COMPILE_CACHE=str(tmp_path / "cache"))

    def run():
        result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr[-3000:]
        return json.loads((tmp_path / "out" / "metrics.json").read_text())

    first, rerun = run(), run()
    assert first["compile_cache"]["programs_added"] >= 2  # training, prediction
    assert rerun["compile_cache"]["programs_added"] == 0
    assert [e["train_loss"] for e in rerun["epochs"]] == [e["train_loss"] for e in first["epochs"]]


def test_bad_input_is_a_clear_error(topic_csv, pretrained_dir, tmp_path, capsys):
    data = topic_csv(tmp_path / "train.csv")
    unseen = topic_csv(tmp_path / "dev.csv", [("The river rises.", "nature"), ("A new label.", "sport")])
    assert run(pretrained_dir, tmp_path / "a", train=data, eval_file=unseen) == 2
    assert "dev.csv, line 3: label 'sport'" in capsys.readouterr().err

    assert run(pretrained_dir, tmp_path / "b", "--text_column", "sentence", train=data, eval_file=data) == 2
    assert "no column 'sentence'" in capsys.readouterr().err

    empty = tmp_path / "empty_model"
    empty.mkdir()
    assert run(empty, tmp_path / "c", train=data, eval_file=data) == 2
    assert "holds no discriminator" in capsys.readouterr().err

    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "metrics.json").write_text("{}")
    assert run(pretrained_dir, tmp_path / "used", train=data, eval_file=data) == 2
    assert "is not empty" in capsys.readouterr().err
    assert (tmp_path / "used" / "metrics.json").read_text() == "{}"  # nothing lost


def test_a_run_as_a_user_sees_it_names_its_classes_and_prints_no_tensorflow_noise(corpus, pretrained_dir,
                                                                                 tmp_path):
    """French reviews with one label mistyped: the run names every class with its count and warns
    about the class of one example; TensorFlow's start-up lines stay out of the terminal, as in
    every command."""
    sentences = [s for document in corpus.DOCUMENTS for s in document]
    rows = [(s, "positif" if i % 2 else "négatif") for i, s in enumerate(sentences)] + [(sentences[0], "positive")]
    train = tmp_path / "reviews.csv"
    train.write_text("text,label\n" + "".join(f'"{t}",{label}\n' for t, label in rows), encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "electra_tf.finetune", "--pretrained", str(pretrained_dir),
                             "--train", str(train), "--eval", str(train), "--output_dir", str(tmp_path / "out"),
                             "--epochs", "1", "--batch_size", "8"], env=user_environment(), capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "reviews: 3 classes: 'négatif' (8), 'positif' (7), 'positive' (1)" in result.stdout
    warnings = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(warnings) == 1 and "class(es) 'positive' (1 example) have fewer than 5" in warnings[0], warnings
    assert alarming_lines(result.stderr.replace(warnings[0], "")) == []
    summary = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert summary["label_counts"] == {"négatif": 8, "positif": 7, "positive": 1}


def tag_of(word: str) -> str:
    """A toy part of speech: what a word ends with decides it, so there is something to learn."""
    return "DET" if word.lower() in ("the", "a") else "PUNCT" if not word.isalpha() else \
        "PLURAL" if word.endswith("s") else "WORD"


def test_tagging_end_to_end_and_served_per_word(corpus, run_python, pretrained_dir, tmp_path, capsys):
    sentences = [s.replace(".", " .").split() for document in corpus.DOCUMENTS for s in document]
    conll = tmp_path / "train.conll"
    conll.write_text("-DOCSTART- -X- O\n\n" + "".join(
        "".join(f"{w}\t{tag_of(w)}\n" for w in words) + "\n" for words in sentences), encoding="utf-8")
    jsonl = tmp_path / "dev.jsonl"  # the other layout, same sentences
    jsonl.write_text("".join(json.dumps({"tokens": words, "tags": [tag_of(w) for w in words]}) + "\n"
                             for words in sentences), encoding="utf-8")
    assert run(pretrained_dir, tmp_path / "pos", "--tagging", "--epochs", "2", "--learning_rate", "3e-3",
               train=conll, eval_file=jsonl) == 0
    printed = capsys.readouterr().out
    assert "accuracy is per word" in printed and "epoch 2: eval accuracy" in printed
    summary = json.loads((tmp_path / "pos" / "metrics.json").read_text())
    assert summary["kind"] == "tagging" and summary["labels"] == ["DET", "PLURAL", "PUNCT", "WORD"]
    assert summary["unscored_eval_words"] == 0 and set(summary["eval"]) == {"accuracy", "score"}

    # The scored accuracy is per word: recount it from the best model's predictions.
    import keras
    import tensorflow as tf

    from electra_tf.finetuning.text import models  # noqa: F401
    tagger = keras.saving.load_model(tmp_path / "pos" / "best.keras")
    inputs, labels = tagger.preprocessor(tf.ragged.constant(sentences),
                                         tf.ragged.constant([[summary["labels"].index(tag_of(w)) for w in words]
                                                             for words in sentences]))
    predicted = tagger.predict(inputs, verbose=0).argmax(-1)
    labels = labels.numpy()
    words = labels != -1
    assert words.sum() == sum(map(len, sentences))
    assert summary["eval"]["accuracy"] == pytest.approx((predicted[words] == labels[words]).mean())

    # The export tags whitespace-split text per word, in a TensorFlow-only process, as the
    # Keras model does.
    export_dir = summary["export"]
    texts = ["The bees visit the orchard .", "A river"]
    served = run_python(
        "import json, tensorflow as tf, tensorflow_text\n"
        f"serve = tf.saved_model.load({export_dir!r}).signatures['serving_default']\n"
        f"out = serve(text=tf.constant({texts!r}))\n"
        "out = {k: v.numpy().tolist() for k, v in out.items()}\n"
        # The same fresh process loads best.keras with only the classifiers module imported
        # (which registers the optimizer the model was compiled with).
        "import keras\nfrom electra_tf.finetuning.text import models\n"
        f"model = keras.saving.load_model({str(tmp_path / 'pos' / 'best.keras')!r})\n"
        "out['reloaded'] = [type(model).__name__, model.num_classes]\n"
        "print(json.dumps(out, default=lambda b: b.decode()))")
    assert served.pop("reloaded") == ["ElectraTokenClassifier", 4]
    assert served["words"] == [t.split() + [""] * (6 - len(t.split())) for t in texts]
    inputs = tagger.preprocessor(tf.ragged.constant([t.split() for t in texts]))
    first_pieces = tagger.predict(inputs, verbose=0)
    expected = keras.ops.softmax(first_pieces).numpy()
    starts = [[1, 2, 3, 4, 5, 6], [1, 2]]  # every toy word is one word piece
    for row, positions in enumerate(starts):
        tags = [summary["labels"][i] for i in expected[row, positions].argmax(-1)]
        assert served["tags"][row][:len(positions)] == tags
        np.testing.assert_allclose(served["tag_probabilities"][row][:len(positions)], expected[row, positions],
                                   atol=1e-5)
    assert served["tags"][1][2:] == ["", "", "", ""] and served["tag_names"][0] == summary["labels"]


def test_tagging_bad_input_is_a_clear_error(pretrained_dir, tmp_path, capsys):
    good = tmp_path / "good.conll"
    good.write_text("The DET\nbees PLURAL\n\n", encoding="utf-8")
    no_tag = tmp_path / "no_tag.conll"
    no_tag.write_text("The DET\nbees\n", encoding="utf-8")
    assert run(pretrained_dir, tmp_path / "a", "--tagging", train=good, eval_file=no_tag) == 2
    assert "no_tag.conll, line 2: 'bees' has no tag column" in capsys.readouterr().err

    uneven = tmp_path / "uneven.jsonl"
    uneven.write_text(json.dumps({"tokens": ["The", "bees"], "tags": ["DET"]}) + "\n", encoding="utf-8")
    assert run(pretrained_dir, tmp_path / "b", "--tagging", train=good, eval_file=uneven) == 2
    assert "uneven.jsonl, line 1: 2 words in 'tokens' but 1 tags in 'tags'" in capsys.readouterr().err

    assert run(pretrained_dir, tmp_path / "c", "--tagging", "--regression", train=good, eval_file=good) == 2
    assert "--regression is an option of classification runs; this is a tagging run" in capsys.readouterr().err


def test_a_run_reruns_from_its_config_to_the_last_digit_and_set_reaches_every_setting(topic_csv, pretrained_dir,
                                                                                        tmp_path):
    data = topic_csv(tmp_path / "reviews.csv")
    assert run(pretrained_dir, tmp_path / "first", "--epochs", "1", "--set", "adam_epsilon=1e-8",
               "--set", "optimizer.clip_global_norm=5", train=data, eval_file=data) == 0
    config = json.loads((tmp_path / "first" / "config.json").read_text())
    assert config["kind"] == "classification" and config["optimizer"]["adam_epsilon"] == 1e-8
    assert config["optimizer"]["clip_global_norm"] == 5.0 and config["trainer"]["log_every"] == 2
    assert config["files"]["train"] == str(data.resolve()) and config["model"]["num_layers"] == 1
    # Rerun from the saved config alone, from another folder: the same run to the last digit.
    assert finetune.main(["--config", str(tmp_path / "first" / "config.json"), "--output_dir",
                          str(tmp_path / "again")]) == 0
    first, again = (json.loads((tmp_path / name / "metrics.json").read_text()) for name in ("first", "again"))
    assert again["eval"] == first["eval"] and [e["train_loss"] for e in again["epochs"]] == \
        [e["train_loss"] for e in first["epochs"]]
    assert again["settings"]["adam_epsilon"] == 1e-8  # flags over a config: tests/finetuning/test_config.py
