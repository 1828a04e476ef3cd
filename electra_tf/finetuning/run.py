"""One whole fine-tuning run as a library call: `run_finetuning(options) -> FinetuningResult`.

Reads the task files, loads the pre-trained discriminator (or builds the same architecture with
fresh weights, the baseline), fine-tunes an `ElectraClassifier` (or, with `tagging`, an
`ElectraTokenClassifier`) with `fit`, evaluates the task's
official metrics after every epoch, keeps the best epoch, and exports it for TF Serving. The
output folder's layout is `run_dir.FinetuneDir`. `python -m electra_tf.finetune` parses
arguments into `FinetuningOptions` and prints the result.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from electra_tf.errors import RunError
from electra_tf.run_dir import LOCK_FILE, FinetuneDir, task_export_name

# Defaults by model size (by the discriminator's hidden size): the official fine-tuning learning
# rates (the paper's 3e-4 for Small; 1e-4 Base; 5e-5 and layer decay 0.9 for Large) and, for the
# 2-CPU tiny preset, the measured one: on BBC News lr 1e-4 left it at the majority class for
# 3 epochs, 1e-3 gave 0.854 and 3e-3 0.893 (docs/results.md, "BBC News demo").
SIZE_DEFAULTS = (  # (largest hidden size, size name, learning rate, layer-wise decay)
    (128, "tiny", 3e-3, 0.8),
    (256, "small", 3e-4, 0.8),
    (768, "base", 1e-4, 0.8),
    (None, "large", 5e-5, 0.9),
)
# Epochs: the official 3, and 10 for the small GLUE tasks (RTE 2.5k, STS-B 5.7k examples). For
# files of your own the size decides: 10 below 6,000 training examples. (Officially MRPC, 3.7k,
# gets 3: with --task MRPC it does here too.) Three epochs of a few hundred examples are a few
# dozen steps, which leaves a classifier at the majority class.
OFFICIAL_EPOCHS, SMALL_TASK_EPOCHS, SMALL_TASK_EXAMPLES = 3, 10, 6000
GLUE_SMALL_TASKS = ("RTE", "STS-B")
SETTINGS = ("epochs", "batch_size", "learning_rate", "layerwise_lr_decay", "layer_decay_schedule",
            "warmup_proportion", "weight_decay", "seed")


@dataclass(frozen=True)
class FinetuningOptions:
    """Defaults are the official ELECTRA fine-tuning values."""

    pretrained: str
    train: str
    eval: str
    output_dir: Path
    checkpoint: str | None = None
    overwrite: bool = False
    text_column: str = "text"
    text_pair_column: str | None = None
    label_column: str = "label"
    regression: bool = False
    tagging: bool = False  # word tags: CoNLL columns, or JSONL word and tag lists
    task: str | None = None  # a GLUE task name: its TSV layout and official metrics
    epochs: int | None = None  # None: by task and training-set size (default_epochs)
    batch_size: int = 32
    learning_rate: float | None = None  # None: by model size (SIZE_DEFAULTS)
    layerwise_lr_decay: float | None = None  # None: by model size
    layer_decay_schedule: str = "official"
    warmup_proportion: float = 0.1
    weight_decay: float = 0.01
    max_seq_length: int | None = None  # None: the pre-training max_seq_length
    seed: int = 1
    random_init: bool = False
    strategy: str = "auto"
    mixed_precision: str = "auto"
    xla: bool | None = None
    export_name: str | None = None
    log_every: int = 20

    def __post_init__(self):
        for name in ("epochs", "batch_size", "log_every"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise RunError(f"--{name} must be at least 1.")
        if self.layerwise_lr_decay is not None and not 0 < self.layerwise_lr_decay <= 1:
            raise RunError("--layerwise_lr_decay must be in (0, 1].")
        if not 0 <= self.warmup_proportion < 1:
            raise RunError("--warmup_proportion must be in [0, 1).")
        if self.learning_rate is not None and self.learning_rate <= 0:
            raise RunError("--learning_rate must be positive.")
        if self.tagging and (self.task or self.regression or self.text_pair_column):
            raise RunError("--tagging reads word/tag files; it does not combine with --task, --regression "
                           "or --text_pair_column.")
        output_dir = Path(self.output_dir)
        if _written(output_dir) and not self.overwrite and not (output_dir / LOCK_FILE).exists():
            raise RunError(f"{output_dir} is not empty; choose a new --output_dir or pass --overwrite.")


def size_defaults(hidden_size: int) -> tuple[str, float, float]:
    """(size name, learning rate, layer-wise decay) for a discriminator of `hidden_size`.

    >>> size_defaults(256), size_defaults(1024)
    (('small', 0.0003, 0.8), ('large', 5e-05, 0.9))
    """
    for largest, name, learning_rate, decay in SIZE_DEFAULTS:
        if largest is None or hidden_size <= largest:
            return name, learning_rate, decay
    raise AssertionError("SIZE_DEFAULTS ends with a catch-all row")


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


@dataclass
class FinetuningResult:
    summary: dict  # what metrics.json holds
    output_dir: FinetuneDir
    export_path: Path


def _written(folder: Path) -> list[Path]:
    """What a folder holds besides a writer's lock file."""
    return [p for p in folder.iterdir() if p.name != LOCK_FILE] if folder.is_dir() else []


