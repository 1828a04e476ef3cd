"""One whole fine-tuning run as a library call: `run_finetuning(options) -> FinetuningResult`.

Reads the task files, loads the pre-trained discriminator (or builds the same architecture with
fresh weights, the baseline), fine-tunes the task's model with `fit`, evaluates the task's
official metrics after every epoch, keeps the best epoch, and exports it for TF Serving. What
differs between kinds of task (classification and regression, tagging, question answering:
reader, features, model, scores, files) is a `task_kind.TaskKind`; everything else is here,
once. The output folder's layout is `run_dir.FinetuneDir`. `python -m electra_tf.finetune`
parses arguments into `FinetuningOptions` and prints the result.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from electra_tf.utils.errors import RunError
from electra_tf.utils.run_dir import LOCK_FILE, FinetuneDir, task_export_name

# Defaults by model size (by the discriminator's hidden size): the official fine-tuning learning
# rates (the paper's 3e-4 for Small; 1e-4 Base; 5e-5 and layer decay 0.9 for Large) and, for the
# tiny preset, the best of 1e-4, 1e-3 and 3e-3 on BBC News (1e-4 left it at the majority class).
SIZE_DEFAULTS = (  # (largest hidden size, size name, learning rate, layer-wise decay)
    (128, "tiny", 3e-3, 0.8),
    (256, "small", 3e-4, 0.8),
    (768, "base", 1e-4, 0.8),
    (None, "large", 5e-5, 0.9),
)
SETTINGS = ("epochs", "batch_size", "gradient_accumulation_steps", "learning_rate", "layerwise_lr_decay",
            "layer_decay_schedule", "warmup_proportion", "weight_decay", "seed")


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
    task: str | None = None  # a GLUE task name (its TSV layout and official metrics), or squad
    # question answering (--task squad): the official windowing and answer settings
    doc_stride: int | None = None  # None: squad.default_doc_stride(max_seq_length)
    max_query_length: int = 64
    max_answer_length: int = 30
    qa_head: str = "electra"  # the official ELECTRA head, or "plain" (transformers' qa_outputs)
    strict_entities: bool = False  # entity tags: only well-formed chunks count (seqeval's strict mode)
    test: str | None = None  # a third file, scored once with the best epoch
    epochs: int | None = None  # None: by task and training-set size (default_epochs)
    batch_size: int = 32
    # Each update sums the gradients of this many batches of batch_size (runtime/accumulation.py).
    gradient_accumulation_steps: int = 1
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

    @property
    def update_batch_size(self) -> int:
        """The examples of one update: batch_size x gradient_accumulation_steps."""
        return self.batch_size * self.gradient_accumulation_steps

    def __post_init__(self):
        for name in ("epochs", "batch_size", "gradient_accumulation_steps", "log_every"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise RunError(f"--{name} must be at least 1.")
        if self.layerwise_lr_decay is not None and not 0 < self.layerwise_lr_decay <= 1:
            raise RunError("--layerwise_lr_decay must be in (0, 1].")
        if not 0 <= self.warmup_proportion < 1:
            raise RunError("--warmup_proportion must be in [0, 1).")
        if self.learning_rate is not None and self.learning_rate <= 0:
            raise RunError("--learning_rate must be positive.")
        if self.tagging and ((self.task or "").lower() not in ("", "conll2003") or self.regression
                             or self.text_pair_column):
            raise RunError("--tagging reads word/tag files; it does not combine with --task, --regression "
                           "or --text_pair_column.")
        if self.test and not (self.tagging or (self.task or "").lower() == "conll2003"):
            raise RunError("--test is supported for --tagging runs (and --task conll2003) so far.")
        for name in ("doc_stride", "max_query_length", "max_answer_length"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise RunError(f"--{name} must be at least 1.")
        if self.qa_head not in ("electra", "plain"):
            raise RunError("--qa_head must be electra (the official head) or plain (transformers' qa_outputs).")
        output_dir = Path(self.output_dir)
        if _written(output_dir) and not self.overwrite and not (output_dir / LOCK_FILE).exists():
            raise RunError(f"{output_dir} is not empty; choose a new --output_dir or pass --overwrite.")


def _is_number(value) -> bool:
    return isinstance(value, (int, float))


def size_defaults(hidden_size: int) -> tuple[str, float, float]:
    """(size name, learning rate, layer-wise decay) for a discriminator of `hidden_size`.

    >>> size_defaults(256), size_defaults(1024)
    (('small', 0.0003, 0.8), ('large', 5e-05, 0.9))
    """
    for largest, name, learning_rate, decay in SIZE_DEFAULTS:
        if largest is None or hidden_size <= largest:
            return name, learning_rate, decay
    raise AssertionError("SIZE_DEFAULTS ends with a catch-all row")


@dataclass
class FinetuningResult:
    summary: dict  # what metrics.json holds
    output_dir: FinetuneDir
    export_path: Path


def _written(folder: Path) -> list[Path]:
    """What a folder holds besides a writer's lock file."""
    return [p for p in folder.iterdir() if p.name != LOCK_FILE] if folder.is_dir() else []


