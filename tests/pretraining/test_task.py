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
    assert metadata["electra_tf"]["step"] == config.run.num_train_steps and metadata["parameter_count"] > 0
    # A keras-hub preset folder: its config names the registered class, keras-hub's own loader reads it.
    saved = json.loads((finished_run / "backbone" / "config.json").read_text())
    assert saved["registered_name"] == "electra_tf>DiscriminatorBackbone"
    assert (finished_run / "backbone" / "tokenizer.json").is_file()
    assert (finished_run / "backbone" / "assets" / "tokenizer" / "vocabulary.txt").is_file()
    import keras_hub

    by_keras_hub = keras_hub.models.Backbone.from_preset(str(finished_run / "backbone")).discriminator
    pretrainer, tokenizer, _, _ = restore_pretrainer(finished_run)
    assert backbone.tokenizer.vocabulary == tokenizer.vocabulary
    theirs = {v.path: v.numpy() for v in model_weights(pretrainer.discriminator)}
    for model in (backbone.discriminator, by_keras_hub):
        ours = {v.path: v.numpy() for v in model_weights(model)}
        assert ours.keys() == theirs.keys()
        for path, value in theirs.items():
            np.testing.assert_array_equal(ours[path], value, err_msg=path)
    # The dropout layers' random-number states too (by position: their paths are numbered in creation
    # order), so fine-tuning from the backbone draws the masks it would from the checkpoint.
    seeds = [[v.numpy().tolist() for v in m.variables if "seed_generator" in v.path]
             for m in (backbone.discriminator, pretrainer.discriminator)]
    assert seeds[0] == seeds[1]


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
