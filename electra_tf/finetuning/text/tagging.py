"""The kind `tagging`: a tag per word (part of speech, entity tags), an `ElectraTokenClassifier`
scored at each word's first piece. Entity tags (B-/I-/E-/S- prefixes, or `--task conll2003`)
are also scored by entity (`entities.py`), the best epoch is the one with the highest entity
F1, and the output folder gets predictions.conll (word, gold tag, predicted tag). See
`finetuning/task.py`."""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from electra_tf.finetuning.task import FinetuningTask
from electra_tf.finetuning.text.classification import default_epochs
from electra_tf.finetuning.text.models import ElectraTokenClassifier
from electra_tf.finetuning.text.entities import detect_scheme, entity_scores, is_entity_tag_set
from electra_tf.finetuning.text.inputs import evaluation_batches, training_batches
from electra_tf.finetuning.text.task_data import (Columns, LabelSpace, TaskData, read_tagged_examples,
                                                  read_tagging_files)
from electra_tf.models.preprocessing import IGNORE_LABEL, ElectraWordPreprocessor
from electra_tf.training.task import register_task
from electra_tf.utils.sections import Section, option

ENTITY_TASKS = ("conll2003",)
ENTITY_METRICS = ("entity_f1", "entity_precision", "entity_recall", "accuracy", "per_type")


@dataclasses.dataclass(frozen=True)
class TaggingConfig(Section):
    """A tag per word. Columns None: the file's defaults (CoNLL columns; JSON Lines `tokens` and
    `tags`); `entity_task` (conll2003, set by --task) names the task and scores entities; entity
    tags are scored by conlleval's chunk rules, or seqeval's strict ones (`strict_entities`)."""

    text_column: str | None = None
    label_column: str | None = None
    entity_task: str | None = None
    strict_entities: bool = option(False, "entity tags: count only well-formed chunks (seqeval's strict mode) "
                                          "instead of conlleval's rules")

    @property
    def columns(self) -> Columns | None:
        if self.text_column is None and self.label_column is None:
            return None
        return Columns(self.text_column or "tokens", None, self.label_column or "tags")


@dataclasses.dataclass(frozen=True)
class EvaluationPart:
    """Words and tags of a file, as batches of ids and the word-piece labels the scores read."""

    examples: object  # task_data.Examples
    inputs: tf.data.Dataset
    piece_labels: np.ndarray  # [N, L], each scored word's first piece labelled, IGNORE_LABEL elsewhere
    unscored_words: int  # words past max_seq_length


@dataclasses.dataclass
class TaggedText:
    task: TaskData
    entity_tags: bool = False
    scheme: str | None = None  # the entity tag scheme (IOB1, IOB2, IOBES), when entity_tags
    preprocessor: object = None
    evaluation: EvaluationPart | None = None

    @property
    def name(self) -> str:
        return self.task.name


