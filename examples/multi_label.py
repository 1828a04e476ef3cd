"""A kind of run of your own, outside the package: multi-label classification (any number of
labels a text), registered as `multi_label` and run by electra_tf's own commands.

    python -m electra_tf.finetune --import examples/multi_label.py --kind multi_label \\
        --pretrained runs/electra_tiny --train train.jsonl --eval dev.jsonl --output_dir runs/topics
    python -m electra_tf.export --import examples/multi_label.py --model_dir runs/topics --format litert

Files: JSON Lines with a text and a list of label names per line (`{"text": ..., "labels": [...]}`;
--text_column, --labels_column), or .csv/.tsv with the labels in one column joined by
--labels_separator ("|"); a text may have no label. The model is the discriminator's [CLS] vector
-> dropout -> one logit per label (the classifier's head, `ElectraTaskModel`), trained with a
sigmoid cross-entropy per label; a label is predicted when its probability reaches --threshold.
Scores: micro- and macro-averaged F1 over the labels and exact match (every label of a text
right); the best epoch by micro F1. Served (TF Serving, LiteRT): `probabilities` [batch, labels],
`labels` (the predicted names, "" for the others) and `label_names`.

What a kind gives the package (docs/finetuning.md, "Write your own kind of task"): a config
section (its fields are the kind's flags and --set keys), a task class registered with
`register_task` (files in, its model, its scores), and a model class registered with Keras
(saved in best.keras, loaded by its registered name) that says what it serves.
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import json
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from electra_tf.finetuning.task import FinetuningTask
from electra_tf.finetuning.text.models import ElectraTaskModel
from electra_tf.finetuning.text.inputs import evaluation_batches, training_batches
from electra_tf.models.device_inputs import pack_text
from electra_tf.models.preprocessing import ElectraTextPreprocessor
from electra_tf.models.signatures import ID_INPUTS, IDS_SIGNATURE, TEXT_INPUT, TEXT_SIGNATURE, ids_endpoint, text_endpoint
from electra_tf.training.task import register_task
from electra_tf.utils.errors import ElectraError
from electra_tf.utils.sections import Section, option

SMALL_FILE, SMALL_FILE_EPOCHS, EPOCHS = 6000, 10, 3  # as the classification kind chooses epochs


@dataclasses.dataclass(frozen=True)
class MultiLabelConfig(Section):
    """The kind's own settings: its files' columns and the threshold of a predicted label."""

    text_column: str = option("text", "the column (JSON Lines field) of the text")
    labels_column: str = option("labels", "the column (field) of a text's labels: a list in JSON Lines, names "
                                          "joined by --labels_separator in .csv/.tsv")
    labels_separator: str = option("|", "what joins the labels in a .csv/.tsv column")
    threshold: float = option(0.5, "the probability from which a label is predicted")

    def check(self) -> None:
        self.require(0 < self.threshold < 1, "threshold", "must be in (0, 1).")
        self.require(bool(self.labels_separator), "labels_separator", "must not be empty.")


class MultiLabelFileError(ElectraError):
    """A file of the task that cannot be read; the message names the file and line."""


@dataclasses.dataclass(frozen=True)
class Examples:
    texts: list
    labels: np.ndarray  # float32 [texts, label names]: 1 where the text has the label


@dataclasses.dataclass(frozen=True)
class EvaluationPart:
    inputs: tf.data.Dataset
    labels: np.ndarray


@dataclasses.dataclass
class MultiLabelData:
    names: list  # the label names, in the model's order
    train: Examples | None  # None evaluating a fine-tuned model only
    eval: Examples
    name: str
    preprocessor: object = None
    evaluation: EvaluationPart | None = None


def read_rows(path: str, config: MultiLabelConfig) -> list[tuple[str, list[str]]]:
    """(text, label names) of each line of a .jsonl, .csv or .tsv file."""
    path = Path(path)
    if not path.is_file():
        raise MultiLabelFileError(f"{path} does not exist.")
    with open(path, newline="", encoding="utf-8-sig") as handle:
        if path.suffix.lower() in (".jsonl", ".json"):
            records = ((number, json.loads(line)) for number, line in enumerate(handle, 1) if line.strip())
        else:
            reader = csv.DictReader(handle, delimiter="\t" if path.suffix.lower() == ".tsv" else ",")
            records = ((reader.line_num, {**record, config.labels_column: _split(record.get(config.labels_column),
                                                                                  config.labels_separator)})
                       for record in reader)
        rows = [_row(path, number, record, config) for number, record in records]
    if not rows:
        raise MultiLabelFileError(f"{path}: no examples.")
    return rows


def _split(cell: str | None, separator: str):
    return None if cell is None else [label.strip() for label in cell.split(separator) if label.strip()]


def _row(path: Path, number: int, record: dict, config: MultiLabelConfig) -> tuple[str, list[str]]:
    text, labels = record.get(config.text_column), record.get(config.labels_column)
    if not isinstance(text, str) or not text.strip():
        raise MultiLabelFileError(f"{path}, line {number}: {config.text_column!r} must be a non-empty text "
                                  "(--text_column names the column).")
    if not isinstance(labels, list) or not all(isinstance(label, str) for label in labels):
        raise MultiLabelFileError(f"{path}, line {number}: {config.labels_column!r} must be a list of label names "
                                  "(--labels_column names the column).")
    return text, labels


def encode(rows, names: list, path: str) -> Examples:
    """The rows with their labels as 0/1 vectors over `names`; a label outside them is an error."""
    index = {name: i for i, name in enumerate(names)}
    labels = np.zeros((len(rows), len(names)), np.float32)
    for row, (_, label_names) in enumerate(rows):
        for name in label_names:
            if name not in index:
                raise MultiLabelFileError(f"{path}: label {name!r} is not one of the training file's (or the "
                                          f"model's) labels: {names}.")
            labels[row, index[name]] = 1.0
    return Examples([text for text, _ in rows], labels)


def scores(probabilities: np.ndarray, gold: np.ndarray, threshold: float) -> dict:
    """Micro and macro F1 over the labels (a label never predicted nor true counts 0 in the macro
    mean, as scikit-learn's zero_division=0), and exact match.

    >>> scores(np.array([[0.9, 0.2], [0.6, 0.7]]), np.array([[1, 0], [0, 1]]), 0.5)["micro_f1"]
    0.8
    """
    predicted = probabilities >= threshold
    gold = gold.astype(bool)
    true_positive = (predicted & gold).sum(axis=0)
    counts = predicted.sum(axis=0) + gold.sum(axis=0)
    per_label = np.where(counts > 0, 2 * true_positive / np.maximum(counts, 1), 0.0)
    micro = 2 * true_positive.sum() / counts.sum() if counts.sum() else 0.0
    return {"micro_f1": round(float(micro), 6), "macro_f1": round(float(per_label.mean()), 6),
            "exact_match": float((predicted == gold).all(axis=1).mean())}


@keras.saving.register_keras_serializable(package="multi_label")
class ElectraMultiLabelClassifier(ElectraTaskModel):
    """Texts -> one logit per label [B, labels]; `threshold` is where a label is predicted."""

    def __init__(self, backbone, num_classes: int, dropout: float = 0.1, preprocessor=None, label_names=None,
                 threshold: float = 0.5, **kwargs):
        super().__init__(backbone, num_classes, dropout, preprocessor, label_names, **kwargs)
        self.threshold = float(threshold)

    def call(self, inputs, training=None):
        first_token = self.backbone.encode(inputs, training=training)[:, 0, :]
        return keras.ops.cast(self.head(self.dropout(first_token, training=training)), "float32")

    def compile(self, optimizer="adamw", loss="auto", metrics="auto", **kwargs):
        loss = keras.losses.BinaryCrossentropy(from_logits=True) if loss == "auto" else loss
        super().compile(optimizer=optimizer, loss=loss, metrics=[] if metrics == "auto" else metrics, **kwargs)

    def get_config(self):
        return {**super().get_config(), "threshold": self.threshold}

    # --- what it serves ----------------------------------------------------------------------------
    def _outputs(self, inputs) -> dict:
        probabilities = tf.sigmoid(tf.cast(self(inputs, training=False), tf.float32))
        names = tf.constant(self.label_names)
        return {"probabilities": probabilities, "label_names": tf.tile(names[tf.newaxis], [tf.shape(probabilities)[0], 1]),
                "labels": tf.where(probabilities >= self.threshold, names[tf.newaxis], "")}

    def serving_endpoints(self, tokenizer, max_seq_length: int) -> dict:
        def outputs(token_ids, segment_ids, padding_mask):
            return self._outputs({"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask})

        return {TEXT_SIGNATURE: (text_endpoint(tokenizer, max_seq_length, outputs), TEXT_INPUT),
                IDS_SIGNATURE: (ids_endpoint(max_seq_length, tokenizer.vocabulary_size, outputs), ID_INPUTS)}

    def serving_task(self, max_seq_length: int) -> dict:
        return {"label_names": list(self.label_names), "threshold": self.threshold, "multi_label": True}

    def litert_endpoint(self, lite_tokenizer, max_seq_length: int):
        """Text -> probabilities [b, labels] and label_names [labels] (LiteRT has no string kernels
        for the per-row names)."""
        def endpoint(text):
            inputs = pack_text(lite_tokenizer.tokenize(text), lite_tokenizer.tokenizer, max_seq_length)
            return {"probabilities": tf.sigmoid(tf.cast(self(inputs, training=False), tf.float32)),
                    "label_names": tf.constant(self.label_names)}

        return endpoint, ["text"]


@register_task("multi_label")
@dataclasses.dataclass(frozen=True)
class MultiLabelTask(FinetuningTask):
    """Any number of labels a text: .jsonl label lists or .csv/.tsv joined labels; micro/macro F1."""

    section = MultiLabelConfig
    model_names = ("multi_label>ElectraMultiLabelClassifier",)

    def read_files(self, labels=None) -> MultiLabelData:
        config, files = self.config.task, self.config.files
        evaluation = read_rows(files.eval, config)
        if labels is not None:  # evaluating a fine-tuned model: its labels
            return MultiLabelData(labels, None, encode(evaluation, labels, files.eval), Path(files.eval).stem)
        train = read_rows(files.train, config)
        names = sorted({name for _, label_names in train for name in label_names})
        if len(names) < 2:
            raise MultiLabelFileError(f"{files.train}: {len(names)} label(s) in the whole file: nothing to learn.")
        return MultiLabelData(names, encode(train, names, files.train), encode(evaluation, names, files.eval),
                              Path(files.train).stem)

    def labels_of(self, model) -> list:
        return list(model.label_names)

    def prepare(self, data: MultiLabelData, tokenizer, max_seq_length: int, seed: int):
        data.preprocessor = ElectraTextPreprocessor(tokenizer, max_seq_length)
        train = None
        if data.train is not None:
            train = training_batches(data.train.texts, data.train.labels, len(data.train.texts), data.preprocessor,
                                     self.config.run.update_batch_size, seed)
        data.evaluation = self._part(data.eval, data.preprocessor)
        return train, data

    def _part(self, examples: Examples, preprocessor) -> EvaluationPart:
        return EvaluationPart(evaluation_batches(examples.texts, preprocessor, self.config.run.update_batch_size),
                              examples.labels)

    def evaluation_part(self, path: str, data: MultiLabelData, tokenizer, max_seq_length: int) -> EvaluationPart:
        return self._part(encode(read_rows(path, self.config.task), data.names, path), data.preprocessor)

    def score(self, model, data: MultiLabelData, part: EvaluationPart):
        probabilities = tf.sigmoid(model.predict(part.inputs, verbose=0)).numpy()
        values = scores(probabilities, part.labels, self.config.task.threshold)
        return {**values, "score": values["micro_f1"]}, {}

    def default_epochs(self, data: MultiLabelData) -> int:
        return SMALL_FILE_EPOCHS if len(data.train.texts) < SMALL_FILE else EPOCHS

    def counts(self, data: MultiLabelData) -> tuple[int, int]:
        return len(data.train.texts) if data.train is not None else 0, len(data.eval.texts)

    def metric_names(self, data: MultiLabelData) -> tuple:
        return ("micro_f1", "macro_f1", "exact_match")

    def build_task_model(self, backbone, data: MultiLabelData, config):
        return ElectraMultiLabelClassifier(backbone, len(data.names), dropout=config.model.dropout,
                                           preprocessor=data.preprocessor, label_names=data.names,
                                           threshold=self.config.task.threshold)

    def describe_data(self, data: MultiLabelData) -> list[str]:
        if data.train is None:
            return [f"{len(data.names)} labels: {', '.join(data.names)}"]
        counts = collections.Counter(dict(zip(data.names, data.train.labels.sum(axis=0).astype(int))))
        per_text = data.train.labels.sum(axis=1).mean()
        return [f"{len(data.names)} labels: " + ", ".join(f"{name!r} ({count:,})" for name, count in counts.items())
                + f"; {per_text:.2f} a training text"]

    def data_summary(self, data: MultiLabelData) -> dict:
        return {"labels": data.names, "threshold": self.config.task.threshold}
