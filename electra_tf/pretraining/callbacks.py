"""Keras callbacks of a pre-training run: what it shows, saves and refuses.

Advancing the resumable input is not a monitor's job: `resumable_input.InputTracker` does it,
and these callbacks only read the input's state, so their order does not matter.

- `TrainingMonitor`: every `log_every` steps, console progress (step, rate, ETA, key metrics)
  and step-keyed TensorBoard scalars (every metric, learning rate, loss scale, examples/s,
  tokens/s, step time, peak memory); the window's metrics go to the run's health checks
  (`evaluation.TrainingHealth`); metrics are averaged over those steps, then reset. It also stops the
  run on a non-finite loss (float32/bfloat16: a real divergence) naming the step. A batch
  whose float16 gradients overflowed makes no optimizer update (dynamic loss scaling halves
  the scale and skips it): the step number stays, the batch is counted in `skipped_steps`
  (console, `train/skipped_steps`, the run's summary), and no step is shown twice. After
  `MAX_CONSECUTIVE_SKIPS` skipped batches in a row it stops the run too (`overflowing`): the
  gradients then overflow at every loss scale, and the run would otherwise never reach its steps.
- `CheckpointSaver`: a checkpoint every `every` steps, at the end, and when SIGTERM/SIGINT
  arrives (preemption): the run stops after the current step, saved.
- `ReplacementSamples`: every `every` steps, a TensorBoard text panel showing one sentence
  with the generator's replacements and the discriminator's verdicts.
- `StepProfiler`: TensorFlow profiler trace over a range of steps.
"""

from __future__ import annotations

import math
import signal
import statistics
import sys
import time

import keras
import numpy as np
import tensorflow as tf

from electra_tf.runtime.optimizer import as_float, current_learning_rate, optimizer_step
from electra_tf.utils.progress import format_duration

CONSOLE_METRICS = ("loss", "masked_lm_accuracy", "disc_auc")
# Dynamic loss scaling starts at 2^15 and halves the scale at each overflowing batch; a healthy
# float16 run skips a few at its start (4 on the tiny preset). 40 in a row divide the scale by
# 2^40 (from the initial 2^15: 2^-25), where float16 gradients underflow to zero: an overflow left
# then does not come from the scale.
MAX_CONSECUTIVE_SKIPS = 40


