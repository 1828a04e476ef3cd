"""What a run does differently with several workers (MultiWorkerMirroredStrategy): each
worker's share of the input, a barrier, the run folder checked to be one every worker sees, and
a lost peer reported as what it is."""

from __future__ import annotations

import contextlib
import secrets
import time
from pathlib import Path

import tensorflow as tf

from electra_tf.utils.errors import RunError
from electra_tf.utils.files import atomic_write_text


def per_worker(strategy, role, dataset):
    """What fit and evaluate read. One worker: the dataset (Keras splits each batch over the
    replicas). Several: each worker's own batches, split over its replicas, through
    `distribute_datasets_from_function` (the worker's batch is its share of the global one)."""
    if not role.is_multi_worker:
        return dataset
    replicas_per_worker = strategy.num_replicas_in_sync // role.count

    def worker_dataset(context):
        if replicas_per_worker == 1:
            return dataset
        batch = next(iter(dataset.element_spec.values())).shape[0]
        return dataset.rebatch(batch // replicas_per_worker)

    return strategy.distribute_datasets_from_function(worker_dataset)


def barrier(strategy) -> None:
    """Returns once every worker has reached it (one scalar all-reduce)."""
    _all_reduce_sum(strategy, 1, [0.0])


# The file the chief writes into the run folder for the other workers to read back.
SHARED_FOLDER_PROBE = ".workers-see-this"
# How long a worker looks for it: shared file systems (NFS attribute caches, object stores
# mounted by FUSE) may show a new file a few seconds late.
SHARED_FOLDER_WAIT_SECONDS = 15.0


def check_shared_folder(strategy, role, folder: Path) -> None:
    """Every worker must see the run folder the chief writes (its config, checkpoints and the
    other workers' input positions): a folder on each machine's own disk would let a worker
    start afresh beside a chief that resumes. The chief writes a random token into the folder,
    an all-reduce hands the token to every worker, each reads the file back, and a second
    all-reduce gathers which workers could not; all of them then stop with the same error,
    before anything else is written (a rerun on shared storage starts or resumes normally)."""
    folder = Path(folder)
    probe = folder / SHARED_FOLDER_PROBE
    token = [float(secrets.randbelow(2 ** 24 - 1) + 1) for _ in range(2)]  # exact in float32
    if role.is_chief:
        atomic_write_text(probe, " ".join(str(int(part)) for part in token))
    try:
        shared = _all_reduce_sum(strategy, role.count, [value if role.is_chief else 0.0 for value in token])
        expected = " ".join(str(int(part)) for part in shared)
        blind = [0.0] * role.count
        blind[role.index] = 0.0 if _reads_back(probe, expected) else 1.0
        blind_workers = [index for index, flag in enumerate(_all_reduce_sum(strategy, role.count, blind)) if flag > 0]
    finally:
        if role.is_chief:
            probe.unlink(missing_ok=True)
    if blind_workers:
        names = ", ".join(f"worker {index}" for index in blind_workers)
        raise RunError(f"{names} of {role.count} cannot read what the chief (worker 0) wrote into the run folder "
                       f"({probe}, as this worker sees it, is missing or another run's): every worker must see the "
                       "same folder (a shared file system mounted at the same path on every machine), since the "
                       "chief writes the config and checkpoints every worker restores. Nothing was trained, and the "
                       "folder holds nothing a rerun trips on: rerun with a --model_dir on shared storage.")


def _reads_back(path: Path, expected: str) -> bool:
    deadline = time.monotonic() + SHARED_FOLDER_WAIT_SECONDS
    while True:
        try:
            if path.read_text().strip() == expected:
                return True
        except OSError:
            pass
        if time.monotonic() > deadline:
            return False
        time.sleep(1.0)


def _all_reduce_sum(strategy, workers: int, values: list[float]) -> list[float]:
    """The sum over workers of each worker's `values` (given by its first replica; its other
    replicas, a worker's further GPUs, add zeros)."""
    local = tf.constant(values, tf.float32)
    replicas_per_worker = strategy.num_replicas_in_sync // workers

    @tf.function(autograph=False)
    def reduce():
        def replica_values():
            replica = tf.distribute.get_replica_context().replica_id_in_sync_group
            return local * tf.cast(tf.equal(replica % replicas_per_worker, 0), tf.float32)
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(replica_values), axis=None)

    return [float(value) for value in reduce().numpy()]


@contextlib.contextmanager
def lost_workers_reported(role, latest_checkpoint=lambda: None):
    """In a multi-worker run, a collective that fails because a peer died (connection reset,
    the collective timeout, the coordination service's heartbeat) becomes a RunError that says
    so, instead of TensorFlow's traceback from inside the step. `latest_checkpoint()`: the
    checkpoint a rerun resumes from, named in the error."""
    try:
        yield
    except (tf.errors.UnavailableError, tf.errors.DeadlineExceededError, tf.errors.CancelledError,
            tf.errors.AbortedError, tf.errors.InternalError) as error:
        if not role.is_multi_worker:
            raise
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        first_line = next((line for line in lines if not line.startswith(("Graph execution error", "Detected at"))),
                          type(error).__name__)[:200]
        raise RunError(f"{role.describe()}: a collective with the other workers failed ({type(error).__name__}: "
                       f"{first_line}); a worker has died or become unreachable, and the job cannot go on "
                       f"without it. The last checkpoint is {latest_checkpoint() or 'none yet'}: "
                       "rerun the same command on every worker (or the same python -m electra_tf.launch "
                       "command) to resume from it.") from None


def wait_for_chief(path: Path, what: str, timeout: float = 1800.0) -> None:
    """A worker waits for a file the chief writes once (the job's shared data)."""
    deadline = time.monotonic() + timeout
    if not path.is_file():
        print(f"  waiting for the chief to prepare {what} ({path}) ...", flush=True)
    while not path.is_file():
        if time.monotonic() > deadline:
            raise RunError(f"the chief did not prepare {what} within {timeout / 60:.0f} minutes ({path} is "
                           "missing); check the chief's output.")
        time.sleep(1.0)