def read_data(options: FinetuningOptions):
    from electra_tf.finetuning.tasks import Columns, glue_task, read_task_files, read_tagging_files

    if options.tagging:
        given = Columns(options.text_column, None, options.label_column)
        return read_tagging_files(options.train, options.eval,
                                  None if given == Columns("text", None, "label") else given)
    if options.task:
        return read_task_files(options.train, options.eval, glue=glue_task(options.task))
    return read_task_files(options.train, options.eval, regression=options.regression,
                           columns=Columns(options.text_column, options.text_pair_column, options.label_column))


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


def run_finetuning(options: FinetuningOptions) -> FinetuningResult:
    """The whole run, holding the output folder's lock (one writer per folder)."""
    from electra_tf.locking import FolderLock

    with FolderLock(options.output_dir, "electra_tf.finetune"):
        if _written(Path(options.output_dir)) and not options.overwrite:  # filled while we waited to lock
            raise RunError(f"{options.output_dir} is not empty; choose a new --output_dir or pass --overwrite.")
        return _run(options)


def _run(options: FinetuningOptions) -> FinetuningResult:
    import keras
    import tensorflow as tf

    from electra_tf.files import atomic_write_text
    from electra_tf.finetuning.callbacks import EpochEvaluator, FinetuningProgress
    from electra_tf.finetuning.classifiers import ElectraClassifier, ElectraTokenClassifier
    from electra_tf.finetuning.tasks import glue_task
    from electra_tf.loading import build_discriminator, load_pretrained, pretrained_hidden_size
    from electra_tf.models.preprocessing import ElectraTextPreprocessor, ElectraWordPreprocessor
    from electra_tf.optimization import create_finetuning_optimizer
    from electra_tf.runtime import create_strategy, resolve_runtime
    from electra_tf.serving.publish import export_task_model

    started = time.monotonic()
    task = read_data(options)
    task.name = task.name or FinetuneDir(options.output_dir).path.resolve().name  # files named only train/dev
    runtime = resolve_runtime(options.strategy, options.mixed_precision, options.xla,
                              hidden_size=pretrained_hidden_size(options.pretrained))
    strategy = create_strategy(runtime)
    keras.config.set_dtype_policy(runtime.precision)
    with strategy.scope():  # the model's variables are created (or restored) here
        pretrained = load_pretrained(options.pretrained, options.checkpoint, encoder_only=True)
    config = pretrained.config
    max_seq_length = options.max_seq_length or config.max_seq_length
    if not 3 <= max_seq_length <= config.max_position_embeddings:
        raise RunError(f"--max_seq_length must be in [3, {config.max_position_embeddings}] "
                       "(the model's max_position_embeddings).")
    config = config.replace(max_seq_length=max_seq_length)
    size, size_learning_rate, size_decay = size_defaults(config.hidden_size)
    learning_rate = options.learning_rate or size_learning_rate
    layerwise_lr_decay = options.layerwise_lr_decay or size_decay
    epochs = options.epochs or default_epochs(len(task.train), glue_task(options.task).name if options.task else None)
    chosen = [f"{epochs} epochs" + (" (given)" if options.epochs else f" for {len(task.train):,} examples"),
              f"learning rate {learning_rate:g}" + (" (given)" if options.learning_rate else ""),
              f"layer-wise decay {layerwise_lr_decay:g}" + (" (given)" if options.layerwise_lr_decay else "")]
    print(f"Settings: {', '.join(chosen)}; defaults for a {size} model (hidden size {config.hidden_size}).",
          flush=True)

    output = FinetuneDir(options.output_dir)
    for old in _written(output.path) if options.overwrite else ():  # keep our lock file
        shutil.rmtree(old) if old.is_dir() else old.unlink()
    output.path.mkdir(parents=True, exist_ok=True)
    config.save(output.config)
    keras.utils.set_random_seed(options.seed)

    preprocessor = (ElectraWordPreprocessor if task.tagging else ElectraTextPreprocessor)(
        pretrained.tokenizer, max_seq_length)
    train, evaluation = make_datasets(task, preprocessor, options.batch_size, options.seed)
    eval_labels, unscored_words = tagging_eval_labels(task, preprocessor) if task.tagging \
        else (task.eval.labels, 0)
    steps_per_epoch = math.ceil(len(task.train) / options.batch_size)
    total_steps = steps_per_epoch * epochs
    with strategy.scope():
        backbone = build_discriminator(config) if options.random_init else pretrained.discriminator
        if task.tagging:
            classifier = ElectraTokenClassifier(backbone, task.labels.num_classes, dropout=config.dropout,
                                                preprocessor=preprocessor, label_names=task.labels.names)
        else:
            classifier = ElectraClassifier(backbone, task.labels.num_classes, dropout=config.dropout,
                                           preprocessor=preprocessor, label_names=task.labels.names,
                                           score_range=task.labels.score_range,
                                           text_pair=task.train.text_pairs is not None)
        classifier.compile(optimizer=create_finetuning_optimizer(
            learning_rate, total_steps, config.num_layers, options.warmup_proportion,
            layerwise_lr_decay if layerwise_lr_decay < 1 else None,
            options.layer_decay_schedule, options.weight_decay, config.adam_epsilon, config.clip_global_norm),
            jit_compile=runtime.xla)

    origin = "random initialisation" if options.random_init else pretrained.source
    print(f"Fine-tuning {task.name} from {origin}: {len(task.train):,} train / {len(task.eval):,} eval "
          f"examples, {task.labels.num_classes if task.labels.names else 'regression'}"
          f"{' classes' if task.labels.names else ''}, {epochs} epochs x {steps_per_epoch} steps, "
          f"max_seq_length {max_seq_length}; {runtime.describe()}", flush=True)
    if task.tagging:
        print(f"Tagging: {sum(map(len, task.train.labels)):,} tagged training words; accuracy is per word "
              f"(its first word piece){f', {unscored_words:,} eval words past max_seq_length not scored' if unscored_words else ''}.",
              flush=True)
    writer = tf.summary.create_file_writer(str(output.logs))

    def save_best(record):
        temporary = output.path / ".best.tmp.keras"
        classifier.save(temporary)
        os.replace(temporary, output.best_model)

    evaluator = EpochEvaluator(writer, evaluation, eval_labels, task.labels.metrics,
                               task.labels.num_classes, on_best=save_best)
    classifier.fit(train, epochs=epochs, verbose=0, callbacks=[
        FinetuningProgress(writer, total_steps, options.batch_size, options.log_every), evaluator])
    evaluator.restore_best()

    export_name = options.export_name or task_export_name(task.name)
    export_path = export_task_model(classifier, pretrained.tokenizer, config, output.exports, export_name)
    best = evaluator.best
    summary = {
        "task": task.name,
        "eval": {name: best[name] for name in (*task.labels.metrics, "score")},
        "best_epoch": best["epoch"],
        "epochs": evaluator.history,
        "pretrained": str(options.pretrained),
        "random_init": options.random_init,
        "tagging": task.tagging,
        "train_examples": len(task.train),
        "eval_examples": len(task.eval),
        "labels": task.labels.names,
        "score_range": task.labels.score_range,
        **({"unscored_eval_words": unscored_words} if task.tagging else {}),
        "settings": {key: getattr(options, key) for key in SETTINGS} | {
            "epochs": epochs, "max_seq_length": max_seq_length, "learning_rate": learning_rate, "layerwise_lr_decay": layerwise_lr_decay,
            "size_defaults": size},
        "checkpoint": str(output.best_model),
        "export": str(export_path),
        "seconds": round(time.monotonic() - started, 1),
    }
    atomic_write_text(output.metrics, json.dumps(summary, indent=2) + "\n")
    return FinetuningResult(summary, output, export_path)