class TrainingMonitor(keras.callbacks.Callback):
    def __init__(self, writer, total_steps: int, batch_size: int, resumable_input, log_every: int = 50,
                 stop_on_nonfinite: bool = True, stream=None, token_scale: int = 1, quiet: bool = False,
                 skipped_steps=None, health=None):
        """`health`: an `evaluation.TrainingHealth` that reads each window's metrics. `token_scale`: how many alike inputs the tokens this process reads stand for (the
        workers of a multi-worker run). `quiet`: no progress lines (a worker that is not the chief).
        `skipped_steps`: an int64 tf.Variable that counts batches without an update (checkpointed
        with the run, `RunCheckpoint.skipped_steps`); None keeps a count of this fit's own."""
        super().__init__()
        self.skipped_steps = skipped_steps if skipped_steps is not None else tf.Variable(0, dtype=tf.int64)
        self.health = health
        self.token_scale = token_scale
        self.quiet = quiet
        self.writer = writer
        self.total_steps = total_steps
        self.batch_size = batch_size
        self.input = resumable_input
        self.log_every = log_every
        self.stop_on_nonfinite = stop_on_nonfinite
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

    def _step(self) -> int:
        return optimizer_step(self.model)

    def on_train_begin(self, logs=None):
        self._first_step = self._last_step = self._step()
        self._last_batch = -1  # this fit's batches are numbered from 0
        self._started = time.monotonic()
        self.began = self.began or self._started
        self._window_start = (self._started, self._first_step, self.input.tokens_through(0))

    def on_train_batch_end(self, batch, logs=None):
        # Called once per call of the step: after `batch - _last_batch` batches (several with
        # --steps_per_loop), each an update unless float16 loss scaling skipped it.
        logs = logs or {}
        step = self._step()
        batches, self._last_batch = batch - self._last_batch, batch
        loss = float(logs.get("loss", 0.0))
        if self.stop_on_nonfinite and not math.isfinite(loss):
            self.diverged_at = step
            self.model.stop_training = True
            return
        skipped = batches - (step - self._last_step)
        if skipped:  # no update for these: float16 overflow, their steps are taken again
            self.skipped_steps.assign_add(skipped)
            self._consecutive_skips = self._consecutive_skips + skipped if step == self._last_step else skipped
            if self._consecutive_skips >= MAX_CONSECUTIVE_SKIPS:
                self.diverged_at, self.overflowing = step, True
                self.model.stop_training = True
                return
        else:
            self._consecutive_skips = 0
        if step == self._last_step:
            return
        last, self._last_step = self._last_step, step
        self.last_update = (time.monotonic(), step)
        self.first_update = self.first_update or self.last_update
        if passed_a_multiple(last, step, self.log_every) or step >= self.total_steps:
            self._log(step, logs, tokens=self.input.tokens_through(batch + 1))

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
        rates = {
            "examples_per_second": steps * self.batch_size / elapsed,
            "tokens_per_second": self.token_scale * (tokens - tokens_before) / elapsed,
            "step_time_seconds": elapsed / steps,
        }
        with self.pause:
            self._write_log(step, logs, rates, now)
        self._window_start = (now, step, tokens)

    def _write_log(self, step, logs, rates, now):
        optimizer = self.model.optimizer
        scalars = {key: float(value) for key, value in logs.items()}
        scalars["learning_rate"] = current_learning_rate(optimizer)
        loss_scale = getattr(optimizer, "dynamic_scale", None)
        if loss_scale is not None:
            scalars["loss_scale"] = as_float(loss_scale)
            scalars["skipped_steps"] = as_float(self.skipped_steps)
        from electra_tf.runtime.devices import peak_memory

        memory = peak_memory()
        with self.writer.as_default(step=step):
            for name, value in scalars.items():
                tf.summary.scalar(f"train/{name}", value)
            for name, value in rates.items():
                tf.summary.scalar(f"speed/{name}", value)
            tf.summary.scalar("memory/peak_gib", memory["bytes"] / 2**30,
                              description=f"peak {memory['where']}, GiB")
        self.writer.flush()
        self.last_logs = scalars
        self.peak_memory = memory

        # At the last window's pace: the first window (tracing, compiling) and a resume's start
        # would otherwise weigh on the estimate until the end of the run.
        remaining = (self.total_steps - step) * rates["step_time_seconds"]
        shown = " | ".join(f"{key} {scalars[key]:.4f}" for key in CONSOLE_METRICS if key in scalars)
        if scalars.get("skipped_steps"):
            shown += f" | skipped {int(scalars['skipped_steps'])} (float16 overflow)"
        if not self.quiet:
            print(f"step {step}/{self.total_steps} ({100.0 * step / self.total_steps:.1f}%) | "
                  f"{rates['examples_per_second']:.0f} examples/s | "
                  f"{rates['tokens_per_second']:,.0f} tokens/s | {shown} | "
                  f"ETA {format_duration(remaining)}", file=self.stream, flush=True)
        for metric in self.model.metrics:  # next window averages over its own steps only
            metric.reset_state()
        if self.health is not None and not self.quiet:
            self.health.observe(step, scalars)


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


class CheckpointSaver(keras.callbacks.Callback):
    """Saves every `every` steps, at the end, and after the step in which a signal arrived."""

    def __init__(self, run_checkpoint, every: int, signals=(signal.SIGTERM, signal.SIGINT)):
        super().__init__()
        self.run_checkpoint = run_checkpoint
        self.every = every
        self.signals = signals
        self.received: int | None = None
        self.saved_paths: list[str] = []
        self.pause = Pause()
        self._previous = {}

    def on_train_begin(self, logs=None):
        self._last_saved = self.run_checkpoint.step  # a step a float16 skip stalls on is saved once
        for number in self.signals:
            self._previous[number] = signal.signal(number, self._on_signal)

    def _on_signal(self, number, frame):
        self.received = number
        # A second signal falls back to the default behaviour (e.g. Ctrl-C twice quits).
        signal.signal(number, self._previous.get(number, signal.SIG_DFL))

    def on_train_batch_end(self, batch, logs=None):
        step = self.run_checkpoint.step
        if self.received is not None:
            with self.pause:
                self.saved_paths.append(self.run_checkpoint.save(steps_done=batch + 1))
            self.model.stop_training = True
        elif (passed_a_multiple(self._last_saved, step, self.every)
              and math.isfinite(float((logs or {}).get("loss", 0.0)))):
            with self.pause:
                self.saved_paths.append(self.run_checkpoint.save(steps_done=batch + 1))
            self._last_saved = step

    def on_train_end(self, logs=None):
        for number, previous in self._previous.items():
            signal.signal(number, previous)


