"""The classification task's choices, named before training: classes and their counts, the
class a binary F1 is computed for, the epochs by task and size."""

import io
import contextlib

from electra_tf.finetuning.text.task_data import Columns
from electra_tf.finetuning.text.classification import default_epochs, describe_classes
from electra_tf.finetuning.text.task_data import glue_task, read_task_files


def csv(path, rows):
    path.write_text("text,label\n" + "".join(f'"{text}",{label}\n' for text, label in rows), encoding="utf-8")
    return path


def test_a_binary_task_names_the_class_its_f1_is_for(tmp_path):
    data = csv(tmp_path / "reviews.csv", [(f"text {i}", ["négatif", "positif"][i % 2]) for i in range(12)])
    task = read_task_files(data, data, Columns())
    errors = io.StringIO()
    with contextlib.redirect_stderr(errors):
        lines = describe_classes(task)
    assert lines == ["2 classes: 'négatif' (6), 'positif' (6)",
                     "f1 is the F1 of class 'positif' (the second label in order)"]
    assert errors.getvalue() == ""
    glue = read_task_files(data, data, Columns())
    assert describe_classes(glue, glue_task("MRPC"))[1].endswith("as GLUE MRPC scores it)")


def test_a_class_of_few_examples_is_warned_about(tmp_path):
    rows = [(f"text {i}", ["a", "b", "c"][i % 3]) for i in range(30)] + [("typo", "B")]
    task = read_task_files(csv(tmp_path / "t.csv", rows), csv(tmp_path / "d.csv", rows), Columns())
    errors = io.StringIO()
    with contextlib.redirect_stderr(errors):
        lines = describe_classes(task)
    assert lines == ["4 classes: 'B' (1), 'a' (10), 'b' (10), 'c' (10)"]  # macro F1: no one positive class
    assert "class(es) 'B' (1 example) have fewer than 5 training examples" in errors.getvalue()
    assert str(tmp_path / "t.csv") in errors.getvalue()


def test_epochs_by_task_and_size():
    assert (default_epochs(393_000, "MNLI"), default_epochs(2_490, "RTE"), default_epochs(250)) == (3, 10, 10)
