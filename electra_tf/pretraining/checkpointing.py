"""Exact resume: model, optimizer (and its step counter), random state and input position.

`RunCheckpoint` saves and restores, in one `tf.train.Checkpoint`, every model variable (the
sampling and dropout seed generators' state included), the optimizer's variables (`iterations`,
the global step, among them) and the run's input position (`resumable_input.ResumableInput`:
the iterator's position and the batches handed out but not yet trained on).

`tf.train.CheckpointManager` writes a checkpoint's files first and the `checkpoint` index
last, so a run killed mid-save leaves the previous checkpoint as the latest, intact. A restore
takes the newest checkpoint that reads in full, after checking it holds this model's
architecture and this run's batch size; damaged ones are set aside, never deleted. Checkpoints
written before Adam's moments were flat restore too.

A run's scheduled checkpoints are written in the background (`RunCheckpoint(background=True)`):
the state is copied to host memory at the step, training goes on, and TensorFlow's asynchronous
checkpoint writes the copy (docs/performance.md, "Checkpoints and the step rate").
"""

from __future__ import annotations

import functools
import os
import sys
import time
from pathlib import Path

import numpy as np
import tensorflow as tf

from electra_tf.errors import RunError
from electra_tf.optimization import ElectraAdamW, optimizer_step
from electra_tf.pretraining.resumable_input import ResumableInput


