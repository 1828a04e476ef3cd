"""Fine-tuning losses. Classification and regression use Keras' own cross-entropy and squared
error, as the official heads do; tagging needs positions without a label skipped."""

from __future__ import annotations

import tensorflow as tf


def token_classification_loss(labels, logits, ignore_label: int = -1):
    """Per example: sum over labelled positions of -log softmax(logits)[label].

    labels int [B, L] (`ignore_label` where a position has no label, e.g. a word's second
    word piece, [CLS], padding); logits [B, L, classes]. The official tagging task sums
    over the sequence; Keras then averages the examples of a batch.
    """
    labels = tf.cast(labels, tf.int32)
    labelled = tf.not_equal(labels, ignore_label)
    per_token = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.where(labelled, labels, 0), logits=tf.cast(logits, tf.float32))
    return tf.reduce_sum(per_token * tf.cast(labelled, tf.float32), axis=-1)
