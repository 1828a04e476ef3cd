"""`python -m electra_tf.finetune`: fine-tune a pre-trained discriminator on labelled text.

    python -m electra_tf.finetune --pretrained runs/electra_tiny \\
        --train train.csv --eval dev.csv --text_column text --label_column label \\
        --output_dir runs/finetune/my_task

    python -m electra_tf.finetune --pretrained runs/electra_small --task MRPC \\
        --train glue_data/MRPC/train.tsv --eval glue_data/MRPC/dev.tsv --output_dir runs/mrpc

Files are .csv, .tsv (with a header) or .jsonl (one object per line); `--text_pair_column`
makes it a sentence-pair task, `--regression` a regression task. `--task` reads the GLUE
TSV layouts instead and reports that task's official metric(s).

`--pretrained` is a pre-training model_dir, a `.keras` file or an export. `--random_init`
builds the same architecture from its config with fresh weights: the baseline that shows
what pre-training is worth.

OUTPUT_DIR receives
  metrics.json   eval metrics of the best epoch by name (+ every epoch, settings, timings)
  best.keras     the best epoch's ElectraClassifier, preprocessor included
  logs/          TensorBoard: train/loss, train/learning_rate, eval/<metric> per epoch
  export/NAME/1  TF Serving SavedModel of the best epoch, with a text signature
and must be empty (or pass --overwrite). Exit status: 0 done, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path

DEFAULTS = dict(epochs=3, batch_size=32, learning_rate=1e-4, layerwise_lr_decay=0.8,
                warmup_proportion=0.1, weight_decay=0.01, seed=1)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m electra_tf.finetune", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pretrained", required=True,
                        help="pre-training model_dir, .keras file, or export folder")
    parser.add_argument("--checkpoint", default=None, help="with a model_dir: e.g. ckpt-2000 (default: latest)")
    parser.add_argument("--train", required=True, help="training file (.csv, .tsv, .jsonl, or GLUE .tsv)")
    parser.add_argument("--eval", required=True, help="evaluation file, same layout")
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--overwrite", action="store_true", help="replace a non-empty OUTPUT_DIR")
    data = parser.add_argument_group("columns (your own files)")
    data.add_argument("--text_column", default="text")
    data.add_argument("--text_pair_column", default=None, help="second text of sentence-pair tasks")
    data.add_argument("--label_column", default="label")
    data.add_argument("--regression", action="store_true", help="numeric labels, squared-error loss")
    parser.add_argument("--task", default=None,
                        help="GLUE task (CoLA, SST-2, MRPC, STS-B, QQP, MNLI, QNLI, RTE, WNLI): "
                             "read its TSV layout and report its official metrics")
    training = parser.add_argument_group("training (official ELECTRA fine-tuning values by default)")
    training.add_argument("--epochs", type=int, default=DEFAULTS["epochs"])
    training.add_argument("--batch_size", type=int, default=DEFAULTS["batch_size"])
    training.add_argument("--learning_rate", type=float, default=DEFAULTS["learning_rate"])
    training.add_argument("--layerwise_lr_decay", type=float, default=DEFAULTS["layerwise_lr_decay"],
                          help="per-layer factor, embeddings lowest (1 = off)")
    training.add_argument("--layer_decay_schedule", choices=("official", "corrected"), default="official",
                          help="official: the top layer gets decay^2 as in google-research/electra; "
                               "corrected: decay^1 (see electra_tf/optimization.py)")
    training.add_argument("--warmup_proportion", type=float, default=DEFAULTS["warmup_proportion"])
    training.add_argument("--weight_decay", type=float, default=DEFAULTS["weight_decay"])
    training.add_argument("--max_seq_length", type=int, default=None,
                          help="default: the pre-training max_seq_length")
    training.add_argument("--seed", type=int, default=DEFAULTS["seed"])
    training.add_argument("--random_init", action="store_true",
                          help="same architecture, fresh weights (the no-pre-training baseline)")
    parser.add_argument("--strategy", default="auto",
                        help="auto | one_device | mirrored | multi_worker | tpu (as for pre-training)")
    parser.add_argument("--mixed_precision", default="auto",
                        help="auto | float32 | mixed_float16 | mixed_bfloat16 (auto: float32 on CPU)")
    parser.add_argument("--xla", action=argparse.BooleanOptionalAction, default=None,
                        help="compile the step with XLA (default: on GPU/TPU)")
    parser.add_argument("--export_name", default=None, help="TF Serving model name (default: the task name)")
    parser.add_argument("--log_every", type=int, default=20, help="steps between progress lines")
    return parser


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _check_arguments(args) -> str | None:
    for name in ("epochs", "batch_size", "log_every"):
        if getattr(args, name) < 1:
            return f"--{name} must be at least 1."
    if not 0 < args.layerwise_lr_decay <= 1:
        return "--layerwise_lr_decay must be in (0, 1]."
    if not 0 <= args.warmup_proportion < 1:
        return "--warmup_proportion must be in [0, 1)."
    if args.learning_rate <= 0:
        return "--learning_rate must be positive."
    output_dir = Path(args.output_dir)
    if output_dir.exists() and any(output_dir.iterdir()) and not args.overwrite:
        return f"{output_dir} is not empty; choose a new --output_dir or pass --overwrite."
    return None


def read_data(args):
    from electra_tf.tasks import Columns, glue_task, read_task_files

    if args.task:
        return read_task_files(args.train, args.eval, glue=glue_task(args.task))
    return read_task_files(args.train, args.eval, regression=args.regression,
                           columns=Columns(args.text_column, args.text_pair_column, args.label_column))


def make_datasets(task, preprocessor, batch_size: int, seed: int):
    """(train (inputs, label) batches, shuffled each epoch; eval input batches).

    Texts are tokenized once, in large batches, and the token ids cached: every epoch (and
    every evaluation) then reads ids instead of tokenizing again.
    """
    import tensorflow as tf

    def features(examples):
        return examples.texts if examples.text_pairs is None else (examples.texts, examples.text_pairs)

    label_dtype = tf.float32 if task.labels.num_classes == 1 else tf.int32
    train = tf.data.Dataset.from_tensor_slices(
        (features(task.train), tf.constant(task.train.labels, label_dtype)))
    # unbatch() forgets the example count; restate it so Keras knows the steps per epoch.
    train = train.batch(1024).map(preprocessor).unbatch().apply(
        tf.data.experimental.assert_cardinality(len(task.train))).cache()
    train = train.shuffle(len(task.train), seed=seed, reshuffle_each_iteration=True).batch(batch_size)
    # A 1-tuple, so a (text, text_pair) element reaches the preprocessor as one argument.
    evaluation = tf.data.Dataset.from_tensor_slices((features(task.eval),)).batch(batch_size)
    return train, evaluation.map(preprocessor).cache()


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    problem = _check_arguments(args)
    if problem:
        return _fail(problem)
    started = time.monotonic()

    import keras
    import tensorflow as tf

    from electra_tf.pretrained import PretrainedError, build_discriminator, load_pretrained
    from electra_tf.runtime import create_strategy, resolve_runtime
    from electra_tf.tasks import TaskDataError

    try:
        task = read_data(args)
        runtime = resolve_runtime(args.strategy, args.mixed_precision, args.xla)
        strategy = create_strategy(runtime)
        keras.config.set_dtype_policy(runtime.precision)
        with strategy.scope():  # the model's variables are created (or restored) here
            pretrained = load_pretrained(args.pretrained, args.checkpoint)
    except (TaskDataError, PretrainedError, ValueError) as error:
        return _fail(str(error))
    config = pretrained.config
    max_seq_length = args.max_seq_length or config.max_seq_length
    if not 3 <= max_seq_length <= config.max_position_embeddings:
        return _fail(f"--max_seq_length must be in [3, {config.max_position_embeddings}] "
                     "(the model's max_position_embeddings).")
    config = config.replace(max_seq_length=max_seq_length)

    from electra_tf import export
    from electra_tf.callbacks import EpochEvaluator, FinetuningProgress
    from electra_tf.classifiers import ElectraClassifier
    from electra_tf.files import atomic_write_text
    from electra_tf.optimization import create_finetuning_optimizer
    from electra_tf.preprocessing import ElectraTextPreprocessor

    output_dir = Path(args.output_dir)
    if output_dir.exists() and args.overwrite:
        shutil.rmtree(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    keras.utils.set_random_seed(args.seed)

    preprocessor = ElectraTextPreprocessor(pretrained.tokenizer, max_seq_length)
    train, evaluation = make_datasets(task, preprocessor, args.batch_size, args.seed)
    steps_per_epoch = math.ceil(len(task.train) / args.batch_size)
    total_steps = steps_per_epoch * args.epochs
    with strategy.scope():
        backbone = build_discriminator(config) if args.random_init else pretrained.discriminator
        classifier = ElectraClassifier(backbone, task.labels.num_classes, dropout=config.dropout,
                                       preprocessor=preprocessor)
        classifier.compile(optimizer=create_finetuning_optimizer(
            args.learning_rate, total_steps, config.num_layers, args.warmup_proportion,
            args.layerwise_lr_decay if args.layerwise_lr_decay < 1 else None, args.layer_decay_schedule,
            args.weight_decay, config.adam_epsilon, config.clip_global_norm), jit_compile=runtime.xla)

    origin = "random initialisation" if args.random_init else pretrained.source
    print(f"Fine-tuning {task.name} from {origin}: {len(task.train):,} train / {len(task.eval):,} eval "
          f"examples, {task.labels.num_classes if task.labels.names else 'regression'}"
          f"{' classes' if task.labels.names else ''}, {args.epochs} epochs x {steps_per_epoch} steps, "
          f"max_seq_length {max_seq_length}; {runtime.strategy_name}, {runtime.precision}"
          f"{', XLA' if runtime.xla else ''}", flush=True)
    writer = tf.summary.create_file_writer(str(output_dir / "logs"))
    best_path = output_dir / "best.keras"

    def save_best(record):
        temporary = output_dir / ".best.tmp.keras"
        classifier.save(temporary)
        os.replace(temporary, best_path)

    evaluator = EpochEvaluator(writer, evaluation, task.eval.labels, task.labels.metrics,
                               task.labels.num_classes, on_best=save_best)
    classifier.fit(train, epochs=args.epochs, verbose=0, callbacks=[
        FinetuningProgress(writer, total_steps, args.batch_size, args.log_every), evaluator])
    evaluator.restore_best()

    export_path = export.export_text_classifier(
        classifier, pretrained.tokenizer, config, output_dir / "export",
        args.export_name or task.name.lower().replace("-", ""), label_names=task.labels.names,
        score_range=task.labels.score_range, text_pair=task.train.text_pairs is not None)
    best = evaluator.best
    summary = {
        "task": task.name,
        "eval": {name: best[name] for name in (*task.labels.metrics, "score")},
        "best_epoch": best["epoch"],
        "epochs": evaluator.history,
        "pretrained": str(args.pretrained),
        "random_init": args.random_init,
        "train_examples": len(task.train),
        "eval_examples": len(task.eval),
        "labels": task.labels.names,
        "score_range": task.labels.score_range,
        "settings": {key: getattr(args, key) for key in (
            "epochs", "batch_size", "learning_rate", "layerwise_lr_decay", "layer_decay_schedule",
            "warmup_proportion", "weight_decay", "seed")} | {"max_seq_length": max_seq_length},
        "checkpoint": str(best_path),
        "export": str(export_path),
        "seconds": round(time.monotonic() - started, 1),
    }
    atomic_write_text(output_dir / "metrics.json", json.dumps(summary, indent=2) + "\n")
    shown = ", ".join(f"{name} {value:.4f}" for name, value in summary["eval"].items())
    print(f"\nBest epoch {best['epoch']}: {shown}\n  metrics:     {output_dir / 'metrics.json'}\n"
          f"  checkpoint:  {best_path}\n  export:      {export_path}\n"
          f"  TensorBoard: tensorboard --logdir {output_dir / 'logs'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
