"""What a run does differently with several workers (MultiWorkerMirroredStrategy): each
worker's share of the input, a barrier, and a lost peer reported as what it is."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import tensorflow as tf

from electra_tf.utils.errors import RunError


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

    @tf.function(autograph=False)
    def all_reduce_one():
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.ones([])), axis=None)

    all_reduce_one()


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
