"""The pre-training task: what it plans, what it leaves behind (the backbone, which fine-tuning
reads without building a pre-trainer), and what an export of it serves."""

import json

import numpy as np
import pytest

from electra_tf.models.encoders import model_weights
from electra_tf.pretraining.config import PretrainingConfig
from electra_tf.pretraining.task import PretrainingTask


@pytest.fixture
def finished_run(pretrained_run):
    return pretrained_run  # a finished run of the tiny preset (tests/conftest.py)


def test_a_finished_run_leaves_its_discriminator_as_a_backbone(finished_run):
    from electra_tf.models.backbone import Backbone
    from electra_tf.pretraining.restore import restore_pretrainer

    backbone = Backbone.load(finished_run / "backbone")
    config = PretrainingConfig.load(str(finished_run / "config.json"))
    assert backbone.config.model == config.model and backbone.config.max_seq_length == config.run.max_seq_length
    metadata = json.loads((finished_run / "backbone" / "metadata.json").read_text())
    assert metadata["step"] == config.run.num_train_steps
    pretrainer, tokenizer, _, _ = restore_pretrainer(finished_run)
    assert backbone.tokenizer.vocabulary == tokenizer.vocabulary
    ours = {v.path: v.numpy() for v in model_weights(backbone.discriminator)}
    theirs = {v.path: v.numpy() for v in model_weights(pretrainer.discriminator)}
    assert ours.keys() == theirs.keys()
    for path, value in theirs.items():
        np.testing.assert_array_equal(ours[path], value, err_msg=path)


def test_fine_tuning_reads_the_backbone_without_building_a_pretrainer(finished_run, monkeypatch):
    from electra_tf.finetuning.pretrained import load_pretrained
    from electra_tf.pretraining.pretrainer import ElectraPretrainer

    def refuse(*args, **kwargs):
        raise AssertionError("a pre-trainer was built")

    monkeypatch.setattr(ElectraPretrainer, "from_pretraining_config", refuse)
    backbone = load_pretrained(finished_run)
    assert backbone.source == str(finished_run / "backbone")
    with pytest.raises(AssertionError, match="a pre-trainer was built"):  # a named checkpoint still needs one
        load_pretrained(finished_run, checkpoint="ckpt-4")


def test_the_plan_and_the_served_model():
    config = PretrainingConfig.load("electra_tiny", {"gradient_accumulation_steps": 2})
    task = PretrainingTask(config)
    assert task.model_width() == 128 and task.name == "pretraining"
    inputs = type("Inputs", (), {"config": config, "starting_phase": True, "train": "stream", "data": None})()
    plan = task.plan(inputs)
    assert (plan.total_steps, plan.examples_per_step, plan.resumable, plan.restore_input_position) == \
        (2000, 64, True, False)
    assert plan.epochs is None and not plan.keep_best and plan.data.stream == "stream"
