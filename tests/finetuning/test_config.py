"""Fine-tuning's config: the official defaults, what each section checks (one error style), the
batch an update reads, and the whole run's config: its kind's section, `--set` reaching every
field, saved and read back, and built from a command line."""

import argparse
import json

import pytest

from electra_tf.finetuning.config import (FinetuningConfig, FinetuningOptimizerConfig, FinetuningRunConfig,
                                          add_finetuning_options, check_complete, config_from_command, requested_kind)
from electra_tf.finetuning.question_answering.task import QuestionAnsweringConfig
from electra_tf.finetuning.text.classification import ClassificationConfig
from electra_tf.models.config import ModelConfig
from electra_tf.utils.sections import ConfigError


def test_the_defaults_are_the_official_fine_tuning_values():
    optimizer = FinetuningOptimizerConfig()
    assert (optimizer.warmup_proportion, optimizer.weight_decay, optimizer.adam_epsilon,
            optimizer.clip_global_norm, optimizer.layer_decay_schedule) == (0.1, 0.01, 1e-6, 1.0, "official")
    assert optimizer.learning_rate is None and optimizer.layerwise_lr_decay is None  # chosen by model size
    run = FinetuningRunConfig()
    assert (run.batch_size, run.gradient_accumulation_steps, run.update_batch_size) == (32, 1, 32)
    assert QuestionAnsweringConfig().max_answer_length == 30 and QuestionAnsweringConfig().qa_head == "electra"


@pytest.mark.parametrize("values, message", [
    ({"layerwise_lr_decay": 0.0}, "'layerwise_lr_decay' = 0.0: must be in"),
    ({"layerwise_lr_decay": 1.5}, "'layerwise_lr_decay' = 1.5: must be in"),
    ({"warmup_proportion": 1.0}, "'warmup_proportion' = 1.0: must be in"),
    ({"learning_rate": -1e-4}, "'learning_rate' = -0.0001: must be positive"),
    ({"layer_decay_schedule": "linear"}, "layer_decay_schedule"),
    ({"weight_decay": "0.01"}, "'weight_decay' must be float"),
    ({"adam_epsilon": 0}, "'adam_epsilon' = 0.0: must be positive"),
])
def test_optimizer_values_are_checked(values, message):
    with pytest.raises(ConfigError, match=message):
        FinetuningOptimizerConfig(**values)


@pytest.mark.parametrize("field", ["epochs", "batch_size", "gradient_accumulation_steps", "max_seq_length"])
def test_run_counts_must_be_at_least_one(field):
    with pytest.raises(ConfigError, match=f"'{field}' = 0: must be at least 1"):
        FinetuningRunConfig(**{field: 0})


def test_an_update_reads_batch_size_times_accumulation():
    assert FinetuningRunConfig(batch_size=8, gradient_accumulation_steps=4).update_batch_size == 32
    assert FinetuningRunConfig(epochs=None).epochs is None  # chosen by the task and its data
    with pytest.raises(ConfigError, match="'seed' must be int"):
        FinetuningRunConfig(seed=1.5)


def test_question_answering_settings_are_checked():
    with pytest.raises(ConfigError, match="'doc_stride' = 0: must be at least 1"):
        QuestionAnsweringConfig(doc_stride=0)
    with pytest.raises(ConfigError, match="'qa_head' = 'bert': must be electra"):
        QuestionAnsweringConfig(qa_head="bert")
    assert QuestionAnsweringConfig(qa_head="plain").qa_head == "plain"


def test_every_field_is_reached_by_set_and_the_config_reads_back_whole(tmp_path):
    config = FinetuningConfig.for_kind("classification").with_overrides(
        ["adam_epsilon=1e-8", "optimizer.clip_global_norm=5", "task.text_pair_column=b", "regression=true",
         "log_every=7", "runtime.strategy=one_device", "pretrained=runs/x", "train=t.csv", "eval=d.csv"])
    assert (config.optimizer.adam_epsilon, config.optimizer.clip_global_norm) == (1e-8, 5.0)
    assert (config.task.text_pair_column, config.task.regression, config.trainer.log_every) == ("b", True, 7)
    path = tmp_path / "config.json"
    config.save(path)
    saved = json.loads(path.read_text())
    assert saved["kind"] == "classification" and list(saved)[1:] == ["task", "source", "files", "optimizer", "run",
                                                                       "trainer", "runtime"]
    assert FinetuningConfig.load(path) == config
    with pytest.raises(ConfigError, match="unknown key 'adam_epsilom'. Did you mean adam_epsilon"):
        config.with_overrides(["adam_epsilom=1"])
    with pytest.raises(ConfigError, match="unknown key 'doc_stride'"):  # another kind's setting
        config.with_overrides(["doc_stride=8"])
    (tmp_path / "other.json").write_text("{}")
    with pytest.raises(ConfigError, match="not a fine-tuning run's config.json"):
        FinetuningConfig.load(tmp_path / "other.json")


def test_the_recorded_model_is_saved_beside_the_settings(tmp_path):
    import dataclasses

    model = ModelConfig(vocab_size=10, hidden_size=16, num_heads=2, num_layers=1, intermediate_size=8)
    config = dataclasses.replace(FinetuningConfig.for_kind("tagging"), model=model)
    config.save(tmp_path / "config.json")
    assert FinetuningConfig.load(tmp_path / "config.json").model == model
    with pytest.raises(ConfigError, match="unknown key 'model.hidden_size'"):  # the model is --pretrained's
        config.with_overrides(["model.hidden_size=32"])


def parse(*argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--set", action="append", default=[])
    parser.add_argument("--task", default=None)
    parser.add_argument("--kind", default=argparse.SUPPRESS)
    add_finetuning_options(parser)
    return parser.parse_args(list(argv))


def test_a_command_line_makes_the_config_flags_after_set_paths_absolute(tmp_path):
    args = parse("--pretrained", "runs/x", "--train", "t.csv", "--eval", "d.csv", "--task", "MRPC",
                 "--set", "learning_rate=1e-4", "--learning_rate", "2e-4", "--no-regression")
    kind = requested_kind(args, None)
    config = config_from_command(args, None, kind)
    assert kind == "classification" and config.task == ClassificationConfig(glue="MRPC")
    assert config.optimizer.learning_rate == 2e-4  # the flag is the more specific
    assert config.files.train.startswith("/") and config.source.pretrained.endswith("runs/x")
    check_complete(config)
    with pytest.raises(ConfigError, match="give --pretrained, --eval, --train"):
        check_complete(FinetuningConfig.for_kind("classification"))
    evaluating = config_from_command(parse("--eval_only", "--pretrained", "x", "--eval", "d"), None, "classification")
    check_complete(evaluating)  # no training file needed
    assert requested_kind(parse("--tagging"), None) == "tagging"
    assert requested_kind(parse("--task", "squad"), None) == "question_answering"
    assert requested_kind(parse(), config) == "classification"  # the base config's
    with pytest.raises(ConfigError, match="--config holds a classification run; this command asks for tagging"):
        requested_kind(parse("--tagging"), config)
