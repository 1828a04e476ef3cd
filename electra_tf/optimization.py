"""ELECTRA's optimizer: AdamW, no decay on LayerNorm/bias, global-norm clipping, and the
official learning-rate schedule.

Official behaviour (`optimization.py` of google-research/electra) and where we differ:
- schedule: linear decay from the peak to 0 over all training steps, *multiplied* by the
  warmup factor min(1, step / warmup_steps) -> `WarmupLinearDecay` (same formula);
- Adam with decoupled weight decay 0.01, epsilon 1e-6, betas 0.9/0.999; decay skipped for
  variables whose name matches "LayerNorm", "layer_norm" or "bias" -> `ElectraAdamW`, matching
  on the full variable path with the same patterns. Deviation: Keras' Adam applies bias
  correction to the moment estimates, the official optimizer does not; with 10k warmup steps
  the two differ only during the first few thousand steps, where the learning rate is tiny.
- global-norm clipping at 1.0. Deviation: the official TPU code clips each core's gradient
  before the cross-core sum, and Keras' `global_clipnorm` also clips before the cross-replica
  sum; we clip the *summed* gradient, so an update does not depend on the replica count.
"""

from __future__ import annotations

import re

import keras
import tensorflow as tf

from electra_tf.config import ElectraConfig

NO_DECAY_PATTERNS = ("LayerNorm", "layer_norm", "bias")


@keras.saving.register_keras_serializable(package="electra_tf")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """lr(step) = peak * (1 - min(step, total) / total) ** power * min(1, step / warmup).

    Example:
    >>> schedule = WarmupLinearDecay(1e-3, total_steps=100, warmup_steps=10)
    >>> [round(float(schedule(s)), 6) for s in (0, 5, 10, 55, 100)]
    [0.0, 0.000475, 0.0009, 0.00045, 0.0]
    """

    def __init__(self, peak_learning_rate: float, total_steps: int, warmup_steps: int = 0,
                 power: float = 1.0):
        self.peak_learning_rate = peak_learning_rate
        self.total_steps = total_steps
        self.warmup_steps = warmup_steps
        self.power = power

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        total = float(self.total_steps)
        decayed = self.peak_learning_rate * (1.0 - tf.minimum(step, total) / total) ** self.power
        if self.warmup_steps > 0:
            decayed *= tf.minimum(1.0, step / float(self.warmup_steps))
        return decayed

    def get_config(self):
        return {"peak_learning_rate": self.peak_learning_rate, "total_steps": self.total_steps,
                "warmup_steps": self.warmup_steps, "power": self.power}


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraAdamW(keras.optimizers.AdamW):
    """AdamW that skips decay by variable-path pattern and clips the cross-replica sum.

    Clipping overrides a private method of Keras' TensorFlow optimizer (keras>=3.15,<4,
    pinned in setup.py); tests/test_optimization.py checks it directly.
    """

    def __init__(self, *args, clip_global_norm: float | None = 1.0,
                 no_decay_patterns=NO_DECAY_PATTERNS, **kwargs):
        for unsupported in ("clipnorm", "global_clipnorm", "clipvalue"):
            if kwargs.get(unsupported) is not None:
                raise ValueError(f"ElectraAdamW: use clip_global_norm, not {unsupported}.")
        super().__init__(*args, **kwargs)
        self.clip_global_norm = clip_global_norm
        self.no_decay_patterns = tuple(no_decay_patterns)

    def build(self, variables):
        # Decided once, on the Keras variables' full paths; the update later sees unwrapped
        # tf.Variables, which Keras matches by key.
        self.exclude_from_weight_decay(var_list=[
            v for v in variables
            if any(re.search(pattern, v.path) for pattern in self.no_decay_patterns)])
        super().build(variables)

    def _all_reduce_sum_gradients(self, grads_and_vars):
        grads_and_vars = list(super()._all_reduce_sum_gradients(grads_and_vars))
        if self.clip_global_norm is None:
            return grads_and_vars
        present = [i for i, (grad, _) in enumerate(grads_and_vars) if grad is not None]
        clipped, _ = tf.clip_by_global_norm(
            [grads_and_vars[i][0] for i in present], self.clip_global_norm)
        for i, grad in zip(present, clipped):
            grads_and_vars[i] = (grad, grads_and_vars[i][1])
        return grads_and_vars

    def get_config(self):
        return {**super().get_config(), "clip_global_norm": self.clip_global_norm,
                "no_decay_patterns": list(self.no_decay_patterns)}


def create_optimizer(config: ElectraConfig) -> ElectraAdamW:
    """The pre-training optimizer for `config` (official hyperparameters by default)."""
    schedule = WarmupLinearDecay(config.learning_rate, config.num_train_steps,
                                 config.num_warmup_steps)
    return ElectraAdamW(learning_rate=schedule, weight_decay=config.weight_decay, beta_1=0.9,
                        beta_2=0.999, epsilon=config.adam_epsilon,
                        clip_global_norm=config.clip_global_norm)


def decayed_variable_paths(optimizer: ElectraAdamW, variables) -> list[str]:
    """The paths of the variables that a built `optimizer` applies weight decay to."""
    return [v.path for v in variables if optimizer._use_weight_decay(v)]
