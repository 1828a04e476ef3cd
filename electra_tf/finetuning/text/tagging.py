"""`TaggingTask`: a tag per word (part of speech, entity tags), an `ElectraTokenClassifier`
scored at each word's first piece. Entity tags (B-/I-/E-/S- prefixes, or the `conll2003`
task) are also scored by entity (`entities.py`), and the best epoch is the one with the
highest entity F1. See `finetuning/task.py`."""

from __future__ import annotations

import dataclasses

from electra_tf.finetuning.config import TaggingConfig
from electra_tf.finetuning.text.classification import ClassificationTask, LabelledText, make_datasets
from electra_tf.training.task import register_task

ENTITY_TASKS = ("conll2003",)
ENTITY_METRICS = ("entity_f1", "entity_precision", "entity_recall", "accuracy", "per_type")


@dataclasses.dataclass
class TaggedText(LabelledText):
    entity_tags: bool = False
    scheme: str | None = None  # the entity tag scheme (IOB1, IOB2, IOBES), when entity_tags
    unscored_words: int = 0  # eval words past max_seq_length


@register_task("tagging")
@dataclasses.dataclass(frozen=True)
class TaggingTask(ClassificationTask):
    kind_config: TaggingConfig = TaggingConfig()
    train_unit = eval_unit = "sentences"

    def read_files(self) -> TaggedText:
        from electra_tf.finetuning.text.entities import detect_scheme, is_entity_tag_set
        from electra_tf.finetuning.text.task_data import read_tagging_files

        config = self.kind_config
        task = read_tagging_files(self.files.train, self.files.eval, config.columns)
        if config.entity_task:
            task.name = config.entity_task.lower()
        entity_tags = bool(config.entity_task) or is_entity_tag_set(task.labels.names)
        return TaggedText(task, entity_tags=entity_tags, scheme=detect_scheme(task.labels.names) if entity_tags else None)

    def preprocessor(self, tokenizer, max_seq_length: int):
        from electra_tf.models.preprocessing import ElectraWordPreprocessor

        return ElectraWordPreprocessor(tokenizer, max_seq_length)

    def prepare(self, data: TaggedText, tokenizer, max_seq_length: int, seed: int):
        preprocessor = self.preprocessor(tokenizer, max_seq_length)
        train, eval_inputs = make_datasets(data.task, preprocessor, self.run.update_batch_size, seed)
        labels, unscored = tagging_eval_labels(data.task, preprocessor)
        return train, dataclasses.replace(data, preprocessor=preprocessor, eval_inputs=eval_inputs, eval_labels=labels,
                                          unscored_words=unscored)

    def metric_names(self, data: TaggedText) -> tuple:
        return ENTITY_METRICS if data.entity_tags else ("accuracy",)

    def build_task_model(self, backbone, data: TaggedText, config):
        from electra_tf.finetuning.text.classifiers import ElectraTokenClassifier

        return ElectraTokenClassifier(backbone, data.task.labels.num_classes, dropout=config.model.dropout,
                                      preprocessor=data.preprocessor, label_names=data.task.labels.names)

    def evaluate(self, model, inputs, final: bool = False):
        data = inputs.data
        if not data.entity_tags:
            return super().evaluate(model, inputs, final)
        return self._entity_scores(model, data, data.eval_inputs, data.eval_labels, data.task.eval, "predictions.conll")

    def test(self, model, inputs):
        """Scores of the best epoch on the test file (read with the training file's tags), and
        its predictions file."""
        from electra_tf.finetuning.text.metrics import predicted_metrics
        from electra_tf.finetuning.text.task_data import read_tagging_files

        data = inputs.data
        test = read_tagging_files(self.files.train, self.files.test, self.kind_config.columns)
        examples = _with_names(test.eval, test.labels.names, data.task.labels.names)
        features, labels = data.preprocessor(*_ragged_words_and_tags(examples))
        dataset = _batched(features, self.run.batch_size)
        labels = labels.numpy()
        if data.entity_tags:
            return self._entity_scores(model, data, dataset, labels, examples, "test_predictions.conll")
        return predicted_metrics(model, dataset, labels, ("accuracy",), data.task.labels.num_classes), {}

    def _entity_scores(self, model, data: TaggedText, inputs, piece_labels, examples, predictions_file):
        from electra_tf.finetuning.text.entities import entity_scores
        from electra_tf.models.preprocessing import IGNORE_LABEL

        names = data.task.labels.names
        outputs = model.predict(inputs, verbose=0).argmax(axis=-1)
        gold = [[names[tag] for tag in tags] for tags in examples.labels]
        predicted, right, scored = [], 0, 0
        for row, gold_tags in enumerate(gold):
            starts = piece_labels[row] != IGNORE_LABEL  # each scored word's first piece, in order
            tags = [names[tag] for tag in outputs[row][starts]]
            right += sum(p == g for p, g in zip(tags, gold_tags))
            scored += len(tags)
            predicted.append(tags + ["O"] * (len(gold_tags) - len(tags)))  # words cut off: no entity
        scores = entity_scores(gold, predicted, strict=self.kind_config.strict_entities, scheme=data.scheme)
        values = {"entity_f1": scores["entity_f1"], "entity_precision": scores["entity_precision"],
                  "entity_recall": scores["entity_recall"], "accuracy": right / scored if scored else 0.0,
                  "per_type": scores["per_type"], "score": scores["entity_f1"]}
        conll = "".join("".join(f"{word} {g} {p}\n" for word, g, p in zip(words, gold_tags, tags)) + "\n"
                        for words, gold_tags, tags in zip(examples.texts, gold, predicted))
        return values, {predictions_file: conll}

    def describe_data(self, data: TaggedText) -> list[str]:
        unscored, strict = data.unscored_words, self.kind_config.strict_entities
        scoring = (f"; entities scored by {'strict ' + data.scheme if strict else 'conlleval'} chunks, the best epoch "
                   "by entity F1" if data.entity_tags else "")
        return [f"{data.task.labels.num_classes} tags; {sum(map(len, data.task.train.labels)):,} tagged training "
                f"words; accuracy is per word (its first word piece)"
                f"{f', {unscored:,} eval words past max_seq_length not scored' if unscored else ''}{scoring}"]

    def data_summary(self, data: TaggedText) -> dict:
        return {"tagging": True, "labels": data.task.labels.names, "score_range": None,
                "unscored_eval_words": data.unscored_words,
                **({"entity_scheme": data.scheme, "strict_entities": self.kind_config.strict_entities}
                   if data.entity_tags else {})}