class RunCheckpoint:
    """Checkpoint + CheckpointManager over the pretrainer, its optimizer and the input.

    In a multi-worker run the chief writes the run's checkpoints (model, optimizer and its own
    input position) to `directory`; every other worker writes only its input position, to
    `directory/worker-<index>/`, numbered by the same step. All workers restore the model from
    the chief's newest checkpoint for which every worker's input position exists, so a worker
    killed between the chief's save and its own costs one checkpoint interval, never a mismatch.
    The checkpoint folder must be one all workers see (shared storage across machines).

    `background=True` (one worker only): `save(wait=False)` returns once the state is copied to
    host memory, and the files are written while training goes on; `wait()` (and the next save)
    returns when they are on disk, and raises a RunError if the write failed.
    """

    def __init__(self, directory, pretrainer, resumable_input: ResumableInput, keep: int = 3,
                 worker_index: int = 0, num_workers: int = 1, background: bool = False):
        self.pretrainer = pretrainer
        self.input = resumable_input
        self.worker_index, self.num_workers = worker_index, num_workers
        # The model's variables are listed explicitly: tf.train.Checkpoint(model=...) misses a
        # Keras 3 model's layer lists and its seed-generator states (sampling and dropout).
        # Batches float16 loss scaling skipped (no update), over the whole run (callbacks.py).
        self.skipped_steps = tf.Variable(0, dtype=tf.int64, trainable=False, name="skipped_steps")
        model_state = {"model_variables": list(pretrainer.variables), "optimizer": pretrainer.optimizer}
        input_state = {"in_flight": resumable_input.in_flight}
        if resumable_input.checkpointable:
            input_state["data_iterator"] = resumable_input.iterator_state
        self.keep = keep
        self.run_directory = str(directory)
        self.model_checkpoint = tf.train.Checkpoint(**model_state)  # restores a chief's checkpoint's model
        self._model_state = model_state
        self._state = {**model_state, **input_state}
        if worker_index == 0:
            self.checkpoint = tf.train.Checkpoint(**self._state, skipped_steps=self.skipped_steps)
            own_directory = self.run_directory
        else:
            self.checkpoint = tf.train.Checkpoint(**input_state)
            own_directory = worker_input_directory(directory, worker_index)
        repair_checkpoint_index(own_directory)
        self.manager = tf.train.CheckpointManager(self.checkpoint, own_directory, max_to_keep=keep)
        # The run's checkpoints, which every worker restores the model from.
        self.run_manager = (self.manager if worker_index == 0 else tf.train.CheckpointManager(
            self.model_checkpoint, self.run_directory, max_to_keep=keep))
        # Multi-worker runs save in step: the workers' input positions must match the chief's.
        self.background = background and num_workers == 1
        if self.background:
            make_keras_variable_copies_once()
        self._options = tf.train.CheckpointOptions(experimental_enable_async_checkpoint=self.background)
        self._writing: str | None = None  # the checkpoint being written in the background

    @property
    def step(self) -> int:
        return optimizer_step(self.pretrainer)

    def restore_latest(self) -> int | None:
        """Restores the newest intact checkpoint, if any; returns its step. Damaged ones (a
        truncated or missing file) are set aside with a warning (by the chief); none intact is
        an error. In a multi-worker run, checkpoints some worker has no input position for are
        passed over."""
        candidates = self.run_manager.checkpoints
        if not candidates:
            return None
        directory = Path(self.run_directory)
        complete = [path for path in candidates if self._inputs_complete(path)]
        if not complete:
            raise RunError(f"{directory} has checkpoints, but none that every one of the {self.num_workers} "
                           f"workers saved its input position for ({directory}/worker-<i>/). Was the run "
                           "started with another number of workers? Rerun with that number.")
        for path in reversed(complete):
            problem = checkpoint_damage(path)
            if problem is None:
                check_architecture(path, self.pretrainer.variables)
                own = path if self.worker_index == 0 else self._own_input_path(path)
                check_input_batch(own, self.input, self.num_workers)
                try:
                    # Written before the moments were flat: all but the moments restore by name;
                    # the moments are read from the file.
                    earlier = moments_per_variable(path, self.pretrainer.optimizer)
                    if self.worker_index != 0:
                        model = self.model_checkpoint if not earlier else tf.train.Checkpoint(**{
                            **self._model_state, "optimizer": _without_flat_moments(self.pretrainer.optimizer)})
                        model.restore(path).expect_partial()
                    self._restorer(own, flat_moments=not earlier).restore(own).assert_existing_objects_matched()
                    if earlier:
                        restore_moments_per_variable(path, self.pretrainer.optimizer)
                except (tf.errors.OpError, IndexError) as error:
                    # Damage in what checkpoint_damage cannot read; an older checkpoint's
                    # restore then overwrites every value this one set.
                    problem = f"{type(error).__name__}: {str(error).strip().splitlines()[0][:160]}"
            if problem is None:
                if path != candidates[-1]:
                    print(f"note: restoring {path}, the newest checkpoint every worker saved its input "
                          "position for.", file=sys.stderr, flush=True)
                self.input.restored()
                return self.step
            if self.worker_index != 0:  # the chief sets damaged checkpoints aside
                continue
            moved = set_aside(path)
            print(f"warning: checkpoint {path} is damaged ({problem}); moved {', '.join(moved)} to "
                  f"{directory / DAMAGED_FOLDER} and trying the one before it.", file=sys.stderr, flush=True)
            self._forget(path)
        raise RunError(f"{directory} has no intact checkpoint (the damaged ones are in {directory / DAMAGED_FOLDER}). "
                       "Start a new run in another --model_dir, or restore the files from a copy.")

    def _restorer(self, path: str, flat_moments: bool = True):
        """The checkpoint object to restore `path` with: one without the skipped-steps counter
        for a checkpoint written before it existed (its count starts at 0); with `flat_moments`
        False, one whose optimizer lacks its flat moments (`moments_per_variable`)."""
        if self.worker_index != 0:  # a worker's own checkpoints hold its input position alone
            return self.checkpoint
        with_skipped = "skipped_steps/.ATTRIBUTES/VARIABLE_VALUE" in \
            tf.train.load_checkpoint(path).get_variable_to_shape_map()
        if with_skipped and flat_moments:
            return self.checkpoint
        state = dict(self._state)
        if not flat_moments:
            state["optimizer"] = _without_flat_moments(state["optimizer"])
        return tf.train.Checkpoint(**state, **({"skipped_steps": self.skipped_steps} if with_skipped else {}))

    def _own_input_path(self, run_checkpoint_path: str) -> str:
        return str(Path(worker_input_directory(self.run_directory, self.worker_index)) / Path(run_checkpoint_path).name)

    def _inputs_complete(self, run_checkpoint_path: str) -> bool:
        name = Path(run_checkpoint_path).name
        return all((Path(worker_input_directory(self.run_directory, index)) / f"{name}.index").is_file()
                   for index in range(1, self.num_workers))

    def _forget(self, path: str) -> None:
        """Drops a set-aside checkpoint from the `checkpoint` index and from the manager."""
        write_checkpoint_index(self.manager.directory, [p for p in self.manager.checkpoints if p != path])
        self.manager = tf.train.CheckpointManager(self.checkpoint, self.manager.directory, max_to_keep=self.keep)
        self.run_manager = self.manager

    def save(self, steps_done: int | None = None, wait: bool = True) -> str:
        """Writes a checkpoint; `steps_done` (steps of the current `fit`) first settles the
        input's bookkeeping, so the caller need not run after the `InputTracker`. With
        `background`, `wait=False` returns once the state is copied (see the class)."""
        self.wait()  # the previous write (TensorFlow would wait for it too) and its outcome
        if steps_done is not None:
            self.input.advance_to(steps_done)
        with self.input.frozen():
            try:
                path = self.manager.save(checkpoint_number=self.step, options=self._options)
            except (tf.errors.OpError, OSError) as error:
                raise self._write_error(f"ckpt-{self.step}", error) from None
        if self.background:
            copy_to_host_eagerly(self.checkpoint)  # from the next save on (the first copies eagerly)
            self._writing = path
            if wait:
                self.wait()
        return path

    def wait(self) -> None:
        """Returns when the checkpoint being written in the background is on disk; a RunError
        if its write failed (the previous checkpoint is then the latest, intact)."""
        if self._writing is None:
            return
        path, self._writing = self._writing, None
        self.checkpoint.sync()
        # The index names a checkpoint only once its files are written (CheckpointManager's
        # write callback). TensorFlow keeps the write's error for its next save: taken here,
        # from its helper's private attributes (without them the message says less, no more).
        latest = tf.train.latest_checkpoint(self.manager.directory)
        if latest is None or Path(latest).name != Path(path).name:
            helper = getattr(self.checkpoint, "_async_checkpointer_impl", None)
            error = getattr(helper, "_async_error", None)
            if helper is not None:
                helper._async_error = None
            raise self._write_error(Path(path).name, error or OSError("the write did not finish"))

    def _write_error(self, name: str, error: Exception) -> RunError:
        # TensorFlow writes the files first and the `checkpoint` index last: a failed write
        # leaves the previous checkpoint as the latest, intact.
        reason = str(error).strip().splitlines()[0][:200] if str(error).strip() else type(error).__name__
        return RunError(f"could not write checkpoint {name} in {self.manager.directory} ({reason}). The last "
                        f"good checkpoint is {tf.train.latest_checkpoint(self.manager.directory) or 'none'}; "
                        "free space or fix permissions, then rerun the same command to continue from it.")


