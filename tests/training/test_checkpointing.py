import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from electra_tf.training.checkpointing import RunCheckpoint
from electra_tf.training.resumable_input import ResumableInput
from tests.training.test_resumable_input import indices, numbered_batches


def test_checkpoint_after_a_step_is_the_same_whichever_callback_runs_first(tmp_path):
    """The saver settles the input itself, so it may run before the InputTracker."""
    from electra_tf.training.resumable_input import InputTracker

    def model():  # what RunCheckpoint needs of a pretrainer: variables and an optimizer
        return types.SimpleNamespace(variables=[tf.Variable(1.0)], optimizer=keras.optimizers.SGD())

    replayed = {}
    for order in ("tracker_first", "saver_first"):
        resumable = ResumableInput(numbered_batches())
        indices(iter(resumable.dataset()), 4)  # batch 3 prefetched while step 3 runs on batch 2
        tracker = InputTracker(resumable)
        checkpoint = RunCheckpoint(tmp_path / order, model(), resumable)
        if order == "tracker_first":
            tracker.on_train_batch_end(2)
            checkpoint.save(steps_done=3)
        else:
            checkpoint.save(steps_done=3)
            tracker.on_train_batch_end(2)
        restored = ResumableInput(numbered_batches())
        RunCheckpoint(tmp_path / order, model(), restored).restore_latest()
        replayed[order] = indices(iter(restored.dataset()), 3)
    assert replayed["tracker_first"] == replayed["saver_first"] == [3, 4, 5]


def tiny_model():
    return types.SimpleNamespace(variables=[tf.Variable(1.0)], optimizer=keras.optimizers.SGD())


def test_sigkill_while_writing_a_checkpoint_leaves_the_previous_one_latest_and_intact(tmp_path):
    """The process dies after the new checkpoint's files and before its `checkpoint` index
    entry (where TensorFlow writes it last)."""
    import subprocess
    import sys

    code = f"""
import os, signal, types, keras, tensorflow as tf
from tensorflow.python.checkpoint import checkpoint_management
from electra_tf.training.checkpointing import RunCheckpoint
from electra_tf.training.resumable_input import ResumableInput
model = types.SimpleNamespace(variables=[tf.Variable(1.0)], optimizer=keras.optimizers.SGD())
data = ResumableInput(tf.data.Dataset.range(1000).map(lambda i: {{"index": tf.fill([2], tf.cast(i, tf.int32))}}).prefetch(4))
checkpoint = RunCheckpoint({str(tmp_path)!r}, model, data)
model.optimizer.iterations.assign(10); checkpoint.save()
model.variables[0].assign(2.0); model.optimizer.iterations.assign(20)
checkpoint_management.update_checkpoint_state_internal = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
checkpoint.save()
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert result.returncode == -9
    assert (tmp_path / "ckpt-20.index").is_file()  # its files were written ...
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-10")  # ... but it is not the latest
    model = tiny_model()
    restored = RunCheckpoint(tmp_path, model, ResumableInput(numbered_batches())).restore_latest()
    assert restored == 10 and float(model.variables[0].numpy()) == 1.0


def test_a_failed_write_is_a_clear_error_and_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    from electra_tf.utils.errors import RunError

    model = tiny_model()
    checkpoint = RunCheckpoint(tmp_path, model, ResumableInput(numbered_batches()))
    model.optimizer.iterations.assign(10)
    first = checkpoint.save()

    def disk_full(self, checkpoint_number=None, **kwargs):
        raise tf.errors.ResourceExhaustedError(None, None, "No space left on device")

    monkeypatch.setattr(tf.train.CheckpointManager, "save", disk_full)
    model.optimizer.iterations.assign(20)
    with pytest.raises(RunError, match=f"could not write checkpoint ckpt-20 .*No space left .*is {first}"):
        checkpoint.save()
    assert tf.train.latest_checkpoint(str(tmp_path)) == first


def test_a_checkpoint_of_another_architecture_lists_the_mismatched_variables(tmp_path):
    from electra_tf.utils.errors import RunError

    small = types.SimpleNamespace(variables=[keras.Variable(np.zeros((4, 2)), name="kernel")],
                                  optimizer=keras.optimizers.SGD())
    RunCheckpoint(tmp_path, small, ResumableInput(numbered_batches())).save()
    wide = types.SimpleNamespace(variables=[keras.Variable(np.zeros((4, 3)), name="kernel")],
                                 optimizer=keras.optimizers.SGD())
    with pytest.raises(RunError, match=r"different architecture: kernel \(4, 3\) \(checkpoint: \(4, 2\)\)"):
        RunCheckpoint(tmp_path, wide, ResumableInput(numbered_batches())).restore_latest()
    assert (tmp_path / "ckpt-0.index").is_file()  # not mistaken for damage: nothing was moved


def test_after_a_damaged_checkpoint_is_set_aside_the_others_still_resume_and_rotate(tmp_path, capsys):
    """Setting a damaged checkpoint aside rewrites the `checkpoint` index. CheckpointManager
    manages (lists, restores, rotates) only checkpoints the index gives a time: written without
    times, the older checkpoints were invisible to the next run, which started again at step 0,
    and they were never rotated away."""
    model = tiny_model()
    checkpoint = RunCheckpoint(tmp_path, model, ResumableInput(numbered_batches()), keep=3)
    for step in (10, 20, 30):
        model.optimizer.iterations.assign(step)
        checkpoint.save()
    data = tmp_path / "ckpt-30.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])

    assert RunCheckpoint(tmp_path, tiny_model(), ResumableInput(numbered_batches())).restore_latest() == 20
    assert "ckpt-30 is damaged" in capsys.readouterr().err
    # Stopped before its next checkpoint and run again: it resumes from the same one.
    model = tiny_model()
    again = RunCheckpoint(tmp_path, model, ResumableInput(numbered_batches()), keep=3)
    assert again.restore_latest() == 20
    for step in (40, 50, 60):
        model.optimizer.iterations.assign(step)
        again.save()
    assert sorted(path.name for path in tmp_path.glob("ckpt-*.index")) == [
        "ckpt-40.index", "ckpt-50.index", "ckpt-60.index"]


def keras_model():
    """Keras variables, as a pretrainer has, and an optimizer that has some."""
    weights = [keras.Variable(np.zeros(3, np.float32)), keras.Variable(0.0)]
    optimizer = keras.optimizers.SGD(momentum=0.9)
    optimizer.build(weights)
    return types.SimpleNamespace(variables=weights, optimizer=optimizer)


def test_repeated_saves_of_mirrored_keras_variables_restore_each_steps_values(tmp_path, two_replicas):
    """Every save holds the state at its step (TensorFlow's asynchronous checkpoint could save
    Keras 3 variables only once, keras-team/keras#18749: saves are synchronous)."""
    with two_replicas.scope():
        model = keras_model()
        checkpoint = RunCheckpoint(tmp_path, model, ResumableInput(numbered_batches()), keep=5)
        for step in (10, 20, 30):
            model.optimizer.iterations.assign(step)
            model.variables[0].assign([float(step)] * 3)
            checkpoint.save()
            model.variables[0].assign([-1.0] * 3)
        for step in (10, 20, 30):
            restored = keras_model()
            reader = RunCheckpoint(tmp_path, restored, ResumableInput(numbered_batches()), keep=5)
            reader.checkpoint.restore(str(tmp_path / f"ckpt-{step}")).expect_partial()
            np.testing.assert_array_equal(restored.variables[0].numpy(), [float(step)] * 3)
        assert RunCheckpoint(tmp_path, keras_model(), ResumableInput(numbered_batches())).restore_latest() == 30
