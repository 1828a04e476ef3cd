"""The kind `classification`: one text or a pair -> a class or a score (classes, sentence pairs,
regression, the GLUE tasks by `--task NAME`), an `ElectraClassifier` fine-tuned by the trainer.
See `finetuning/task.py`.

Before training it names every class with its training count, warns about a class with fewer
than `FEW_EXAMPLES` examples (often a mistyped label, which becomes a class of its own), and
says which class a binary F1 is computed for (the second label in order, GLUE's "1").
"""

from __future__ import annotations

import collections
import dataclasses
import sys

import tensorflow as tf

from electra_tf.finetuning.task import FinetuningTask
from electra_tf.finetuning.text.models import ElectraClassifier
from electra_tf.finetuning.text.inputs import evaluation_batches, training_batches
from electra_tf.finetuning.text.metrics import predicted_metrics
from electra_tf.finetuning.text.task_data import (GLUE_TASKS, Columns, LabelSpace, TaskData, default_metrics, glue_task,
                                                  is_glue_task, read_examples, read_task_files, sample_shots)
from electra_tf.models.preprocessing import ElectraTextPreprocessor
from electra_tf.training.task import register_task
from electra_tf.utils.sections import Section, option

# Epochs: the official 3, and 10 for the small GLUE tasks (RTE 2.5k, STS-B 5.7k examples). For
# files of your own the size decides: 10 below 6,000 training examples. (Officially MRPC, 3.7k,
# gets 3: with --task MRPC it does here too.) Three epochs of a few hundred examples are a few
# dozen steps, which leaves a classifier at the majority class.
OFFICIAL_EPOCHS, SMALL_TASK_EPOCHS, SMALL_TASK_EXAMPLES = 3, 10, 6000
GLUE_SMALL_TASKS = ("RTE", "STS-B")
FEW_EXAMPLES = 5  # a class with fewer training examples is warned about


def default_epochs(num_train_examples: int, glue_name: str | None = None) -> int:
    """Official epochs for GLUE tasks; by training-set size for other data.

    >>> default_epochs(393_000, "MNLI"), default_epochs(2_490, "RTE"), default_epochs(3_668, "MRPC")
    (3, 10, 3)
    >>> default_epochs(250), default_epochs(50_000)
    (10, 3)
    """
    if glue_name is not None:
        return SMALL_TASK_EPOCHS if glue_name in GLUE_SMALL_TASKS else OFFICIAL_EPOCHS
    return SMALL_TASK_EPOCHS if num_train_examples < SMALL_TASK_EXAMPLES else OFFICIAL_EPOCHS


@dataclasses.dataclass(frozen=True)
class ClassificationConfig(Section):
    """Classes, sentence pairs (`text_pair_column`) or a score (`regression`); `glue` (set by
    `--task NAME`) reads a GLUE task's TSV layout and reports its official metrics instead."""

    text_column: str | None = option(
        "text", "the column (JSON Lines field) of the text; tagging: of the word list (default there: tokens in "
        ".jsonl files, the first CoNLL column)")
    text_pair_column: str | None = option(None, "the second text of sentence-pair tasks")
    label_column: str | None = option(
        "label", "the column (field) of the label; tagging: of the tag list (default there: tags in .jsonl files, "
        "the last CoNLL column)")
    regression: bool = option(False, "numeric labels, squared-error loss")
    shots: int | None = option(None, "train on K examples of each class, drawn from --train with --seed (the "
                                     "few-shot sample)", metavar="K")
    glue: str | None = None

    def check(self) -> None:
        self.require(bool(self.text_column), "text_column", "name the text's column.")
        self.require(bool(self.label_column), "label_column", "name the label's column.")
        self.at_least_one("shots")
        self.require(not (self.shots and self.regression), "shots", "draws examples per class: a regression has none.")
        if self.glue is not None:
            glue_task(self.glue)

    @property
    def columns(self) -> Columns:
        return Columns(self.text_column, self.text_pair_column, self.label_column)


@dataclasses.dataclass(frozen=True)
class EvaluationPart:
    inputs: tf.data.Dataset  # batches of token ids
    labels: object  # numpy array of class ids or scaled scores


@dataclasses.dataclass
class LabelledText:
    """The task's files (`task_data.TaskData`) and, once prepared, its preprocessor and evaluation."""

    task: object  # task_data.TaskData
    glue: object | None = None  # task_data.GlueTask
    preprocessor: object = None
    evaluation: EvaluationPart | None = None

    @property
    def name(self) -> str:
        return self.task.name


def class_counts(task) -> list[tuple[str, int]]:
    """(class name, training examples) in the classes' order."""
    counts = collections.Counter(task.train.labels)
    return [(name, counts[index]) for index, name in enumerate(task.labels.names)]


