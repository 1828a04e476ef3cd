"""`TrainerConfig`: how the trainer drives a run, whatever the task.

Cadence, not content: these settings change what a run shows and when it saves, never the
weights it ends with, so a rerun that continues a run may change them (a run's config.json
keeps them in its `trainer` section, and a rerun starts from there). What a task trains with
(model, objective, optimizer, batch, steps) is the task's sections.
"""

from __future__ import annotations

import dataclasses

from electra_tf.utils.sections import Section, option


@dataclasses.dataclass(frozen=True)
class TrainerConfig(Section):
    log_every: int = option(50, "steps between progress lines and TensorBoard scalars")
    checkpoint_every: int = option(200, "steps between checkpoints (runs that resume)")
    keep_checkpoints: int = option(3, "checkpoints kept (the newest)")
    eval_every: int | None = option(
        None, "evaluate every N steps (a multiple of --log_every), to TensorBoard (eval/) and the progress output; "
        "default: the task's schedule (pre-training: at the end; fine-tuning: every epoch)", metavar="N")
    # Steps per call of the compiled step (Keras' steps_per_execution; the official code's TPU
    # `iterations_per_loop`): the host reads a step's results once per call. One device only.
    steps_per_loop: int = option(
        1, "training steps per call of the compiled step (one device): the host reads results once per call, so a "
        "GPU need not wait for it between steps; checkpoints, progress lines and samples fall at the first call's "
        "end on or after their step")
    profile_steps: str | None = option(None, "trace steps START..STOP with the TensorFlow profiler",
                                       metavar="START,STOP")

    def check(self) -> None:
        self.at_least_one("log_every", "checkpoint_every", "keep_checkpoints", "steps_per_loop")
        self.require(self.eval_every is None or (self.eval_every >= 1 and self.eval_every % self.log_every == 0),
                     "eval_every", f"must be a positive multiple of log_every ({self.log_every}): an evaluation runs "
                     "between two progress windows.")
        self.profile_range  # noqa: B018  (checked by reading it)

    @property
    def profile_range(self) -> tuple[int, int] | None:
        """(START, STOP) of `profile_steps`, or None."""
        if not self.profile_steps:
            return None
        try:
            start, stop = (int(x) for x in self.profile_steps.split(","))
        except ValueError:
            start = stop = -1
        self.require(0 <= start < stop, "profile_steps", "takes START,STOP: two integers, 0 <= START < STOP.")
        return start, stop


def steps_per_loop_needs_one_device(steps_per_loop: int, strategy: str) -> str:
    # Keras' several-steps loop fails under MirroredStrategy (keras-team/keras#19246).
    return (f"--steps_per_loop {steps_per_loop} needs one device (--strategy one_device, or auto on one GPU or "
            f"a CPU); this run's strategy is {strategy}: use --steps_per_loop 1.")
