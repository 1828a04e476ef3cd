"""`python -m electra_tf.finetune`: fine-tune a pre-trained discriminator on labelled text.

    python -m electra_tf.finetune --pretrained runs/electra_tiny \\
        --train train.csv --eval dev.csv --text_column text --label_column label \\
        --output_dir runs/finetune/my_task

    python -m electra_tf.finetune --pretrained runs/electra_small --task MRPC \\
        --train glue_data/MRPC/train.tsv --eval glue_data/MRPC/dev.tsv --output_dir runs/mrpc

Files are .csv, .tsv (with a header) or .jsonl (one object per line); `--text_pair_column`
makes it a sentence-pair task, `--regression` a regression task. `--task` reads the GLUE
TSV layouts instead and reports that task's official metric(s). `--tagging` tags words
(part of speech, BIO entity tags): CoNLL files (word first, tag last on each line, a blank
line between sentences) or .jsonl with a word list and a tag list per line
(`--text_column tokens --label_column tags` by default there); accuracy is per word. Entity
tags (IOB1, IOB2, IOBES; or `--task conll2003`) are also scored by entity (precision, recall,
F1, per type; conlleval's chunk rules, `--strict_entities` for seqeval's strict mode), the
best epoch is the one with the highest entity F1, and OUTPUT_DIR gets predictions.conll
(word, gold tag, predicted tag). `--test FILE` scores a third file with the best epoch.

    python -m electra_tf.finetune --pretrained runs/electra_tiny --tagging \\
        --train train.conll --eval dev.conll --output_dir runs/finetune/pos

`--task squad` answers questions (extractive, SQuAD 1.1 or 2.0 JSON files, the version read
from the file): each question becomes windows `[CLS] question [SEP] context window [SEP]`,
the official ELECTRA head finds the span, and OUTPUT_DIR also gets predictions.json (question
id -> answer) and, for 2.0, null_odds.json; scores are the official exact match and F1.

    python -m electra_tf.finetune --pretrained runs/electra_tiny --task squad \\
        --train data/squad/train-v1.1.json --eval data/squad/dev-v1.1.json --output_dir runs/squad

`--pretrained` is a pre-training model_dir, a `.keras` file or an export. `--random_init`
builds the same architecture from its config with fresh weights: the baseline that shows
what pre-training is worth.

OUTPUT_DIR receives
  metrics.json   eval metrics of the best epoch by name (+ every epoch, settings, timings)
  best.keras     the best epoch's model: an ElectraClassifier (classes, pairs, regression, GLUE),
                 an ElectraTokenClassifier (--tagging, conll2003) or an ElectraQuestionAnswerer
                 (squad); preprocessor, label names and settings included
  config.json    the backbone's config (model sizes, max_seq_length), read with best.keras
  vocab.txt      its vocabulary (read with best.keras)
  logs/train/    TensorBoard: train/loss, train/learning_rate, speed, eval/<metric> per epoch
  processes.json the process that trained it (steps, time)
  export/NAME/1  TF Serving SavedModel of the best epoch, with a text signature
  predictions.json, null_odds.json   question answering: the best epoch's answers
and must be empty (or pass --overwrite). Exit status: 0 done, 2 bad input, 3 the loss diverged,
128+N stopped by signal N (the best epoch so far is kept). The run is the task's
(`electra_tf.finetuning.task`, its kinds in `finetuning/text/` and `finetuning/question_answering/`)
run by `electra_tf.training.trainer.Trainer`; the export after it is `electra_tf.serving.publish`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from electra_tf.finetuning.config import (ClassificationConfig, Columns, FinetuningOptimizerConfig,
                                          FinetuningRunConfig, QuestionAnsweringConfig, TaggingConfig)
from electra_tf.utils.errors import RunError, command

DEFAULTS = argparse.Namespace(**vars(FinetuningRunConfig()), **vars(FinetuningOptimizerConfig()),
                              **vars(QuestionAnsweringConfig()))
ENTITY_TASKS = ("conll2003",)
QUESTION_ANSWERING_TASKS = ("squad", "squad1.1", "squad2.0")


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
    data.add_argument("--tagging", action="store_true",
                      help="a tag per word: CoNLL files, or .jsonl word and tag lists (--text_column, "
                           "--label_column; default tokens, tags); entity tags (B-/I-/E-/S-) are also "
                           "scored by entity")
    data.add_argument("--strict_entities", action="store_true",
                      help="entity tags: count only well-formed chunks (seqeval's strict mode) instead of "
                           "conlleval's rules")
    parser.add_argument("--test", default=None,
                        help="--tagging: a third file, scored once with the best epoch (test_predictions.conll)")
    parser.add_argument("--task", default=None,
                        help="GLUE task (CoLA, SST-2, MRPC, STS-B, QQP, MNLI, QNLI, RTE, WNLI): "
                             "read its TSV layout and report its official metrics; squad: question "
                             "answering on SQuAD 1.1/2.0 JSON files; conll2003: entity tagging (CoNLL "
                             "files, scored by entity F1)")
    qa = parser.add_argument_group("question answering (--task squad; official values by default)")
    qa.add_argument("--doc_stride", type=int, default=None,
                    help="word pieces between window starts (default: 128 at max_seq_length 512, "
                         "half the length for shorter ones: 64 at 128)")
    qa.add_argument("--max_query_length", type=int, default=DEFAULTS.max_query_length,
                    help="question word pieces kept")
    qa.add_argument("--max_answer_length", type=int, default=DEFAULTS.max_answer_length,
                    help="longest answer, in word pieces")
    qa.add_argument("--qa_head", choices=("electra", "plain"), default=DEFAULTS.head,
                    help="electra: the official head (end conditioned on the start, beam search, "
                         "answerability for 2.0); plain: transformers' qa_outputs (start and end apart)")
    training = parser.add_argument_group("training (official ELECTRA fine-tuning values by default; the learning "
                                         "rate and layer-wise decay by model size: tiny 3e-3, small 3e-4, base "
                                         "1e-4, large 5e-5 with decay 0.9)")
    training.add_argument("--epochs", type=int, default=None,
                          help="default: 3 (official), 10 for RTE, STS-B and files under 6,000 examples, "
                               "2 for squad (official)")
    training.add_argument("--batch_size", type=int, default=DEFAULTS.batch_size,
                          help="examples of one forward and backward pass")
    training.add_argument("--gradient_accumulation_steps", type=int, default=DEFAULTS.gradient_accumulation_steps,
                          metavar="K", help="make each update from K batches of --batch_size (default 1)")
    training.add_argument("--learning_rate", type=float, default=DEFAULTS.learning_rate,
                          help="default: by the model's size (see above)")
    training.add_argument("--layerwise_lr_decay", type=float, default=DEFAULTS.layerwise_lr_decay,
                          help="per-layer factor, embeddings lowest (1 = off; default by the model's size)")
    training.add_argument("--layer_decay_schedule", choices=("official", "corrected"), default="official",
                          help="official: the top layer gets decay^2 as in google-research/electra; "
                               "corrected: decay^1 (see electra_tf/runtime/optimizer.py)")
    training.add_argument("--warmup_proportion", type=float, default=DEFAULTS.warmup_proportion)
    training.add_argument("--weight_decay", type=float, default=DEFAULTS.weight_decay)
    training.add_argument("--max_seq_length", type=int, default=None,
                          help="default: the pre-training max_seq_length")
    training.add_argument("--seed", type=int, default=DEFAULTS.seed)
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


@command(interrupted="OUTPUT_DIR keeps the best epoch saved so far (metrics.json and best.keras are written whole)")
def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    task = task_from_args(args)
    from electra_tf.runtime.config import RuntimeConfig
    from electra_tf.training.config import TrainerConfig
    from electra_tf.training.trainer import Trainer  # heavy: after the argument checks
    from electra_tf.utils.run_dir import FinetuneDir

    output = FinetuneDir(Path(args.output_dir).resolve())  # absolute, as every command prints
    result = Trainer(task, TrainerConfig(log_every=args.log_every), RuntimeConfig(args.strategy, args.mixed_precision,
                     args.xla), output.path, lock_name="electra_tf.finetune").run(
        after_training=_exporter(output.exports, args.export_name))
    if result.status == "diverged":
        print(f"error: the loss became non-finite at step {result.diverged_at} ({result.precision}); stopped. "
              f"{output.best_model} holds the best epoch before it, if any. Lower --learning_rate, then rerun with "
              "--overwrite.", file=sys.stderr)
        return 3
    if result.status == "stopped":
        print(f"Stopped by signal {result.signal} after step {result.step}; {output.best_model} holds the best epoch "
              "so far, if one ended (fine-tuning does not resume: rerun with --overwrite to start again).")
        return 128 + result.signal
    summary = result.summary
    shown = ", ".join(f"{name} {value:.4f}" for name, value in summary["eval"].items() if not isinstance(value, dict))
    print(f"\nBest epoch {summary['best_epoch']}: {shown}\n  metrics:     {output.metrics}\n"
          f"  checkpoint:  {output.best_model}\n  export:      {Path(summary['export']).resolve()}\n"
          f"  TensorBoard: tensorboard --logdir {output.logs}", flush=True)
    return 0


def task_from_args(args):
    """The fine-tuning task the arguments ask for (question answering, tagging or
    classification), its settings checked."""
    from electra_tf.finetuning.config import PretrainedSource, TaskFiles
    from electra_tf.finetuning.task import written

    name = (args.task or "").lower()
    tagging = args.tagging or name in ENTITY_TASKS
    if args.tagging and (name not in ("", *ENTITY_TASKS) or args.regression or args.text_pair_column):
        raise RunError("--tagging reads word/tag files; it does not combine with --task, --regression "
                       "or --text_pair_column.")
    if args.test and not tagging:
        raise RunError("--test is supported for --tagging runs (and --task conll2003) so far.")
    if written(Path(args.output_dir)) and not args.overwrite:
        raise RunError(f"{args.output_dir} is not empty; choose a new --output_dir or pass --overwrite.")
    common = dict(
        source=PretrainedSource(args.pretrained, args.checkpoint, args.random_init),
        files=TaskFiles(args.train, args.eval, args.test),
        optimizer=FinetuningOptimizerConfig(args.learning_rate, args.layerwise_lr_decay, args.layer_decay_schedule,
                                            args.warmup_proportion, args.weight_decay),
        run=FinetuningRunConfig(args.epochs, args.batch_size, args.gradient_accumulation_steps, args.max_seq_length,
                                args.seed),
        overwrite=args.overwrite)
    columns = Columns(args.text_column, args.text_pair_column, args.label_column)
    if name in QUESTION_ANSWERING_TASKS:
        from electra_tf.finetuning.question_answering.task import QuestionAnsweringTask

        return QuestionAnsweringTask(**common, kind_config=QuestionAnsweringConfig(
            args.doc_stride, args.max_query_length, args.max_answer_length, args.qa_head))
    if tagging:
        from electra_tf.finetuning.text.tagging import TaggingTask

        return TaggingTask(**common, kind_config=TaggingConfig(None if columns == Columns() else columns,
                                                               name or None, args.strict_entities))
    from electra_tf.finetuning.text.classification import ClassificationTask

    return ClassificationTask(**common, kind_config=ClassificationConfig(columns, args.regression, args.task))


def _exporter(export_dir: Path, export_name: str | None):
    """What the chief runs once training is done: the best epoch's model for TF Serving."""
    def export(served) -> dict:
        from electra_tf.serving.publish import export_task_model

        return {"export": str(export_task_model(served.model, served.tokenizer, served.config, export_dir,
                                                export_name or served.name))}
    return export


if __name__ == "__main__":
    sys.exit(main())