def task_kind(options):
    """The `TaskKind` the options ask for, its files read (errors name the file and line)."""
    from electra_tf.finetuning.question_answering.kind import QuestionAnsweringKind, is_question_answering
    from electra_tf.finetuning.text.kinds import ENTITY_TASKS, ClassificationKind, TaggingKind

    if is_question_answering(options.task):
        return QuestionAnsweringKind(options)
    if options.tagging or (options.task or "").lower() in ENTITY_TASKS:
        return TaggingKind(options)
    return ClassificationKind(options)


def run_finetuning(options: FinetuningOptions) -> FinetuningResult:
    """The whole run, holding the output folder's lock (one writer per folder)."""
    from electra_tf.utils.locking import FolderLock

    with FolderLock(options.output_dir, "electra_tf.finetune"):
        if _written(Path(options.output_dir)) and not options.overwrite:  # filled while we waited to lock
            raise RunError(f"{options.output_dir} is not empty; choose a new --output_dir or pass --overwrite.")
        return _run(options)


def _run(options: FinetuningOptions) -> FinetuningResult:
    started = time.monotonic()
    runtime, compile_cache, programs_before = _choose_runtime(options)  # first: TensorFlow starts here
    task = task_kind(options)
    task.name = task.name or FinetuneDir(options.output_dir).path.resolve().name  # files named only train/dev
    pretrained, config, output = _prepare(options, runtime)
    import keras

    keras.utils.set_random_seed(options.seed)  # the data's order and the task head's initial weights
    train = task.datasets(pretrained.tokenizer, config.max_seq_length, options.update_batch_size, options.seed)
    plan = _plan(options, task, config)  # after the data: question answering counts its windows there
    model = _build_model(options, runtime, pretrained, config, task, plan)
    origin = "random initialisation" if options.random_init else pretrained.source
    print(f"Fine-tuning {task.name} from {origin}: {task.train_examples:,} training {task.train_unit} / "
          f"{task.eval_examples:,} eval {task.eval_unit}, {plan['epochs']} epoch(s) x {plan['steps_per_epoch']} "
          f"steps, max_seq_length {config.max_seq_length}; {runtime.describe()}", flush=True)
    if task.describe():
        print(f"{task.name}: {task.describe()}.", flush=True)
    evaluator, test_values = _fit(options, task, model, train, output, plan)
    from electra_tf.serving.publish import export_task_model

    export_path = export_task_model(model, pretrained.tokenizer, config, output.exports,
                                    options.export_name or task_export_name(task.name))
    summary = _summary(options, task, model, config, plan, evaluator, test_values, output, export_path, runtime,
                       started, compile_cache, programs_before)
    return FinetuningResult(summary, output, export_path)


def _choose_runtime(options: FinetuningOptions):
    """(the runtime with its strategy, the compile cache folder, the programs it held): the
    cache's flags are set before TensorFlow starts, so a rerun loads its compiled steps."""
    from electra_tf.finetuning.pretrained import pretrained_hidden_size
    from electra_tf.runtime.devices import create_strategy, resolve_runtime
    from electra_tf.runtime.xla import cached_programs, use_compile_cache
    from electra_tf.utils.logs import start_tensorflow

    compile_cache = use_compile_cache(xla=options.xla)
    start_tensorflow()
    programs_before = cached_programs(compile_cache)
    runtime = resolve_runtime(options.strategy, options.mixed_precision, options.xla,
                              hidden_size=pretrained_hidden_size(options.pretrained))
    create_strategy(runtime)
    return runtime, (compile_cache if runtime.xla else None), programs_before


def _prepare(options: FinetuningOptions, runtime):
    """(the pre-trained model, the config at the run's sequence length, the output folder, made
    and holding the config and vocabulary, so best.keras can be read alone)."""
    import keras

    from electra_tf.finetuning.pretrained import load_pretrained

    keras.config.set_dtype_policy(runtime.precision)
    with runtime.strategy.scope():  # the model's variables are created (or restored) here
        pretrained = load_pretrained(options.pretrained, options.checkpoint, encoder_only=True)
    config = pretrained.config
    max_seq_length = options.max_seq_length or config.max_seq_length
    if not 3 <= max_seq_length <= config.max_position_embeddings:
        raise RunError(f"--max_seq_length must be in [3, {config.max_position_embeddings}] "
                       "(the model's max_position_embeddings).")
    config = config.replace(max_seq_length=max_seq_length)
    output = FinetuneDir(options.output_dir)
    for old in _written(output.path) if options.overwrite else ():  # keep our lock file
        shutil.rmtree(old) if old.is_dir() else old.unlink()
    output.path.mkdir(parents=True, exist_ok=True)
    config.save(output.config)
    pretrained.tokenizer.save(output.vocab)
    return pretrained, config, output


