"""Where the pre-training step's time goes, from the TensorFlow profiler's own trace.

    python benchmarks/step_profile.py                       # ELECTRA-Small, batch 32 x 128, float32
    python benchmarks/step_profile.py --preset electra_tiny --batch 32 --steps 3 --logdir runs/profile

The project's step (`ElectraPretrainer` compiled with `create_optimizer`, driven by `fit`, on
synthetic batches in memory) is warmed up, then `--steps` steps are traced with
`tf.profiler.experimental` into `--logdir` (open it in TensorBoard's Profile tab after
`pip install tensorboard-plugin-profile`). The script then reads the trace itself (the
`.xplane.pb` the profiler wrote) and prints, per step:

- the time of every TensorFlow op, summed by kind: matrix multiplies, the vocabulary softmax and
  its cross-entropy, random numbers (dropout masks, sampling), gathers and scatters (embedding
  lookups, masked positions, their gradients), the optimizer's update (ops under the
  optimizer's name scope), and the elementwise rest (LayerNorm, GELU, bias, dropout
  application, casts), with the top op types;
- wall time per step, and how much of it no op was running (host overhead: Python, `fit`'s
  loop, the executor's scheduling between ops).

Op times are wall time on the executor's threads: two ops running at once both count, so the
kinds can add up to more than the busy time. The profiler adds a little overhead of its own.

Last, the ceiling the matrix multiplies themselves set: every matmul shape of the step (dense
layers of both networks, the attention's batched products, the embedding projection, the tied
vocabulary layer at the masked positions) timed alone, against the 2048^3 fp32 GEMM peak measured
in the same run, and the step's fraction of peak if it did nothing but those matmuls at those
rates (backward products counted as two more of the forward shape).
"""

from __future__ import annotations

import argparse
import collections
import glob
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # pretrain_step: the GEMM peak and FLOP count
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

MATMUL = ("MatMul", "BatchMatMul", "Einsum", "Conv")
SOFTMAX = ("Softmax", "SoftmaxCrossEntropy", "LogSoftmax")
GATHER = ("Gather", "Scatter", "UnsortedSegment", "SegmentSum", "OneHot", "ResourceGather")
KINDS = ("matrix multiplies", "softmax + cross-entropy", "random numbers", "gather/scatter", "optimizer update",
         "elementwise (LayerNorm, GELU, bias, dropout, casts, ...)")


def kind_of(op_name: str, op_type: str, optimizer_scope: str) -> str:
    """The kind an op's time is counted under; the optimizer's ops by their name scope (a path
    segment: Grappler's rewrites put "ArithmeticOptimizer" into other ops' names)."""
    if f"/{optimizer_scope}/" in f"/{op_name}/":
        return KINDS[4]
    if any(key in op_type for key in MATMUL):
        return KINDS[0]
    if any(key in op_type for key in SOFTMAX):
        return KINDS[1]
    if "Random" in op_type:
        return KINDS[2]
    if any(key in op_type for key in GATHER):
        return KINDS[3]
    return KINDS[5]


