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

With a `preprocessor`, `fit`, `evaluate` and `predict` take text as keras-hub's task models
do: lists, numpy arrays or tensors of strings (word lists for tagging), `(text, text_pair)`
tuples, or a `tf.data.Dataset` of such batches (`finetuning/text/inputs.py` has every form); string
labels are mapped through the model's `label_names`. The preprocessor is mapped over the data,
so the model itself only ever sees token ids; datasets that already hold token ids (e.g.
preprocessed once and cached, as `electra_tf.finetune` does) pass through unchanged.
`predict` returns logits, as Keras models do; `predict_labels` returns what the export's
`serving_default` returns: label names and probabilities (or scores, or per-word tags).
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

import electra_tf.runtime.optimizer  # noqa: F401  registers ElectraAdamW: a saved model is compiled with it
from electra_tf.finetuning.text.inputs import holds_text, map_string_labels, text_dataset
from electra_tf.finetuning.text.losses import token_classification_loss
from electra_tf.finetuning.text.serving import (classifier_endpoints, classifier_litert_endpoint, tagger_endpoints,
                                                tagger_litert_endpoint)
from electra_tf.finetuning.text.task_data import from_unit_interval
from electra_tf.models.dropout import Dropout
from electra_tf.models.encoders import Discriminator, deserialize_as
from electra_tf.models.preprocessing import IGNORE_LABEL, pack_words_with_starts
from electra_tf.runtime.compiled_step import CompiledGradients

HEAD_NAME = "task_specific"  # the official variable scope, which its layer-wise learning rates key on


class TextInputModel(CompiledGradients, keras.Model):
    """Base of a model on the pre-trained discriminator (`backbone`) that takes text: text in
    through `preprocessor` (`ElectraTextPreprocessor`, `ElectraWordPreprocessor`,
    `PromptPreprocessor`, or any Keras layer mapping strings to the model's inputs), string labels
    mapped through `label_names`; `fit`, `evaluate` and `predict` take lists, arrays, tensors or
    datasets of strings."""

    ragged_inputs = False  # True for word lists (tagging)

    def __init__(self, backbone, preprocessor=None, label_names=None, **kwargs):
        super().__init__(**kwargs)
        self.backbone = deserialize_as(backbone, Discriminator, type(self).__name__, "backbone")
        if preprocessor is not None:
            preprocessor = deserialize_as(preprocessor, keras.layers.Layer, type(self).__name__, "preprocessor")
        self.preprocessor = preprocessor
        self.label_names = [str(name) for name in label_names] if label_names is not None else None

    # --- strings in, via the preprocessor ---------------------------------------------

    def _text_dataset(self, x, y=None, sample_weight=None, batch_size=None, shuffle=False):
        if self.preprocessor is None:
            raise ValueError(f"this {type(self).__name__} has no preprocessor, so it takes token ids only; "
                             "build it with preprocessor=ElectraTextPreprocessor(...) to give it text.")
        return text_dataset(x, y, sample_weight, label_names=self.label_names, batch_size=batch_size or 32,
                            shuffle=shuffle, ragged=self.ragged_inputs)

    def _preprocessed(self, data):
        """Maps the preprocessor over a dataset of strings; token ids pass as they are."""
        if self.preprocessor is None or not isinstance(data, tf.data.Dataset) or not any(
                spec.dtype == tf.string for spec in tf.nest.flatten(data.element_spec)):
            return data
        return map_string_labels(data, self.label_names).map(self.preprocessor, num_parallel_calls=tf.data.AUTOTUNE) \
            .prefetch(tf.data.AUTOTUNE)

    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None, validation_split=0.0,
            validation_data=None, shuffle=True, sample_weight=None, **kwargs):
        if holds_text(x):
            if validation_split:
                raise ValueError("validation_split is not supported for text; pass validation_data=(texts, labels).")
            x = self._text_dataset(x, y, sample_weight, batch_size, shuffle=shuffle)
            y = sample_weight = batch_size = None
        if isinstance(validation_data, tuple) and holds_text(validation_data[0]):
            validation_data = self._text_dataset(*validation_data, batch_size=batch_size)
        if isinstance(x, tf.data.Dataset):
            shuffle = False  # a dataset shuffles itself; Keras would warn
        return super().fit(self._preprocessed(x), y, batch_size=batch_size, epochs=epochs, verbose=verbose,
                           callbacks=callbacks, validation_split=validation_split,
                           validation_data=self._preprocessed(validation_data), shuffle=shuffle,
                           sample_weight=sample_weight, **kwargs)

    def evaluate(self, x=None, y=None, batch_size=None, verbose="auto", sample_weight=None, **kwargs):
        if holds_text(x):
            x = self._text_dataset(x, y, sample_weight, batch_size)
            y = sample_weight = batch_size = None
        return super().evaluate(self._preprocessed(x), y, batch_size=batch_size, verbose=verbose,
                                sample_weight=sample_weight, **kwargs)

    def predict(self, x, batch_size=None, verbose="auto", **kwargs):
        if holds_text(x):
            x, batch_size = self._text_dataset(x, batch_size=batch_size), None
        return super().predict(self._preprocessed(x), batch_size=batch_size, verbose=verbose, **kwargs)

    # compile() is overridden (task defaults for loss and metrics), so Keras asks for these
    # to restore the optimizer of a saved model; loss and metrics come back as the defaults.
    def get_compile_config(self):
        if not self.compiled:
            return None
        return {"optimizer": keras.saving.serialize_keras_object(self.optimizer)}

    def compile_from_config(self, config):
        self.compile(optimizer=keras.saving.deserialize_keras_object(config["optimizer"]))  # builds it too

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "backbone": keras.saving.serialize_keras_object(self.backbone),
            "preprocessor": keras.saving.serialize_keras_object(self.preprocessor)
            if self.preprocessor is not None else None,
            "label_names": self.label_names,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)


