"""`python -m electra_tf.pretrain`: the whole ELECTRA pre-training run.

With no arguments: the tiny config on the bundled Wikipedia sample (vocabulary and shards are
built once into runs/data/ and reused), about 10 minutes on 2 CPU cores, ending with the
discriminator exported for TensorFlow Serving under exports/<run>/<version>/ and a summary.

    python -m electra_tf.pretrain --config electra_small --data runs/data/owt128 \\
        --model_dir runs/small --strategy mirrored --mixed_precision mixed_float16

Rerunning the same command continues from the last checkpoint (exact resume: weights,
optimizer, step, random state and input position). SIGTERM/SIGINT save a checkpoint and stop.
Exit status: 0 done; 2 bad arguments, config or data; 3 the loss diverged; 128+N stopped by
signal N (checkpoint saved).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from electra_tf.config import ConfigError, ElectraConfig

DEFAULT_CONFIG = "electra_tiny"
DATA_CACHE = Path("runs") / "data"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="python -m electra_tf.pretrain", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=DEFAULT_CONFIG,
                        help="preset name (electra_tiny, electra_small, electra_small_plus, electra_base, "
                             "electra_large) or a JSON config file (default: electra_tiny)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override one config value, e.g. --set learning_rate=3e-4; repeatable")
    parser.add_argument("--data", nargs="+", default=None,
                        help="a build_data folder or its *.tfrecord glob, or raw text files / wiki dumps "
                             "(tokenized and packed on the fly); default: the bundled Wikipedia sample")
    parser.add_argument("--vocab", default=None,
                        help="vocab.txt (default: the one the data was built with; for raw text, "
                             "learned into MODEL_DIR/vocab.txt)")
    parser.add_argument("--model_dir", default=None,
                        help="checkpoints, TensorBoard logs and the resolved config (default: runs/<config>)")
    parser.add_argument("--steps", type=int, default=None, help="training steps (overrides num_train_steps)")
    parser.add_argument("--batch_size", type=int, default=None,
                        help="global batch size (overrides train_batch_size)")
    parser.add_argument("--strategy", default="auto",
                        choices=("auto", "one_device", "mirrored", "multi_worker", "tpu"))
    parser.add_argument("--mixed_precision", default="auto",
                        choices=("auto", "float32", "mixed_float16", "mixed_bfloat16"))
    parser.add_argument("--xla", action=argparse.BooleanOptionalAction, default=None,
                        help="compile the train step with XLA (default: on for GPU/TPU, off on CPU)")
    parser.add_argument("--checkpoint_every", type=int, default=200, help="steps between checkpoints")
    parser.add_argument("--keep_checkpoints", type=int, default=3)
    parser.add_argument("--log_every", type=int, default=50, help="steps between progress lines and scalars")
    parser.add_argument("--sample_every", type=int, default=200,
                        help="steps between TensorBoard replacement samples")
    parser.add_argument("--eval_batches", type=int, default=20,
                        help="batches (fresh masking) for the final metrics")
    parser.add_argument("--seed", type=int, default=None, help="seed for data order, masking and sampling")
    parser.add_argument("--export_dir", default="exports", help="where the discriminator is exported")
    parser.add_argument("--profile_steps", default=None, metavar="START,STOP",
                        help="trace steps START..STOP with the TensorFlow profiler")
    args = parser.parse_args(argv)
    for name in ("checkpoint_every", "keep_checkpoints", "log_every", "sample_every", "eval_batches"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1.")
    if args.steps is not None and args.steps < 1:
        parser.error("--steps must be at least 1.")
    if args.profile_steps:
        try:
            start, stop = (int(x) for x in args.profile_steps.split(","))
            assert 0 <= start < stop
        except (ValueError, AssertionError):
            parser.error("--profile_steps takes START,STOP with 0 <= START < STOP.")
        args.profile_steps = (start, stop)
    return args


class RunError(ValueError):
    """The run cannot start as asked."""


def resolve_config(args) -> tuple[ElectraConfig, str]:
    config = ElectraConfig.load(args.config).with_overrides(args.set)
    overrides = {}
    if args.steps is not None:
        overrides["num_train_steps"] = args.steps
        overrides["num_warmup_steps"] = min(config.num_warmup_steps, args.steps // 10)
    if args.batch_size is not None:
        overrides["train_batch_size"] = args.batch_size
    if args.seed is not None:
        overrides["seed"] = args.seed
    name = Path(args.config).stem
    return (config.replace(**overrides) if overrides else config), name


def bundled_data_dir(max_seq_length: int) -> Path:
    """Where the default run builds (once) and reuses the bundled Wikipedia sample."""
    return DATA_CACHE / f"wiki_sample_seq{max_seq_length}"


def prepare_data(args, config: ElectraConfig, model_dir: Path):
    """(kind, location, tokenizer, description) for the run's data."""
    from electra_tf import build_data
    from electra_tf.data import read_metadata, resolve_data
    from electra_tf.tokenization import ElectraTokenizer

    if args.data is None:
        data_dir = bundled_data_dir(config.max_seq_length)
        if not (data_dir / "metadata.json").is_file():
            print(f"Preparing the bundled Wikipedia sample in {data_dir} (once; later runs reuse it) ...",
                  flush=True)
            code = build_data.main(["--output_dir", str(data_dir), "--max_seq_length",
                                    str(config.max_seq_length), "--num_shards", "8",
                                    "--num_workers", str(min(8, os.cpu_count() or 1)), "--overwrite"])
            if code != 0:
                raise RunError("could not build the bundled Wikipedia sample.")
        kind, location = "records", str(data_dir)
    else:
        kind, paths = resolve_data(args.data[0])
        location = paths[0] if kind == "records" else args.data
    if kind == "records":
        vocab = args.vocab or read_metadata(location)["vocab_file"]
        description = f"{location} ({read_metadata(location)['examples']:,} packed examples)"
    else:
        vocab = args.vocab or str(model_dir / "vocab.txt")
        if not Path(vocab).is_file():
            from electra_tf.build_vocab import DEFAULT_VOCAB_SIZE, build_vocabulary
            build_vocabulary(list(location), DEFAULT_VOCAB_SIZE, Path(vocab))
        description = f"raw text, packed on the fly: {' '.join(location)}"
    return kind, location, ElectraTokenizer(vocab), description