def read_trace(logdir: str):
    """(op events [(name, type, start_ps, end_ps)], first and last step boundaries in ps) from the
    newest trace in `logdir`."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    paths = sorted(glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb")), key=os.path.getmtime)
    if not paths:
        raise SystemExit(f"no profiler trace under {logdir}")
    space = xplane_pb2.XSpace()
    space.ParseFromString(Path(paths[-1]).read_bytes())
    host = next(plane for plane in space.planes if plane.name == "/host:CPU")
    ops, steps = [], []
    for line in host.lines:
        base = line.timestamp_ns * 1000
        for event in line.events:
            name = host.event_metadata[event.metadata_id].name
            start = base + event.offset_ps
            if line.name == "python" and name.startswith("EagerLocalExecute: __inference_multi_step_on_iterator"):
                steps.append((start, start + event.duration_ps))
            elif line.name.startswith("tf_Compute") and ":" in name and "::" not in name:
                op_name, op_type = name.rsplit(":", 1)
                ops.append((op_name, op_type, start, start + event.duration_ps))
    return ops, sorted(steps)


def busy_time(intervals) -> float:
    """Length of the union of [start, end) intervals."""
    total, current_start, current_end = 0, None, None
    for start, end in sorted(intervals):
        if current_end is None or start > current_end:
            if current_end is not None:
                total += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    if current_end is not None:
        total += current_end - current_start
    return total


def step_matmuls(config, batch: int):
    """(name, count per step forward, (batch dims..., m, k, n)) of the step's matrix multiplies."""
    tokens, length = batch * config.max_seq_length, config.max_seq_length
    shapes = []
    for network, hidden, intermediate, heads, layers in (
            ("discriminator", config.hidden_size, config.intermediate_size, config.num_heads, config.num_layers),
            ("generator", config.generator_hidden_size, config.generator_intermediate_size,
             config.generator_num_heads, config.generator_num_layers)):
        head_size = hidden // heads
        shapes += [(f"{network} QKV + attention output", 4 * layers, (tokens, hidden, hidden)),
                   (f"{network} FFN in", layers, (tokens, hidden, intermediate)),
                   (f"{network} FFN out", layers, (tokens, intermediate, hidden)),
                   (f"{network} attention scores QK^T", layers, (batch * heads, length, head_size, length)),
                   (f"{network} attention x V", layers, (batch * heads, length, length, head_size))]
        if config.embedding_size != hidden:
            shapes.append((f"{network} embedding projection", 1, (tokens, config.embedding_size, hidden)))
    shapes.append(("discriminator head dense", 1, (tokens, config.hidden_size, config.hidden_size)))
    masked = batch * config.num_masked_predictions
    shapes.append(("tied vocabulary layer (masked positions)", 1, (masked, config.embedding_size, config.vocab_size)))
    return shapes


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="electra_small")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--precision", default="float32", choices=["float32", "mixed_bfloat16"])
    parser.add_argument("--steps", type=int, default=3, help="traced steps (after 3 warm-up steps)")
    parser.add_argument("--logdir", default=None, help="where the trace goes (default: a temporary folder)")
    parser.add_argument("--top", type=int, default=12, help="op types listed")
    args = parser.parse_args(argv)

    import tempfile

    import keras
    import tensorflow as tf

    from pretrain_step import benchmark_inputs, compiled_pretrainer

    logdir = args.logdir or tempfile.mkdtemp(prefix="electra_profile_")
    keras.config.set_dtype_policy(args.precision)
    config, batch = benchmark_inputs(args.preset, args.batch)
    dataset = tf.data.Dataset.from_tensors(batch).repeat()
    pretrainer = compiled_pretrainer(config)
    started = time.perf_counter()
    pretrainer.fit(dataset, steps_per_epoch=3, epochs=1, verbose=0)
    print(f"{args.preset}, batch {args.batch} x {config.max_seq_length}, {args.precision}, TensorFlow "
          f"{tf.__version__}, {os.cpu_count()} CPU(s); warm-up {time.perf_counter() - started:.1f} s; tracing "
          f"{args.steps} steps into {logdir}", flush=True)
    tf.profiler.experimental.start(logdir)
    pretrainer.fit(dataset, steps_per_epoch=args.steps, epochs=1, verbose=0)
    tf.profiler.experimental.stop()

    ops, steps = read_trace(logdir)
    if not steps:
        raise SystemExit("the trace holds no step (multi_step_on_iterator) events")
    window = (steps[0][0], steps[-1][1])
    ops = [op for op in ops if op[2] >= window[0] and op[3] <= window[1]]
    count = len(steps)
    wall = (window[1] - window[0]) / count
    busy = busy_time([(start, end) for _, _, start, end in ops]) / count
    by_kind, by_type = collections.Counter(), collections.Counter()
    for name, op_type, start, end in ops:
        by_kind[kind_of(name, op_type, pretrainer.optimizer.name)] += end - start
        by_type[op_type] += end - start
    op_total = sum(by_kind.values()) / count

    def ms(ps):
        return ps / 1e9

    print(f"\nper step: wall {ms(wall):.1f} ms; some op running {ms(busy):.1f} ms ({busy / wall:.0%}); "
          f"host overhead (no op running) {ms(wall - busy):.1f} ms ({(wall - busy) / wall:.0%}); "
          f"op time summed over threads {ms(op_total):.1f} ms")
    print(f"\n{'kind':58} {'ms/step':>9} {'of op time':>10}")
    for kind in KINDS:
        value = by_kind[kind] / count
        print(f"{kind:58} {ms(value):9.1f} {value / op_total:10.1%}")
    print(f"\n{'op type':58} {'ms/step':>9} {'of op time':>10}")
    for op_type, value in by_type.most_common(args.top):
        print(f"{op_type:58} {ms(value / count):9.1f} {value / count / op_total:10.1%}")

    from pretrain_step import gemm_peak, matmul_rate, training_flops

    peak = gemm_peak()
    print(f"\nmatmul shapes of the step, alone (fp32 GEMM peak {peak:.1f} GFLOP/s, 2048^3):")
    print(f"{'matmul':45} {'shape ((b,) m, k, n)':>24} {'per step':>8} {'GFLOP/s':>8} {'of peak':>8}")
    seconds = 0.0
    for name, per_step, dims in step_matmuls(config, args.batch):
        rate = matmul_rate(dims)
        *leading, m, k, n = dims
        flops = 2 * m * k * n * (leading[0] if leading else 1) * per_step * 3  # forward + 2 backward
        seconds += flops / (rate * 1e9)
        print(f"{name:45} {str(dims):>24} {per_step:8} {rate:8.1f} {rate / peak:8.1%}")
    total = training_flops(config, args.batch)
    print(f"if the step were only these matmuls at these rates: {seconds:.2f} s, "
          f"{total / seconds / 1e9 / peak:.1%} of peak (measured step: {ms(wall) / 1e3:.2f} s, "
          f"{total / (wall / 1e12) / 1e9 / peak:.1%} of this run's peak, with the profiler on)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