class ElectraTaskModel(TextInputModel):
    """Base of a task model with a head of its own: dropout and a dense head of `num_classes`
    outputs (named `task_specific`, the scope layer-wise learning rates key on). The
    discriminator's replaced-token head is frozen: no fine-tuning loss reaches it. Subclasses give
    `call` (and what they serve); the kinds of `finetuning/` and docs/finetuning.md's multi-label
    example build on it."""

    def __init__(self, backbone, num_classes: int, dropout: float = 0.1, preprocessor=None, label_names=None,
                 **kwargs):
        if num_classes < 1:
            raise ValueError(f"num_classes must be at least 1, got {num_classes}.")
        if label_names is not None and len(label_names) != num_classes:
            raise ValueError(f"{len(label_names)} label_names for {num_classes} classes.")
        super().__init__(backbone, preprocessor, label_names, **kwargs)
        self.backbone.head.trainable = False  # pre-training only: no fine-tuning gradient reaches it
        self.num_classes = num_classes
        self.dropout_rate = dropout
        with keras.name_scope(self.name):
            self.dropout = Dropout(dropout, name="dropout")
            self.head = keras.layers.Dense(num_classes, name=HEAD_NAME)
            self.head.build((None, self.backbone.hidden_size))
        self.built = True

    def get_config(self):
        return {**super().get_config(), "num_classes": self.num_classes, "dropout": self.dropout_rate}


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraClassifier(ElectraTaskModel):
    """Single texts or text pairs -> class logits [B, classes] (or a score [B, 1] when
    num_classes == 1).

    `label_names` names the classes (string labels in `fit` are mapped through them, and
    `predict_labels` returns them); `score_range` is a regression model's original scale (it
    trains on [0, 1]); `text_pair` says it was trained on sentence pairs. A fine-tuned
    `best.keras` keeps all three.

    Example:
    >>> from electra_tf.models.config import ModelConfig
    >>> from electra_tf.models.encoders import build_discriminator
    >>> from electra_tf.models.preprocessing import ElectraTextPreprocessor
    >>> config = ModelConfig(vocab_size=8, hidden_size=128, num_layers=1, num_heads=2, intermediate_size=512)
    >>> backbone = build_discriminator(config)
    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "movie"]
    >>> classifier = ElectraClassifier(backbone, num_classes=2,
    ...                                preprocessor=ElectraTextPreprocessor(vocabulary, 16))
    >>> classifier.compile(optimizer="adam")
    >>> train = tf.data.Dataset.from_tensor_slices((["good movie", "bad movie"], [1, 0])).batch(2)
    >>> history = classifier.fit(train, epochs=1, verbose=0)
    >>> classifier.predict(["good movie"], verbose=0).shape
    (1, 2)

    With label names, labels and predictions are words:
    >>> classifier = ElectraClassifier(backbone, num_classes=2, label_names=["negative", "positive"],
    ...                                preprocessor=ElectraTextPreprocessor(vocabulary, 16))
    >>> classifier.compile(optimizer="adam")
    >>> history = classifier.fit(["good movie", "bad movie"], ["positive", "negative"], verbose=0)
    >>> predicted = classifier.predict_labels(["good movie", "bad movie"])
    >>> sorted(predicted), predicted["probabilities"].shape, predicted["label_names"]
    (['label', 'label_names', 'probabilities'], (2, 2), ['negative', 'positive'])
    """

    def __init__(self, backbone, num_classes: int, dropout: float = 0.1, preprocessor=None, label_names=None,
                 score_range=None, text_pair: bool = False, **kwargs):
        super().__init__(backbone, num_classes, dropout, preprocessor, label_names, **kwargs)
        if score_range is not None and num_classes != 1:
            raise ValueError("score_range is for regression (num_classes=1).")
        self.score_range = tuple(float(v) for v in score_range) if score_range is not None else None
        self.text_pair = bool(text_pair)

    def call(self, inputs, training=None):
        sequence_output = self.backbone.encode(inputs, training=training)
        first_token = self.dropout(sequence_output[:, 0, :], training=training)
        return keras.ops.cast(self.head(first_token), "float32")

    def predict_labels(self, x, batch_size=None, verbose=0) -> dict:
        """What the export's `serving_default` returns, as numpy arrays: `label` (the most
        probable class's name, or its index without label_names), `probabilities` [N,
        classes] and `label_names`; for regression, `score` on the original scale."""
        logits = self.predict(x, batch_size=batch_size, verbose=verbose)
        if self.is_regression:
            score = logits[:, 0]
            return {"score": from_unit_interval(score, self.score_range) if self.score_range else score}
        probabilities = tf.nn.softmax(logits, axis=-1).numpy()
        names = self.label_names or [str(i) for i in range(self.num_classes)]
        return {"label": np.array(names)[probabilities.argmax(-1)], "probabilities": probabilities,
                "label_names": names}

    def serving_endpoints(self, tokenizer, max_seq_length: int) -> dict:
        """The export's signatures (`finetuning/text/serving.py`)."""
        return classifier_endpoints(self, tokenizer, max_seq_length, self.label_names, self.score_range,
                                    self.text_pair)

    def litert_endpoint(self, lite_tokenizer, max_seq_length: int):
        """(function of the text input(s) -> outputs, input names) of a LiteRT file."""
        return classifier_litert_endpoint(self, lite_tokenizer, max_seq_length)

    def serving_task(self, max_seq_length: int) -> dict:
        """task.json of the export: what the outputs mean."""
        return {"label_names": list(self.label_names) if self.label_names is not None else None,
                "score_range": list(self.score_range) if self.score_range is not None else None,
                "text_pair": self.text_pair}

    def get_config(self):
        return {**super().get_config(), "score_range": self.score_range, "text_pair": self.text_pair}

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
class ElectraTokenClassifier(ElectraTaskModel):
    """Pre-split words -> per-word-piece logits [B, L, classes]; the loss and accuracy only
    look at the first word piece of each word.

    Example:
    >>> from electra_tf.models.config import ModelConfig
    >>> from electra_tf.models.encoders import build_discriminator
    >>> from electra_tf.models.preprocessing import ElectraWordPreprocessor
    >>> config = ModelConfig(vocab_size=9, hidden_size=128, num_layers=1, num_heads=2, intermediate_size=512)
    >>> backbone = build_discriminator(config)
    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "##s", "sat"]
    >>> tagger = ElectraTokenClassifier(backbone, num_classes=3,
    ...                                 preprocessor=ElectraWordPreprocessor(vocabulary, 8))
    >>> tagger.compile(optimizer="adam")
    >>> words = tf.ragged.constant([["the", "cats", "sat"], ["cats"]])
    >>> tags = tf.ragged.constant([[0, 1, 2], [1]])
    >>> history = tagger.fit(tf.data.Dataset.from_tensor_slices((words, tags)).batch(2), verbose=0)
    >>> sorted(history.history)
    ['accuracy', 'loss']

    Word lists and tag names in, tags per word out:
    >>> tagger = ElectraTokenClassifier(backbone, num_classes=3, label_names=["DET", "NOUN", "VERB"],
    ...                                 preprocessor=ElectraWordPreprocessor(vocabulary, 8))
    >>> tagger.compile(optimizer="adam")
    >>> history = tagger.fit([["the", "cats", "sat"]], [["DET", "NOUN", "VERB"]], verbose=0)
    >>> [len(tags) for tags in tagger.predict_labels([["the", "cats", "sat"], ["cats"]])["tags"]]
    [3, 1]
    """

    ragged_inputs = True

    def call(self, inputs, training=None):
        sequence_output = self.backbone.encode(inputs, training=training)
        return keras.ops.cast(self.head(self.dropout(sequence_output, training=training)), "float32")

    def predict_labels(self, words, batch_size=None, verbose=0) -> dict:
        """What the export's `serving_default` returns, per word (its first word piece), as
        Python lists: `tags` (names, or indices without label_names; "" for a word cut off by
        max_seq_length), `tag_probabilities` [words, tags] per sentence, and `tag_names`."""
        if self.preprocessor is None:
            raise ValueError("predict_labels needs the tagger's preprocessor (words in).")
        words = words if isinstance(words, tf.RaggedTensor) else tf.ragged.constant(
            [[str(word) for word in sentence] for sentence in words], dtype=tf.string)
        _, starts = pack_words_with_starts(self.preprocessor.tokenizer, self.preprocessor.max_seq_length, words)
        probabilities = tf.nn.softmax(self.predict(words, batch_size=batch_size, verbose=verbose), axis=-1).numpy()
        names = self.label_names or [str(i) for i in range(self.num_classes)]
        tags, tag_probabilities = [], []
        for row, sentence_starts in enumerate(starts.to_list()):
            kept = [probabilities[row, start] if start >= 0 else np.zeros(self.num_classes, "float32")
                    for start in sentence_starts]
            tags.append([names[p.argmax()] if start >= 0 else "" for p, start in zip(kept, sentence_starts)])
            tag_probabilities.append(np.array(kept).reshape(len(kept), self.num_classes))
        return {"tags": tags, "tag_probabilities": tag_probabilities, "tag_names": names}

    def serving_endpoints(self, tokenizer, max_seq_length: int) -> dict:
        """The export's signatures (`finetuning/text/serving.py`)."""
        return tagger_endpoints(self, tokenizer, max_seq_length, self.label_names)

    def litert_endpoint(self, lite_tokenizer, max_seq_length: int):
        """(function of the text -> outputs, input names) of a LiteRT file."""
        return tagger_litert_endpoint(self, lite_tokenizer, max_seq_length)

    def serving_task(self, max_seq_length: int) -> dict:
        """task.json of the export: what the outputs mean."""
        return {"tag_names": list(self.label_names), "tagging": True}

    def compile(self, optimizer="adamw", loss="auto", metrics="auto", **kwargs):
        if loss == "auto":
            loss = labelled_token_loss
        if metrics == "auto":
            metrics = [LabelledTokenAccuracy()]
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)
