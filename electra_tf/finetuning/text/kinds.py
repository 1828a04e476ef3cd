"""Labelled text for the fine-tuning run: `ClassificationKind` (classes, pairs, regression,
GLUE) and `TaggingKind` (a tag per word). See `task_kind.TaskKind`."""

from __future__ import annotations

from electra_tf.finetuning.task_kind import TaskKind

# Epochs: the official 3, and 10 for the small GLUE tasks (RTE 2.5k, STS-B 5.7k examples). For
# files of your own the size decides: 10 below 6,000 training examples. (Officially MRPC, 3.7k,
# gets 3: with --task MRPC it does here too.) Three epochs of a few hundred examples are a few
# dozen steps, which leaves a classifier at the majority class.
OFFICIAL_EPOCHS, SMALL_TASK_EPOCHS, SMALL_TASK_EXAMPLES = 3, 10, 6000
GLUE_SMALL_TASKS = ("RTE", "STS-B")


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


class ClassificationKind(TaskKind):
    """An `ElectraClassifier`: one text or a pair -> a class or a score."""

    def __init__(self, options):
        from electra_tf.finetuning.text.tasks import Columns, glue_task, read_task_files

        self.glue = glue_task(options.task) if options.task else None
        if self.glue is not None:
            self.task = read_task_files(options.train, options.eval, glue=self.glue)
        else:
            self.task = read_task_files(options.train, options.eval, regression=options.regression, columns=Columns(
                options.text_column, options.text_pair_column, options.label_column))
        self._set_counts()

    def _set_counts(self):
        self.name, self.metric_names = self.task.name, tuple(self.task.labels.metrics)
        self.train_examples, self.eval_examples = len(self.task.train), len(self.task.eval)

    def default_epochs(self) -> int:
        return default_epochs(self.train_examples, self.glue.name if self.glue else None)

    def _preprocessor(self, tokenizer, max_seq_length):
        from electra_tf.models.preprocessing import ElectraTextPreprocessor

        return ElectraTextPreprocessor(tokenizer, max_seq_length)

    def datasets(self, tokenizer, max_seq_length, batch_size, seed):
        self.preprocessor = self._preprocessor(tokenizer, max_seq_length)
        train, self.eval_inputs = make_datasets(self.task, self.preprocessor, batch_size, seed)
        self.eval_labels = self.task.eval.labels
        return train

    def build_model(self, backbone, config, tokenizer, max_seq_length):
        from electra_tf.finetuning.text.classifiers import ElectraClassifier

        labels = self.task.labels
        return ElectraClassifier(backbone, labels.num_classes, dropout=config.dropout, preprocessor=self.preprocessor,
                                 label_names=labels.names, score_range=labels.score_range,
                                 text_pair=self.task.train.text_pairs is not None)

    def evaluate(self, model):
        from electra_tf.finetuning.callbacks import predicted_metrics

        return predicted_metrics(self.eval_inputs, self.eval_labels, self.metric_names,
                                 self.task.labels.num_classes)(model)

    def describe(self):
        labels = self.task.labels
        return f"{labels.num_classes} classes" if labels.names else "regression"

    def summary(self):
        return {"tagging": False, "labels": self.task.labels.names, "score_range": self.task.labels.score_range}


ENTITY_TASKS = ("conll2003",)
ENTITY_METRICS = ("entity_f1", "entity_precision", "entity_recall", "accuracy", "per_type")


