"""`TrainerConfig`: how the trainer drives a run, whatever the task.

Cadence, not content: these settings change what a run shows and when it saves, never the
weights it ends with, so a resumed run may use others than the run it continues (they are not
saved with the run's config). What a task trains with (model, objective, optimizer, batch,
steps) is the task's config.
"""

from __future__ import annotations

import dataclasses

from electra_tf.utils.errors import RunError


@dataclasses.dataclass(frozen=True)
class TrainerConfig:
    log_every: int = 50  # steps between progress lines and TensorBoard scalars
    checkpoint_every: int = 200  # steps between checkpoints (a task that resumes)
    keep_checkpoints: int = 3
    eval_every: int | None = None  # steps between evaluations during training; None: the task's schedule
    # Steps per call of the compiled step (Keras' steps_per_execution; the official code's TPU
    # `iterations_per_loop`): the host reads a step's results once per call. One device only.
    steps_per_loop: int = 1
    profile_steps: tuple[int, int] | None = None  # trace steps [START, STOP) with the profiler

    def __post_init__(self):
        for name in ("log_every", "checkpoint_every", "keep_checkpoints", "steps_per_loop"):
            if getattr(self, name) < 1:
                raise RunError(f"--{name} must be at least 1, got {getattr(self, name)}.")
        if self.eval_every is not None and (self.eval_every < 1 or self.eval_every % self.log_every):
            raise RunError(f"--eval_every {self.eval_every} must be a positive multiple of --log_every "
                           f"{self.log_every}: an evaluation runs between two progress windows.")
        if self.profile_steps is not None and not 0 <= self.profile_steps[0] < self.profile_steps[1]:
            raise RunError(f"profile_steps takes (START, STOP) with 0 <= START < STOP, got {self.profile_steps}.")


def steps_per_loop_needs_one_device(steps_per_loop: int, strategy: str) -> str:
    # Keras' several-steps loop fails under MirroredStrategy (keras-team/keras#19246).
    return (f"--steps_per_loop {steps_per_loop} needs one device (--strategy one_device, or auto on one GPU or "
            f"a CPU); this run's strategy is {strategy}: use --steps_per_loop 1.")
