"""The pre-training step's speed against transformers' PyTorch ELECTRA and the machine's matmul
peak, measured in one run.

    python benchmarks/pretrain_step.py                   # ELECTRA-Small 32 x 128: float32, mixed_bfloat16; XLA off, on
    python benchmarks/pretrain_step.py --peer            # and transformers' PyTorch ELECTRA: each row's ratio
    python benchmarks/pretrain_step.py --sizes small --batch 128 --precisions mixed_bfloat16 --xla on --peer
                                                         # on a GPU: the paper's Small batch, the GPU defaults
    python benchmarks/pretrain_step.py --sizes small --batch 128 --precisions mixed_bfloat16 --xla on \
        --accumulation 1 4                               # the same update's batch as 1 or 4 micro-batches

Each row is the package's own step (`ElectraPretrainer` compiled with `create_optimizer`, as
`python -m electra_tf.pretrain` compiles it), driven by `fit` on
one synthetic batch already in memory, so the input pipeline costs nothing. `--peer` times
transformers' PyTorch ELECTRA taking the same step on the same batch and device
(`transformers_step.py`, in a process of its own; needs the `.[reference]` extra). Timing is
done in `--rounds` alternating rounds, the peer and every row in turn, so a slow minute of a
shared machine falls on both; each row reports the median round. Printed per row: the first
step (building, tracing, compiling or loading the compiled program, the first update), the step
time, tokens/s, the step's matrix-multiply FLOPs (common.training_flops) as GFLOP/s, the
matmul peak in the same precision (bfloat16 and float16 rows against the bfloat16 peak),
measured in every round beside that round's steps (the median is printed), the share of it the
step reaches (the median of the rounds' shares), the peer's step time over ours, and on a GPU
the allocator's peak memory during the row's timed steps (the other rows' weights and optimizer
state stay resident). `--accumulation K ...` adds a row per K:
the same update's batch (`--batch`) made of K micro-batches (`gradient_accumulation_steps`).

The first XLA step compiles unless the compile cache (`ELECTRA_TF_COMPILE_CACHE`; on with an
`on` row, as in a command run with `--xla`) holds the program: run twice to see both, or set it
to `off`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import common

PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")


def build(config, batch: dict, precision: str, xla: bool, accumulation: int = 1):
    """(the pre-trainer, seconds to its first update): built, compiled and trained one step."""
    import keras

    from electra_tf.pretraining.pretrainer import ElectraPretrainer
    from electra_tf.pretraining.pretrainer import pretraining_optimizer

    keras.config.set_dtype_policy(precision)
    keras.utils.set_random_seed(0)
    started = time.perf_counter()
    pretrainer = ElectraPretrainer.from_pretraining_config(config)
    pretrainer.compile(optimizer=pretraining_optimizer(config), jit_compile=xla, gradient_accumulation_steps=accumulation)
    pretrainer.fit(dataset(batch), steps_per_epoch=1, verbose=0, shuffle=False)
    first_step = time.perf_counter() - started
    keras.config.set_dtype_policy("float32")
    return pretrainer, first_step


def dataset(batch: dict):
    import tensorflow as tf

    return tf.data.Dataset.from_tensors(batch).repeat()


def step_seconds(pretrainer, batch: dict, steps: int) -> tuple[float, float | None]:
    """(seconds per step over `steps` steps of `fit` after one that is not timed, the GPU
    allocator's peak GiB meanwhile, or None on a CPU)."""
    import tensorflow as tf

    gpu = bool(tf.config.list_logical_devices("GPU"))
    if gpu:
        tf.config.experimental.reset_memory_stats("GPU:0")
    times = []

    import keras

    class Ends(keras.callbacks.Callback):
        def on_train_batch_end(self, step, logs=None):
            times.append(time.perf_counter())

    pretrainer.fit(dataset(batch), steps_per_epoch=steps + 1, verbose=0, shuffle=False, callbacks=[Ends()])
    peak = tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**30 if gpu else None
    return (times[-1] - times[0]) / steps, peak


def peer_seconds(preset: str, batch: dict, precision: str, steps: int, python: str | None) -> dict:
    """transformers' step on `batch` (transformers_step.py in a process of its own: TensorFlow
    holds its own GPU memory and CUDA libraries)."""
    with tempfile.TemporaryDirectory() as folder:
        batch_file = Path(folder) / "batch.npz"
        np.savez(batch_file, **batch)
        command = [python or sys.executable, str(Path(__file__).with_name("transformers_step.py")), "--preset", preset,
                   "--batch_file", str(batch_file), "--precision", precision, "--steps", str(steps)]
        done = subprocess.run(command, capture_output=True, text=True)
    lines = done.stdout.strip().splitlines()
    if done.returncode or not lines:
        said = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"the PyTorch peer failed (exit {done.returncode}): {said}")
    return json.loads(lines[-1])


