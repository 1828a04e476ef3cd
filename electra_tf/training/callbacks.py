"""The trainer's Keras callbacks: what every run shows, saves and refuses.

Advancing the resumable input is not a monitor's job: `resumable_input.InputTracker` does it,
and these callbacks only read the input's state, so their order does not matter.

- `TrainingMonitor`: every `log_every` steps, a console line (step, rate, ETA, the task's key
  metrics) and step-keyed TensorBoard scalars (every metric, learning rate, loss scale,
  examples/s, tokens/s, step time, peak memory); each window's metrics go to the task's
  observers (pre-training's health checks); metrics are averaged over those steps, then reset.
  It stops the run on a non-finite loss (float32/bfloat16: a real divergence) naming the step.
  A batch whose float16 gradients overflowed makes no optimizer update (dynamic loss scaling
  halves the scale and skips it): the step number stays, the batch is counted in
  `skipped_steps` (console, `train/skipped_steps`, the run's summary), and no step is shown
  twice. After `MAX_CONSECUTIVE_SKIPS` skipped batches in a row it stops the run too
  (`overflowing`): the gradients then overflow at every loss scale, and the run would otherwise
  never reach its steps.
- `StopOnSignal`: SIGTERM/SIGINT (preemption, Ctrl-C) stop the run after the current step.
- `CheckpointSaver`: a checkpoint every `every` steps and after the step a signal stopped.
- `StepProfiler`: TensorFlow profiler trace over a range of steps.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import signal
import statistics
import sys
import time
from typing import Callable

import keras
import tensorflow as tf

from electra_tf.runtime.devices import peak_memory
from electra_tf.runtime.optimizer import as_float, current_learning_rate, optimizer_step
from electra_tf.utils.progress import format_duration

# Dynamic loss scaling starts at 2^15 and halves the scale at each overflowing batch; a healthy
# float16 run skips a few at its start (4 on the tiny preset). 40 in a row divide the scale by
# 2^40 (from the initial 2^15: 2^-25), where float16 gradients underflow to zero: an overflow left
# then does not come from the scale.
MAX_CONSECUTIVE_SKIPS = 40


@dataclasses.dataclass(frozen=True)
class ProgressPlan:
    """What the monitor reports against. `token_scale`: how many alike inputs the tokens this
    process reads stand for (the workers of a multi-worker run). `quiet`: no console lines (a
    worker that is not the chief). `window_metrics`: each window's metrics are its own (the
    trackers are reset after each line); False keeps Keras' running means over the epoch,
    which its epoch-end logs report (a plan of epochs)."""

    total_steps: int
    examples_per_step: int
    log_every: int = 50
    console_metrics: tuple = ("loss",)
    stop_on_nonfinite: bool = True
    token_scale: int = 1
    quiet: bool = False
    window_metrics: bool = True


class TrainingMonitor(keras.callbacks.Callback):
    def __init__(self, writer, plan: ProgressPlan, tokens_through: Callable[[int], int] | None = None,
                 skipped_steps=None, observers=(), stream=None):
        """`tokens_through(steps_done)`: the non-padding tokens consumed once that many steps of
        the current `fit` are done (`ResumableInput.tokens_through`; None: no tokens/s).
        `skipped_steps`: an int64 tf.Variable that counts batches without an update (checkpointed
        with the run); None keeps a count of this process's own. `observers`: callables
        `(step, window metrics)`, called at every window."""
        super().__init__()
        self.writer, self.plan = writer, plan
        self.tokens_through = tokens_through
        self.skipped_steps = skipped_steps if skipped_steps is not None else tf.Variable(0, dtype=tf.int64)
        self.observers = list(observers)
        self.stream = stream or sys.stdout
        self.diverged_at: int | None = None
        self.overflowing = False  # stopped after MAX_CONSECUTIVE_SKIPS float16 overflows in a row
        self._consecutive_skips = 0
        self.last_logs: dict = {}
        self._window_start = None
        # A log line's own time: its TensorBoard writes, the metrics read from the device and
        # reset. Inside the window after it (a real pause of training), and counted apart
        # (metrics.json's `pauses`): on a fast GPU a process's first line can cost a window.
        self.pause = Pause()
        # (time, step) of this process's first and latest update, across the run's fits: the time
        # before the first is tracing and compiling, the rate after it the steady step.
        self.first_update = self.last_update = None
        self.began = None
        self.peak_memory: dict | None = None  # runtime.devices.peak_memory() at the latest window

    def _tokens(self, steps_done: int) -> int:
        return self.tokens_through(steps_done) if self.tokens_through else 0

    def on_train_begin(self, logs=None):
        self._last_step = optimizer_step(self.model)
        self._last_batch = -1  # this fit's batches are numbered from 0
        self.began = self.began or time.monotonic()
        self._window_start = (time.monotonic(), self._last_step, self._tokens(0))

    def on_epoch_begin(self, epoch, logs=None):
        self._last_batch = -1  # Keras numbers each epoch's batches from 0

    def on_train_batch_end(self, batch, logs=None):
        # Called once per call of the step: after `batch - _last_batch` batches (several with
        # --steps_per_loop), each an update unless float16 loss scaling skipped it.
        logs = logs or {}
        step = optimizer_step(self.model)
        batches, self._last_batch = batch - self._last_batch, batch
        if self.plan.stop_on_nonfinite and not math.isfinite(float(logs.get("loss", 0.0))):
            self.diverged_at = step
            self.model.stop_training = True
            return
        if not self._count_skips(batches - (step - self._last_step), step) or step == self._last_step:
            return
        last, self._last_step = self._last_step, step
        self.last_update = (time.monotonic(), step)
        self.first_update = self.first_update or self.last_update
        if passed_a_multiple(last, step, self.plan.log_every) or step >= self.plan.total_steps:
            self._log(step, logs, tokens=self._tokens(batch + 1))

    def _count_skips(self, skipped: int, step: int) -> bool:
        """Counts batches without an update (float16 overflow: their steps are taken again);
        False when too many in a row stopped the run."""
        if not skipped:
            self._consecutive_skips = 0
            return True
        self.skipped_steps.assign_add(skipped)
        self._consecutive_skips = self._consecutive_skips + skipped if step == self._last_step else skipped
        if self._consecutive_skips >= MAX_CONSECUTIVE_SKIPS:
            self.diverged_at, self.overflowing = step, True
            self.model.stop_training = True
            return False
        return True

    def timings(self) -> dict:
        """This process's training time: until the first update (tracing, compiling; with
        several steps a call, until the first call's end: its steps included) and the mean step
        after it (checkpoint writes included); empty before any update."""
        if self.first_update is None:
            return {}
        (first_at, first_step), (last_at, last_step) = self.first_update, self.last_update
        timings = {"train_seconds": round(last_at - self.began, 3),
                   "first_step_seconds": round(first_at - self.began, 3)}
        if last_step > first_step:
            timings["step_seconds"] = (last_at - first_at) / (last_step - first_step)
        return timings

    def _log(self, step, logs, tokens):
        now = time.monotonic()
        started, first, tokens_before = self._window_start
        steps = max(1, step - first)
        elapsed = max(now - started, 1e-9)
        rates = {"examples_per_second": steps * self.plan.examples_per_step / elapsed,
                 "step_time_seconds": elapsed / steps}
        if self.tokens_through:
            rates["tokens_per_second"] = self.plan.token_scale * (tokens - tokens_before) / elapsed
        with self.pause:
            self._write_log(step, logs, rates)
        self._window_start = (now, step, tokens)

    def _write_log(self, step, logs, rates):
        scalars = self._scalars(logs)

        memory = peak_memory()
        with self.writer.as_default(step=step):
            for name, value in scalars.items():
                tf.summary.scalar(f"train/{name}", value)
            for name, value in rates.items():
                tf.summary.scalar(f"speed/{name}", value)
            tf.summary.scalar("memory/peak_gib", memory["bytes"] / 2**30, description=f"peak {memory['where']}, GiB")
        self.writer.flush()
        self.last_logs, self.peak_memory = scalars, memory
        if not self.plan.quiet:
            print(self._line(step, scalars, rates), file=self.stream, flush=True)
        if self.plan.window_metrics:
            for metric in self.model.metrics:  # next window averages over its own steps only
                metric.reset_state()
        for observe in self.observers:
            observe(step, scalars)

    def _scalars(self, logs) -> dict:
        optimizer = self.model.optimizer
        scalars = {key: float(value) for key, value in logs.items()}
        scalars["learning_rate"] = current_learning_rate(optimizer)
        loss_scale = getattr(optimizer, "dynamic_scale", None)
        if loss_scale is not None:
            scalars["loss_scale"] = as_float(loss_scale)
            scalars["skipped_steps"] = as_float(self.skipped_steps)
        return scalars

    def _line(self, step, scalars, rates) -> str:
        # At the last window's pace: the first window (tracing, compiling) and a resume's start
        # would otherwise weigh on the estimate until the end of the run.
        total = self.plan.total_steps
        remaining = (total - step) * rates["step_time_seconds"]
        shown = " | ".join(f"{key} {scalars[key]:.4f}" for key in self.plan.console_metrics if key in scalars)
        if scalars.get("skipped_steps"):
            shown += f" | skipped {int(scalars['skipped_steps'])} (float16 overflow)"
        tokens = f"{rates['tokens_per_second']:,.0f} tokens/s | " if "tokens_per_second" in rates else ""
        return (f"step {step}/{total} ({100.0 * step / total:.1f}%) | {rates['examples_per_second']:.0f} examples/s | "
                f"{tokens}{shown} | ETA {format_duration(remaining)}")


def passed_a_multiple(before: int, now: int, every: int) -> bool:
    """Whether a multiple of `every` lies in (before, now]: the step a log, checkpoint or sample
    is due at was reached in the last call (one step a call: `now % every == 0`)."""
    return now // every > before // every


class Pause:
    """Counts the times and seconds a callback held training up (`with pause: ...`): what a
    window's rate loses to checkpoint writes or samples, in the run's metrics.json. The first
    few pauses are kept apart, and the median of all: a run's first saves and panels also trace
    once, and the totals alone could not say which pause cost what."""

    FIRST = 3

    def __init__(self):
        self.each = []  # seconds, one per pause

    @property
    def count(self) -> int:
        return len(self.each)

    @property
    def seconds(self) -> float:
        return sum(self.each)

    def __enter__(self):
        self._began = time.monotonic()

    def __exit__(self, *error):
        self.each.append(time.monotonic() - self._began)

    def summary(self) -> dict:
        summary = {"count": self.count, "seconds": round(self.seconds, 3)}
        if self.each:
            summary["first_seconds"] = [round(seconds, 3) for seconds in self.each[:self.FIRST]]
            summary["median_seconds"] = round(statistics.median(self.each), 3)
        return summary


class StopOnSignal(keras.callbacks.Callback):
    """SIGTERM/SIGINT stop training after the step in which they arrive (`received` holds the
    number); a second one falls back to the handler from before (e.g. Ctrl-C twice quits). Put it
    before a `CheckpointSaver`, which then saves that step.

    As a plain callback it listens from `on_train_begin` to `on_train_end`. Keras skips
    `on_train_end` when `fit` raises, so a run of several `fit` calls listens with `listening()`
    around all of them: no gap between calls, and the earlier handlers back however it ends."""

    def __init__(self, signals=(signal.SIGTERM, signal.SIGINT)):
        super().__init__()
        self.signals = signals
        self.received: int | None = None
        self._previous: dict | None = None  # the handlers replaced while listening
        self._installed_by_fit = False

    @contextlib.contextmanager
    def listening(self):
        installed = self._install()
        try:
            yield self
        finally:
            if installed:
                self._restore()

    def _install(self) -> bool:
        if self._previous is not None:
            return False
        self._previous = {number: signal.signal(number, self._on_signal) for number in self.signals}
        return True

    def _restore(self) -> None:
        for number, previous in (self._previous or {}).items():
            signal.signal(number, previous)
        self._previous = None

    def _on_signal(self, number, frame):
        self.received = number
        signal.signal(number, (self._previous or {}).get(number, signal.SIG_DFL))

    def on_train_begin(self, logs=None):
        self._installed_by_fit = self._install()

    def on_train_batch_end(self, batch, logs=None):
        if self.received is not None:
            self.model.stop_training = True

    def on_train_end(self, logs=None):
        if self._installed_by_fit:
            self._restore()
            self._installed_by_fit = False


class CheckpointSaver(keras.callbacks.Callback):
    """Saves every `every` steps, and after the step in which `stop` received a signal;
    `on_save(path)` runs after each save (the run's history)."""

    def __init__(self, run_checkpoint, every: int, stop: StopOnSignal, on_save=None):
        super().__init__()
        self.run_checkpoint, self.every, self.stop, self.on_save = run_checkpoint, every, stop, on_save
        self.saved_paths: list[str] = []
        self.pause = Pause()

    def on_train_begin(self, logs=None):
        self._last_saved = self.run_checkpoint.step  # a step a float16 skip stalls on is saved once

    def on_train_batch_end(self, batch, logs=None):
        step = self.run_checkpoint.step
        due = passed_a_multiple(self._last_saved, step, self.every) and math.isfinite(
            float((logs or {}).get("loss", 0.0)))
        if self.stop.received is not None or due:
            self.save(steps_done=batch + 1)

    def save(self, steps_done: int | None = None) -> str:
        with self.pause:
            path = self.run_checkpoint.save(steps_done=steps_done)
        self.saved_paths.append(path)
        self._last_saved = self.run_checkpoint.step
        if self.on_save is not None:
            self.on_save(path)
        return path


class StepProfiler(keras.callbacks.Callback):
    """Traces steps [start, stop) with the TensorFlow profiler into `logdir`."""

    def __init__(self, logdir: str, start: int, stop: int):
        super().__init__()
        self.logdir, self.start, self.stop = logdir, start, stop
        self.active = False

    def on_train_batch_begin(self, batch, logs=None):
        step = optimizer_step(self.model)
        if self.start <= step < self.stop and not self.active:
            tf.profiler.experimental.start(self.logdir)
            self.active = True

    def on_train_batch_end(self, batch, logs=None):
        if self.active and optimizer_step(self.model) >= self.stop:
            tf.profiler.experimental.stop()
            self.active = False

    def on_train_end(self, logs=None):
        if self.active:
            tf.profiler.experimental.stop()
            self.active = False