def make_keras_variable_copies_once() -> None:
    """Lets TensorFlow's asynchronous checkpoint save Keras 3 variables more than once.

    TensorFlow copies every variable to host memory with `_copy_trackable_to_cpu(object_map)`,
    traced once into a tf.function and called at each save; its own variables make their copy on
    the first call and assign to it after. Keras' (keras-team/keras#18749, Keras 3.15) makes a
    new tf.Variable on every call, so the second save failed ("tf.function only supports
    singleton tf.Variables created on the first call"). This makes Keras' copy the way
    TensorFlow's is: its value's copy, made once. Idempotent.
    """
    from keras.src.backend.tensorflow.core import Variable  # the TensorFlow backend's variable

    if getattr(Variable._copy_trackable_to_cpu, "copies_once", False):
        return

    def copy_to_cpu(self, object_map):
        self.value._copy_trackable_to_cpu(object_map)  # makes or refreshes the value's copy
        if self not in object_map:
            object_map[self] = object_map[self.value]

    copy_to_cpu.copies_once = True
    Variable._copy_trackable_to_cpu = copy_to_cpu


def copy_to_host_eagerly(checkpoint: tf.train.Checkpoint) -> None:
    """Makes `checkpoint`'s background saves copy the state to host memory op by op, as
    TensorFlow's first save does, instead of through the `tf.function` it traces at its second.

    Why: that trace is once per run but a second or more of Python, paid in a window of steps
    (ELECTRA-Small on the 2 CPU cores: the second save paused the run 1.13-1.27 s; on one H200 the
    first two saves and the first traced sample panel cost two 100-step windows of the tiny
    preset two thirds of their rate). Copied eagerly, that save pauses 0.15 s, and every save
    costs about 0.05 s more than a traced copy would (0.15-0.21 s against 0.11-0.12 s): about
    20 saves repay the trace, so a long run loses some seconds in all and no window loses more
    than a few percent (docs/results.md, "A checkpoint's copy without a trace (CPU)"). Sets an
    attribute TensorFlow's private helper calls, on that one helper, once it exists (after the
    first background save). Idempotent.
    """
    helper = getattr(checkpoint, "_async_checkpointer_impl", None)
    if helper is None or "_copy_to_cpu" in vars(helper):
        return
    helper._copy_to_cpu = functools.partial(type(helper)._copy_to_cpu.python_function, helper)


