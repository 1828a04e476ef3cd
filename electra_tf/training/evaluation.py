"""Evaluation during training: `PeriodicEvaluation`, the callback that asks the task for its
metrics on schedule, writes them to TensorBoard and the console, keeps them for the run's
summary and, where the task picks its best weights by evaluation (fine-tuning's best epoch),
keeps those weights and restores them at the end.

The task's `evaluate(model, inputs, final=False)` returns `(metrics, files)`: metrics by name
(with `score`, what a best evaluation is chosen by) and files its best evaluation leaves in the
run folder (predictions, for example; usually none).
"""

from __future__ import annotations

import sys
from typing import Callable

import keras
import tensorflow as tf

from electra_tf.runtime.optimizer import optimizer_step


class PeriodicEvaluation(keras.callbacks.Callback):
    """Evaluates every `every` steps, or at the end of every epoch (`every` None); `results`
    holds this process's (step -> metrics). A step in `earlier` (evaluated by an earlier process
    of the run) is not evaluated again. `describe(metrics)` is the console line's text. With `keep_best`, the
    weights of the evaluation with the highest `score` are kept (`restore_best`), and
    `on_best(record, files)` is called when it improves."""

    def __init__(self, evaluate: Callable, writer, describe: Callable[[dict], str], every: int | None = None,
                 keep_best: bool = False, on_best: Callable | None = None, quiet: bool = False, stream=None):
        super().__init__()
        self.evaluate, self.writer, self.describe, self.every = evaluate, writer, describe, every
        self.keep_best, self.on_best, self.quiet = keep_best, on_best, quiet
        self.stream = stream or sys.stdout
        self.results: dict[int, dict] = {}
        self.earlier: set[int] = set()
        self.history: list[dict] = []  # {"step", "epoch" (per epoch), "train_loss", **metrics}
        self.best: dict | None = None
        self.best_weights = None

    def on_train_batch_end(self, batch, logs=None):
        step = optimizer_step(self.model)
        if self.every is not None and step % self.every == 0 and step not in self.results and step not in self.earlier:
            self._evaluate(step, None, logs)

    def on_epoch_end(self, epoch, logs=None):
        if self.every is None:
            self._evaluate(optimizer_step(self.model), epoch + 1, logs)

    def _evaluate(self, step: int, epoch: int | None, logs) -> None:
        metrics, files = self.evaluate()
        self.results[step] = metrics
        record = {"step": step, **({"epoch": epoch} if epoch else {}),
                  "train_loss": float((logs or {}).get("loss", float("nan"))), **metrics}
        self.history.append(record)
        write_scalars(self.writer, step, "eval", metrics)
        improved = self.keep_best and (self.best is None or metrics["score"] > self.best["score"])
        if not self.quiet:
            where = f"epoch {epoch}: eval" if epoch else f"  eval at step {step:,}"
            print(f"{where} {self.describe(metrics)}{' (best so far)' if improved else ''}", file=self.stream,
                  flush=True)
        if improved:
            self.best = record
            self.best_weights = [w.copy() for w in self.model.get_weights()]
            if self.on_best is not None:
                self.on_best(record, files)

    def restore_best(self) -> None:
        if self.best_weights is not None:
            self.model.set_weights(self.best_weights)


def write_scalars(writer, step: int, prefix: str, metrics: dict) -> None:
    """`prefix/name` scalars at `step`; nested metrics (per entity type) as `prefix/name/key/...`."""
    with writer.as_default(step=step):
        for key, value in _flat(metrics, prefix):
            tf.summary.scalar(key, value)
    writer.flush()


def _flat(values: dict, prefix: str):
    for key, value in values.items():
        if isinstance(value, dict):
            yield from _flat(value, f"{prefix}/{key}")
        elif isinstance(value, (int, float)):
            yield f"{prefix}/{key}", value


def numbers(metrics: dict) -> str:
    """`name value | ...` of a task's flat metrics (the default console text)."""
    return " | ".join(f"{name} {value:.4f}" for name, value in metrics.items() if isinstance(value, (int, float)))
