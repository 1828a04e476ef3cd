"""A multi-worker run's pieces that work on one process too: the input share, the barrier, a lost
peer reported as what it is, and waiting for what the chief prepares."""

import threading

import pytest
import tensorflow as tf

from electra_tf.runtime.cluster import WorkerRole
from electra_tf.training.workers import barrier, lost_workers_reported, per_worker, wait_for_chief
from electra_tf.utils.errors import RunError

ONE = WorkerRole(index=0, count=1)
TWO = WorkerRole(index=1, count=2, is_chief=False)


def test_one_worker_reads_the_dataset_itself_and_passes_through_a_barrier():
    dataset = tf.data.Dataset.range(4).batch(2)
    assert per_worker(tf.distribute.get_strategy(), ONE, dataset) is dataset
    barrier(tf.distribute.get_strategy())  # one scalar all-reduce, returns


def test_a_lost_peer_is_a_run_error_naming_the_checkpoint_to_resume_from():
    with pytest.raises(RunError, match="worker 1 of 2.*a collective with the other workers failed \\(UnavailableError: "
                                       "peer gone\\).*The last checkpoint is ckpt-8"):
        with lost_workers_reported(TWO, lambda: "ckpt-8"):
            raise tf.errors.UnavailableError(None, None, "Graph execution error:\npeer gone")
    with pytest.raises(tf.errors.UnavailableError):  # one process: TensorFlow's own error, nothing to explain
        with lost_workers_reported(ONE):
            raise tf.errors.UnavailableError(None, None, "peer gone")


def test_a_worker_waits_for_the_chiefs_file_and_gives_up_saying_what_was_missing(tmp_path, capsys):
    path = tmp_path / "metadata.json"
    threading.Timer(0.3, path.write_text, args=("{}",)).start()
    wait_for_chief(path, "the data", timeout=30)
    assert "waiting for the chief to prepare the data" in capsys.readouterr().out
    with pytest.raises(RunError, match="did not prepare the vocabulary within 0 minutes"):
        wait_for_chief(tmp_path / "never", "the vocabulary", timeout=0.1)
