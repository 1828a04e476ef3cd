import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from electra_tf.pretraining.checkpointing import RunCheckpoint
from electra_tf.pretraining.resumable_input import ResumableInput
from tests.pretraining.test_resumable_input import indices, numbered_batches


def test_checkpoint_after_a_step_is_the_same_whichever_callback_runs_first(tmp_path):
    """The saver settles the input itself, so it may run before the InputTracker."""
    from electra_tf.pretraining.resumable_input import InputTracker

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
from electra_tf.pretraining.checkpointing import RunCheckpoint
from electra_tf.pretraining.resumable_input import ResumableInput
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
    from electra_tf.errors import RunError

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
    from electra_tf.errors import RunError

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


def test_an_index_without_checkpoint_times_is_repaired_and_resumes(tmp_path):
    """Such an index was written by earlier versions after setting a damaged checkpoint aside."""
    model = tiny_model()
    checkpoint = RunCheckpoint(tmp_path, model, ResumableInput(numbered_batches()))
    for step in (10, 20):
        model.optimizer.iterations.assign(step)
        checkpoint.save()
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "ckpt-20"\n'
                                         'all_model_checkpoint_paths: "ckpt-10"\n'
                                         'all_model_checkpoint_paths: "ckpt-20"\n')
    assert RunCheckpoint(tmp_path, tiny_model(), ResumableInput(numbered_batches())).restore_latest() == 20


def keras_model():
    """Keras variables, as a pretrainer has (TensorFlow's asynchronous checkpoint failed on
    them from the second save on), and an optimizer that has some."""
    weights = [keras.Variable(np.zeros(3, np.float32)), keras.Variable(0.0)]
    optimizer = keras.optimizers.SGD(momentum=0.9)
    optimizer.build(weights)
    return types.SimpleNamespace(variables=weights, optimizer=optimizer)


def test_a_background_checkpoint_holds_its_steps_state_while_training_goes_on(tmp_path):
    """save(wait=False) returns once the state is copied: what training changes after it is not
    in the checkpoint, and a restore continues with the model and batch of the saved step."""
    model = keras_model()
    resumable = ResumableInput(numbered_batches())
    reader = iter(resumable.dataset())
    checkpoint = RunCheckpoint(tmp_path, model, resumable, background=True)
    for steps_done, step in enumerate((10, 20, 30), start=1):  # the second save is where Keras' failed
        indices(reader, 1)
        model.optimizer.iterations.assign(step)
        model.variables[0].assign([float(step)] * 3)
        model.optimizer.variables[-2].assign([float(step)] * 3)  # the momentum of the first weight
        assert checkpoint.save(steps_done=steps_done, wait=False).endswith(f"ckpt-{step}")
        model.variables[0].assign([-1.0] * 3)  # the next steps, while the files are written
        model.optimizer.variables[-2].assign([-1.0] * 3)
    checkpoint.wait()
    assert sorted(path.name for path in tmp_path.glob("ckpt-*.index")) == [
        "ckpt-10.index", "ckpt-20.index", "ckpt-30.index"]

    restored_model, restored_input = keras_model(), ResumableInput(numbered_batches())
    assert RunCheckpoint(tmp_path, restored_model, restored_input).restore_latest() == 30
    np.testing.assert_array_equal(restored_model.variables[0].numpy(), [30.0] * 3)
    np.testing.assert_array_equal(restored_model.optimizer.variables[-2].numpy(), [30.0] * 3)
    assert indices(iter(restored_input.dataset()), 2) == [3, 4]


