"""The kind `prompt`: classes from the discriminator's replaced-token head and a template, with no
new parameters (`prompt_model.ElectraPromptClassifier`; the scoring rule is there).

    zero-shot   --eval_only with a pre-trained discriminator: no training step, the trainer's
                evaluation-only path scores --eval (and --test), the folder keeps the model
                (best.keras) and exports it like any kind's
    few-shot    --train (optionally --shots K: K examples per class, drawn with --seed): the
                same scores trained with cross-entropy over softmax(-score), from the pre-trained
                head (the paper's prompt fine-tuning)

The classes are the ones --label_words names, in its order; every label in the files must be one
of them. Scores: accuracy, macro F1 and per class the gold, predicted and correct counts.
"""

from __future__ import annotations

import collections
import dataclasses
from pathlib import Path

import numpy as np
import tensorflow as tf

from electra_tf.finetuning.pretrained import saved_model_class
from electra_tf.finetuning.task import FinetuningTask
from electra_tf.finetuning.text.classification import (EvaluationPart, LabelledText, default_epochs,
                                                       labelled_batches, text_features)
from electra_tf.finetuning.text.inputs import training_batches
from electra_tf.finetuning.text.metrics import compute
from electra_tf.finetuning.text.prompt_model import ElectraPromptClassifier
from electra_tf.finetuning.text.prompts import LabelWords, PromptPreprocessor, Template
from electra_tf.finetuning.text.task_data import Columns, LabelSpace, TaskData, read_examples, sample_shots, task_name
from electra_tf.training.task import register_task
from electra_tf.utils.sections import Section, option

REGISTERED_NAME = "electra_tf>ElectraPromptClassifier"
METRICS = ("accuracy", "macro_f1")


@dataclasses.dataclass(frozen=True)
class PromptConfig(Section):
    """The template, the label words, the files' columns and the few-shot sample."""

    template: str | None = option(None, 'the text the discriminator reads, with {text} (pairs: {text_a} and '
                                        '{text_b}) and one {label}, e.g. "{text} It was {label}."')
    label_words: str | None = option(
        None, "a word (or phrase) per class, CLASS=WORD, alternatives joined by '|': positive=great "
              "'negative=very bad|terrible'", joined_by="; ", metavar="CLASS=WORD")
    shots: int | None = option(None, "train on K examples of each class, drawn from --train with --seed (the "
                                     "few-shot sample)", metavar="K")
    text_column: str | None = option("text", "the column (JSON Lines field) of the text")
    text_pair_column: str | None = option(None, "the second text of sentence-pair tasks")
    label_column: str | None = option("label", "the column (field) of the label")

    def check(self) -> None:
        self.at_least_one("shots")
        if self.template is not None:
            self.require(Template.parse(self.template).pair == (self.text_pair_column is not None), "text_pair_column",
                         "a template with {text_b} reads pairs: name the second text's column with "
                         "--text_pair_column (and a template without {text_b} takes none).")
        if self.label_words is not None:
            LabelWords.parse(self.label_words)

    def check_complete(self) -> None:
        self.require(self.template is not None, "template", 'give one, e.g. --template "{text} It was {label}."')
        self.require(self.label_words is not None, "label_words", "give a word per class, e.g. --label_words "
                                                                  "positive=great negative=terrible")

    @property
    def words(self) -> LabelWords:
        return LabelWords.parse(self.label_words)

    @property
    def columns(self) -> Columns:
        return Columns(self.text_column, self.text_pair_column, self.label_column)