def describe_classes(task, glue=None) -> list[str]:
    """The classes with their counts, the F1's positive class, and a warning line (stderr) for
    a class of fewer than FEW_EXAMPLES training examples."""
    counts = class_counts(task)
    lines = [f"{len(counts)} classes: " + ", ".join(f"{name!r} ({count:,})" for name, count in counts)]
    if "f1" in task.labels.metrics:
        lines.append(f"f1 is the F1 of class {task.labels.names[1]!r} (the second label in order"
                     + (f", as GLUE {glue.name} scores it)" if glue else ")"))
    rare = [(name, count) for name, count in counts if count < FEW_EXAMPLES]
    if rare:
        listed = ", ".join(f"{name!r} ({count} example{'s' if count != 1 else ''})" for name, count in rare)
        print(f"warning: {task.train.source}: class(es) {listed} have fewer than {FEW_EXAMPLES} training examples: "
              "a mistyped label becomes a class of its own. Fix or remove those rows if they are typos.",
              file=sys.stderr, flush=True)
    return lines


@register_task("classification")
@dataclasses.dataclass(frozen=True)
class ClassificationTask(FinetuningTask):
    """Classes, sentence pairs or a score of one text or a pair; the GLUE tasks by --task NAME."""

    section = ClassificationConfig
    default = True
    task_names = tuple(task.name for task in GLUE_TASKS.values())
    model_names = ("electra_tf>ElectraClassifier",)

    @classmethod
    def runs_task(cls, task_name: str) -> bool:
        return is_glue_task(task_name)

    @classmethod
    def task_values(cls, task_name: str) -> dict:
        return {"glue": glue_task(task_name).name}

    def read_files(self, labels: LabelSpace | None = None) -> LabelledText:
        config, files = self.config.task, self.config.files
        glue = glue_task(config.glue) if config.glue else None
        columns = None if glue else config.columns
        if labels is not None:  # evaluating a fine-tuned model: its labels, the eval file only
            examples = read_examples(files.eval, labels, columns, glue)
            return LabelledText(TaskData(None, examples, labels, glue.name if glue else ""), glue)
        task = read_task_files(files.train, files.eval, columns, glue, config.regression)
        if config.shots:
            task.train = sample_shots(task.train, task.labels.names, config.shots, self.config.run.seed)
        return LabelledText(task, glue)

    def labels_of(self, model) -> LabelSpace:
        glue = glue_task(self.config.task.glue) if self.config.task.glue else None
        names = list(model.label_names) if model.label_names is not None else None
        return LabelSpace(names=names, score_range=model.score_range, metrics=default_metrics(names, glue))

    def prepare(self, data: LabelledText, tokenizer, max_seq_length: int, seed: int):
        preprocessor = ElectraTextPreprocessor(tokenizer, max_seq_length)
        data = dataclasses.replace(data, preprocessor=preprocessor)
        train = None
        if data.task.train is not None:
            labels = tf.constant(data.task.train.labels, tf.float32 if data.task.labels.num_classes == 1 else tf.int32)
            train = training_batches(text_features(data.task.train), labels, len(data.task.train), preprocessor,
                                     self.config.run.update_batch_size, seed)
        evaluation = labelled_batches(data.task.eval, preprocessor, self.config.run.update_batch_size)
        return train, dataclasses.replace(data, evaluation=evaluation)

    def evaluation_part(self, path: str, data: LabelledText, tokenizer, max_seq_length: int) -> EvaluationPart:
        columns = None if data.glue else self.config.task.columns
        return labelled_batches(read_examples(path, data.task.labels, columns, data.glue), data.preprocessor,
                                self.config.run.update_batch_size)

    def score(self, model, data: LabelledText, part: EvaluationPart):
        return predicted_metrics(model, part.inputs, part.labels, self.metric_names(data),
                                 data.task.labels.num_classes), {}

    def default_epochs(self, data: LabelledText) -> int:
        return default_epochs(len(data.task.train), data.glue.name if data.glue else None)

    def counts(self, data: LabelledText) -> tuple[int, int]:
        return len(data.task.train) if data.task.train is not None else 0, len(data.task.eval)

    def metric_names(self, data: LabelledText) -> tuple:
        return tuple(data.task.labels.metrics)

    def build_task_model(self, backbone, data: LabelledText, config):
        labels = data.task.labels
        return ElectraClassifier(backbone, labels.num_classes, dropout=config.model.dropout,
                                 preprocessor=data.preprocessor, label_names=labels.names,
                                 score_range=labels.score_range, text_pair=data.task.eval.text_pairs is not None)

    def describe_data(self, data: LabelledText) -> list[str]:
        if not data.task.labels.names:
            return ["regression"]
        if data.task.train is None:
            return [f"{data.task.labels.num_classes} classes: {', '.join(map(repr, data.task.labels.names))}"]
        return describe_classes(data.task, data.glue)

    def data_summary(self, data: LabelledText) -> dict:
        labels = data.task.labels
        summary = {"labels": labels.names, "score_range": labels.score_range}
        if labels.names and data.task.train is not None:
            summary["label_counts"] = dict(class_counts(data.task))
        if labels.names and "f1" in labels.metrics:
            summary["f1_positive_class"] = labels.names[1]
        return summary


def text_features(examples):
    """A file's texts as a preprocessor takes them: the texts, or (texts, pairs)."""
    return examples.texts if examples.text_pairs is None else (examples.texts, examples.text_pairs)


def labelled_batches(examples, preprocessor, batch_size: int) -> EvaluationPart:
    """A file's examples as evaluation batches of model inputs, beside their labels."""
    return EvaluationPart(evaluation_batches(text_features(examples), preprocessor, batch_size), examples.labels)
