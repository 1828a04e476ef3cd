"""`python -m electra_tf.pretrain`: the whole ELECTRA pre-training run.

With no arguments: the tiny config on the bundled Wikipedia sample (vocabulary and shards are
built once into runs/data/ and reused), about 10 minutes on 2 CPU cores, ending with the
discriminator exported for TensorFlow Serving under runs/electra_tiny/export/electra_tiny/<version>/
and a summary.

    python -m electra_tf.pretrain --config electra_small --data runs/data/owt128 \\
        --model_dir runs/small --strategy mirrored --mixed_precision mixed_float16

Rerunning the same command continues from the last checkpoint (exact resume: weights,
optimizer, step, random state and input position). SIGTERM/SIGINT save a checkpoint and stop.
Exit status: 0 done; 2 bad arguments, config or data; 3 the loss diverged; 128+N stopped by
signal N (checkpoint saved). The run is `electra_tf.pretraining.task.PretrainingTask` run by
`electra_tf.training.trainer.Trainer`; the export after it is `electra_tf.serving.publish`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from electra_tf.pretraining.config import EvaluationConfig, PretrainingConfig, preset_names, same_preset
from electra_tf.pretraining.phases import RunShortcuts, requested_config
from electra_tf.runtime.config import RuntimeConfig
from electra_tf.training.config import TrainerConfig
from electra_tf.utils.errors import RunError, command
from electra_tf.utils.logs import import_tensorflow
from electra_tf.utils.run_dir import ModelDir
from electra_tf.utils.sections import add_options, given_options

DEFAULT_CONFIG = "electra_tiny"
DIVERGED = 3
# A run shorter than this gets a note on what pre-training of its length was measured to buy.
SHORT_RUN_STEPS = 10_000


def build_parser() -> argparse.ArgumentParser:
    import_tensorflow()  # quietly: the export formats' modules import it
    from electra_tf.serving.exports import add_export_options

    parser = argparse.ArgumentParser(prog="python -m electra_tf.pretrain", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=None,
                        help=f"preset name ({', '.join(preset_names())}) or a JSON config file (default: "
                             f"{DEFAULT_CONFIG}; on a model_dir that holds a run, that run's config; with --init_from "
                             "the source's config)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override one config value, e.g. --set learning_rate=3e-4; repeatable")
    parser.add_argument("--data", nargs="+", default=None,
                        help="a build_data folder or its *.tfrecord glob, or raw text files / wiki dumps / records "
                             "(tokenized and packed on the fly); default: the bundled Wikipedia sample")
    parser.add_argument("--text_field", default="text", metavar="FIELD",
                        help="raw JSON Lines, Parquet or Arrow --data: the field that holds a document's text "
                             "(a dotted path for a nested one; default: text)")
    parser.add_argument("--vocab", default=None,
                        help="vocab.txt (default: the one the data was built with; for raw text, "
                             "learned into MODEL_DIR/vocab.txt)")
    parser.add_argument("--model_dir", default=None,
                        help="checkpoints, TensorBoard logs and the resolved config (default: runs/<config>)")
    parser.add_argument("--steps", type=int, default=None,
                        help="the step the run ends at (overrides num_train_steps; in a later phase, counted "
                             "from the run's first step)")
    parser.add_argument("--batch_size", type=int, default=None,
                        help="global batch size of one forward and backward pass (overrides train_batch_size)")
    parser.add_argument("--gradient_accumulation_steps", type=int, default=None, metavar="K",
                        help="make each update from K batches of --batch_size (the config's "
                             "gradient_accumulation_steps; default 1): the paper's batch on a GPU whose "
                             "memory holds a Kth of it")
    parser.add_argument("--seed", type=int, default=None, help="seed for data order, masking and sampling")
    parser.add_argument("--eval_data", default=None, metavar="DIR",
                        help="a build_data folder whose text is the run's held-out text (its held-out split "
                             "if it has one, else its shards); default: the data's own held-out split")
    parser.add_argument("--phase", type=int, default=None, metavar="P",
                        help="the run's phase: one more than MODEL_DIR's current phase starts a new one from "
                             "its latest checkpoint (e.g. 512-token sequences after 128: weights, optimizer "
                             "state and step count carry over; a new warmup and decay); default: continue the "
                             "current phase")
    parser.add_argument("--init_from", default=None, metavar="MODEL_DIR_OR_CHECKPOINT",
                        help="start a new run from these weights (an earlier run, or a converted release); "
                             "fresh optimizer, schedule and step counter; its vocabulary unless --vocab")
    defined: set[str] = set()
    for title, section in (("evaluation", EvaluationConfig), ("the trainer", TrainerConfig),
                           ("where it runs", RuntimeConfig)):
        add_options(parser.add_argument_group(title), section, defined)
    add_export_options(parser, "MODEL_DIR/export")
    return parser


@command(interrupted="its last checkpoint, if any, is intact; rerun the same command to continue")
def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.steps is not None and args.steps < 1:
        raise RunError("--steps must be at least 1.")
    task, model_dir = _run_settings(args)
    from electra_tf.pretraining.task import FINAL_METRICS
    from electra_tf.serving.exports import exporter
    from electra_tf.training.trainer import Trainer  # heavy: after the argument checks

    model_dir = ModelDir(model_dir)
    export = exporter(args, model_dir.path, model_dir.exports, model_dir.name)
    result = Trainer(task, task.config.trainer, task.config.runtime, model_dir.path,
                     lock_name="electra_tf.pretrain").run(after_training=export)
    return report(result, task.config.evaluation.eval_batches, export is not None, FINAL_METRICS)


def _run_settings(args):
    """(the pre-training task, the model_dir) the arguments ask for. A model_dir that holds a run
    starts from that run's config (not the preset's), so `--set` changes the run's own values;
    `--config` naming another preset (or file) than the run started from names another base."""
    from electra_tf.pretraining.data import DataSource
    from electra_tf.pretraining.restore import source_model_dir
    from electra_tf.pretraining.task import PretrainingTask

    config_name, vocab, default_name = args.config or DEFAULT_CONFIG, args.vocab, None
    if args.init_from:
        source = ModelDir(source_model_dir(args.init_from)[0])
        config_name = args.config or str(source.config)
        vocab = args.vocab or str(source.vocab)
        default_name = f"{source.name}-continued"
    model_dir = Path(args.model_dir) if args.model_dir else ModelDir.default_for(
        default_name or Path(config_name).stem).path
    saved = ModelDir(model_dir).config
    saved_config = PretrainingConfig.load(str(saved)) if saved.is_file() else None
    if args.config and not (saved_config and same_preset(args.config, saved_config.preset)):
        base = PretrainingConfig.load(args.config)
    else:
        base = saved_config or PretrainingConfig.load(config_name)
    config = requested_config(base, args.set, RunShortcuts(args.steps, args.batch_size, args.seed,
                                                           args.gradient_accumulation_steps), saved_config)
    flags = {name: given_options(args, section) for name, section in (
        ("evaluation", EvaluationConfig), ("trainer", TrainerConfig), ("runtime", RuntimeConfig))}
    config = config.with_sections({name: values for name, values in flags.items() if values}, "command line")
    source = DataSource(tuple(args.data) if args.data else None, vocab, args.text_field, args.eval_data)
    return PretrainingTask(config, source, phase=args.phase, init_from=args.init_from), model_dir


def report(result, eval_batches: int, exported: bool = True, final_metrics: tuple = ()) -> int:
    """Prints how the run ended; returns its exit status."""
    if result.status == "diverged" and result.overflowing:
        from electra_tf.training.callbacks import MAX_CONSECUTIVE_SKIPS
        print(f"error: float16 gradients overflowed on {MAX_CONSECUTIVE_SKIPS} batches in a row at step "
              f"{result.diverged_at} (the loss scale halved at each, {MAX_CONSECUTIVE_SKIPS} times): the overflow "
              "does not come from the scale, and none of them made an update; stopped. The last good checkpoint is intact: "
              f"{result.latest_checkpoint or 'none yet'}. Rerun with --mixed_precision mixed_bfloat16 (GPUs since "
              "Ampere; the range of float32) or float32.", file=sys.stderr)
        return DIVERGED
    if result.status == "diverged":
        print(f"error: the loss became non-finite at step {result.diverged_at} ({result.precision}); stopped. "
              f"The last good checkpoint is intact: {result.latest_checkpoint or 'none yet'}. Lower the "
              "learning rate or check the data, then rerun.", file=sys.stderr)
        return DIVERGED
    if result.status == "stopped":
        print(f"Stopped by signal {result.signal} after step {result.step}; checkpoint saved: "
              f"{result.latest_checkpoint}. Rerun the same command to continue.")
        return 128 + result.signal
    model_dir = ModelDir(result.run_dir.resolve())  # absolute: the summary is read from anywhere
    if not result.is_chief:
        print(f"Done at step {result.step} (the chief reports the run).")
        return 0
    exports = result.summary.get("exports") or {}
    if exports:
        export = "; ".join(f"{path} ({name})" for name, path in exports.items())
    elif not exported:
        export = f"not exported (--no-export; python -m electra_tf.export --model_dir {model_dir.path} makes one)"
    else:
        export = "none (objective mlm has no discriminator; fine-tune the checkpoints' encoder)"
    print(f"\nDone in {result.seconds / 60:.1f} min at step {result.step}.")
    if result.skipped_steps:
        print(f"  float16 loss scaling skipped {result.skipped_steps} batch(es) whose gradients overflowed "
              f"(no update; the run trained {result.step:,} steps all the same)")
    print(f"  config:        {model_dir.config}")
    print(f"  checkpoints:   {model_dir.checkpoints} (latest {Path(result.latest_checkpoint).name})")
    print(f"  discriminator: {export}")
    print(f"  TensorBoard:   tensorboard --logdir {model_dir.path}")
    if result.summary.get("backbone"):
        print(f"  backbone:      {model_dir.backbone} (what fine-tuning and the exports start from)")
    print(f"  summary:       {model_dir.metrics}")
    print(f"Final metrics on {eval_batches} batches of {result.summary['evaluated_on']}:")
    for key in final_metrics:
        if key in result.metrics:
            print(f"  {key:28s} {result.metrics[key]:.4f}")
    if result.step < SHORT_RUN_STEPS:
        print(f"note: {result.step:,} steps is a short run. At the tiny preset's 2,000 steps, fine-tuning from the "
              "discriminator lost to random initialisation on topic and spam classification; by 7,000 steps on "
              "the task's own text it gained on every seed (docs/results.md, \"What pre-training buys downstream\"). "
              "Compare on your task: python -m electra_tf.finetune --pretrained "
              f"{model_dir.path} --train ... --eval ... and the same command with --random_init.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