def tagging_eval_labels(task, preprocessor):
    """(word-piece labels [N, L] of the eval set, words cut off by max_seq_length): the
    evaluator scores each word at its first piece; cut-off words are not scored."""
    import tensorflow as tf

    from electra_tf.models.preprocessing import IGNORE_LABEL

    words, tags = (tf.ragged.constant(v, d) for v, d in ((task.eval.texts, tf.string), (task.eval.labels, tf.int32)))
    _, labels = preprocessor(words, tags)
    labels = labels.numpy()
    scored = int((labels != IGNORE_LABEL).sum())
    return labels, sum(len(tags) for tags in task.eval.labels) - scored


def _ragged_words_and_tags(examples):
    import tensorflow as tf

    return tf.ragged.constant(examples.texts, tf.string), tf.ragged.constant(examples.labels, tf.int32)


def _with_names(examples, names, model_names):
    """The examples with tag ids in the model's tag list (a tag the model lacks becomes O)."""
    index = {name: i for i, name in enumerate(model_names)}
    return dataclasses.replace(examples, labels=[[index.get(names[tag], index.get("O", 0)) for tag in sentence]
                                                 for sentence in examples.labels])


def _batched(inputs, batch_size: int):
    import tensorflow as tf

    return tf.data.Dataset.from_tensor_slices(inputs).batch(batch_size)