@register_task("prompt")
@dataclasses.dataclass(frozen=True)
class PromptTask(FinetuningTask):
    """Zero- and few-shot classes from the replaced-token head and a template (no new parameters)."""

    section = PromptConfig
    model_names = (REGISTERED_NAME,)
    uses_replaced_token_head = True

    def evaluates_finetuned_model(self) -> bool:
        return saved_model_class(self.config.source.pretrained) == REGISTERED_NAME

    def read_files(self, labels=None) -> LabelledText:
        config, files = self.config.task, self.config.files
        names = list(config.words.classes)
        space = LabelSpace(names=names, metrics=METRICS, origin="--label_words")
        evaluation = read_examples(files.eval, space, config.columns)
        if self.config.run.eval_only:
            return LabelledText(TaskData(None, evaluation, space, ""))
        train = read_examples(files.train, space, config.columns)  # labels by the words' classes, in their order
        if config.shots:
            train = sample_shots(train, names, config.shots, self.config.run.seed)
        return LabelledText(TaskData(train, evaluation, space, task_name(Path(files.train))))

    def labels_of(self, model) -> list:
        return list(model.label_names)

    def prepare(self, data: LabelledText, tokenizer, max_seq_length: int, seed: int):
        config = self.config.task
        preprocessor = PromptPreprocessor(tokenizer, max_seq_length, template=config.template,
                                          label_words=config.words.spec())
        data = dataclasses.replace(data, preprocessor=preprocessor)
        train = None
        if data.task.train is not None:
            train = training_batches(text_features(data.task.train), tf.constant(data.task.train.labels, tf.int32),
                                     len(data.task.train), preprocessor, self.config.run.update_batch_size, seed)
        evaluation = labelled_batches(data.task.eval, preprocessor, self.config.run.update_batch_size)
        return train, dataclasses.replace(data, evaluation=evaluation)

    def evaluation_part(self, path: str, data: LabelledText, tokenizer, max_seq_length: int) -> EvaluationPart:
        return labelled_batches(read_examples(path, data.task.labels, self.config.task.columns), data.preprocessor,
                                self.config.run.update_batch_size)

    def score(self, model, data: LabelledText, part: EvaluationPart):
        logits = model.predict(part.inputs, verbose=0)
        names, gold = data.task.labels.names, np.asarray(part.labels)
        values = compute(METRICS, logits, gold, len(names))
        predicted = logits.argmax(axis=-1)
        values["per_class"] = {name: {"gold": int((gold == c).sum()), "predicted": int((predicted == c).sum()),
                                      "correct": int(((gold == c) & (predicted == c)).sum())}
                               for c, name in enumerate(names)}
        return values, {}

    def default_epochs(self, data: LabelledText) -> int:
        return default_epochs(len(data.task.train))

    def counts(self, data: LabelledText) -> tuple[int, int]:
        return len(data.task.train) if data.task.train is not None else 0, len(data.task.eval)

    def metric_names(self, data: LabelledText) -> tuple:
        return (*METRICS, "per_class")

    def build_task_model(self, backbone, data: LabelledText, config):
        return ElectraPromptClassifier(backbone, data.preprocessor)

    def describe_data(self, data: LabelledText) -> list[str]:
        config, layout = self.config.task, data.preprocessor.layout
        words = config.words
        lines = [f"template {config.template!r}; {layout.num_classes} classes: "
                 + ", ".join(f"{name!r} ({' | '.join(map(repr, phrases))})"
                             for name, phrases in zip(words.classes, words.words)),
                 f"{len(layout.variants)} filled templates a text; {layout.text_budget} pieces left for the text"
                 + ("s" if layout.pair else "")]
        if data.task.train is not None:
            counts = collections.Counter(data.task.train.labels)
            sample = f" ({config.shots} a class, drawn with seed {self.config.run.seed})" if config.shots else ""
            lines.append(f"training examples{sample}: " + ", ".join(
                f"{name!r} {counts[c]:,}" for c, name in enumerate(words.classes)))
        return lines

    def data_summary(self, data: LabelledText) -> dict:
        config = self.config.task
        return {"labels": data.task.labels.names, "template": config.template,
                "label_words": config.words.spec(), "shots": config.shots,
                "zero_shot": data.task.train is None}