def measure(args, size: str, precision: str) -> list[list]:
    """The rows of one size and precision: the peer's, then one per XLA setting."""
    config, batch_size = common.benchmark_config(size, args.batch)
    batch = common.synthetic_batch(config, batch_size)
    flops = common.training_flops(config, batch_size)
    peak_dtype = "float32" if precision == "float32" else "bfloat16"
    cells = [(xla, k) for xla in args.xla for k in args.accumulation]
    models = {cell: build(config, batch, precision, cell[0] == "on", cell[1]) for cell in cells}
    times = {cell: [] for cell in cells}
    peaks_gib = {cell: [] for cell in cells}
    peer_times, peer, peaks = [], None, []
    for _ in range(args.rounds):
        # The peak again in every round: a shared host's speed drifts within a run, and each
        # round's steps are set against the peak measured beside them.
        peaks.append(common.matmul_peak(peak_dtype))
        if args.peer:
            peer = peer_seconds(common.SIZES[size][0], batch, precision, args.steps, args.peer_python)
            peer_times.append(peer["step_s"])
        for cell, (pretrainer, _) in models.items():
            seconds, peak_gib = step_seconds(pretrainer, batch, args.steps)
            times[cell].append(seconds)
            peaks_gib[cell].append(peak_gib)

    def share_of_peak(step_times):  # the median over rounds of each round's GFLOP/s over its peak
        return statistics.median(flops / step / 1e9 / peak for step, peak in zip(step_times, peaks))

    rows = []
    shape = f"{batch_size} x {config.run.max_seq_length}"
    peak = f"{statistics.median(peaks):.0f}"
    if peer:
        step = statistics.median(peer_times)
        rows.append(["transformers", size, precision, "-", shape, "1", f"{peer['first_step_s']:.1f}", f"{1000 * step:.1f}",
                     f"{batch_size * config.run.max_seq_length / step:,.0f}", f"{flops / step / 1e9:.1f}", peak,
                     f"{share_of_peak(peer_times):.1%}", "1.00", "-"])
    for (xla, k), (_, first_step) in models.items():
        step = statistics.median(times[(xla, k)])
        ratio = f"{statistics.median(peer_times) / step:.2f}" if peer else "-"
        rows.append(["electra_tf", size, precision, xla, shape, str(k), f"{first_step:.1f}", f"{1000 * step:.1f}",
                     f"{batch_size * config.run.max_seq_length / step:,.0f}", f"{flops / step / 1e9:.1f}", peak,
                     f"{share_of_peak(times[(xla, k)]):.1%}", ratio,
                     "-" if peaks_gib[(xla, k)][0] is None else f"{max(peaks_gib[(xla, k)]):.1f}"])
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=["small"], choices=sorted(common.SIZES))
    parser.add_argument("--precisions", nargs="+", default=["float32", "mixed_bfloat16"], choices=PRECISIONS)
    parser.add_argument("--xla", nargs="+", default=["off", "on"], choices=["off", "on"])
    parser.add_argument("--batch", type=int, default=None, help="examples a step (default: 32 for small, 8 for base)")
    parser.add_argument("--accumulation", nargs="+", type=int, default=[1], metavar="K",
                        help="micro-batches per update (the update's batch stays --batch); a row for each")
    parser.add_argument("--steps", type=int, default=10, help="timed steps a round")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (the median is reported)")
    parser.add_argument("--peer", action="store_true", help="also time transformers' PyTorch ELECTRA (.[reference])")
    parser.add_argument("--peer_python", default=None, metavar="PYTHON",
                        help="an interpreter that has torch and transformers (default: this one)")
    args = parser.parse_args(argv)
    tf, cache, gpus = common.start(xla=True if "on" in args.xla else None)
    if gpus and "mixed_float16" in args.precisions and "on" in args.xla:
        from electra_tf.runtime.xla import use_float16_safe_gemms

        use_float16_safe_gemms()  # as runs do: XLA's Triton GEMMs made non-finite float16 gradients
    print(f"{common.host()}; XLA compile cache: {cache or 'off'}\n")
    header = ["step", "size", "precision", "XLA", "batch", "micro-batches", "first step s", "step ms", "tokens/s", "GFLOP/s",
              "peak GFLOP/s", "of peak", "x PyTorch", "GPU GiB"]
    rows = [row for size in args.sizes for precision in args.precisions for row in measure(args, size, precision)]
    print(common.markdown_table(header, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