class TaggingKind(ClassificationKind):
    """An `ElectraTokenClassifier`: a tag per word, scored at each word's first piece. Entity
    tags (B-/I-/E-/S- prefixes, or `--task conll2003`) are also scored by entity
    (`entities.py`), and the best epoch is the one with the highest entity F1."""

    train_unit = eval_unit = "sentences"

    def __init__(self, options):
        from electra_tf.finetuning.text.entities import detect_scheme, is_entity_tag_set
        from electra_tf.finetuning.text.tasks import Columns, read_tagging_files

        self.glue, self.options = None, options
        given = Columns(options.text_column, None, options.label_column)
        self.columns = None if given == Columns("text", None, "label") else given
        self.task = read_tagging_files(options.train, options.eval, self.columns)
        if options.task and options.task.lower() in ENTITY_TASKS:
            self.task.name = options.task.lower()
        names = self.task.labels.names
        self.entity_tags = bool(options.task) or is_entity_tag_set(names)
        self.scheme = detect_scheme(names) if self.entity_tags else None
        self._set_counts()
        if self.entity_tags:
            self.metric_names = ENTITY_METRICS

    def _preprocessor(self, tokenizer, max_seq_length):
        from electra_tf.models.preprocessing import ElectraWordPreprocessor

        return ElectraWordPreprocessor(tokenizer, max_seq_length)

    def datasets(self, tokenizer, max_seq_length, batch_size, seed):
        train = super().datasets(tokenizer, max_seq_length, batch_size, seed)
        self.eval_labels, self.unscored_words = tagging_eval_labels(self.task, self.preprocessor)
        return train

    def build_model(self, backbone, config, tokenizer, max_seq_length):
        from electra_tf.finetuning.text.classifiers import ElectraTokenClassifier

        return ElectraTokenClassifier(backbone, self.task.labels.num_classes, dropout=config.dropout,
                                      preprocessor=self.preprocessor, label_names=self.task.labels.names)

    def evaluate(self, model):
        if not self.entity_tags:
            return super().evaluate(model)
        return self._entity_scores(model, self.eval_inputs, self.eval_labels, self.task.eval, "predictions.conll")

    def test(self, model):
        """Scores of the best epoch on `--test` (read with the training file's tags), and its
        predictions file."""
        from electra_tf.finetuning.text.tasks import read_tagging_files

        test = read_tagging_files(self.options.train, self.options.test, self.columns)
        test_names = test.labels.names
        examples = _with_names(test.eval, test_names, self.task.labels.names)
        inputs = self.preprocessor(*_ragged_words_and_tags(examples))
        labels = inputs[1].numpy()
        dataset = _batched_inputs(inputs[0], self.options.batch_size)
        if self.entity_tags:
            return self._entity_scores(model, dataset, labels, examples, "test_predictions.conll")
        from electra_tf.finetuning.callbacks import predicted_metrics

        return predicted_metrics(dataset, labels, ("accuracy",), self.task.labels.num_classes)(model)

    def _entity_scores(self, model, inputs, piece_labels, examples, predictions_file):
        from electra_tf.finetuning.text.entities import entity_scores
        from electra_tf.models.preprocessing import IGNORE_LABEL

        names = self.task.labels.names
        outputs = model.predict(inputs, verbose=0).argmax(axis=-1)
        gold = [[names[tag] for tag in tags] for tags in examples.labels]
        predicted, right, scored = [], 0, 0
        for row, gold_tags in enumerate(gold):
            starts = piece_labels[row] != IGNORE_LABEL  # each scored word's first piece, in order
            tags = [names[tag] for tag in outputs[row][starts]]
            right += sum(p == g for p, g in zip(tags, gold_tags))
            scored += len(tags)
            predicted.append(tags + ["O"] * (len(gold_tags) - len(tags)))  # words cut off: no entity
        scores = entity_scores(gold, predicted, strict=self.options.strict_entities, scheme=self.scheme)
        values = {"entity_f1": scores["entity_f1"], "entity_precision": scores["entity_precision"],
                  "entity_recall": scores["entity_recall"], "accuracy": right / scored if scored else 0.0,
                  "per_type": scores["per_type"], "score": scores["entity_f1"]}
        conll = "".join("".join(f"{word} {g} {p}\n" for word, g, p in zip(words, gold_tags, tags)) + "\n"
                        for words, gold_tags, tags in zip(examples.texts, gold, predicted))
        return values, {predictions_file: conll}

    def describe(self):
        unscored = self.unscored_words
        scoring = (f"; entities scored by {'strict ' + self.scheme if self.options.strict_entities else 'conlleval'}"
                   f" chunks, the best epoch by entity F1" if self.entity_tags else "")
        return (f"{self.task.labels.num_classes} tags; {sum(map(len, self.task.train.labels)):,} tagged training "
                f"words; accuracy is per word (its first word piece)"
                f"{f', {unscored:,} eval words past max_seq_length not scored' if unscored else ''}{scoring}")

    def summary(self):
        return {**super().summary(), "tagging": True, "unscored_eval_words": self.unscored_words,
                **({"entity_scheme": self.scheme, "strict_entities": self.options.strict_entities}
                   if self.entity_tags else {})}


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
    from dataclasses import replace

    index = {name: i for i, name in enumerate(model_names)}
    return replace(examples, labels=[[index.get(names[tag], index.get("O", 0)) for tag in sentence]
                                     for sentence in examples.labels])


def _batched_inputs(inputs, batch_size: int):
    import tensorflow as tf

    return tf.data.Dataset.from_tensor_slices(inputs).batch(batch_size)
