"""The trainer's callbacks only observe (the InputTracker advances the input), stop on a
non-finite loss and on a signal, and save on schedule and after a signal."""

import io
import signal
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from electra_tf.training.callbacks import (MAX_CONSECUTIVE_SKIPS, CheckpointSaver, ProgressPlan, StopOnSignal,
                                           TrainingMonitor, passed_a_multiple)
from electra_tf.training.resumable_input import InputTracker, ResumableInput


class FakeModel:
    def __init__(self):
        self.optimizer = keras.optimizers.SGD(learning_rate=0.5)
        self.metrics = []
        self.stop_training = False


def padded_batches(real_tokens=3):
    mask = np.zeros((2, 4), "int32")
    mask[:, :real_tokens] = 1
    return tf.data.Dataset.from_tensors({"padding_mask": mask}).repeat()


def run_steps(callbacks, model, steps, losses=None):
    for callback in callbacks:
        callback.set_model(model)
        callback.on_train_begin()
    for batch in range(steps):
        model.optimizer.iterations.assign_add(1)
        for callback in callbacks:
            callback.on_train_batch_end(batch, {"loss": (losses or {}).get(batch + 1, 1.0)})
        if model.stop_training:
            break


def monitor_of(resumable, total, log_every, stream, **plan):
    return TrainingMonitor(tf.summary.create_noop_writer(), ProgressPlan(total, 2, log_every, **plan),
                           tokens_through=resumable.tokens_through if resumable else None, stream=stream)


def test_monitor_logs_rates_whatever_the_callback_order():
    lines = {}
    for order in ("tracker_first", "monitor_first"):
        resumable = ResumableInput(padded_batches())
        reader = iter(resumable.dataset())
        stream = io.StringIO()
        monitor = monitor_of(resumable, 4, 2, stream)
        tracker = InputTracker(resumable)
        model = FakeModel()
        callbacks = [tracker, monitor] if order == "tracker_first" else [monitor, tracker]
        for callback in callbacks:
            callback.set_model(model)
            callback.on_train_begin()
        for batch in range(4):
            next(reader)  # the step's batch is pulled before the step ends
            model.optimizer.iterations.assign_add(1)
            for callback in callbacks:
                callback.on_train_batch_end(batch, {"loss": 1.0})
        lines[order] = stream.getvalue().splitlines()
        assert resumable.tokens_consumed == 4 * 6  # 4 steps x 2 rows x 3 real tokens
    for order, printed in lines.items():
        assert [line.split(" (")[0] for line in printed] == ["step 2/4", "step 4/4"], order
        assert all("tokens/s" in line and "ETA" in line for line in printed)
    # tokens/s is positive in both orders: the monitor read the step's tokens either way
    for printed in lines.values():
        tokens_per_second = float(printed[0].split(" tokens/s")[0].split("| ")[-1].replace(",", ""))
        assert tokens_per_second > 0


def test_monitor_without_a_token_count_and_with_its_observers():
    """A finite dataset (fine-tuning): examples/s and ETA, no tokens/s; the observers see every window."""
    stream, seen = io.StringIO(), []
    monitor = TrainingMonitor(tf.summary.create_noop_writer(), ProgressPlan(5, 4, 2, console_metrics=("loss",)),
                              observers=[lambda step, metrics: seen.append((step, metrics["loss"]))], stream=stream)
    run_steps([monitor], FakeModel(), 5, losses={2: 0.5, 4: 0.25, 5: 0.125})
    printed = stream.getvalue().splitlines()
    assert [line.split(" (")[0] for line in printed] == ["step 2/5", "step 4/5", "step 5/5"]
    assert all("examples/s" in line and "tokens/s" not in line and "loss" in line for line in printed)
    assert seen == [(2, 0.5), (4, 0.25), (5, 0.125)]


def test_monitor_stops_on_a_non_finite_loss_naming_the_step():
    monitor = monitor_of(ResumableInput(padded_batches()), 10, 5, io.StringIO())
    model = FakeModel()
    run_steps([monitor], model, 10, losses={3: float("nan")})
    assert monitor.diverged_at == 3 and model.stop_training


def test_monitor_counts_float16_skips_and_stops_when_every_batch_overflows():
    monitor = monitor_of(ResumableInput(padded_batches()), 100, 50, io.StringIO())
    model = FakeModel()
    monitor.set_model(model)
    monitor.on_train_begin()

    numbered = iter(range(1000))  # one fit's batches

    def batches(updates):  # one batch per entry: True made an update, False was skipped
        for updated in updates:
            if updated:
                model.optimizer.iterations.assign_add(1)
            monitor.on_train_batch_end(next(numbered), {"loss": 1.0})

    # A healthy start (4 overflows, then updates) and one more overflow later: counted, no stop.
    batches([False] * 4 + [True] * 3 + [False] + [True] * 2)
    assert int(monitor.skipped_steps.numpy()) == 5 and monitor.diverged_at is None and not model.stop_training
    # Overflows in a row, one short of the limit, then an update: the run goes on.
    batches([False] * (MAX_CONSECUTIVE_SKIPS - 1) + [True])
    assert monitor.diverged_at is None and not model.stop_training
    # Every batch overflowing: stopped at the step it could not leave, as an overflow.
    batches([False] * MAX_CONSECUTIVE_SKIPS)
    assert model.stop_training and monitor.overflowing and monitor.diverged_at == 6
    assert int(monitor.skipped_steps.numpy()) == 5 + (MAX_CONSECUTIVE_SKIPS - 1) + MAX_CONSECUTIVE_SKIPS


