"""What the task models take as text, turned into one form, and the run's training and evaluation
batches: tokenized once, cached, shuffled each epoch."""

import numpy as np
import tensorflow as tf

from electra_tf.data.tokenization import ElectraTokenizer
from electra_tf.finetuning.text.inputs import evaluation_batches, holds_text, text_dataset, training_batches
from electra_tf.models.preprocessing import ElectraTextPreprocessor


def test_text_is_recognised_in_every_form_and_labels_map_through_their_names():
    assert holds_text(["a", "b"]) and holds_text(np.array(["a"])) and holds_text((["a b"], ["c"]))
    assert holds_text({"text": ["a"], "text_pair": ["b"]}) and holds_text(tf.constant(["a"]))
    assert not holds_text([1, 2]) and not holds_text(tf.data.Dataset.range(2))
    dataset = text_dataset(["good", "bad", "good"], ["pos", "neg", "pos"], label_names=["neg", "pos"], batch_size=2)
    assert [labels.numpy().tolist() for _, labels in dataset] == [[1, 0], [1]]


def test_training_batches_are_cached_ids_shuffled_each_epoch_and_counted(small_vocab):
    preprocessor = ElectraTextPreprocessor(ElectraTokenizer(small_vocab), 16)
    texts = [f"the river rises {n}" for n in range(10)]
    train = training_batches(texts, tf.range(10), 10, preprocessor, batch_size=4, seed=0)
    assert int(train.cardinality()) == 3  # Keras knows the steps of an epoch
    epochs = [[int(label) for _, labels in train for label in labels] for _ in range(2)]
    assert sorted(epochs[0]) == list(range(10)) and epochs[0] != epochs[1]
    inputs, _ = next(iter(train))
    assert set(inputs) == {"token_ids", "segment_ids", "padding_mask"} and inputs["token_ids"].shape[1] == 16
    evaluation = evaluation_batches(texts, preprocessor, 4)
    assert [int(batch["token_ids"].shape[0]) for batch in evaluation] == [4, 4, 2]  # in order, whole
