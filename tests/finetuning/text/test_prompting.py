"""The `prompt` kind through `python -m electra_tf.finetune`: zero-shot on the evaluation-only path
(no step; metrics.json, best.keras and exports as any kind's, the SavedModel in a process with
TensorFlow and tensorflow-text only and the LiteRT file as an app runs it, both equal to the Keras
model), few-shot prompt fine-tuning from the pre-trained head on --shots examples (the same draw
as standard fine-tuning's), and each bad input refused before any work with nothing written."""

import json
import re

import keras
import numpy as np
import pytest

from electra_tf import finetune
from electra_tf.finetuning.text import prompt_model  # noqa: F401  (registers the saved model's classes)
from tests.litert_only import run_litert_only
from tests.test_finetune import TOPICS

TEMPLATE = "{text} It is about the {label}."
WORDS = ["nature=river|hills", "town=library"]


@pytest.fixture(scope="module")
def pretrained_dir(short_run):
    return short_run / "run"


@pytest.fixture(scope="module")
def topics(corpus, tmp_path_factory):
    path = tmp_path_factory.mktemp("topics") / "topics.csv"
    rows = [(s, TOPICS[i]) for i, document in enumerate(corpus.DOCUMENTS) for s in document]
    path.write_text("text,label\n" + "".join(f'"{text}",{label}\n' for text, label in rows), encoding="utf-8")
    return path


def prompt(pretrained_dir, output, *extra, template=TEMPLATE, words=WORDS):
    return finetune.main(["--kind", "prompt", "--pretrained", str(pretrained_dir), "--output_dir", str(output),
                          "--template", template, "--label_words", *words, "--batch_size", "4", *extra])


def test_zero_shot_evaluates_without_a_step_and_serves_as_the_keras_model(pretrained_dir, topics, run_python,
                                                                         tmp_path, capsys):
    assert prompt(pretrained_dir, tmp_path / "zero", "--eval_only", "--eval", str(topics), "--test", str(topics),
                  "--export", "saved_model", "litert") == 0
    printed = capsys.readouterr().out
    assert "evaluating only: no training step" in printed
    assert "2 classes: 'nature' ('river' | 'hills'), 'town' ('library')" in printed
    summary = json.loads((tmp_path / "zero" / "metrics.json").read_text())
    assert (summary["kind"], summary["zero_shot"], summary["evaluation_only"], summary["step"]) == (
        "prompt", True, True, 0)
    assert summary["label_words"] == "nature=river|hills; town=library" and summary["template"] == TEMPLATE
    per_class = summary["eval"]["per_class"]
    assert {name: counts["gold"] for name, counts in per_class.items()} == {"nature": 8, "town": 7}
    assert sum(counts["predicted"] for counts in per_class.values()) == 15
    assert summary["eval"]["accuracy"] == pytest.approx(sum(c["correct"] for c in per_class.values()) / 15)
    assert summary["test"]["accuracy"] == summary["eval"]["accuracy"]

    model = keras.saving.load_model(tmp_path / "zero" / "best.keras")
    texts = ["The river rises in the hills.", "The library opened with four thousand books.", "", "bees " * 100]
    expected = model.predict_labels(texts)
    export = tmp_path / "zero" / "export"
    served = run_python(
        "import json, tensorflow as tf, tensorflow_text\n"
        f"serve = tf.saved_model.load({str(export / 'zero' / '1')!r}).signatures['serving_default']\n"
        f"out = serve(text=tf.constant({texts!r}))\n"
        "print(json.dumps({'p': out['probabilities'].numpy().tolist(), 'no_text': out['no_text'].numpy().tolist(),"
        " 'label': [x.decode() for x in out['label'].numpy()],"
        " 'names': [x.decode() for x in out['label_names'].numpy()[0]]}))")
    np.testing.assert_allclose(served["p"], expected["probabilities"], atol=1e-5)
    assert served["label"] == expected["label"].tolist() and served["names"] == ["nature", "town"]
    assert served["no_text"] == [False, False, True, False]
    lite = run_litert_only(export / "zero.tflite", [{"text": t} for t in texts], tmp_path / "lite.npz")
    np.testing.assert_allclose(lite["probabilities"], expected["probabilities"], atol=1e-4)
    assert lite["no_text"].tolist() == served["no_text"]
    task = json.loads((export / "zero" / "1" / "assets.extra" / "task.json").read_text())
    assert (task["template"], task["label_words"], task["prompt"]) == (TEMPLATE, summary["label_words"], True)


