"""Where the pre-training step's time goes, from the TensorFlow profiler's own trace.

    python benchmarks/step_profile.py                       # ELECTRA-Small, batch 32 x 128, float32
    python benchmarks/step_profile.py --preset electra_tiny --batch 32 --steps 3 --logdir runs/profile
    python benchmarks/step_profile.py --batch 128 --precision mixed_bfloat16 --xla on --steps 5   # on a GPU

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

With `--xla on` the step is one compiled program, one TensorFlow op: on a GPU the script reads
the trace's GPU planes instead (`kernel_summary`): kernels per step, how much of the step the GPU
was busy, its idle time split into gaps between kernels (launch overhead) and longer ones (the
host between steps), how many kernels are shorter than a launch, and the time by kind (matrix
multiplies, reductions, transposes and copies, elementwise fusions, ...), by kernel, and by the
part of the step each kernel came from (`source_summary`: the gradient clipping, the AdamW
update, the backward pass, the forward pass, read from XLA's kernel annotations). At 256
wide, ELECTRA-Small's step is thousands of small kernels: this says whether their launches, the
memory-bound fusions or the matmuls set its time. The program comes from the compile cache
when `pretrain_step.py` compiled it in this environment (`pretrain_step.py --profile` traces
its own rows the same way).

Last (XLA off), the ceiling the matrix multiplies themselves set: every matmul shape of the step (dense
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
import re
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
    space = read_space(logdir)
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


# --- GPU kernels -------------------------------------------------------------------------------
# Under XLA the step is one TensorFlow op (the compiled program's launch): the host plane above
# says nothing of what runs inside it. The trace's GPU planes hold every kernel the program
# launched (CUPTI), one line per CUDA stream, beside lines the profiler derives from those same
# kernels (grouped by XLA op, module, step): those are left out, or every kernel counts twice.
DERIVED_LINES = {"XLA Ops", "XLA Modules", "Steps", "TensorFlow Ops", "TensorFlow Name Scope", "Framework Ops",
                 "Source code", "XLA TraceMe", "Launch Stats", "Async XLA Ops", "SparseCore XLA Ops"}
# Each kind with the name fragments that mark its kernels, tried in this order (an NCCL kernel's
# name can hold "reduce"); a kernel that matches none is an elementwise fusion. XLA names a fusion
# by what it does (`loop_add_fusion`, `input_reduce_fusion`, `gemm_fusion_dot`, `transpose_fusion`),
# the libraries' kernels carry theirs (`sm90_xmma_gemm_...`, `nvjet_...`, `ncclDevKernel_...`).
KERNEL_NAME_KEYS = (
    ("collectives (NCCL)", ("nccl",)),
    ("matrix multiplies (cuBLAS, cuBLASLt, Triton GEMMs)", ("gemm", "xmma", "cutlass", "nvjet", "cublas", "matmul",
                                                             "dot")),
    ("fused attention (cuDNN)", ("fmha", "flash")),
    ("reductions (softmax, LayerNorm, losses, sums)", ("reduce", "reduction", "softmax", "norm")),
    ("gathers and scatters (embeddings, masked slots)", ("scatter", "gather")),
    ("transposes and copies", ("transpose", "copy", "memcpy", "memset")),
)
ELEMENTWISE = "elementwise fusions (the rest)"
KERNEL_KINDS = tuple(kind for kind, _ in KERNEL_NAME_KEYS) + (ELEMENTWISE,)
SHORT_KERNEL_PS = 10 * 10**6  # 10 us, a few launches' cost (2-5 us each): such kernels are mostly launch
LONG_GAP_PS = 100 * 10**6  # 100 us of an idle GPU: the host between steps, not between kernels


def kernel_kind(name: str) -> str:
    """The kind (`KERNEL_KINDS`) a kernel's time counts under, from its name."""
    lower = name.lower()
    for kind, keys in KERNEL_NAME_KEYS:
        if any(key in lower for key in keys):
            return kind
    return ELEMENTWISE


class Kernel(collections.namedtuple("Kernel", "name start end op")):
    """One kernel or copy on a GPU: its name, start and end (ps), and the TensorFlow op it came from
    ("" where its annotation names none)."""