def test_background_saves_copy_to_host_without_tracing_a_function(tmp_path):
    """TensorFlow's asynchronous checkpoint traces its copy to host memory at the second save:
    seconds once per run, paid inside a window of steps. The run's copies go op by op instead
    (checkpointing.copy_to_host_eagerly), and each save still holds its own step's values."""
    model = keras_model()
    checkpoint = RunCheckpoint(tmp_path, model, ResumableInput(numbered_batches()), background=True)
    for step in (10, 20, 30):
        model.optimizer.iterations.assign(step)
        model.variables[0].assign([float(step)] * 3)
        checkpoint.save(wait=False)
        model.variables[0].assign([-1.0] * 3)
    checkpoint.wait()
    helper = checkpoint.checkpoint._async_checkpointer_impl
    traced_copy = type(helper)._copy_to_cpu.__get__(helper, type(helper))  # the tf.function TensorFlow would call
    assert traced_copy.experimental_get_tracing_count() == 0
    for step in (20, 30):
        reader = tf.train.load_checkpoint(str(tmp_path / f"ckpt-{step}"))
        np.testing.assert_array_equal(reader.get_tensor("model_variables/0/.ATTRIBUTES/VARIABLE_VALUE"),
                                      [float(step)] * 3)


def test_a_failed_background_write_names_its_checkpoint_and_the_last_good_one(tmp_path, monkeypatch):
    from electra_tf.errors import RunError

    model = keras_model()
    checkpoint = RunCheckpoint(tmp_path, model, ResumableInput(numbered_batches()), background=True)
    model.optimizer.iterations.assign(10)
    checkpoint.save()  # written and waited for
    real_write = tf.train.Checkpoint._write

    def disk_full(self, file_prefix, options=None):  # the background thread's write of ckpt-20
        if str(file_prefix).endswith("ckpt-20") and not (options and options.experimental_enable_async_checkpoint):
            raise tf.errors.ResourceExhaustedError(None, None, "No space left on device")
        return real_write(self, file_prefix, options=options)

    monkeypatch.setattr(tf.train.Checkpoint, "_write", disk_full)
    model.optimizer.iterations.assign(20)
    checkpoint.save(wait=False)  # returns: the write fails in the background
    with pytest.raises(RunError, match=r"could not write checkpoint ckpt-20 .*No space left on device.*"
                                       r"last good checkpoint is \S*ckpt-10"):
        checkpoint.wait()
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-10")
    model.optimizer.iterations.assign(30)
    monkeypatch.setattr(tf.train.Checkpoint, "_write", real_write)
    checkpoint.save()  # the error was reported once; the run's next save works
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-30")


def test_background_checkpoints_of_mirrored_variables_restore_their_steps_values(tmp_path, two_replicas):
    with two_replicas.scope():
        model = keras_model()
        checkpoint = RunCheckpoint(tmp_path, model, ResumableInput(numbered_batches()), background=True)
        for step in (10, 20):
            model.optimizer.iterations.assign(step)
            model.variables[0].assign([float(step)] * 3)
            checkpoint.save(wait=False)
            model.variables[0].assign([-1.0] * 3)
        checkpoint.wait()
        restored = keras_model()
        assert RunCheckpoint(tmp_path, restored, ResumableInput(numbered_batches())).restore_latest() == 20
    np.testing.assert_array_equal(restored.variables[0].numpy(), [20.0] * 3)


class PerVariableAdam(tf.Module):
    """What a checkpoint held of Keras' Adam before `ElectraAdamW`'s moments were flat: its step,
    then a momentum and a velocity per weight, and the weights it trained."""

    def __init__(self, weights, moments):
        super().__init__()
        self._iterations = tf.Variable(7, dtype=tf.int64)
        self._variables = [self._iterations] + [tf.Variable(m) for pair in moments for m in pair]
        self._trainable_variables = [w.value for w in weights]

    @property
    def iterations(self):
        return self._iterations


