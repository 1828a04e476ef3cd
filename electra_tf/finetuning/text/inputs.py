"""What the task models' `fit`, `evaluate` and `predict` accept, turned into one form: a
batched `tf.data.Dataset` of strings, which the model's preprocessor then maps to token ids.

Accepted, as keras-hub's task models accept them:

    text          a list, numpy array or tensor of strings; a `(text, text_pair)` tuple or a
                  `{"text": ..., "text_pair": ...}` dict of them for sentence pairs
    words         (tagging) a list of word lists, or a ragged string tensor
    labels        integers, floats (regression), or strings, mapped through the model's
                  `label_names`; for tagging, one list per sentence
    a dataset     `tf.data.Dataset` of batches of the above (string labels mapped in the graph),
                  or of token ids, which pass through unchanged

Example:
>>> dataset = text_dataset(["a good film", "a bad film"], ["pos", "neg"], label_names=["neg", "pos"],
...                        batch_size=2)
>>> [labels.numpy().tolist() for _, labels in dataset]
[[1, 0]]
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf


def _first_leaf(values):
    """The first scalar inside nested lists/arrays (None when empty)."""
    while isinstance(values, (list, tuple, np.ndarray)):
        if len(values) == 0:
            return None
        values = values[0]
    return values


def holds_text(x) -> bool:
    """True for text held in memory (not a dataset): the forms in the module docstring."""
    if isinstance(x, dict):
        return "text" in x and all(holds_text(value) for value in x.values())
    if isinstance(x, tuple) and len(x) == 2:
        return all(holds_text(part) for part in x)
    if isinstance(x, (tf.Tensor, tf.RaggedTensor)):
        return x.dtype == tf.string
    if isinstance(x, (list, np.ndarray)):
        return isinstance(_first_leaf(x), (str, bytes))
    return False


def _as_text_tensor(values, ragged: bool):
    if isinstance(values, dict):
        return {key: _as_text_tensor(value, ragged) for key, value in values.items()}
    if isinstance(values, tuple):
        return tuple(_as_text_tensor(value, ragged) for value in values)
    if isinstance(values, (tf.Tensor, tf.RaggedTensor)):
        return values
    if ragged:
        return tf.ragged.constant([[str(word) for word in row] for row in values], dtype=tf.string)
    return tf.constant(np.asarray(values, dtype=object).astype(str))


def label_ids(labels, label_names, ragged: bool = False):
    """Labels as given -> a tensor: numbers as they are, strings through `label_names`, with an
    error naming any label the model does not know."""
    if isinstance(labels, (tf.Tensor, tf.RaggedTensor)) and labels.dtype != tf.string:
        return labels
    if isinstance(labels, (tf.Tensor, tf.RaggedTensor)):
        labels = labels.to_list() if isinstance(labels, tf.RaggedTensor) else labels.numpy().tolist()
    leaf = _first_leaf(labels)
    if not isinstance(leaf, (str, bytes)):
        return tf.ragged.constant(labels) if ragged else tf.convert_to_tensor(np.asarray(labels))
    if label_names is None:
        raise ValueError("the labels are strings but this model has no label_names: build it with "
                         "label_names=[...] (their order is the class index), or pass integer labels.")
    index = {name: i for i, name in enumerate(label_names)}

    def lookup(label):
        label = label.decode() if isinstance(label, bytes) else label
        if label not in index:
            raise ValueError(f"label {label!r} is not one of the model's label_names {list(label_names)}.")
        return index[label]

    if ragged:
        return tf.ragged.constant([[lookup(label) for label in row] for row in labels], dtype=tf.int32)
    return tf.constant([lookup(label) for label in np.asarray(labels, dtype=object).ravel()], tf.int32)


def text_dataset(x, y=None, sample_weight=None, *, label_names=None, batch_size: int = 32,
                 shuffle: bool = False, ragged: bool = False, seed: int | None = None) -> tf.data.Dataset:
    """In-memory text (and labels, weights) -> a batched dataset of `(x,)`, `(x, y)` or `(x, y, w)`."""
    parts = [_as_text_tensor(x, ragged)]
    if y is not None:
        parts.append(label_ids(y, label_names, ragged))
    if sample_weight is not None:
        parts.append(tf.convert_to_tensor(np.asarray(sample_weight, dtype="float32")))
    dataset = tf.data.Dataset.from_tensor_slices(tuple(parts))
    if shuffle:
        dataset = dataset.shuffle(len(dataset), seed=seed, reshuffle_each_iteration=True)
    return dataset.ragged_batch(batch_size) if ragged else dataset.batch(batch_size)


def map_string_labels(dataset: tf.data.Dataset, label_names) -> tf.data.Dataset:
    """A dataset whose labels (its second component) are strings -> the same with class ids;
    a label the model does not know stops the run with a message naming the label names."""
    spec = dataset.element_spec
    if not isinstance(spec, tuple) or len(spec) < 2 or spec[1].dtype != tf.string:
        return dataset
    if label_names is None:
        raise ValueError("the dataset's labels are strings but this model has no label_names: build it with "
                         "label_names=[...] (their order is the class index), or give integer labels.")
    table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(tf.constant(list(label_names)), tf.range(len(label_names))), -1)

    @tf.autograph.experimental.do_not_convert
    def to_ids(x, labels, *rest):
        ids = tf.ragged.map_flat_values(table.lookup, labels) if isinstance(labels, tf.RaggedTensor) \
            else table.lookup(labels)
        flat = ids.flat_values if isinstance(ids, tf.RaggedTensor) else ids
        check = tf.debugging.assert_non_negative(
            flat, message=f"a label is not among the model's label_names ({', '.join(label_names)})")
        with tf.control_dependencies([check]):
            ids = tf.identity(ids) if not isinstance(ids, tf.RaggedTensor) else ids.with_flat_values(
                tf.identity(ids.flat_values))
        return (x, ids, *rest)

    return dataset.map(to_ids)


def training_batches(features, labels, count: int, preprocessor, batch_size: int, seed: int, ragged: bool = False):
    """(inputs, labels) batches of a run's training examples, shuffled each epoch: tokenized once,
    in large batches, and cached as token ids, so every epoch reads ids instead of tokenizing
    again. `ragged`: word lists and tag lists of varying length (tagging)."""
    batch = _ragged_batch if ragged else _dense_batch
    train = tf.data.Dataset.from_tensor_slices((features, labels))
    # unbatch() forgets the example count; restate it so Keras knows the steps per epoch.
    train = batch(train, 1024).map(preprocessor).unbatch().apply(tf.data.experimental.assert_cardinality(count)).cache()
    return train.shuffle(count, seed=seed, reshuffle_each_iteration=True).batch(batch_size)


def evaluation_batches(features, preprocessor, batch_size: int, ragged: bool = False):
    """Batches of token ids of an evaluation's examples, in order, cached."""
    batch = _ragged_batch if ragged else _dense_batch
    # A 1-tuple, so a (text, text_pair) element reaches the preprocessor as one argument.
    return batch(tf.data.Dataset.from_tensor_slices((features,)), batch_size).map(preprocessor).cache()


def _dense_batch(dataset, size: int):
    return dataset.batch(size)


def _ragged_batch(dataset, size: int):
    return dataset.ragged_batch(size)
