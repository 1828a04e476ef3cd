"""Exact resume: model, optimizer (and its step counter), random state and input position.

`RunCheckpoint` saves and restores, in one `tf.train.Checkpoint`, every model variable (the
sampling and dropout seed generators' state included), the optimizer's variables (`iterations`,
the global step, among them) and the run's input position (`resumable_input.ResumableInput`:
the tf.data iterator and the batches handed out but not yet trained on).

`tf.train.CheckpointManager` writes a checkpoint's files first and the `checkpoint` index
last, so a run killed mid-save leaves the previous checkpoint as the latest, intact. A restore
takes the newest checkpoint that reads in full, after checking it holds this model's
architecture and this run's batch size; damaged ones are set aside, never deleted.

Saves are synchronous: training waits while the state is written (what a save costs:
[results](../../docs/results.md#checkpoints)). TensorFlow's asynchronous checkpoint cannot save
Keras 3 variables more than once (keras-team/keras#18749) without patching Keras.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import tensorflow as tf

from electra_tf.training.resumable_input import ResumableInput
from electra_tf.runtime.optimizer import optimizer_step
from electra_tf.utils.errors import RunError
from electra_tf.utils.files import atomic_write_text


class RunCheckpoint:
    """Checkpoint + CheckpointManager over a model, its optimizer and the input.

    In a multi-worker run the chief writes the run's checkpoints (model, optimizer and its own
    input position) to `directory`; every other worker writes only its input position, to
    `directory/worker-<index>/`, numbered by the same step. All workers restore the model from
    the chief's newest checkpoint for which every worker's input position exists, so a worker
    killed between the chief's save and its own costs one checkpoint interval, never a mismatch.
    The checkpoint folder must be one all workers see (shared storage across machines).
    """

    def __init__(self, directory, model, resumable_input: ResumableInput, keep: int = 3,
                 worker_index: int = 0, num_workers: int = 1):
        self.model = model
        self.input = resumable_input
        self.worker_index, self.num_workers = worker_index, num_workers
        # Batches float16 loss scaling skipped (no update), over the whole run (callbacks.py).
        self.skipped_steps = tf.Variable(0, dtype=tf.int64, trainable=False, name="skipped_steps")
        # The model's variables are listed explicitly: tf.train.Checkpoint(model=...) misses a
        # Keras 3 model's layer lists and its seed-generator states (sampling and dropout).
        model_state = {"model_variables": list(model.variables), "optimizer": model.optimizer}
        input_state = {"in_flight": resumable_input.in_flight}
        if resumable_input.checkpointable:
            input_state["data_iterator"] = resumable_input.iterator
        self.keep = keep
        self.run_directory = str(directory)
        self.model_checkpoint = tf.train.Checkpoint(**model_state)  # restores a chief's checkpoint's model
        if worker_index == 0:
            self.checkpoint = tf.train.Checkpoint(**model_state, **input_state, skipped_steps=self.skipped_steps)
            own_directory = self.run_directory
        else:
            self.checkpoint = tf.train.Checkpoint(**input_state)
            own_directory = worker_input_directory(directory, worker_index)
        self.manager = tf.train.CheckpointManager(self.checkpoint, own_directory, max_to_keep=keep)
        # The run's checkpoints, which every worker restores the model from.
        self.run_manager = (self.manager if worker_index == 0 else tf.train.CheckpointManager(
            self.model_checkpoint, self.run_directory, max_to_keep=keep))

    @property
    def step(self) -> int:
        return optimizer_step(self.model)

    def restore_latest(self, input_position: bool = True) -> int | None:
        """Restores the newest intact checkpoint, if any; returns its step. Damaged ones (a
        truncated or missing file) are set aside with a warning (by the chief); none intact is
        an error. In a multi-worker run, checkpoints some worker has no input position for are
        passed over. `input_position=False` restores the model and optimizer only: a new phase
        of the run reads other data from its start."""
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
                check_architecture(path, self.model.variables)
                own = path if self.worker_index == 0 else self._own_input_path(path)
                if input_position:
                    check_input_batch(own, self.input, self.num_workers)
                try:
                    if self.worker_index != 0 or not input_position:
                        self.model_checkpoint.restore(path).expect_partial()
                    if not input_position:
                        if self.worker_index == 0:
                            tf.train.Checkpoint(skipped_steps=self.skipped_steps).restore(path).expect_partial()
                    else:
                        self.checkpoint.restore(own).assert_existing_objects_matched()
                except (tf.errors.OpError, IndexError) as error:
                    # Damage in what checkpoint_damage cannot read; an older checkpoint's
                    # restore then overwrites every value this one set.
                    problem = f"{type(error).__name__}: {str(error).strip().splitlines()[0][:160]}"
            if problem is None:
                if path != candidates[-1]:
                    print(f"note: restoring {path}, the newest checkpoint every worker saved its input "
                          "position for.", file=sys.stderr, flush=True)
                if input_position:
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

    def save(self, steps_done: int | None = None) -> str:
        """Writes a checkpoint; `steps_done` (steps of the current `fit`) first settles the
        input's bookkeeping, so the caller need not run after the `InputTracker`."""
        if steps_done is not None:
            self.input.advance_to(steps_done)
        with self.input.frozen():
            try:
                return self.manager.save(checkpoint_number=self.step)
            except (tf.errors.OpError, OSError) as error:
                # TensorFlow writes the files first and the `checkpoint` index last: a failed
                # write leaves the previous checkpoint as the latest, intact.
                reason = str(error).strip().splitlines()[0][:200] if str(error).strip() else type(error).__name__
                raise RunError(f"could not write checkpoint ckpt-{self.step} in {self.manager.directory} "
                               f"({reason}). The last good checkpoint is "
                               f"{tf.train.latest_checkpoint(self.manager.directory) or 'none'}; free space or fix "
                               "permissions, then rerun the same command to continue from it.") from None


DAMAGED_FOLDER = "damaged"


def latest_checkpoint_step(directory) -> int | None:
    """The step of the newest checkpoint listed in `directory`'s index (ckpt-<step>), or None."""
    state = tf.train.get_checkpoint_state(str(directory)) if Path(directory).is_dir() else None
    if state is None or not state.model_checkpoint_path:
        return None
    return int(Path(state.model_checkpoint_path).name.rsplit("-", 1)[1])


def write_checkpoint_index(directory, paths) -> None:
    """Rewrites the `checkpoint` index of `directory` to list `paths`, oldest first (relative
    names, atomically, in the text format CheckpointManager writes and `tf.train.
    get_checkpoint_state` reads); no paths, no index.

    Each checkpoint keeps the time the index gave it (its `.index` file's time if none):
    CheckpointManager lists, restores from and rotates only checkpoints whose time is after the
    index's `last_preserved_timestamp`, so an index without times would hide every checkpoint.
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
    lines = [f'model_checkpoint_path: "{names[-1]}"']
    lines += [f'all_model_checkpoint_paths: "{name}"' for name in names]
    lines += [f"all_model_checkpoint_timestamps: {time!r}" for time in times]
    lines.append(f"last_preserved_timestamp: {min(times) - 1!r}")
    atomic_write_text(directory / "checkpoint", "\n".join(lines) + "\n")


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