# Which part of the step launched a kernel: XLA's GPU runtime annotates each launch with the op
# names its HLO came from (`Thunk:#name=<TensorFlow op>,hlo_op=<HLO instruction>#`, the longest
# op-name prefix of what the kernel fuses, xla/service/gpu's annotation.cc), and the profiler keeps
# that as the kernel event's "annotation" stat. ELECTRA-Small's step updates 402 variables, one
# by one: XLA:CPU's optimized step (batch 8) held 1,207 fusions for the Adam updates and, until
# the norm was summed over concatenated gradients (now `optimization.clip_flat_gradient`), 796
# for the global norm's per-variable sums. Where a GPU's
# step is thousands of launches, this says how many are the optimizer's.
KERNEL_SOURCES = ("optimizer: gradient clipping (global norm)", "optimizer: AdamW update and weight decay",
                  "backward pass", "forward pass, losses and sampling", "unattributed (no annotation)")


def kernel_source(op: str, optimizer_scope: str = "electra_adam_w") -> str:
    """The `KERNEL_SOURCES` entry for a kernel whose annotation names TensorFlow op `op`."""
    path = f"/{op}/"
    if not op:
        return KERNEL_SOURCES[4]
    if f"/{optimizer_scope}/" in path:
        # tf.clip_by_global_norm's scope, and optimization.clip_flat_gradient's of the same name
        return KERNEL_SOURCES[0] if "global_norm" in op else KERNEL_SOURCES[1]
    if "gradient_tape/" in path:
        return KERNEL_SOURCES[2]
    return KERNEL_SOURCES[3]


def annotated_op(annotation: str) -> str:
    """The TensorFlow op named in a kernel's annotation stack (`...::Thunk:#name=OP,hlo_op=H#`), or ""."""
    found = re.findall(r"[#,]name=([^,#]*)", annotation)
    return found[-1] if found else ""


OP_READERS = {"annotation": annotated_op, "tf_op": lambda name_and_type: name_and_type.rsplit(":", 1)[0]}


def device_kernels(space):
    """[Kernel] of every kernel and copy on the trace's GPUs, from their stream lines (every line of
    a GPU plane but the derived ones), in start order."""
    kernels = []
    for plane in space.planes:
        if not plane.name.startswith("/device:GPU:"):
            continue
        # The op from the raw annotation stack, or (where the profiler has already split it) from a
        # "tf_op" stat, "name:type" as TensorFlow prints ops.
        op_readers = {i: OP_READERS[stat.name] for i, stat in plane.stat_metadata.items() if stat.name in OP_READERS}
        for line in plane.lines:
            if line.name in DERIVED_LINES or line.display_name in DERIVED_LINES:
                continue
            base = line.timestamp_ns * 1000
            for event in line.events:
                metadata = plane.event_metadata[event.metadata_id]
                start = base + event.offset_ps
                op = ""
                for stat in event.stats:
                    if stat.metadata_id in op_readers:
                        text = stat.str_value or (plane.stat_metadata[stat.ref_value].name if stat.ref_value else "")
                        op = op_readers[stat.metadata_id](text)
                        if op:
                            break
                kernels.append(Kernel(metadata.display_name or metadata.name, start, start + event.duration_ps, op))
    return sorted(kernels, key=lambda kernel: kernel.start)


def source_summary(kernels, steps: int, optimizer_scope: str = "electra_adam_w") -> list[str]:
    """Lines: per `KERNEL_SOURCES` entry, kernels per step, their time, and the short idle gaps
    just before them (the GPU waiting for their launch)."""
    count, time, waits = collections.Counter(), collections.Counter(), collections.Counter()
    reach = None
    for kernel in kernels:
        source = kernel_source(kernel.op, optimizer_scope)
        count[source] += 1
        time[source] += kernel.end - kernel.start
        if reach is not None and 0 < kernel.start - reach < LONG_GAP_PS:
            waits[source] += kernel.start - reach
        reach = kernel.end if reach is None else max(reach, kernel.end)
    lines = [f"  {'source (TensorFlow op in the kernel annotation)':52} {'kernels':>8} {'ms/step':>8} "
             f"{'gaps ms':>8}"]
    for source in KERNEL_SOURCES:
        lines.append(f"  {source:52} {count[source] / steps:8.0f} {time[source] / steps / 1e9:8.3f} "
                     f"{waits[source] / steps / 1e9:8.3f}")
    return lines


