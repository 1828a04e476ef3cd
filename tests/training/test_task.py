"""The registry every command finds kinds in, what a kind declares, and the plain parts of the
Task protocol (the training data's read error, the default report)."""

import pytest

from electra_tf.training.task import (KINDS, Task, TaskReport, TrainingData, default_kind, kind_for_task_name,
                                      kind_of_model, kinds)
from electra_tf.utils.errors import RunError


def test_the_packages_kinds_are_found_by_command_task_name_and_saved_model():
    assert set(kinds("finetune")) >= {"classification", "tagging", "question_answering"}
    assert list(kinds("pretrain")) == ["pretraining"] and default_kind("pretrain").name == "pretraining"
    assert default_kind("finetune").name == "classification"
    assert kind_for_task_name("finetune", "sst-2").name == "classification"  # GLUE names, any case
    assert kind_for_task_name("finetune", "SQuAD2.0").name == "question_answering"
    assert kind_for_task_name("finetune", "conll2003").name == "tagging"
    assert kind_for_task_name("finetune", "imdb") is None
    assert kind_of_model("finetune", "electra_tf>ElectraTokenClassifier").name == "tagging"
    assert kind_of_model("finetune", "electra_tf>Discriminator") is None  # a pre-training run's model
    for name, kind in kinds("finetune").items():  # what a command needs of each kind, declared
        assert kind.section is not None and kind.model_names and kind.__doc__, name


def test_a_kind_declares_itself_and_the_protocol_has_plain_defaults():
    task = Task()
    assert task.model_width() is None and task.served_model(None, None) is None
    assert task.initialize(None, None, None) is None and task.finish(None, None, None, None) == {}
    assert Task.runs_task("x") is False and Task.task_values("x") == {}
    for hook in (lambda: task.build_inputs(None), lambda: task.plan(None), lambda: task.build_model(None, None),
                 lambda: task.evaluate(None, None)):
        with pytest.raises(NotImplementedError):
            hook()
    report = task.report(None)
    assert report.header(None) == [] and report.summary(None, {}, None) == {}
    assert TaskReport().metrics_line({"accuracy": 0.5, "per_type": {}}) == "accuracy 0.5000"
    assert "pretraining" in KINDS


def test_a_read_error_of_the_training_data_is_explained_by_the_data():
    plain = TrainingData(dataset="batches").read_error(ValueError("bad record"))
    assert isinstance(plain, RunError) and "reading the training data failed: bad record" in str(plain)
    explained = TrainingData(stream="s", explain=lambda error: RunError(f"shard 3 is damaged ({error})"))
    assert str(explained.read_error(ValueError("crc"))) == "shard 3 is damaged (crc)"
