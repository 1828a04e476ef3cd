"""Fine-tuning models on the pre-trained discriminator (the official `finetune/` heads).

    ElectraClassifier        [CLS] hidden state -> dropout -> dense -> [B, classes]
                             (classes = 1: regression, STS-B style, squared error)
    ElectraTokenClassifier   every hidden state -> dropout -> dense -> [B, L, classes]
                             (labels on the first word piece of each word)

The discriminator's transformer is the `backbone`; its replaced-token-detection head is kept
(so a fine-tuned model still holds the whole discriminator) but frozen, since no fine-tuning
loss reaches it. As in the official code there is no pooler: the [CLS] vector is used as it
is. The dense layer uses Keras' default Glorot-uniform kernel and zero bias, which is what the
official `tf.layers.dense` call gets.

With a `preprocessor`, `fit`, `evaluate` and `predict` take a `tf.data.Dataset` of strings
(`(text, label)` or `((text, text_pair), label)` batches) and map the preprocessor over it,
so the model itself only ever sees token ids. Datasets that already hold token ids (e.g.
preprocessed once and cached, as `electra_tf.finetune` does) pass through unchanged.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from electra_tf import optimization  # noqa: F401  registers ElectraAdamW: a saved model is compiled with it
from electra_tf.finetuning.losses import token_classification_loss
from electra_tf.models.encoders import Discriminator, deserialize_as
from electra_tf.models.preprocessing import IGNORE_LABEL, ElectraTextPreprocessor

HEAD_NAME = "task_specific"  # the official variable scope; optimization.py keys on it


class _TaskModel(keras.Model):
    def __init__(self, backbone, num_classes: int, dropout: float = 0.1, preprocessor=None, **kwargs):
        super().__init__(**kwargs)
        backbone = deserialize_as(backbone, Discriminator, type(self).__name__, "backbone")
        if preprocessor is not None:
            preprocessor = deserialize_as(preprocessor, ElectraTextPreprocessor, type(self).__name__,
                                          "preprocessor")
        if num_classes < 1:
            raise ValueError(f"num_classes must be at least 1, got {num_classes}.")
        self.backbone = backbone
        backbone.head.trainable = False  # pre-training only: no fine-tuning gradient reaches it
        self.num_classes = num_classes
        self.dropout_rate = dropout
        self.preprocessor = preprocessor
        with keras.name_scope(self.name):
            self.dropout = keras.layers.Dropout(dropout, name="dropout")
            self.head = keras.layers.Dense(num_classes, name=HEAD_NAME)
            self.head.build((None, backbone.hidden_size))
        self.built = True

    # --- strings in, via the preprocessor ---------------------------------------------

    def _preprocessed(self, data):
        """Maps the preprocessor over a dataset of strings; token ids pass as they are."""
        if self.preprocessor is None or not isinstance(data, tf.data.Dataset) or not any(
                spec.dtype == tf.string for spec in tf.nest.flatten(data.element_spec)):
            return data
        return data.map(self.preprocessor, num_parallel_calls=tf.data.AUTOTUNE) \
            .prefetch(tf.data.AUTOTUNE)

    def fit(self, x=None, y=None, validation_data=None, **kwargs):
        if isinstance(x, tf.data.Dataset):
            kwargs.setdefault("shuffle", False)  # a dataset shuffles itself; Keras would warn
        return super().fit(self._preprocessed(x), y, validation_data=self._preprocessed(validation_data),
                           **kwargs)

    def evaluate(self, x=None, y=None, **kwargs):
        return super().evaluate(self._preprocessed(x), y, **kwargs)

    def predict(self, x, batch_size=32, **kwargs):
        if self.preprocessor is not None and _is_text(x):
            x = tf.data.Dataset.from_tensor_slices(tuple(x) if isinstance(x, tuple) else x)
            x = x.map(lambda *t: (t,) if len(t) == 2 else t).batch(batch_size)
        return super().predict(self._preprocessed(x), batch_size=batch_size, **kwargs)

    # compile() is overridden (task defaults for loss and metrics), so Keras asks for these
    # to restore the optimizer of a saved model; loss and metrics come back as the defaults.
    def get_compile_config(self):
        if not self.compiled:
            return None
        return {"optimizer": keras.saving.serialize_keras_object(self.optimizer)}

    def compile_from_config(self, config):
        self.compile(optimizer=keras.saving.deserialize_keras_object(config["optimizer"]))
        if self.built:
            self.optimizer.build(self.trainable_variables)

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "backbone": keras.saving.serialize_keras_object(self.backbone),
            "num_classes": self.num_classes,
            "dropout": self.dropout_rate,
            "preprocessor": keras.saving.serialize_keras_object(self.preprocessor)
            if self.preprocessor is not None else None,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def _is_text(x) -> bool:
    if isinstance(x, tuple) and len(x) == 2:
        return all(_is_text(part) for part in x)
    return isinstance(x, (list, np.ndarray)) and len(x) > 0 and isinstance(np.asarray(x).flat[0], (str, bytes))


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraClassifier(_TaskModel):
    """Single texts or text pairs -> class logits [B, classes] (or a score [B, 1] when
    num_classes == 1).

    Example:
    >>> from electra_tf.config import ElectraConfig
    >>> from electra_tf.models.embeddings import ElectraEmbeddings
    >>> from electra_tf.models.preprocessing import ElectraTextPreprocessor
    >>> config = ElectraConfig.load("electra_tiny").replace(vocab_size=8)
    >>> backbone = Discriminator.from_electra_config(config, ElectraEmbeddings.from_electra_config(config))
    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "movie"]
    >>> classifier = ElectraClassifier(backbone, num_classes=2,
    ...                                preprocessor=ElectraTextPreprocessor(vocabulary, 16))
    >>> classifier.compile(optimizer="adam")
    >>> train = tf.data.Dataset.from_tensor_slices((["good movie", "bad movie"], [1, 0])).batch(2)
    >>> history = classifier.fit(train, epochs=1, verbose=0)
    >>> classifier.predict(["good movie"], verbose=0).shape
    (1, 2)
    """

    def call(self, inputs, training=None):
        sequence_output = self.backbone.encode(inputs, training=training)
        first_token = self.dropout(sequence_output[:, 0, :], training=training)
        return keras.ops.cast(self.head(first_token), "float32")

    @property
    def is_regression(self) -> bool:
        return self.num_classes == 1

    def compile(self, optimizer="adamw", loss="auto", metrics="auto", **kwargs):
        if loss == "auto":
            loss = keras.losses.MeanSquaredError() if self.is_regression \
                else keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        if metrics == "auto":
            metrics = [] if self.is_regression else [keras.metrics.SparseCategoricalAccuracy("accuracy")]
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)


@keras.saving.register_keras_serializable(package="electra_tf")
class LabelledTokenAccuracy(keras.metrics.Metric):
    """Accuracy over positions that carry a label (IGNORE_LABEL positions skipped)."""

    def __init__(self, name="accuracy", **kwargs):
        super().__init__(name=name, **kwargs)
        self.correct = self.add_variable((), initializer="zeros", name="correct")
        self.labelled = self.add_variable((), initializer="zeros", name="labelled")

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = tf.cast(y_true, tf.int32)
        labelled = tf.cast(tf.not_equal(y_true, IGNORE_LABEL), tf.float32)
        hits = tf.cast(tf.equal(tf.cast(tf.argmax(y_pred, axis=-1), tf.int32), y_true), tf.float32)
        self.correct.assign_add(tf.reduce_sum(hits * labelled))
        self.labelled.assign_add(tf.reduce_sum(labelled))

    def result(self):
        return tf.math.divide_no_nan(self.correct, self.labelled)


@keras.saving.register_keras_serializable(package="electra_tf")
def labelled_token_loss(labels, logits):
    return token_classification_loss(labels, logits, IGNORE_LABEL)


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraTokenClassifier(_TaskModel):
    """Pre-split words -> per-word-piece logits [B, L, classes]; the loss and accuracy only
    look at the first word piece of each word.

    Example:
    >>> from electra_tf.config import ElectraConfig
    >>> from electra_tf.models.embeddings import ElectraEmbeddings
    >>> from electra_tf.models.preprocessing import ElectraWordPreprocessor
    >>> config = ElectraConfig.load("electra_tiny").replace(vocab_size=9)
    >>> backbone = Discriminator.from_electra_config(config, ElectraEmbeddings.from_electra_config(config))
    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "##s", "sat"]
    >>> tagger = ElectraTokenClassifier(backbone, num_classes=3,
    ...                                 preprocessor=ElectraWordPreprocessor(vocabulary, 8))
    >>> tagger.compile(optimizer="adam")
    >>> words = tf.ragged.constant([["the", "cats", "sat"], ["cats"]])
    >>> tags = tf.ragged.constant([[0, 1, 2], [1]])
    >>> history = tagger.fit(tf.data.Dataset.from_tensor_slices((words, tags)).batch(2), verbose=0)
    >>> sorted(history.history)
    ['accuracy', 'loss']
    """

    def call(self, inputs, training=None):
        sequence_output = self.backbone.encode(inputs, training=training)
        return keras.ops.cast(self.head(self.dropout(sequence_output, training=training)), "float32")

    def compile(self, optimizer="adamw", loss="auto", metrics="auto", **kwargs):
        if loss == "auto":
            loss = labelled_token_loss
        if metrics == "auto":
            metrics = [LabelledTokenAccuracy()]
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)
