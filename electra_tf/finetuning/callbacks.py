"""Keras callbacks of a fine-tuning run (`python -m electra_tf.finetune`).

- `FinetuningProgress`: console progress (examples/s, ETA, running loss) and step-keyed
  TensorBoard scalars.
- `EpochEvaluator`: the task's official metrics after every epoch (a function the task kind
  supplies; `predicted_metrics` for labelled text); keeps the best epoch's weights.
"""

from __future__ import annotations

import sys

import keras
import numpy as np
import tensorflow as tf

from electra_tf.finetuning.text import metrics
from electra_tf.runtime.optimizer import current_learning_rate, optimizer_step
from electra_tf.utils.progress import Progress


class FinetuningProgress(keras.callbacks.Callback):
    """Console progress (examples/s, ETA, running loss) and step-keyed TensorBoard scalars
    (train loss, learning rate) every `log_every` steps."""

    def __init__(self, writer, total_steps: int, batch_size: int, log_every: int = 20, stream=None):
        super().__init__()
        self.writer, self.total_steps, self.log_every = writer, total_steps, log_every
        self.batch_size = batch_size
        self.progress = Progress("fine-tuning", total=total_steps * batch_size, unit="examples",
                                 stream=stream or sys.stdout, interval=0.0)

    def on_train_batch_end(self, batch, logs=None):
        step = optimizer_step(self.model)
        if step % self.log_every and step != self.total_steps:
            return
        loss = float((logs or {}).get("loss", float("nan")))
        with self.writer.as_default(step=step):
            tf.summary.scalar("train/loss", loss)
            tf.summary.scalar("train/learning_rate", current_learning_rate(self.model.optimizer))
        self.progress.update(step * self.batch_size, f"step {step}/{self.total_steps} | loss {loss:.4f}")


class EpochEvaluator(keras.callbacks.Callback):
    """After every epoch: `evaluate(model) -> (metrics, files)`, the task's official metrics
    (with `score`, what picks the best epoch; TensorBoard and console) and the files its best
    epoch leaves (e.g. predictions.json; {} for most tasks). When `score` improves, the weights
    are kept and `on_best(record, files)` is called, so training ends holding the best epoch's
    model."""

    def __init__(self, writer, evaluate, on_best=None, stream=None):
        super().__init__()
        self.writer, self.evaluate, self.on_best = writer, evaluate, on_best
        self.stream = stream or sys.stdout
        self.history: list[dict] = []
        self.best: dict | None = None
        self.best_weights = None

    def on_epoch_end(self, epoch, logs=None):
        values, files = self.evaluate(self.model)
        record = {"epoch": epoch + 1, "train_loss": float((logs or {}).get("loss", float("nan"))), **values}
        self.history.append(record)
        with self.writer.as_default(step=optimizer_step(self.model)):
            for name, value in values.items():
                if isinstance(value, dict):  # e.g. per entity type: eval/per_type/PER/f1
                    for key, inner in _flat(value, f"eval/{name}"):
                        tf.summary.scalar(key, inner)
                else:
                    tf.summary.scalar(f"eval/{name}", value)
        self.writer.flush()
        improved = self.best is None or values["score"] > self.best["score"]
        shown = " | ".join(f"{name} {value:.4f}" for name, value in values.items() if not isinstance(value, dict))
        print(f"epoch {epoch + 1}: eval {shown}{' (best so far)' if improved else ''}",
              file=self.stream, flush=True)
        if improved:
            self.best = record
            self.best_weights = [w.copy() for w in self.model.get_weights()]
            if self.on_best is not None:
                self.on_best(record, files)

    def restore_best(self):
        if self.best_weights is not None:
            self.model.set_weights(self.best_weights)


def _flat(values: dict, prefix: str):
    for key, value in values.items():
        if isinstance(value, dict):
            yield from _flat(value, f"{prefix}/{key}")
        else:
            yield f"{prefix}/{key}", value


def predicted_metrics(eval_inputs, eval_labels, metric_names, num_classes: int):
    """`evaluate` for classification, regression and tagging: predict the eval inputs and
    score them with `metrics.compute`; no files."""
    eval_labels = np.asarray(eval_labels)

    def evaluate(model):
        outputs = model.predict(eval_inputs, verbose=0)
        return metrics.compute(metric_names, outputs, eval_labels, num_classes), {}
    return evaluate