def test_a_checkpoint_with_adams_moments_per_variable_restores_them_into_the_flat_moments(tmp_path):
    """A run checkpointed before `ElectraAdamW` kept its moments flat resumes with them (its
    schedule, as every run's, keeps the learning rate out of the optimizer's variables)."""
    from electra_tf.optimization import ElectraAdamW, WarmupLinearDecay

    def weights():
        return [keras.Variable(np.full((2, 3), value, np.float32), name="kernel") for value in (1.0, 2.0)]

    moments = [(np.full((2, 3), 0.1, np.float32), np.full((2, 3), 0.01, np.float32)),
               (np.arange(6, dtype=np.float32).reshape(2, 3), np.full((2, 3), 0.04, np.float32))]
    earlier = types.SimpleNamespace(variables=weights(), optimizer=None)
    earlier.optimizer = PerVariableAdam(earlier.variables, moments)
    RunCheckpoint(tmp_path, earlier, ResumableInput(numbered_batches())).save()

    now = types.SimpleNamespace(variables=weights(), optimizer=ElectraAdamW(learning_rate=WarmupLinearDecay(0.1, 10)))
    now.optimizer.build(now.variables)
    for variable in now.variables:
        variable.assign(np.zeros((2, 3), np.float32))
    assert RunCheckpoint(tmp_path, now, ResumableInput(numbered_batches())).restore_latest() == 7
    np.testing.assert_array_equal(now.variables[1].numpy(), np.full((2, 3), 2.0))
    np.testing.assert_array_equal(now.optimizer.momentum.numpy(), np.concatenate([m.ravel() for m, _ in moments]))
    np.testing.assert_array_equal(now.optimizer.velocity.numpy(), np.concatenate([v.ravel() for _, v in moments]))

    # A checkpoint with flat moments restores them as they are (a learning rate that is a number
    # puts a variable where the first momentum was).
    flat = types.SimpleNamespace(variables=weights(), optimizer=ElectraAdamW(learning_rate=0.1))
    flat.optimizer.build(flat.variables)
    flat.optimizer.momentum.assign(np.arange(12, dtype=np.float32))
    RunCheckpoint(tmp_path / "flat", flat, ResumableInput(numbered_batches())).save()
    again = types.SimpleNamespace(variables=weights(), optimizer=ElectraAdamW(learning_rate=0.1))
    again.optimizer.build(again.variables)
    RunCheckpoint(tmp_path / "flat", again, ResumableInput(numbered_batches())).restore_latest()
    np.testing.assert_array_equal(again.optimizer.momentum.numpy(), np.arange(12))

    wider = types.SimpleNamespace(variables=[keras.Variable(np.zeros((2, 4), np.float32), name="kernel")] * 2,
                                  optimizer=ElectraAdamW(learning_rate=0.1))
    wider.optimizer.build(wider.variables[:1])
    from electra_tf.errors import RunError
    with pytest.raises(RunError, match="different architecture"):
        RunCheckpoint(tmp_path, wider, ResumableInput(numbered_batches())).restore_latest()


def test_a_worker_resumes_from_a_chiefs_checkpoint_with_moments_per_variable(tmp_path):
    """A worker of a multi-worker run restores the model (and the optimizer) from the chief's
    checkpoint and its input position from its own: from a checkpoint written before the moments
    were flat, too."""
    from electra_tf.optimization import ElectraAdamW, WarmupLinearDecay

    def weights():
        return [keras.Variable(np.full((2, 3), value, np.float32), name="kernel") for value in (1.0, 2.0)]

    moments = [(np.full((2, 3), 0.1, np.float32), np.full((2, 3), 0.01, np.float32)),
               (np.full((2, 3), 0.3, np.float32), np.full((2, 3), 0.04, np.float32))]
    for worker in (0, 1):
        earlier = types.SimpleNamespace(variables=weights(), optimizer=None)
        earlier.optimizer = PerVariableAdam(earlier.variables, moments)
        RunCheckpoint(tmp_path, earlier, ResumableInput(numbered_batches()), worker_index=worker, num_workers=2).save()

    now = types.SimpleNamespace(variables=weights(), optimizer=ElectraAdamW(learning_rate=WarmupLinearDecay(0.1, 10)))
    now.optimizer.build(now.variables)
    now.variables[0].assign(np.zeros((2, 3), np.float32))
    checkpoint = RunCheckpoint(tmp_path, now, ResumableInput(numbered_batches()), worker_index=1, num_workers=2)
    assert checkpoint.restore_latest() == 7
    np.testing.assert_array_equal(now.variables[0].numpy(), np.ones((2, 3)))
    np.testing.assert_array_equal(now.optimizer.velocity.numpy(), np.concatenate([v.ravel() for _, v in moments]))