def test_few_shot_trains_the_head_on_the_same_draw_as_standard_fine_tuning(pretrained_dir, topics, tmp_path,
                                                                          capsys):
    assert prompt(pretrained_dir, tmp_path / "few", "--train", str(topics), "--eval", str(topics), "--shots", "3",
                  "--seed", "5", "--epochs", "2", "--no-export") == 0
    printed = capsys.readouterr().out
    drawn = re.search(r"training examples \(3 a class, drawn with seed 5\): 'nature' 3, 'town' 3", printed)
    assert drawn and "6 training examples / 15 eval examples" in printed
    summary = json.loads((tmp_path / "few" / "metrics.json").read_text())
    assert summary["zero_shot"] is False and summary["train_examples"] == 6 and len(summary["epochs"]) == 2
    tuned = keras.saving.load_model(tmp_path / "few" / "best.keras")
    from electra_tf.finetuning.pretrained import load_pretrained
    start = load_pretrained(pretrained_dir).discriminator
    moved = [np.abs(a - b).max() for a, b in zip(tuned.backbone.head.get_weights(), start.head.get_weights())]
    assert min(moved) > 0  # the pre-trained replaced-token head is what few-shot training changes

    # Standard fine-tuning with --shots draws the same examples (the same seed, the same rule).
    assert finetune.main(["--pretrained", str(pretrained_dir), "--train", str(topics), "--eval", str(topics),
                          "--shots", "3", "--seed", "5", "--epochs", "1", "--batch_size", "4", "--no-export",
                          "--output_dir", str(tmp_path / "standard")]) == 0
    assert "6 training examples / 15 eval examples" in capsys.readouterr().out


# Each kind of refusal once through the command (every rule of the template and the words:
# tests/finetuning/text/test_prompts.py): the words, the vocabulary, the length, the sample, the files.
@pytest.mark.parametrize("change, message", [
    (dict(words=["nature=river", "town=river"]), "share the word 'river'"),
    (dict(words=["nature=river", "town=zeppelin"]), "no pieces for the word 'zeppelin' of class 'town'"),
    (dict(template="{text} " + "about the river " * 10 + "{label}"), "leaving no room for the text"),
    (dict(extra=("--shots", "8")), "--shots 8 asks for 8 examples of each class; class 'town' has 7"),
    (dict(words=["nature=river", "forest=hills"]), "label 'town' in column 'label' is not one of the labels of "
                                                   "--label_words"),
])
def test_bad_input_is_refused_before_any_work(pretrained_dir, topics, tmp_path, capsys, change, message):
    output = tmp_path / "out"
    extra = ("--train", str(topics), "--eval", str(topics), *change.pop("extra", ()))
    assert prompt(pretrained_dir, output, *extra, **change) == 2
    assert re.search(message, capsys.readouterr().err)
    assert not output.exists() or not [p for p in output.iterdir() if not p.name.startswith(".")]


def test_missing_words_or_template_name_the_flag(pretrained_dir, topics, tmp_path, capsys):
    common = ["--kind", "prompt", "--pretrained", str(pretrained_dir), "--eval_only", "--eval", str(topics),
              "--output_dir", str(tmp_path / "out")]
    assert finetune.main(common + ["--label_words", *WORDS]) == 2
    assert "'template' = None: give one" in capsys.readouterr().err
    assert finetune.main(common + ["--template", TEMPLATE]) == 2
    assert "'label_words' = None: give a word per class" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        finetune.main(common + ["--template", TEMPLATE, "--label_words"])
    assert "expected at least one argument" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
