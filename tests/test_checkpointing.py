import numpy as np
import tensorflow as tf

from electra_tf.checkpointing import ResumableInput


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
    first.consumed(5)
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
    next(reader), next(reader)
    resumable.consumed(2)
    assert resumable.tokens_consumed == 6
