"""The run's health warnings (the evaluation itself is tested end to end in tests/test_pretrain.py)."""

import io

from electra_tf.pretraining.evaluation import RECALL_FLOOR, TrainingHealth


def windows(health, steps, **metrics):
    return [text for step in steps for text in health.observe(step, metrics)]


def test_a_discriminator_that_calls_everything_original_is_warned_about_once():
    stream = io.StringIO()
    health = TrainingHealth(warmup_end=100, phase_steps=1000, log_every=50, stream=stream)
    # During warm-up nothing counts, however low the recall.
    assert windows(health, range(50, 101, 50), disc_recall=0.0, sampled_masked_lm_accuracy=0.1) == []
    # After it, a span of a tenth of the phase (100 steps): two windows.
    assert windows(health, [150], disc_recall=0.001, sampled_masked_lm_accuracy=0.1) == []
    given = windows(health, [200, 250, 300], disc_recall=0.001, sampled_masked_lm_accuracy=0.1)
    assert len(given) == 1 and "calling almost every token original" in given[0]
    assert "learning_rate" in given[0] and "generator_hidden_fraction" in given[0] and "disc_weight" in given[0]
    assert stream.getvalue() == given[0] + "\n" and health.given == given


def test_a_dip_shorter_than_the_span_is_not_a_failure():
    # The embedded default's pattern: recall near zero just after warm-up, then rising.
    health = TrainingHealth(warmup_end=200, phase_steps=2000, log_every=50, stream=io.StringIO())
    recalls = {250: 0.002, 300: 0.014, 350: 0.016, 400: 0.02, 450: 0.002}
    assert [text for step, recall in recalls.items()
            for text in health.observe(step, {"disc_recall": recall})] == []
    assert RECALL_FLOOR == 0.01


def test_a_runaway_generator_is_warned_about():
    health = TrainingHealth(warmup_end=0, phase_steps=100, log_every=10, stream=io.StringIO())
    given = windows(health, [10, 20, 30], disc_recall=0.5, sampled_masked_lm_accuracy=0.9)
    assert len(given) == 1 and "generator's samples equalled the original token 90%" in given[0]
    assert "generator_hidden_fraction" in given[0] and "temperature" in given[0]