def op_prefixes(kernels, steps: int, top: int = 8, depth: int = 2) -> list[str]:
    """Lines: the `top` most frequent TensorFlow op scopes (the op name's first `depth` parts) in the
    kernels' annotations, kernels per step each: what `kernel_source` reads, shown, so that a
    profile whose kernels all land in one source says why (one H200, 2026-11-27: 2,507 of 2,552
    kernels per step read as the forward pass)."""
    scopes = collections.Counter("/".join(kernel.op.split("/")[:depth]) or "(no annotation)" for kernel in kernels)
    return [f"  {f'op scope in the annotations (top {top})':60} {'kernels/step':>8}"] + [
        f"  {scope if len(scope) <= 60 else scope[:57] + '...':60} {count / steps:8.1f}"
        for scope, count in scopes.most_common(top)]


def kernel_summary(kernels, steps: int, top: int = 15, optimizer_scope: str = "electra_adam_w") -> list[str]:
    """What the GPU did per step, as lines to print: kernels, busy time against the window they
    span (first kernel's start to last kernel's end), the idle rest split into short gaps (between
    kernels: launch overhead) and long ones (the host between steps), kernels shorter than a
    launch, time by kind, the `top` kernels by time, and `source_summary`."""
    if not kernels:
        return ["no GPU kernels in the trace: the profiler could not load CUPTI (libcupti.so.12, from the "
                "nvidia-cuda-cupti-cu12 wheel that tensorflow[and-cuda] installs; on LD_LIBRARY_PATH)"]
    window = max(kernel.end for kernel in kernels) - kernels[0].start
    gaps = idle_gaps([(kernel.start, kernel.end) for kernel in kernels])
    busy = window - sum(gaps)
    long_gaps = [gap for gap in gaps if gap >= LONG_GAP_PS]
    durations = sorted(kernel.end - kernel.start for kernel in kernels)
    short = [d for d in durations if d < SHORT_KERNEL_PS]
    by_kind, by_name, count_by_name = collections.Counter(), collections.Counter(), collections.Counter()
    for kernel in kernels:
        by_kind[kernel_kind(kernel.name)] += kernel.end - kernel.start
        by_name[kernel.name] += kernel.end - kernel.start
        count_by_name[kernel.name] += 1
    total = sum(durations)

    def ms(ps):
        return ps / steps / 1e9

    lines = [
        f"GPU, per step ({steps} traced): {len(kernels) / steps:.0f} kernels and copies, busy {ms(busy):.2f} ms of "
        f"the {ms(window):.2f} ms they span ({busy / window:.0%}); idle {ms(window - busy):.2f} ms: "
        f"{ms(sum(gaps) - sum(long_gaps)):.2f} ms in {(len(gaps) - len(long_gaps)) / steps:.1f} gaps under 100 us "
        f"(between kernels), {ms(sum(long_gaps)):.2f} ms in {len(long_gaps) / steps:.1f} longer ones (the host)",
        f"  median kernel {durations[len(durations) // 2] / 1e6:.1f} us; {len(short) / steps:.0f} kernels per step "
        f"under 10 us, {ms(sum(short)):.2f} ms of them",
        f"  {'kind':52} {'ms/step':>8} {'share':>6}"]
    for kind in KERNEL_KINDS:
        lines.append(f"  {kind:52} {ms(by_kind[kind]):8.3f} {by_kind[kind] / total:6.1%}")
    lines.append(f"  {'kernel (top ' + str(top) + ' by time)':60} {'per step':>8} {'mean us':>8} {'ms/step':>8} "
                 f"{'share':>6}")
    for name, value in by_name.most_common(top):
        shown = name if len(name) <= 60 else name[:57] + "..."
        lines.append(f"  {shown:60} {count_by_name[name] / steps:8.1f} {value / count_by_name[name] / 1e6:8.1f} "
                     f"{ms(value):8.3f} {value / total:6.1%}")
    return lines + source_summary(kernels, steps, optimizer_scope)


def command_buffer_note(xla_flags: str) -> str:
    """What the profiled steps ran: XLA launches runs of kernels as CUDA graphs (command buffers, on
    by default in XLA) but replays them kernel by kernel while a profiler is on, unless told not to."""
    if re.search(r"--xla_gpu_enable_command_buffer=(\s|$)", xla_flags):
        return "  (command buffers off in XLA_FLAGS: every kernel launched on its own, as in the unprofiled steps)"
    if re.search(r"--xla_enable_command_buffers_during_profiling=(true|1)\b", xla_flags):
        return ("  (command buffers kept under the profiler, --xla_enable_command_buffers_during_profiling: "
                "graphs launched as in the unprofiled steps)")
    return ("  (XLA replays its command buffers, CUDA graphs, kernel by kernel while a profiler is on: the gaps "
            "between kernels above are that mode's, not necessarily the unprofiled step's; "
            "--xla_enable_command_buffers_during_profiling=true keeps them)")


