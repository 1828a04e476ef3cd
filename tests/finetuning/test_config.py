"""Fine-tuning's config sections: the official defaults, what each checks, and the batch an
update reads."""

import pytest

from electra_tf.finetuning.config import (FinetuningOptimizerConfig, FinetuningRunConfig,
                                          QuestionAnsweringConfig)
from electra_tf.utils.errors import ElectraError
from electra_tf.utils.sections import ConfigError


def test_the_defaults_are_the_official_fine_tuning_values():
    optimizer = FinetuningOptimizerConfig()
    assert (optimizer.warmup_proportion, optimizer.weight_decay, optimizer.adam_epsilon,
            optimizer.clip_global_norm, optimizer.layer_decay_schedule) == (0.1, 0.01, 1e-6, 1.0, "official")
    assert optimizer.learning_rate is None and optimizer.layerwise_lr_decay is None  # chosen by model size
    run = FinetuningRunConfig()
    assert (run.batch_size, run.gradient_accumulation_steps, run.update_batch_size) == (32, 1, 32)
    assert QuestionAnsweringConfig().max_answer_length == 30 and QuestionAnsweringConfig().head == "electra"


@pytest.mark.parametrize("values, message", [
    ({"layerwise_lr_decay": 0.0}, "--layerwise_lr_decay must be in"),
    ({"layerwise_lr_decay": 1.5}, "--layerwise_lr_decay must be in"),
    ({"warmup_proportion": 1.0}, "--warmup_proportion must be in"),
    ({"learning_rate": -1e-4}, "--learning_rate must be positive"),
    ({"layer_decay_schedule": "linear"}, "layer_decay_schedule"),
    ({"weight_decay": "0.01"}, "'weight_decay' must be float"),
])
def test_optimizer_values_are_checked(values, message):
    with pytest.raises(ElectraError, match=message):
        FinetuningOptimizerConfig(**values)


@pytest.mark.parametrize("field", ["epochs", "batch_size", "gradient_accumulation_steps"])
def test_run_counts_must_be_at_least_one(field):
    with pytest.raises(ElectraError, match=f"--{field} must be at least 1"):
        FinetuningRunConfig(**{field: 0})


def test_an_update_reads_batch_size_times_accumulation():
    assert FinetuningRunConfig(batch_size=8, gradient_accumulation_steps=4).update_batch_size == 32
    assert FinetuningRunConfig(epochs=None).epochs is None  # chosen by the task and its data
    with pytest.raises(ConfigError, match="'seed' must be int"):
        FinetuningRunConfig(seed=1.5)


def test_question_answering_settings_are_checked():
    with pytest.raises(ElectraError, match="--doc_stride must be at least 1"):
        QuestionAnsweringConfig(doc_stride=0)
    with pytest.raises(ElectraError, match="--qa_head must be electra"):
        QuestionAnsweringConfig(head="bert")
    assert QuestionAnsweringConfig(head="plain").head == "plain"
