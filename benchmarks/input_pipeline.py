"""Input pipeline throughput vs. what a training step consumes, on this machine.

    python benchmarks/input_pipeline.py                      # builds data from the embedded sample
    python benchmarks/input_pipeline.py --data_dir DIR --vocab DIR/vocab.txt

Prints the pipeline's examples/s and tokens/s (reading, parsing, padding, batching and
ELECTRA masking, as pre-training uses it) and the examples/s one training step of the config
consumes on the same cores, with and without XLA. The target is a pipeline at least 20x faster
than the step, so pre-training is never input-bound.

Then the whole path that feeds `fit` at ELECTRA-Base shapes (128 x 128 tokens): the pipeline,
`ResumableInput` (the Python hop that makes the input position checkpointable), Keras' own
distribution of the dataset, `fit`'s loop and the `InputTracker`, with a train step that does
nothing. 8 A100s consume about 60 such batches/s (NVIDIA: 955 sequences/s per GPU, mixed
precision); the target is 3x that, 180 batches/s, on this machine. Beside it, the two parts
on their own: the tf.data pipeline alone at these shapes (its map and read stages run in
parallel, so it grows with the host's cores) and the hop alone, fed batches already in memory
(one Python thread: its rate is the ceiling of this design on any host).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import common


def measure(dataset, batches: int, warmup: int = 10):
    iterator = iter(dataset)
    for _ in range(warmup):
        next(iterator)
    examples = tokens = 0
    started = time.perf_counter()
    for _ in range(batches):
        batch = next(iterator)
        examples += int(batch["token_ids"].shape[0])
        tokens += int(batch["padding_mask"].numpy().sum())
    elapsed = time.perf_counter() - started
    return examples / elapsed, tokens / elapsed


ACCELERATOR_BATCHES_PER_SECOND = 60  # 8 x A100 at ~955 sequences/s, batch 128


def feed_rate(dataset, steps: int) -> float:
    """Batches/s that reach a do-nothing train step through fit, ResumableInput and the
    strategy's distribution, as the pre-training run feeds its real step."""
    import keras
    import tensorflow as tf

    from electra_tf.training.resumable_input import InputTracker, ResumableInput

    class Idle(keras.Model):
        def train_step(self, data):
            return {"tokens": tf.reduce_sum(data["padding_mask"])}

    model = Idle()
    model.compile()
    resumable = ResumableInput(dataset)
    model.fit(resumable.dataset(), epochs=1, steps_per_epoch=20, verbose=0, shuffle=False, callbacks=[InputTracker(resumable)])
    started = time.perf_counter()
    model.fit(resumable.dataset(), epochs=1, steps_per_epoch=steps, verbose=0, shuffle=False, callbacks=[InputTracker(resumable)])
    return steps / (time.perf_counter() - started)


def step_rate(config, batches, jit_compile: bool, steps: int) -> float:
    import keras

    from electra_tf.pretraining.pretrainer import pretraining_optimizer
    from electra_tf.pretraining.pretrainer import ElectraPretrainer

    keras.utils.clear_session()
    pretrainer = ElectraPretrainer.from_pretraining_config(config)
    pretrainer.compile(optimizer=pretraining_optimizer(config), jit_compile=jit_compile)
    pretrainer.fit(batches.take(3), verbose=0, shuffle=False)  # trace and compile
    started = time.perf_counter()
    pretrainer.fit(batches.take(steps), verbose=0, shuffle=False)
    return steps * config.run.train_batch_size / (time.perf_counter() - started)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_dir", help="a build_data folder (default: build one from the embedded sample)")
    parser.add_argument("--vocab", help="its vocabulary (default: DATA_DIR/vocab.txt)")
    parser.add_argument("--config", default="electra_tiny")
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--feed_steps", type=int, default=300, help="batches for the fit-feeding measurement")
    parser.add_argument("--feed_only", action="store_true", help="only the ELECTRA-Base-shape feeding figures")
    args = parser.parse_args(argv)
    tf, _, _ = common.start(compile_cache=False)

    from electra_tf.pretraining.config import PretrainingConfig
    from electra_tf.data.builder import build_shards
    from electra_tf.data.tokenization import ElectraTokenizer
    from electra_tf.pretraining.input_pipeline import pretraining_dataset

    data_dir = args.data_dir
    if data_dir is None:
        data_dir = os.path.join(tempfile.mkdtemp(prefix="electra_bench_"), "data")
        print(f"Building data from the embedded Wikipedia sample into {data_dir} ...", flush=True)
        build_shards(data_dir)
    tokenizer = ElectraTokenizer(args.vocab or os.path.join(data_dir, "vocab.txt"))
    config = PretrainingConfig.load(args.config, {"vocab_size": tokenizer.vocabulary_size})
    dataset = pretraining_dataset(data_dir, config, tokenizer, config.run.train_batch_size, seed=0)

    cores = len(os.sched_getaffinity(0))
    print(f"\n{common.host()}; config {args.config}, "
          f"batch {config.run.train_batch_size} x {config.run.max_seq_length}")
    if not args.feed_only:
        examples_per_s, tokens_per_s = measure(dataset, args.batches)
        cached = dataset.take(8).cache().repeat()
        list(cached.take(8))
        eager_rate = step_rate(config, cached, jit_compile=False, steps=args.steps)
        xla_rate = step_rate(config, cached, jit_compile=True, steps=args.steps)
        fastest = max(eager_rate, xla_rate)
        print(f"Input pipeline (read, parse, pad, batch, mask): {examples_per_s:,.0f} examples/s, "
              f"{tokens_per_s:,.0f} tokens/s")
        print(f"Training step consumes: {eager_rate:,.0f} examples/s (no XLA), {xla_rate:,.0f} examples/s (XLA)")
        ratio = examples_per_s / fastest
        print(f"Pipeline / fastest step: {ratio:.1f}x (target >= 20x): {'OK' if ratio >= 20 else 'BELOW TARGET'}")

    base = config.replace(train_batch_size=128)
    base_batches = pretraining_dataset(data_dir, base, tokenizer, base.run.train_batch_size, seed=0)
    target = 3 * ACCELERATOR_BATCHES_PER_SECOND
    pipeline_alone = measure(base_batches, args.feed_steps)[0] / base.run.train_batch_size
    in_memory = base_batches.take(8).cache().repeat()
    list(in_memory.take(8))
    hop_alone = feed_rate(in_memory, args.feed_steps)
    rate = feed_rate(base_batches, args.feed_steps)
    print(f"At ELECTRA-Base shapes, batch 128 x {base.run.max_seq_length}; 8 A100s consume "
          f"~{ACCELERATOR_BATCHES_PER_SECOND} batches/s, target {target}/s:")
    print(f"  tf.data pipeline alone ({cores} cores):                  {pipeline_alone:,.1f} batches/s")
    print(f"  ResumableInput + distribution + fit loop alone (in memory): {hop_alone:,.1f} batches/s")
    print(f"  the whole path that feeds fit:                          {rate:,.1f} batches/s: "
          f"{'OK' if rate >= target else 'BELOW TARGET'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