@register_task("tagging")
@dataclasses.dataclass(frozen=True)
class TaggingTask(FinetuningTask):
    """A tag per word: CoNLL files or .jsonl word and tag lists; entity tags also scored by entity."""

    section = TaggingConfig
    flag = "--tagging"
    task_names = ENTITY_TASKS
    model_names = ("electra_tf>ElectraTokenClassifier",)
    train_unit = eval_unit = "sentences"

    @classmethod
    def task_values(cls, task_name: str) -> dict:
        return {"entity_task": task_name.lower()}

    def read_files(self, labels: LabelSpace | None = None) -> TaggedText:
        config, files = self.config.task, self.config.files
        if labels is None:
            task = read_tagging_files(files.train, files.eval, config.columns)
        else:  # evaluating a fine-tuned model: its tags, the eval file only
            task = TaskData(None, read_tagged_examples(files.eval, labels.names, config.columns), labels, "")
        if config.entity_task:
            task.name = config.entity_task
        entity_tags = bool(config.entity_task) or is_entity_tag_set(task.labels.names)
        return TaggedText(task, entity_tags, detect_scheme(task.labels.names) if entity_tags else None)

    def labels_of(self, model) -> LabelSpace:
        return LabelSpace(names=list(model.label_names), metrics=("accuracy",))

    def prepare(self, data: TaggedText, tokenizer, max_seq_length: int, seed: int):
        preprocessor = ElectraWordPreprocessor(tokenizer, max_seq_length)
        data = dataclasses.replace(data, preprocessor=preprocessor)
        train = None
        if data.task.train is not None:
            train = training_batches(tf.ragged.constant(data.task.train.texts, tf.string),
                                     tf.ragged.constant(data.task.train.labels, tf.int32), len(data.task.train),
                                     preprocessor, self.config.run.update_batch_size, seed, ragged=True)
        return train, dataclasses.replace(data, evaluation=self._part(data.task.eval, preprocessor))

    def _part(self, examples, preprocessor) -> EvaluationPart:
        words = tf.ragged.constant(examples.texts, tf.string)
        _, labels = preprocessor(words, tf.ragged.constant(examples.labels, tf.int32))
        labels = labels.numpy()
        unscored = sum(map(len, examples.labels)) - int((labels != IGNORE_LABEL).sum())
        inputs = evaluation_batches(words, preprocessor, self.config.run.update_batch_size, ragged=True)
        return EvaluationPart(examples, inputs, labels, unscored)

    def evaluation_part(self, path: str, data: TaggedText, tokenizer, max_seq_length: int) -> EvaluationPart:
        return self._part(read_tagged_examples(path, data.task.labels.names, self.config.task.columns),
                          data.preprocessor)

    def score(self, model, data: TaggedText, part: EvaluationPart):
        """Per-word accuracy (and entity scores for entity tags), and predictions.conll."""
        names = data.task.labels.names
        outputs = model.predict(part.inputs, verbose=0).argmax(axis=-1)
        gold = [[names[tag] for tag in tags] for tags in part.examples.labels]
        predicted, right, scored = [], 0, 0
        for row, gold_tags in enumerate(gold):
            starts = part.piece_labels[row] != IGNORE_LABEL  # each scored word's first piece, in order
            tags = [names[tag] for tag in outputs[row][starts]]
            right += sum(p == g for p, g in zip(tags, gold_tags))
            scored += len(tags)
            predicted.append(tags + ["O"] * (len(gold_tags) - len(tags)))  # words cut off: no entity
        values = {"accuracy": right / scored if scored else 0.0}
        if data.entity_tags:
            scores = entity_scores(gold, predicted, strict=self.config.task.strict_entities, scheme=data.scheme)
            values = {"entity_f1": scores["entity_f1"], "entity_precision": scores["entity_precision"],
                      "entity_recall": scores["entity_recall"], **values, "per_type": scores["per_type"]}
        values["score"] = values.get("entity_f1", values["accuracy"])
        conll = "".join("".join(f"{word} {g} {p}\n" for word, g, p in zip(words, gold_tags, tags)) + "\n"
                        for words, gold_tags, tags in zip(part.examples.texts, gold, predicted))
        return values, {"predictions.conll": conll}

    def default_epochs(self, data: TaggedText) -> int:
        return default_epochs(len(data.task.train))

    def counts(self, data: TaggedText) -> tuple[int, int]:
        return len(data.task.train) if data.task.train is not None else 0, len(data.task.eval)

    def metric_names(self, data: TaggedText) -> tuple:
        return ENTITY_METRICS if data.entity_tags else ("accuracy",)

    def build_task_model(self, backbone, data: TaggedText, config):
        return ElectraTokenClassifier(backbone, data.task.labels.num_classes, dropout=config.model.dropout,
                                      preprocessor=data.preprocessor, label_names=data.task.labels.names)

    def describe_data(self, data: TaggedText) -> list[str]:
        unscored, strict = data.evaluation.unscored_words, self.config.task.strict_entities
        scoring = (f"; entities scored by {'strict ' + data.scheme if strict else 'conlleval'} chunks, the best epoch "
                   "by entity F1" if data.entity_tags else "")
        words = (f"; {sum(map(len, data.task.train.labels)):,} tagged training words"
                 if data.task.train is not None else "")
        return [f"{data.task.labels.num_classes} tags{words}; accuracy is per word (its first word piece)"
                f"{f', {unscored:,} eval words past max_seq_length not scored' if unscored else ''}{scoring}"]

    def data_summary(self, data: TaggedText) -> dict:
        return {"labels": data.task.labels.names, "score_range": None,
                "unscored_eval_words": data.evaluation.unscored_words,
                **({"entity_scheme": data.scheme, "strict_entities": self.config.task.strict_entities}
                   if data.entity_tags else {})}