def test_saver_saves_on_schedule_and_after_a_signal_then_restores_handlers():
    saved = []
    fake_checkpoint = types.SimpleNamespace(
        step=0, save=lambda steps_done=None: saved.append(steps_done) or f"ckpt-{fake_checkpoint.step}")
    stop = StopOnSignal(signals=(signal.SIGUSR1,))
    noted = []
    saver = CheckpointSaver(fake_checkpoint, every=2, stop=stop, on_save=noted.append)
    previous = signal.getsignal(signal.SIGUSR1)
    model = FakeModel()
    for callback in (stop, saver):
        callback.set_model(model)
        callback.on_train_begin()
    for batch in range(5):
        fake_checkpoint.step = batch + 1
        if batch == 2:
            signal.raise_signal(signal.SIGUSR1)  # arrives during step 3
        for callback in (stop, saver):
            callback.on_train_batch_end(batch, {"loss": 1.0})
        if model.stop_training:
            break
    for callback in (stop, saver):
        callback.on_train_end()
    # Step 2 on schedule, step 3 because of the signal, each with its input count.
    assert saved == [2, 3]
    assert stop.received == signal.SIGUSR1 and model.stop_training
    assert saver.saved_paths == noted == ["ckpt-2", "ckpt-3"]
    assert signal.getsignal(signal.SIGUSR1) == previous


def test_a_fit_that_raises_leaves_the_handlers_it_found():
    """Keras skips on_train_end when fit raises (here a full disk at a save); the handler must
    not outlive the run, or the next Ctrl-C in that process is only recorded."""
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    data = (np.zeros((8, 1), "float32"), np.zeros((8, 1), "float32"))

    class FullDisk(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            raise OSError("No space left on device")

    previous = signal.getsignal(signal.SIGUSR1)
    stop = StopOnSignal(signals=(signal.SIGUSR1,))
    with pytest.raises(OSError, match="No space"), stop.listening():
        model.fit(*data, batch_size=4, epochs=1, verbose=0, callbacks=[stop, FullDisk()])
    assert signal.getsignal(signal.SIGUSR1) == previous
    # Listening spans several fits with no gap between them; a fit on its own listens during itself.
    with stop.listening():
        for _ in range(2):
            model.fit(*data, batch_size=4, epochs=1, verbose=0, callbacks=[stop])
            assert signal.getsignal(signal.SIGUSR1) != previous
    assert signal.getsignal(signal.SIGUSR1) == previous
    model.fit(*data, batch_size=4, epochs=1, verbose=0, callbacks=[stop])
    assert signal.getsignal(signal.SIGUSR1) == previous


def test_callbacks_follow_calls_of_several_steps():
    """With --steps_per_loop the callbacks see one batch end per call of several steps: the monitor
    logs, and the saver saves, at the first call's end on or after each multiple of their period,
    and a call with an overflowing batch counts it as skipped."""
    assert passed_a_multiple(4, 7, 5) and not passed_a_multiple(5, 9, 5) and passed_a_multiple(9, 10, 5)
    stream = io.StringIO()
    monitor = monitor_of(ResumableInput(padded_batches()), 12, 5, stream)
    saved = []
    fake_checkpoint = types.SimpleNamespace(
        step=0, save=lambda steps_done=None: saved.append((fake_checkpoint.step, steps_done)) or "ckpt")
    saver = CheckpointSaver(fake_checkpoint, every=5, stop=StopOnSignal(signals=()))
    model = FakeModel()
    for callback in (monitor, saver):
        callback.set_model(model)
        callback.on_train_begin()
    # Calls of 4 batches (Keras numbers a call's end by its last batch): 4 updates; 3 updates
    # and an overflow; 4 updates.
    for last_batch, updates in ((3, 4), (7, 3), (11, 4)):
        model.optimizer.iterations.assign_add(updates)
        fake_checkpoint.step = int(model.optimizer.iterations.numpy())
        for callback in (monitor, saver):
            callback.on_train_batch_end(last_batch, {"loss": 1.0})
    assert [line.split(" (")[0] for line in stream.getvalue().splitlines()] == ["step 7/12", "step 11/12"]
    assert saved == [(7, 8), (11, 12)]  # the step reached, and the batches the fit has consumed
    assert int(monitor.skipped_steps.numpy()) == 1 and monitor.diverged_at is None