def check_resume_config(model_dir: Path, config: ElectraConfig) -> None:
    saved_path = model_dir / "config.json"
    if not saved_path.is_file():
        return
    saved = ElectraConfig.load(str(saved_path)).to_dict()
    differing = sorted(k for k, v in config.to_dict().items() if saved.get(k) != v)
    if differing:
        details = ", ".join(f"{k}: {saved.get(k)!r} -> {getattr(config, k)!r}" for k in differing)
        raise RunError(f"{model_dir} holds a run with a different config ({details}). Rerun with "
                       "the same settings to continue it, or choose a new --model_dir.")


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        config, name = resolve_config(args)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2

    # Heavy imports after argument checks, so --help and typos answer at once.
    import keras
    import tensorflow as tf

    from electra_tf.callbacks import CheckpointSaver, ReplacementSamples, StepProfiler, TrainingMonitor
    from electra_tf.checkpointing import ResumableInput, RunCheckpoint
    from electra_tf.corpus import InputError
    from electra_tf.data import DataError, explain_read_error, pretraining_dataset, raw_text_dataset
    from electra_tf.optimization import create_optimizer
    from electra_tf.pretrainer import ElectraPretrainer
    from electra_tf.runtime import create_strategy, resolve_runtime
    from electra_tf.tokenization import VocabularyError, write_vocabulary

    model_dir = Path(args.model_dir or Path("runs") / name)
    started = time.monotonic()
    try:
        kind, location, tokenizer, data_description = prepare_data(args, config, model_dir)
        if config.vocab_size != tokenizer.vocabulary_size:
            config = config.replace(vocab_size=tokenizer.vocabulary_size)
        check_resume_config(model_dir, config)
        runtime = resolve_runtime(args.strategy, args.mixed_precision, args.xla)
        strategy = create_strategy(runtime)
        keras.config.set_dtype_policy(runtime.precision)
        model_dir.mkdir(parents=True, exist_ok=True)
        config.save(model_dir / "config.json")
        if not (model_dir / "vocab.txt").exists():
            write_vocabulary(model_dir / "vocab.txt", tokenizer.vocabulary)

        def make_dataset(seed):
            if kind == "records":
                return pretraining_dataset(location, config, tokenizer, config.train_batch_size, seed=seed)
            return raw_text_dataset(location, config, tokenizer, config.train_batch_size, seed=seed)

        resumable = ResumableInput(make_dataset(config.seed))
        held_out = [batch for batch in make_dataset(config.seed + 1).take(args.eval_batches)]
        # Initial weights and every dropout seed generator follow the config's seed.
        keras.utils.set_random_seed(config.seed)
        with strategy.scope():
            pretrainer = ElectraPretrainer.from_electra_config(config)
            pretrainer.compile(optimizer=create_optimizer(config), jit_compile=runtime.xla)
            pretrainer.optimizer.build(pretrainer.trainable_variables)
        checkpoint = RunCheckpoint(model_dir / "checkpoints", pretrainer, resumable, args.keep_checkpoints)
        resumed_from = checkpoint.restore_latest()
    except (ConfigError, DataError, InputError, VocabularyError, RunError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2

    total = config.num_train_steps
    log_dir = model_dir / "logs"
    writer = tf.summary.create_file_writer(str(log_dir / "train"))
    _write_run_description(writer, config, runtime, data_description, checkpoint.step)
    kept = pretrainer.discriminator or pretrainer.generator  # the MLM baseline keeps its generator
    print(f"ELECTRA pre-training: {name}, {kept.count_params():,} parameters kept; "
          f"{total:,} steps of {config.train_batch_size} x {config.max_seq_length}.")
    print(f"  data: {data_description}; vocabulary {tokenizer.vocabulary_size:,} tokens")
    print(f"  runtime: {runtime.strategy_name} ({runtime.num_replicas} replica(s)), {runtime.precision}, "
          f"XLA {'on' if runtime.xla else 'off'}" + (f" [{'; '.join(runtime.notes)}]" if runtime.notes else ""))
    print(f"  resumed from step {resumed_from} ({checkpoint.manager.latest_checkpoint})" if resumed_from is not None
          else f"  starting at step 0; checkpoints every {args.checkpoint_every} steps in {model_dir / 'checkpoints'}")
    print(f"  watch it: tensorboard --logdir {model_dir}", flush=True)

    monitor = TrainingMonitor(writer, total, config.train_batch_size, resumable, args.log_every,
                              stop_on_nonfinite=runtime.precision != "mixed_float16")
    saver = CheckpointSaver(checkpoint, args.checkpoint_every)
    callbacks = [monitor, saver]
    if pretrainer.discriminator is not None:
        callbacks.append(ReplacementSamples(writer, held_out[0], tokenizer, args.sample_every))
    if args.profile_steps:
        callbacks.append(StepProfiler(str(log_dir / "profile"), *args.profile_steps))

    remaining = total - checkpoint.step
    if remaining > 0:
        try:
            pretrainer.fit(resumable.dataset(), epochs=1, steps_per_epoch=remaining, verbose=0,
                           callbacks=callbacks)
        except tf.errors.DataLossError as error:
            print(f"error: {explain_read_error(error, location) if kind == 'records' else error}",
                  file=sys.stderr)
            return 2
    else:
        print(f"  already trained to step {checkpoint.step}: nothing left to train.")

    if monitor.diverged_at is not None:
        last = checkpoint.manager.latest_checkpoint
        print(f"error: the loss became non-finite at step {monitor.diverged_at} ({runtime.precision}); "
              f"stopped. The last good checkpoint is intact: {last or 'none yet'}. Lower the learning "
              "rate or check the data, then rerun.", file=sys.stderr)
        return 3
    if saver.received is not None:
        print(f"Stopped by signal {saver.received} after step {checkpoint.step}; checkpoint saved: "
              f"{checkpoint.manager.latest_checkpoint}. Rerun the same command to continue.")
        return 128 + int(saver.received)
    if not saver.saved_paths or not saver.saved_paths[-1].endswith(f"-{checkpoint.step}"):
        checkpoint.save()

    metrics = pretrainer.evaluate(tf.data.Dataset.from_tensor_slices(
        {k: tf.stack([b[k] for b in held_out]) for k in held_out[0]}), return_dict=True, verbose=0)
    with writer.as_default(step=checkpoint.step):
        for key, value in metrics.items():
            tf.summary.scalar(f"final_eval/{key}", value)
    writer.flush()
    if pretrainer.discriminator is not None:
        from electra_tf.export import export_discriminator
        export_path = export_discriminator(pretrainer.discriminator, tokenizer, config,
                                           Path(args.export_dir), model_dir.name)
    else:
        export_path = "none (objective mlm has no discriminator; the model is in the checkpoints)"
    _print_summary(model_dir, checkpoint, export_path, metrics, args.eval_batches, time.monotonic() - started)
    return 0


def _write_run_description(writer, config, runtime, data_description, step):
    import tensorflow as tf
    from tensorboard.plugins.hparams import api as hparams

    text = "\n".join([
        f"data: {data_description}", f"runtime: {runtime.strategy_name}, {runtime.precision}, "
        f"XLA {'on' if runtime.xla else 'off'}", "", "```json", config.to_json(), "```"])
    with writer.as_default(step=step):
        tf.summary.text("run/config", text)
        hparams.hparams({key: (value if isinstance(value, (int, float, str, bool)) else str(value))
                         for key, value in config.to_dict().items()})
    writer.flush()


def _print_summary(model_dir, checkpoint, export_path, metrics, eval_batches, elapsed):
    print(f"\nDone in {elapsed / 60:.1f} min at step {checkpoint.step}.")
    print(f"  config:        {model_dir / 'config.json'}")
    print(f"  checkpoints:   {model_dir / 'checkpoints'} (latest {checkpoint.manager.latest_checkpoint})")
    print(f"  discriminator: {export_path} (TensorFlow Serving SavedModel)")
    print(f"  TensorBoard:   tensorboard --logdir {model_dir}")
    print(f"Final metrics on {eval_batches} batches with fresh masking:")
    for key in ("masked_lm_accuracy", "masked_lm_loss", "sampled_masked_lm_accuracy", "disc_auc",
                "disc_accuracy", "disc_precision", "disc_recall", "disc_loss", "loss"):
        if key in metrics:
            print(f"  {key:28s} {metrics[key]:.4f}")


if __name__ == "__main__":
    sys.exit(main())
