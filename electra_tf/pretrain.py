"""`python -m electra_tf.pretrain`: ELECTRA pre-training.

Interim version: until the data pipeline and the full run (strategies, resume, TensorBoard,
export) land, this trains the configured model on the synthetic Markov language of
`electra_tf.synthetic`, with masking done per step inside tf.data, and reports what the
generator and discriminator learned. It is a real run of the real step, on toy data.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from electra_tf.config import ConfigError, ElectraConfig

DEMO_VOCAB_SIZE = 512


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m electra_tf.pretrain", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="electra_tiny",
                        help="preset name (configs/<name>.json) or path to a JSON config")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override one config value; repeatable")
    parser.add_argument("--steps", type=int, default=400, help="training steps (default 400)")
    parser.add_argument("--batch_size", type=int, default=None,
                        help="global batch size (default: the config's train_batch_size)")
    parser.add_argument("--model_dir", default="runs/demo",
                        help="where the config and the trained discriminator (.keras) go")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        config = ElectraConfig.load(args.config).with_overrides(args.set)
        # The demo language has a few hundred words, learnable in a few hundred steps.
        config = config.replace(vocab_size=DEMO_VOCAB_SIZE, num_train_steps=args.steps,
                                num_warmup_steps=min(config.num_warmup_steps, args.steps // 10),
                                train_batch_size=args.batch_size or config.train_batch_size)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2

    # Imported here so --help and config errors answer without loading TensorFlow.
    import tensorflow as tf

    from electra_tf import synthetic
    from electra_tf.optimization import create_optimizer
    from electra_tf.pretrainer import ElectraPretrainer

    model_dir = Path(args.model_dir)
    config.save(model_dir / "config.json")
    sequences = synthetic.markov_sequences(
        4096, config.max_seq_length, config.vocab_size, seed=config.seed)

    def batches(seed, count):
        examples = tf.data.Dataset.from_tensor_slices(sequences).shuffle(4096, seed=seed).repeat()
        examples = examples.batch(config.train_batch_size, drop_remainder=True)
        return synthetic.remasked_each_step(config, examples, seed).take(count).prefetch(2)

    pretrainer = ElectraPretrainer.from_electra_config(config)
    pretrainer.compile(optimizer=create_optimizer(config))
    print(f"Pre-training {args.config} ({pretrainer.discriminator.count_params():,} discriminator "
          f"parameters) for {args.steps} steps of {config.train_batch_size} x "
          f"{config.max_seq_length} tokens on the synthetic demo language "
          f"({DEMO_VOCAB_SIZE} token ids).")
    before = pretrainer.evaluate(batches(1, 8), return_dict=True, verbose=0)
    started = time.time()
    pretrainer.fit(batches(config.seed, args.steps), verbose=2 if not sys.stdout.isatty() else 1)
    elapsed = time.time() - started
    after = pretrainer.evaluate(batches(1, 8), return_dict=True, verbose=0)

    path = model_dir / "discriminator.keras"
    temporary = path.with_name(".discriminator.tmp.keras")
    pretrainer.discriminator.save(temporary)
    temporary.replace(path)

    print(f"\nTrained {args.steps} steps in {elapsed:.0f} s "
          f"({args.steps * config.train_batch_size / elapsed:.0f} examples/s).")
    print(f"{'held-out metric':28s} {'before':>8s} {'after':>8s}")
    for name in ("masked_lm_loss", "masked_lm_accuracy", "disc_loss", "disc_auc", "loss"):
        print(f"{name:28s} {before[name]:8.4f} {after[name]:8.4f}")
    print(f"\nConfig: {model_dir / 'config.json'}\nDiscriminator: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