DAMAGED_FOLDER = "damaged"


def write_checkpoint_index(directory, paths) -> None:
    """Rewrites the `checkpoint` index of `directory` to list `paths`, oldest first (relative
    names, atomically, as CheckpointManager writes it); no paths, no index.

    Each checkpoint keeps the time the index gave it (its `.index` file's time if none):
    CheckpointManager lists, restores from and rotates only checkpoints whose time is after the
    index's `last_preserved_timestamp`. An index without times (as this function wrote before)
    hid every checkpoint from the next run, which then started again at step 0.
    """
    directory = Path(directory)
    if not paths:
        (directory / "checkpoint").unlink(missing_ok=True)
        return
    state = tf.train.get_checkpoint_state(str(directory))
    recorded = dict(zip((Path(p).name for p in state.all_model_checkpoint_paths),
                        state.all_model_checkpoint_timestamps)) if state else {}
    names = [Path(p).name for p in paths]
    times = [recorded.get(name) or (directory / f"{name}.index").stat().st_mtime for name in names]
    # What CheckpointManager itself calls to write the index (tf.compat.v1's public wrapper is
    # deprecated and prints so).
    full = [str(directory / name) for name in names]
    tf.__internal__.train.update_checkpoint_state(
        str(directory), full[-1], full, save_relative_paths=True, all_model_checkpoint_timestamps=times,
        last_preserved_timestamp=min(times) - 1)


def repair_checkpoint_index(directory) -> None:
    """Gives the checkpoints of an index written without times (by earlier versions, after
    setting a damaged checkpoint aside) their times, so CheckpointManager sees them."""
    state = tf.train.get_checkpoint_state(str(directory))
    if state is not None and len(state.all_model_checkpoint_timestamps) != len(state.all_model_checkpoint_paths):
        write_checkpoint_index(directory, [p for p in state.all_model_checkpoint_paths
                                           if Path(f"{p}.index").is_file()])


def worker_input_directory(checkpoint_directory, worker_index: int) -> str:
    """Where worker `worker_index` (not the chief) keeps its input positions."""
    return str(Path(checkpoint_directory) / f"worker-{worker_index}")


def checkpoint_damage(path: str) -> str | None:
    """Why the checkpoint at `path` (a prefix such as .../ckpt-200) cannot be read in full, or
    None if every tensor reads. Reading everything is what finds a truncated data file."""
    try:
        reader = tf.train.load_checkpoint(path)
        for name, dtype in reader.get_variable_to_dtype_map().items():
            if dtype != tf.variant:  # the input iterator's state: restore_latest reads it
                reader.get_tensor(name)
    except Exception as error:  # TensorFlow raises IndexError, DataLossError, NotFoundError, ...
        lines = str(error).strip().splitlines() or [type(error).__name__]
        return f"{type(error).__name__}: {lines[0][:160]}"
    return None


def set_aside(path: str) -> list[str]:
    """Moves a checkpoint's files into a `damaged/` folder beside them (never deletes)."""
    prefix = Path(path)
    folder = prefix.parent / DAMAGED_FOLDER
    folder.mkdir(exist_ok=True)
    moved = []
    for file in sorted(prefix.parent.glob(prefix.name + ".*")):
        target = folder / file.name
        if target.exists():
            target = folder / f"{file.name}.{int(time.time())}"
        os.replace(file, target)
        moved.append(file.name)
    return moved


def check_architecture(path: str, variables) -> None:
    """A RunError listing the first variables whose saved shape differs from the model's."""
    shapes = tf.train.load_checkpoint(path).get_variable_to_shape_map()
    mismatched = []
    for index, variable in enumerate(variables):
        key = f"model_variables/{index}/.ATTRIBUTES/VARIABLE_VALUE"
        saved = shapes.get(key)
        if saved is None or tuple(saved) != tuple(variable.shape):
            mismatched.append(f"{variable.path} {tuple(variable.shape)} (checkpoint: "
                              f"{tuple(saved) if saved is not None else 'absent'})")
    extra = sum(1 for key in shapes if key.startswith("model_variables/")
                and key.endswith("VARIABLE_VALUE") and int(key.split("/")[1]) >= len(variables))
    if mismatched or extra:
        raise RunError(f"checkpoint {path} holds a different architecture: {'; '.join(mismatched[:5])}"
                       + (f"; and {extra} more saved variables than the model has" if extra else "")
                       + ". Use the config it was trained with, or another --model_dir.")


