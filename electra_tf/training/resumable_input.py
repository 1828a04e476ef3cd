"""The run's input, whose position a checkpoint holds: `ResumableInput` and `InputTracker`.

Keras' `fit` makes its own iterator over a dataset, out of reach of a checkpoint. So the run
owns the tf.data iterator (`ResumableInput`) and gives `fit` a thin generator dataset that
pulls from it; `InputTracker`, a callback, tells it after every step that the step's batch was
consumed. What a checkpoint then holds of the input (`RunCheckpoint` in checkpointing.py saves
it beside the model): the tf.data iterator, and the batches it already
handed out that no step has consumed yet (prefetched by tf.data or the strategy), which are
replayed first after a restore, so the resumed run sees exactly the batches the uninterrupted
run would have.
"""

from __future__ import annotations

import collections
import contextlib
import threading

import keras
import numpy as np
import tensorflow as tf


class ResumableInput:
    """Wraps a tf.data pipeline so its position can be checkpointed while `fit` reads it."""

    def __init__(self, dataset: tf.data.Dataset, checkpointable: bool = True):
        """`checkpointable=False` for a pipeline whose iterator TensorFlow cannot save (one fed
        by a Python generator, as raw text is): checkpoints then leave the input position out."""
        self.spec = dict(dataset.element_spec)
        self.checkpointable = checkpointable
        self.iterator = iter(dataset)
        self._lock = threading.Lock()
        self._handed_out = collections.deque()  # (batch, tokens) yielded, not yet consumed by a step
        self._steps_accounted = 0  # steps of the current fit whose batch left _handed_out
        self._replay: list = []
        self._generation = 0  # which dataset() call's generator may pull; older ones stop
        self.tokens_consumed = 0
        # Dynamic-length stacks of in-flight batches, saved with the checkpoint.
        self.in_flight = {
            key: tf.Variable(tf.zeros([0, *spec.shape], spec.dtype), shape=[None, *spec.shape],
                             trainable=False, name=f"in_flight_{key}")
            for key, spec in self.spec.items()}

    def close(self) -> None:
        """Releases the pipeline's iterator (the run is over)."""
        with self._lock:
            self.iterator = iter(())

    def dataset(self) -> tf.data.Dataset:
        """What `fit` reads: the pipeline's batches, in order, through this object. Read it
        in one `fit` call with an `InputTracker` among the callbacks. Called again for the next
        `fit`, it first hands out the batches the last one pulled (prefetched) but never trained
        on, and stops the last one's generator, so no batch is lost or read twice."""
        with self._lock:
            self._generation += 1
            self._replay = [batch for batch, _ in self._handed_out] + self._replay
            self._handed_out.clear()
            self._steps_accounted = 0
        generation = self._generation
        dataset = tf.data.Dataset.from_generator(lambda: self._generate(generation), output_signature=self.spec)
        options = tf.data.Options()
        # Batches are already this input pipeline's own; a strategy must not re-shard them.
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
        return dataset.with_options(options)

    def _generate(self, generation):
        while True:
            with self._lock:
                if generation != self._generation:  # a later fit reads now
                    return
                if self._replay:
                    batch = self._replay.pop(0)
                else:
                    try:
                        batch = next(self.iterator)
                    except StopIteration:
                        return
                tokens = int(np.sum(batch["padding_mask"])) if "padding_mask" in batch else 0
                self._handed_out.append((batch, tokens))
            # Handed to tf.data as numpy copies: yielding the source iterator's own EagerTensors
            # through from_generator fed a MirroredStrategy step corrupted batches (token ids
            # far outside the vocabulary by the second step, seen with mixed_float16 on two CPU
            # replicas; tests/runtime/test_compiled_step.py). The copy costs microseconds a batch.
            yield {key: np.array(value) for key, value in batch.items()}

    def advance_to(self, steps_done: int) -> None:
        """`steps_done` steps of the current `fit` have finished, each having consumed the
        oldest batch handed out. Idempotent: any number of callers may report the same step."""
        with self._lock:
            while self._steps_accounted < steps_done and self._handed_out:
                _, tokens = self._handed_out.popleft()
                self.tokens_consumed += tokens
                self._steps_accounted += 1

    @property
    def steps_in_fit(self) -> int:
        """Batches the current (or last) `fit` has trained on."""
        return self._steps_accounted

    def tokens_through(self, steps_done: int) -> int:
        """Non-padding tokens consumed once `steps_done` steps of the current `fit` have
        finished; only reads, so it does not matter whether `advance_to` ran yet."""
        with self._lock:
            pending = max(0, steps_done - self._steps_accounted)
            return self.tokens_consumed + sum(tokens for _, tokens in list(self._handed_out)[:pending])

    @contextlib.contextmanager
    def frozen(self):
        """Holds the input still while a checkpoint is written, with in-flight batches staged."""
        with self._lock:
            # In reading order: handed out (and not yet trained on) before those still to replay.
            pending = [batch for batch, _ in self._handed_out] + list(self._replay)
            for key, variable in self.in_flight.items():
                if pending:
                    variable.assign(tf.stack([batch[key] for batch in pending]))
                else:
                    variable.assign(tf.zeros([0, *self.spec[key].shape], self.spec[key].dtype))
            yield

    def in_flight_count(self) -> int:
        return int(tf.shape(next(iter(self.in_flight.values())))[0])

    def restored(self) -> int:
        """After a restore: replays the in-flight batches first; returns how many."""
        with self._lock:
            count = self.in_flight_count()
            self._replay = [{key: variable[i] for key, variable in self.in_flight.items()}
                            for i in range(count)]
            self._handed_out.clear()
            return count


class InputTracker(keras.callbacks.Callback):
    """Tells the `ResumableInput` after every step that the step's batch was consumed."""

    def __init__(self, resumable_input: ResumableInput):
        super().__init__()
        self.input = resumable_input

    def on_train_batch_end(self, batch, logs=None):
        self.input.advance_to(batch + 1)
