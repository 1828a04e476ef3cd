"""`python -m electra_tf.finetune`: fine-tune a pre-trained discriminator on labelled text, or
evaluate a fine-tuned model.

    python -m electra_tf.finetune --pretrained runs/electra_tiny \\
        --train train.csv --eval dev.csv --test test.csv --output_dir runs/finetune/my_task

    python -m electra_tf.finetune --pretrained runs/electra_small --task MRPC \\
        --train glue_data/MRPC/train.tsv --eval glue_data/MRPC/dev.tsv --output_dir runs/mrpc

The kind of run (--kind, or what --task names; `classification` by default) decides what the
files hold and what is trained, each kind one module (`electra_tf/training/task.py`'s registry):
  classification      .csv, .tsv (with a header) or .jsonl; --text_pair_column makes it a
                      sentence-pair task, --regression a regression task; --task NAME reads a GLUE
                      task's TSV layout and reports its official metric(s)
  prompt              (--kind prompt) classes from the discriminator's replaced-token head and a
                      --template with --label_words, no new parameters: zero-shot with --eval_only
                      (nothing trained), few-shot with --train [--shots K] (docs/finetuning.md)
  tagging             (--tagging) a tag per word: CoNLL files (word first, tag last, a blank line
                      between sentences) or .jsonl word and tag lists (tokens, tags); entity tags
                      (IOB1, IOB2, IOBES; or --task conll2003) are also scored by entity (conlleval's
                      chunk rules, --strict_entities for seqeval's), the best epoch by entity F1, and
                      OUTPUT_DIR gets predictions.conll
  question_answering  (--task squad) extractive answers from SQuAD 1.1 / 2.0 JSON files: windows
                      `[CLS] question [SEP] context window [SEP]`, the official ELECTRA head and scores;
                      OUTPUT_DIR gets predictions.json (and null_odds.json for 2.0)
A kind of your own registers from a module of yours: --import MODULE (docs/finetuning.md, "Write
your own kind of task").

    python -m electra_tf.finetune --pretrained runs/electra_tiny --tagging \\
        --train train.conll --eval dev.conll --output_dir runs/finetune/pos
    python -m electra_tf.finetune --pretrained runs/electra_tiny --task squad \\
        --train data/squad/train-v1.1.json --eval data/squad/dev-v1.1.json --output_dir runs/squad

`--test FILE` scores a third file once with the best epoch (metrics.json's `test`). `--eval_only`
trains nothing: it evaluates the fine-tuned model --pretrained names (a fine-tuning run's folder or
its best.keras; the run's own settings are the defaults) on --eval and --test.

    python -m electra_tf.finetune --eval_only --pretrained runs/finetune/my_task --eval new.csv \\
        --output_dir runs/finetune/my_task_on_new

Every setting is in the run's OUTPUT_DIR/config.json; `--config RUN/config.json` reruns a run
(the same result on the same host), `--set KEY=VALUE` changes any setting (flat, or
`section.key`), and the flags are the most common ones. `--pretrained` is a pre-training
model_dir (or its backbone), a keras-hub preset, a `.keras` file or an export. `--random_init`
builds the same architecture from its config with fresh weights: the baseline that shows what
pre-training is worth.

OUTPUT_DIR receives
  config.json    every setting of the run, by section, and the model's architecture
  metrics.json   eval metrics of the best epoch by name (+ every epoch, settings, timings, test)
  best.keras     the best epoch's model, preprocessor, label names and settings included
  vocab.txt      its vocabulary (read with best.keras)
  logs/train/    TensorBoard: train/loss, train/learning_rate, speed, eval/<metric> per epoch
  processes.json the process that trained it (steps, time)
  export/NAME/1  TF Serving SavedModel of the best epoch, with a text signature (--export: other formats)
  predictions.*  the kind's predictions of the best epoch (test_predictions.* for --test)
and must be empty (or pass --overwrite). Exit status: 0 done, 2 bad input, 3 the loss diverged,
128+N stopped by signal N (the best epoch so far is kept). The run is the kind's task
(`electra_tf.finetuning.task`) run by `electra_tf.training.trainer.Trainer`; the export after it is
`electra_tf.serving.exports`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from electra_tf.finetuning.config import COMMAND, add_finetuning_options
from electra_tf.training.task import kinds
from electra_tf.utils.errors import command
from electra_tf.utils.logs import import_tensorflow
from electra_tf.utils.registry import import_modules, imports_in
from electra_tf.utils.run_dir import FinetuneDir

DIVERGED = 3


def build_parser() -> argparse.ArgumentParser:
    import_tensorflow()  # quietly: the kinds' modules import it
    from electra_tf.serving.exports import add_export_options

    parser = argparse.ArgumentParser(prog="python -m electra_tf.finetune", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--overwrite", action="store_true", help="replace a non-empty OUTPUT_DIR")
    parser.add_argument("--config", default=None, help="a fine-tuning run's config.json: rerun it (flags and --set "
                                                       "change it)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="change one setting, e.g. --set adam_epsilon=1e-8 or --set task.qa_head=plain; repeatable")
    parser.add_argument("--kind", default=argparse.SUPPRESS,
                        help=f"the kind of run: {', '.join(kinds(COMMAND))} (default: what --task names, else "
                             "classification)")
    parser.add_argument("--task", default=None,
                        help="a named task: GLUE's (CoLA, SST-2, MRPC, STS-B, QQP, MNLI, QNLI, RTE, WNLI; their TSV "
                             "layouts and official metrics), squad (question answering), conll2003 (entities)")
    parser.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                        help="a module (or .py file) of your own that registers kinds of run or export formats")
    add_finetuning_options(parser)
    add_export_options(parser, "OUTPUT_DIR/export")
    return parser


@command(interrupted="OUTPUT_DIR keeps the best epoch saved so far (metrics.json and best.keras are written whole)")
def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    import_tensorflow()
    import_modules(imports_in(argv))
    args = build_parser().parse_args(argv)
    from electra_tf.finetuning.task import task_from_command
    from electra_tf.serving.exports import DEFAULT_FORMAT, exporter
    from electra_tf.training.trainer import Trainer

    output = FinetuneDir(Path(args.output_dir).resolve())  # absolute, as every command prints
    task = task_from_command(args, output.path)
    eval_only = task.config.run.eval_only
    # An evaluation exports only when asked: the model it evaluated has its export already.
    export = exporter(args, output.path, output.exports, output.name, [] if eval_only else [DEFAULT_FORMAT])
    trainer = Trainer(task, task.config.trainer, task.config.runtime, output.path, lock_name="electra_tf.finetune")
    result = trainer.evaluate(export) if eval_only else trainer.run(after_training=export)
    if result.status == "diverged":
        print(f"error: the loss became non-finite at step {result.diverged_at} ({result.precision}); stopped. "
              f"{output.best_model} holds the best epoch before it, if any. Lower --learning_rate, then rerun with "
              "--overwrite.", file=sys.stderr)
        return DIVERGED
    if result.status == "stopped":
        print(f"Stopped by signal {result.signal} after step {result.step}; {output.best_model} holds the best epoch "
              "so far, if one ended (fine-tuning does not resume: rerun with --overwrite to start again).")
        return 128 + result.signal
    summary = result.summary
    shown = ", ".join(f"{name} {value:.4f}" for name, value in summary["eval"].items() if not isinstance(value, dict))
    which = "Evaluation" if eval_only else f"Best epoch {summary['best_epoch']}"
    print(f"\n{which}: {shown}\n  metrics:     {output.metrics}\n  config:      {output.config}\n"
          f"  model:       {output.best_model}")
    for name, path in summary.get("exports", {}).items():
        print(f"  {name + ':':12} {path}")
    print(f"  TensorBoard: tensorboard --logdir {output.logs}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