def _plan(options: FinetuningOptions, task, config) -> dict:
    """Epochs, learning rate and layer-wise decay (given, or the defaults for the model's size
    and the task), and the steps they make; printed."""
    size, size_learning_rate, size_decay = size_defaults(config.hidden_size)
    plan = {"size": size, "learning_rate": options.learning_rate or size_learning_rate,
            "layerwise_lr_decay": options.layerwise_lr_decay or size_decay,
            "epochs": options.epochs or task.default_epochs(),
            "steps_per_epoch": math.ceil(task.train_examples / options.update_batch_size)}
    plan["total_steps"] = plan["steps_per_epoch"] * plan["epochs"]
    chosen = [f"{plan['epochs']} epoch(s)" + (" (given)" if options.epochs else
                                              f" for {task.train_examples:,} training {task.train_unit}"),
              f"learning rate {plan['learning_rate']:g}" + (" (given)" if options.learning_rate else ""),
              f"layer-wise decay {plan['layerwise_lr_decay']:g}" + (" (given)" if options.layerwise_lr_decay else "")]
    print(f"Settings: {', '.join(chosen)}; defaults for a {size} model (hidden size {config.hidden_size}).",
          flush=True)
    return plan


def _build_model(options: FinetuningOptions, runtime, pretrained, config, task, plan):
    """The task's model on the pre-trained discriminator (or a fresh one), compiled with the
    official fine-tuning optimizer."""
    from electra_tf.models.encoders import build_discriminator
    from electra_tf.runtime.optimizer import create_finetuning_optimizer

    decay = plan["layerwise_lr_decay"]
    with runtime.strategy.scope():
        backbone = build_discriminator(config) if options.random_init else pretrained.discriminator
        model = task.build_model(backbone, config, pretrained.tokenizer, config.max_seq_length)
        model.compile(optimizer=create_finetuning_optimizer(
            plan["learning_rate"], plan["total_steps"], config.num_layers, options.warmup_proportion,
            decay if decay < 1 else None, options.layer_decay_schedule, options.weight_decay, config.adam_epsilon,
            config.clip_global_norm), jit_compile=runtime.xla,
            gradient_accumulation_steps=options.gradient_accumulation_steps)
    return model


def _fit(options: FinetuningOptions, task, model, train, output, plan):
    """`fit` with the task's evaluation after every epoch, keeping the best epoch (best.keras,
    restored at the end); then the test file, if any. Returns (evaluator, test metrics or None)."""
    import tensorflow as tf

    from electra_tf.finetuning.callbacks import EpochEvaluator, FinetuningProgress
    from electra_tf.utils.files import atomic_write_text

    writer = tf.summary.create_file_writer(str(output.logs))

    def save_best(record, files):
        for name, text in files.items():  # e.g. predictions.json: the best epoch's, as best.keras
            atomic_write_text(output.path / name, text)
        temporary = output.path / ".best.tmp.keras"
        model.save(temporary)
        os.replace(temporary, output.best_model)

    evaluator = EpochEvaluator(writer, task.evaluate, on_best=save_best)
    model.fit(train, epochs=plan["epochs"], verbose=0, shuffle=False, callbacks=[  # the dataset shuffles itself
        FinetuningProgress(writer, plan["total_steps"], options.update_batch_size, options.log_every), evaluator])
    evaluator.restore_best()
    test_values = None
    if options.test:
        test_values, files = task.test(model)
        for name, text in files.items():
            atomic_write_text(output.path / name, text)
        shown = " | ".join(f"{name} {value:.4f}" for name, value in test_values.items() if _is_number(value))
        print(f"test (epoch {evaluator.best['epoch']}): {shown}", flush=True)
    return evaluator, test_values


def _summary(options, task, model, config, plan, evaluator, test_values, output, export_path, runtime, started,
             compile_cache, programs_before) -> dict:
    """OUTPUT_DIR/metrics.json: the best epoch's metrics, every epoch, the settings."""
    import tensorflow as tf

    from electra_tf.runtime.devices import gpu_names
    from electra_tf.runtime.optimizer import optimizer_step
    from electra_tf.runtime.xla import compile_cache_report
    from electra_tf.utils.files import atomic_write_text

    best = evaluator.best
    summary = {
        "task": task.name,
        "eval": {name: best[name] for name in (*task.metric_names, "score")},
        **({"test": {name: test_values[name] for name in (*task.metric_names, "score")}} if test_values else {}),
        "best_epoch": best["epoch"],
        "epochs": evaluator.history,
        "pretrained": str(options.pretrained),
        "random_init": options.random_init,
        "train_examples": task.train_examples,
        "train_unit": task.train_unit,
        "eval_examples": task.eval_examples,
        "eval_unit": task.eval_unit,
        **task.summary(),
        "settings": {key: getattr(options, key) for key in SETTINGS} | {
            "epochs": plan["epochs"], "max_seq_length": config.max_seq_length, "learning_rate": plan["learning_rate"],
            "layerwise_lr_decay": plan["layerwise_lr_decay"], "size_defaults": plan["size"]},
        "checkpoint": str(output.best_model),
        "export": str(export_path),
        "seconds": round(time.monotonic() - started, 1),
        "optimizer_steps": optimizer_step(model),  # float16: skipped batches are not steps
        "runtime": runtime.describe(),
        "compile_cache": compile_cache_report(compile_cache, programs_before),
        "gpus": gpu_names(),
        "tensorflow": tf.__version__,
    }
    atomic_write_text(output.metrics, json.dumps(summary, indent=2) + "\n")
    return summary