def _earlier_moment_key(optimizer, number: int) -> str:
    """The checkpoint key of the `number`-th per-weight moment in a checkpoint written before
    `ElectraAdamW`'s moments were flat: Keras' Adam listed, after its own variables (`iterations`,
    and the learning rate when it was a number and not a schedule), the momentum and the velocity
    of each trainable variable in turn (0: the first weight's momentum, 1: its velocity, ...).
    The optimizer's own variables then were what they are now less the two flat moments."""
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    first = len(inner.variables) - 2
    return f"{_optimizer_key_prefix(optimizer)}/_variables/{first + number}/.ATTRIBUTES/VARIABLE_VALUE"


def _optimizer_key_prefix(optimizer) -> str:
    """Where a run checkpoint keeps the Adam optimizer's variables: under float16's loss scaling,
    inside the LossScaleOptimizer."""
    return "optimizer/inner_optimizer" if hasattr(optimizer, "inner_optimizer") else "optimizer"


def moments_per_variable(path: str, optimizer) -> bool:
    """Whether the checkpoint at `path` keeps Adam's moments one pair per weight (electra_tf
    before 2026-11-27), where `ElectraAdamW` now keeps them in two flat variables."""
    if not isinstance(getattr(optimizer, "inner_optimizer", optimizer), ElectraAdamW):
        return False
    saved = tf.train.load_checkpoint(path).get_variable_to_shape_map()
    flat = f"{_optimizer_key_prefix(optimizer)}/momentum/.ATTRIBUTES/VARIABLE_VALUE"
    return flat not in saved and _earlier_moment_key(optimizer, 0) in saved


def _without_flat_moments(optimizer):
    """A stand-in for `optimizer` that holds what it checkpoints (its step, learning rate, loss
    scale, ...) under the same names, but not `ElectraAdamW`'s flat moments: an earlier
    checkpoint's per-weight moments sit where the optimizer's variable list now has the flat
    ones (`optimizer/_variables/1`), and would not restore into them. Reads the optimizer's
    tracked children (TensorFlow's private `_trackable_children`, as Keras' own checkpoints do)."""
    moments = [getattr(optimizer, name) for name in ("momentum", "velocity") if hasattr(optimizer, name)]
    stand_in = tf.Module()
    for name, child in optimizer._trackable_children().items():
        if any(child is moment for moment in moments):
            continue
        if name == "inner_optimizer":
            child = _without_flat_moments(child)
        elif name == "_variables":
            child = [variable for variable in child if not any(variable is moment for moment in moments)]
        setattr(stand_in, name, child)
    return stand_in


def restore_moments_per_variable(path: str, optimizer) -> None:
    """Reads an earlier checkpoint's per-weight moments into the optimizer's flat moments, in the
    order of the trainable variables (the same values: resuming from it continues the run)."""
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    reader = tf.train.load_checkpoint(path)
    parts = {"momentum": [], "velocity": []}
    for index, size in enumerate(inner.moment_sizes):
        for offset, name in ((0, "momentum"), (1, "velocity")):
            key = _earlier_moment_key(optimizer, 2 * index + offset)
            if not reader.has_tensor(key) or reader.get_tensor(key).size != size:
                raise RunError(f"checkpoint {path} keeps Adam's moments per variable, but its {name} of "
                               f"variable {index} ({key}) is missing or not of {size} values: it was not "
                               "written for this model. Use the config it was trained with, or another --model_dir.")
            parts[name].append(reader.get_tensor(key).reshape(-1))
    inner.momentum.assign(np.concatenate(parts["momentum"]).astype(np.float32))
    inner.velocity.assign(np.concatenate(parts["velocity"]).astype(np.float32))


def check_input_batch(path: str, resumable_input: ResumableInput, num_workers: int) -> None:
    """A RunError if the checkpoint's input batches are not this worker's batch size: the run
    was made with another number of workers (each worker's batch is the global batch / workers)."""
    key = next(iter(resumable_input.spec))
    saved = tf.train.load_checkpoint(path).get_variable_to_shape_map().get(
        f"in_flight/{key}/.ATTRIBUTES/VARIABLE_VALUE")
    batch = resumable_input.spec[key].shape[0]
    if saved is not None and len(saved) > 1 and saved[1] != batch:
        raise RunError(f"checkpoint {path} was written by a run whose workers read batches of {saved[1]} "
                       f"(this one reads {batch} on each of {num_workers} worker(s)): rerun it with the "
                       "number of workers it was started with.")