class ReplacementSamples(keras.callbacks.Callback):
    """A TensorBoard text panel: one example with replacements and the discriminator's verdicts."""

    def __init__(self, writer, probe_batch, tokenizer, every: int = 200):
        """Shows the first example of `probe_batch`, and runs the networks on that one alone
        (a whole batch would pause the run every `every` steps for seconds on a CPU).

        The first panel is written when the run's first call of the step has ended, not before
        it (it would add to the first step, which a rerun waits for). The networks run through a
        `tf.function` traced at that first panel, whose window the first step's tracing and
        compiling slow anyway; every later panel is one graph call (run eagerly, a panel
        dispatches the networks' ops one by one, a pause comparable to a GPU's whole window)."""
        super().__init__()
        self.writer = writer
        self.probe = {key: tf.constant(value[:1]) for key, value in probe_batch.items()}
        self.tokenizer = tokenizer
        self.every = every
        self.pause = Pause()
        self._outputs_of = None  # the networks as a tf.function, traced at the first panel
        self._last = None  # the step of the last panel, across the run's fits

    def on_train_batch_end(self, batch, logs=None):
        step = optimizer_step(self.model)
        if self._last is None or passed_a_multiple(self._last, step, self.every):
            self._last = step
            self._write(step)

    def _write(self, step):
        with self.pause:
            if self._outputs_of is None:
                self._outputs_of = tf.function(self.model.compute_pretraining_outputs, autograph=False)
            text = render_replacements(self._outputs_of, self.probe, self.tokenizer)
            with self.writer.as_default(step=step):
                tf.summary.text("samples/replaced_token_detection", text)
            self.writer.flush()


def render_replacements(outputs_of, batch, tokenizer, row: int = 0) -> str:
    """Markdown for one example: ~~original~~ **sample** for replaced tokens, and a verdict
    mark after every token the discriminator calls replaced (p > 0.5). `outputs_of`: the
    pre-trainer's `compute_pretraining_outputs`, eager or traced."""
    outputs = outputs_of(batch, tf.constant([7, 7], tf.int64))
    length = int(np.sum(batch["padding_mask"][row]))
    original = np.array(batch["token_ids"][row])
    positions = np.array(batch["mask_positions"][row])[np.array(batch["mask_weights"][row]) > 0]
    original[positions] = np.array(batch["mask_ids"][row])[: len(positions)]
    corrupted = np.array(outputs["corrupted_ids"][row])
    labels = np.array(outputs["replaced_token_labels"][row])
    probabilities = 1.0 / (1.0 + np.exp(-np.array(outputs["disc_logits"][row])))
    words, hits, misses, false_alarms = [], 0, 0, 0
    for t in range(length):
        token = tokenizer.id_to_token(int(corrupted[t]))
        if labels[t]:
            token = f"~~{tokenizer.id_to_token(int(original[t]))}~~ **{token}**"
        flagged = probabilities[t] > 0.5
        if flagged:
            token += " ⚑" if labels[t] else " ⚐"
        hits += int(flagged and labels[t])
        misses += int(labels[t] and not flagged)
        false_alarms += int(flagged and not labels[t])
        words.append(token)
    header = (f"{int(labels.sum())} of {len(positions)} masked tokens replaced by the generator; "
              f"discriminator caught {hits}, missed {misses}, false alarms {false_alarms}.")
    legend = ("~~original~~ **generator sample** = replaced token; ⚑ discriminator says replaced "
              "(correct); ⚐ discriminator says replaced (wrong).")
    return f"{header}\n\n{' '.join(words)}\n\n{legend}"


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