def read_space(logdir: str):
    """The newest trace (`XSpace`) the profiler wrote under `logdir`."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    paths = sorted(glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb")), key=os.path.getmtime)
    if not paths:
        raise SystemExit(f"no profiler trace under {logdir}")
    space = xplane_pb2.XSpace()
    space.ParseFromString(Path(paths[-1]).read_bytes())
    return space


def idle_gaps(intervals) -> list:
    """The lengths of the gaps between [start, end) intervals: where none of them runs."""
    gaps, reach = [], None
    for start, end in sorted(intervals):
        if reach is not None and start > reach:
            gaps.append(start - reach)
        reach = end if reach is None else max(reach, end)
    return gaps


def busy_time(intervals) -> float:
    """Length of the union of [start, end) intervals."""
    if not intervals:
        return 0
    return max(end for _, end in intervals) - min(start for start, _ in intervals) - sum(idle_gaps(intervals))


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


def profiled_steps(model, dataset, steps: int, logdir: str) -> list[str]:
    """Traces `steps` more steps of `model.fit` (warmed up: compiled, loaded) into `logdir` and
    returns the wall time per step and, where the trace has GPU kernels, `kernel_summary`."""
    import tensorflow as tf

    tf.profiler.experimental.start(logdir)
    started = time.perf_counter()
    model.fit(dataset, steps_per_epoch=steps, epochs=1, verbose=0)
    wall = time.perf_counter() - started
    tf.profiler.experimental.stop()
    kernels = device_kernels(read_space(logdir))
    on_gpu = bool(kernels or tf.config.list_physical_devices("GPU"))  # a GPU and no kernel: CUPTI was missing
    return [f"profiled: {steps} steps, {1000 * wall / steps:.2f} ms/step wall with the profiler on, trace in "
            f"{logdir}", *(kernel_summary(kernels, steps, optimizer_scope=model.optimizer.name)
                           + [command_buffer_note(os.environ.get("XLA_FLAGS", ""))] + op_prefixes(kernels, steps)
                           if on_gpu else [])]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="electra_small")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--precision", default="float32", choices=["float32", "mixed_bfloat16", "mixed_float16"])
    parser.add_argument("--xla", choices=["off", "on"], default="off",
                        help="compile the step with XLA (on a GPU: what `auto` runs; the GPU's kernels are then "
                             "the detail, the TensorFlow ops one launch)")
    parser.add_argument("--steps", type=int, default=3, help="traced steps (after 3 warm-up steps)")
    parser.add_argument("--logdir", default=None, help="where the trace goes (default: a temporary folder)")
    parser.add_argument("--top", type=int, default=12, help="op types listed")
    args = parser.parse_args(argv)

    import tempfile

    import keras
    import tensorflow as tf

    from pretrain_step import benchmark_inputs, benchmark_session, compiled_pretrainer

    from electra_tf.runtime.devices import align_function_names

    cache, _ = benchmark_session()  # as pretrain_step.py's processes: a program it compiled loads here
    logdir = args.logdir or tempfile.mkdtemp(prefix="electra_profile_")
    keras.config.set_dtype_policy(args.precision)
    config, batch = benchmark_inputs(args.preset, args.batch)
    dataset = tf.data.Dataset.from_tensors(batch).repeat()
    align_function_names()  # the step named as in pretrain_step.py's `measure`
    pretrainer = compiled_pretrainer(config, xla=args.xla == "on")
    started = time.perf_counter()
    pretrainer.fit(dataset, steps_per_epoch=3, epochs=1, verbose=0)
    print(f"{args.preset}, batch {args.batch} x {config.max_seq_length}, {args.precision}, XLA {args.xla}, "
          f"TensorFlow {tf.__version__}, {os.cpu_count()} CPU(s); compile cache {cache or 'off'}; warm-up "
          f"{time.perf_counter() - started:.1f} s; tracing {args.steps} steps into {logdir}", flush=True)
    for line in profiled_steps(pretrainer, dataset, args.steps, logdir):
        print(line)
    if args.xla == "on":
        return 0  # the TensorFlow ops are one launch a step: nothing below would say more

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
