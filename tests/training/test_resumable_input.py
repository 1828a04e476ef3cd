"""The run's input: batches handed out in order, the position a checkpoint holds, the batches a
step has not consumed yet replayed after a restore or to the next `fit`, tokens counted when
consumed. (Checkpoints of the whole run: test_checkpointing.py.)"""

import numpy as np
import tensorflow as tf

from electra_tf.training.resumable_input import ResumableInput


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


def test_a_second_fit_reads_on_from_the_first_batch_no_step_trained_on():
    # A float16 run calls fit again for the steps loss scaling skipped (pretraining/run.py).
    resumable = ResumableInput(numbered_batches())
    first = iter(resumable.dataset())
    assert indices(first, 5) == [0, 1, 2, 3, 4]
    resumable.advance_to(3)  # 0-2 trained on; 3 and 4 were prefetched by the first fit
    second = iter(resumable.dataset())
    assert indices(second, 4) == [3, 4, 5, 6]
    # The first fit's reader stops; what it still holds, tf.data had already pulled through the
    # generator, so the new reader hands those batches out too: none is lost.
    stale = [int(batch["index"][0]) for batch in first]
    assert set(stale) <= {5, 6, 7, 8}
    resumable.advance_to(4)
    assert indices(second, 1) == [7]


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
