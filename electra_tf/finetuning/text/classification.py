"""`ClassificationTask`: one text or a pair -> a class or a score (classes, sentence pairs,
regression, GLUE), an `ElectraClassifier` fine-tuned by the trainer. See `finetuning/task.py`.

Before training it names every class with its training count, warns about a class with fewer
than `FEW_EXAMPLES` examples (often a mistyped label, which becomes a class of its own), and
says which class a binary F1 is computed for (the second label in order, GLUE's "1").
"""

from __future__ import annotations

import collections
import dataclasses
import sys

from electra_tf.finetuning.config import ClassificationConfig
from electra_tf.finetuning.task import FinetuningTask
from electra_tf.training.task import register_task

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


@dataclasses.dataclass
class LabelledText:
    """The task's files (`task_data.TaskData`) and, once prepared, its features."""

    task: object  # task_data.TaskData
    glue: object | None = None  # task_data.GlueTask
    preprocessor: object = None
    eval_inputs: object = None  # tf.data.Dataset of eval input batches
    eval_labels: object = None

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
    kind_config: ClassificationConfig = ClassificationConfig()

    def read_files(self) -> LabelledText:
        from electra_tf.finetuning.text.task_data import glue_task, read_task_files

        config = self.kind_config
        glue = glue_task(config.glue) if config.glue else None
        if glue is not None:
            return LabelledText(read_task_files(self.files.train, self.files.eval, glue=glue), glue)
        return LabelledText(read_task_files(self.files.train, self.files.eval, regression=config.regression,
                                            columns=config.columns))

    def preprocessor(self, tokenizer, max_seq_length: int):
        from electra_tf.models.preprocessing import ElectraTextPreprocessor

        return ElectraTextPreprocessor(tokenizer, max_seq_length)

    def prepare(self, data: LabelledText, tokenizer, max_seq_length: int, seed: int):
        preprocessor = self.preprocessor(tokenizer, max_seq_length)
        train, eval_inputs = make_datasets(data.task, preprocessor, self.run.update_batch_size, seed)
        return train, dataclasses.replace(data, preprocessor=preprocessor, eval_inputs=eval_inputs,
                                          eval_labels=data.task.eval.labels)

    def default_epochs(self, data: LabelledText) -> int:
        return default_epochs(len(data.task.train), data.glue.name if data.glue else None)

    def counts(self, data: LabelledText) -> tuple[int, int]:
        return len(data.task.train), len(data.task.eval)

    def metric_names(self, data: LabelledText) -> tuple:
        return tuple(data.task.labels.metrics)

    def build_task_model(self, backbone, data: LabelledText, config):
        from electra_tf.finetuning.text.classifiers import ElectraClassifier

        labels = data.task.labels
        return ElectraClassifier(backbone, labels.num_classes, dropout=config.model.dropout,
                                 preprocessor=data.preprocessor, label_names=labels.names,
                                 score_range=labels.score_range, text_pair=data.task.train.text_pairs is not None)

    def evaluate(self, model, inputs, final: bool = False):
        from electra_tf.finetuning.text.metrics import predicted_metrics

        data = inputs.data
        return predicted_metrics(model, data.eval_inputs, data.eval_labels, self.metric_names(data),
                                 data.task.labels.num_classes), {}

    def describe_data(self, data: LabelledText) -> list[str]:
        return describe_classes(data.task, data.glue) if data.task.labels.names else ["regression"]

    def data_summary(self, data: LabelledText) -> dict:
        labels = data.task.labels
        summary = {"tagging": False, "labels": labels.names, "score_range": labels.score_range}
        if labels.names:
            summary["label_counts"] = dict(class_counts(data.task))
            if "f1" in labels.metrics:
                summary["f1_positive_class"] = labels.names[1]
        return summary


def make_datasets(task, preprocessor, batch_size: int, seed: int):
    """(train (inputs, label) batches, shuffled each epoch; eval input batches).

    Texts are tokenized once, in large batches, and the token ids cached: every epoch (and
    every evaluation) then reads ids instead of tokenizing again. Tagging examples are word
    lists and tag lists of varying length, batched as ragged tensors.
    """
    import tensorflow as tf

    if task.tagging:
        def features(examples):
            return tf.ragged.constant(examples.texts, tf.string)

        train_labels = tf.ragged.constant(task.train.labels, tf.int32)
        batched = lambda dataset, size: dataset.ragged_batch(size)  # noqa: E731
    else:
        def features(examples):
            return examples.texts if examples.text_pairs is None else (examples.texts, examples.text_pairs)

        train_labels = tf.constant(task.train.labels, tf.float32 if task.labels.num_classes == 1 else tf.int32)
        batched = lambda dataset, size: dataset.batch(size)  # noqa: E731
    train = tf.data.Dataset.from_tensor_slices((features(task.train), train_labels))
    # unbatch() forgets the example count; restate it so Keras knows the steps per epoch.
    train = batched(train, 1024).map(preprocessor).unbatch().apply(
        tf.data.experimental.assert_cardinality(len(task.train))).cache()
    train = train.shuffle(len(task.train), seed=seed, reshuffle_each_iteration=True).batch(batch_size)
    # A 1-tuple, so a (text, text_pair) element reaches the preprocessor as one argument.
    evaluation = batched(tf.data.Dataset.from_tensor_slices((features(task.eval),)), batch_size)
    return train, evaluation.map(preprocessor).cache()
