import types

import keras
import numpy as np
import tensorflow as tf

from electra_tf.pretraining.checkpointing import ResumableInput


def numbered_batches():
    # Each batch carries its own index: easy to see which batch comes next.
    return tf.data.Dataset.range(1000).map(lambda i: {"index": tf.fill([2], tf.cast(i, tf.int32))}).prefetch(4)


def indices(dataset_iterator, count):
    return [int(next(dataset_iterator)["index"][0]) for _ in range(count)]


def test_resume_continues_with_the_next_unconsumed_batch(tmp_path):
    first = ResumableInput(numbered_batches())
    reader = iter(first.dataset())
    # The reader runs ahead of training, as fit's prefetching does: 7 batches handed out, 5 trained on.
    assert indices(reader, 7) == [0, 1, 2, 3, 4, 5, 6]
    first.advance_to(5)
    first.advance_to(5)  # reported twice (tracker and saver): counted once
    checkpoint = tf.train.Checkpoint(data_iterator=first.iterator, in_flight=first.in_flight)
    with first.frozen():
        path = checkpoint.write(str(tmp_path / "ckpt"))
    in_flight = first.in_flight_count()
    assert in_flight >= 2  # 5 and 6 at least (from_generator may have pulled one more)

    second = ResumableInput(numbered_batches())
    tf.train.Checkpoint(data_iterator=second.iterator, in_flight=second.in_flight).read(path).assert_consumed()
    assert second.restored() == in_flight
    assert indices(iter(second.dataset()), 6) == [5, 6, 7, 8, 9, 10]


def test_tokens_are_counted_when_consumed():
    dataset = tf.data.Dataset.from_tensors({"padding_mask": np.array([[1, 1, 0], [1, 0, 0]], np.int32)}).repeat()
    resumable = ResumableInput(dataset)
    reader = iter(resumable.dataset())
    next(reader), next(reader), next(reader)
    # A reader sees the count a step will have consumed before the tracker reports it.
    assert resumable.tokens_through(2) == 6
    assert resumable.tokens_consumed == 0
    resumable.advance_to(2)
    assert resumable.tokens_consumed == 6
    assert resumable.tokens_through(2) == 6 and resumable.tokens_through(3) == 9


def test_checkpoint_after_a_step_is_the_same_whichever_callback_runs_first(tmp_path):
    """The saver settles the input itself, so it may run before the InputTracker."""
    from electra_tf.pretraining.checkpointing import InputTracker, RunCheckpoint

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
