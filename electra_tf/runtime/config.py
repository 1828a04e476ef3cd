"""The configs of where a run executes (`RuntimeConfig`) and of its optimizer
(`OptimizerConfig`): plain validated sections, readable without starting TensorFlow. What they
choose is decided in `devices.resolve_runtime` and built in `optimizer.create_optimizer`.
"""

from __future__ import annotations

import dataclasses

from electra_tf.utils.sections import Section, option

STRATEGIES = ("auto", "one_device", "mirrored", "multi_worker", "tpu")
PRECISIONS = ("auto", "float32", "mixed_float16", "mixed_bfloat16")
# Fine-tuning's layer-wise learning-rate decay (`optimizer.layerwise_lr_multiplier`).
LAYER_DECAY_SCHEDULES = ("official", "corrected")


@dataclasses.dataclass(frozen=True)
class RuntimeConfig(Section):
    """The command's choices; `auto` (and `xla` None) leave them to `devices.resolve_runtime`."""

    strategy: str = option("auto", "auto: TPUStrategy with TPU_NAME, multi_worker with a TF_CONFIG cluster, mirrored "
                           "on several GPUs, else one device (runtime/devices.py)", choices=STRATEGIES)
    mixed_precision: str = option("auto", "auto: bfloat16 on TPUs and recent GPUs, float16 on older ones, bfloat16 on "
                                  "CPUs with bfloat16 instructions at ELECTRA-Small's width and wider, else float32",
                                  choices=PRECISIONS)
    xla: bool | None = option(None, "compile the step with XLA (default: on GPU/TPU, off on CPU)")

    def check(self) -> None:
        self.require(self.strategy in STRATEGIES, "strategy", f"must be one of {STRATEGIES}.")
        self.require(self.mixed_precision in PRECISIONS, "mixed_precision", f"must be one of {PRECISIONS}.")


OPTIMIZERS = ("adamw", "lamb")


@dataclasses.dataclass(frozen=True)
class OptimizerConfig(Section):
    """The pre-training update and its schedule (official values by default)."""

    # "adamw" (official) or "lamb" (layer-wise adaptive, for large effective batches; docs/pretraining.md).
    optimizer: str = "adamw"
    learning_rate: float = 5e-4
    num_warmup_steps: int = 10_000  # counted from the phase's first step
    # After warmup the rate falls as (1 - step / num_train_steps) ** lr_decay_power: 1.0 is the
    # official linear decay; NVIDIA's LAMB recipe uses 0.5.
    lr_decay_power: float = 1.0
    adam_beta_1: float = 0.9
    adam_beta_2: float = 0.999
    weight_decay: float = 0.01
    adam_epsilon: float = 1e-6
    clip_global_norm: float = 1.0

    def check(self) -> None:
        self.require(self.optimizer in OPTIMIZERS, "optimizer", f"must be one of {OPTIMIZERS}.")
        self.require(self.learning_rate > 0, "learning_rate", "must be positive.")
        self.require(0 <= self.num_warmup_steps, "num_warmup_steps", "must be >= 0.")
        self.require(self.lr_decay_power > 0, "lr_decay_power", "must be positive.")
        self.require(0 <= self.adam_beta_1 < 1, "adam_beta_1", "must be in [0, 1).")
        self.require(0 <= self.adam_beta_2 < 1, "adam_beta_2", "must be in [0, 1).")
        self.require(0 <= self.weight_decay < 1, "weight_decay", "must be in [0, 1).")
        self.require(self.adam_epsilon > 0, "adam_epsilon", "must be positive.")
        self.require(self.clip_global_norm > 0, "clip_global_norm", "must be positive.")
