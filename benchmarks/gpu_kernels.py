"""How many kernels the pre-training step launches on a GPU, counted without a GPU.

    pip install -e ".[gpu-kernels]"          # jaxlib and its CUDA plugin: XLA's GPU compiler
    python benchmarks/gpu_kernels.py         # ELECTRA-Small, 128 x 128, mixed_bfloat16, for an H100
    python benchmarks/gpu_kernels.py --preset electra_tiny --batch 32 --keep runs/kernels

On one H200 ELECTRA-Small's compiled step ran 3,441 kernels, most of them under 10 us, and kept
the GPU busy 27% of the time they spanned under the profiler (which replays XLA's CUDA graphs
kernel by kernel: docs/performance.md, "The step's speed"). Fewer kernels shorten the GPU's own
time, and each attempt used to need a GPU to count them. XLA
can compile for a GPU it does not have ("deviceless" compilation: the target described by its
device properties), and jaxlib's CUDA plugin exposes that compiler. This script

1. traces the step as the runs compile it (`ElectraPretrainer` with `create_optimizer`, one
   device, XLA) and takes TensorFlow's HLO for it (`experimental_get_compiler_ir`, the program
   TensorFlow hands XLA);
2. compiles that HLO for the target GPU (an H100 SXM by default, `H100_TARGET`) in a child
   process that imports only jax (`--compile`: jaxlib's compile-only client, no device needed);
3. counts what the optimized program launches: every instruction of its entry computation but
   parameters, constants, tuples and bitcasts (a fusion is one kernel, a cuBLAS call one or two,
   a copy one; a `while` loop's condition and body once per iteration), by kind, by the part of
   the step it came from (the kernel annotations' classification of `step_profile.py`, from the
   same TensorFlow op names) and by TensorFlow op;
4. reads XLA's dump of the program's thunks to say what the host launches per step with XLA's
   command buffers, on by default: runs of kernels recorded into CUDA graphs, each replayed with
   one launch (`host_launches`). The kernels still run one after another on the GPU, but without
   a launch from the host before each. (A profiler turns them back into kernel-by-kernel
   launches: `step_profile.command_buffer_note`.)

It is a proxy, not the GPU's own count. Differences, each deliberate or forced:
- jaxlib's XLA is not the one in TensorFlow's wheel (versions are printed); fusion decisions
  move a little between XLA releases;
- Triton's GEMM fusions are off (`--xla_gpu_enable_triton_gemm=false`): deviceless, Triton
  cannot pick tile sizes without autotuning ("Couldn't find output tile sizes", jaxlib 0.10.2),
  so GEMMs go to cuBLAS and elementwise work beside them (the bfloat16 weight casts) stays in
  kernels of its own; on one H200 Triton's GEMMs off added 178 kernels to 3,441;
- TensorFlow's HLO has `copy` instructions (values it returns), which jaxlib's HLO import
  rejects; they are passed as same-shape reshapes (value identities; XLA inserts the copies it
  needs itself);
- the command buffers are jaxlib's XLA's (TensorFlow 2.21's has the same defaults, its dumped
  debug options say); whether TensorFlow records them again every step (when the buffers they
  point at move), a GPU's log says (`gpu_checks.sh first_step`'s rerun, read by
  `compile_stages.py`).
Measured for ELECTRA-Small at 128 x 128, mixed_bfloat16 (2026-11-26, docs/results.md): 3,011
launches against 3,441 + 178 on the GPU, the same code; 2,567 since each transformer layer draws
its dropout masks at once (`models/dropout.py`; the H200 then counted 2,552); 2,135 since query,
key and value are one product in training (`models/transformer.py`); 4,125 with the layers as
one loop (`ELECTRA_TF_LOOP_LAYERS=1`, before that change; 3,744 after), loops counted per
iteration. With command buffers (2026-11-27): **one host launch per step**, a single CUDA graph
holding all 2,135 kernels (1,035 launches before the target named a driver version: XLA then
assumed a driver older than 12.3 and left every cuBLAS matmul out of the graphs); the layers'
loop, 1,101 (its loops break the graphs: a graph or a kernel per body part and iteration).

Running it costs a minute of tracing and lowering and a minute or more of XLA's GPU
compile on 2 CPU cores; nothing here runs on a GPU.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # pretrain_step, step_profile
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# An H100 SXM (80 GB HBM3) as XLA's GpuTargetConfig describes a device: what XLA's cost models
# and emitters read from a real one. Values from NVIDIA's H100 data sheet and its CUDA device
# query (132 SMs, 228 KiB shared memory per SM, 50 MiB L2, compute capability 9.0); the driver
# and runtime versions are the GPU sessions' (driver 580, CUDA 13.0; the kit's CUDA runtime 12.9).
# Without a driver version XLA assumes one older than 12.3 and leaves cuBLAS calls out of its
# command buffers (CUDA graphs): the graphs then break at every matmul.
H100_TARGET = """
gpu_device_info {
  threads_per_block_limit: 1024
  threads_per_warp: 32
  shared_memory_per_block: 49152
  shared_memory_per_core: 233472
  threads_per_core_limit: 2048
  core_count: 132
  fpus_per_core: 128
  block_dim_limit_x: 2147483647
  block_dim_limit_y: 65535
  block_dim_limit_z: 65535
  memory_bandwidth: 3352320000000
  l2_cache_size: 52428800
  clock_rate_ghz: 1.98
  device_memory_size: 84929347584
  shared_memory_per_block_optin: 232448
  cuda_compute_capability { major: 9 minor: 0 }
  registers_per_core_limit: 65536
  registers_per_block_limit: 65536
  driver_version: "13.0.0"
  runtime_version: "12.9.0"
}
platform_name: "CUDA"
dnn_version_info { major: 9 minor: 7 }
runtime_version { major: 12 minor: 9 }
device_description_str: "NVIDIA H100 80GB HBM3"
"""

COMPILE_FLAGS = "--xla_gpu_enable_triton_gemm=false"
# Entry-computation instructions that launch nothing: buffers, views and bookkeeping.
NOT_LAUNCHED = {"parameter", "constant", "get-tuple-element", "tuple", "bitcast", "after-all", "opt-barrier"}


class Launch(collections.namedtuple("Launch", "kind op")):
    """One launched instruction of an optimized HLO module: its kind ("fusion:kLoop",
    "custom-call:__cublas$lt$matmul", "copy", ...) and the TensorFlow op it came from ("" if none)."""


def _computations(hlo_text: str) -> dict:
    """An optimized HLO module's computations by name ("ENTRY" for the entry): their instruction lines."""
    computations = {}
    for block in hlo_text.split("\n}"):
        header = re.search(r"^(ENTRY )?%?([\w.\-]+) \(.*\{$", block, re.MULTILINE)
        if header:
            computations["ENTRY" if header.group(1) else header.group(2)] = block[header.end():].splitlines()[1:]
    return computations


def _loop_trips(hlo_text: str):
    """A function from a `while` instruction's TensorFlow op name to its trip count (None: unknown):
    XLA's `known_trip_count`, or for TensorFlow's gradient loops ("gradient_tape/X/X_grad", which
    XLA does not annotate) their forward loop's."""
    known = {op: int(n) for op, n in re.findall(
        r' while\(.*?op_name="([^"]*)".*?"known_trip_count":\{"n":"(\d+)"', hlo_text)}

    def trips(op: str):
        gradient_of = re.fullmatch(r"gradient_tape/(.+)/\1_grad", op)
        return known.get(op, known.get(gradient_of.group(1)) if gradient_of else None)
    return trips


def launched_instructions(hlo_text: str) -> list[Launch]:
    """What the entry computation of an optimized HLO module (text) launches per run, in order.

    A `while` loop (the layers' loop of `ELECTRA_TF_LOOP_LAYERS=1`) launches its condition and
    its body once per iteration, so each counts its trip count's times (the condition once more,
    for the test that ends the loop); the `while` itself launches nothing. The trip count is
    XLA's `known_trip_count`; XLA does not know it for TensorFlow's gradient loops, which run
    their forward loop's count ("gradient_tape/X/X_grad" is the gradient of "X"). A loop whose
    count is still unknown is counted as one iteration and flagged by one more entry, of kind
    "while:unknown trip count", so the summary shows that its total is short.
    """
    trip_count, computations = _loop_trips(hlo_text), _computations(hlo_text)

    def launches_of(name: str) -> list[Launch]:
        launches = []
        for line in computations[name]:
            match = re.match(r"\s*(?:ROOT )?%?[\w.\-]+ = .*? ([a-z][a-z\-]*)\(", line)
            if not match or match.group(1) in NOT_LAUNCHED:
                continue
            kind = match.group(1)
            op = re.search(r'op_name="([^"]*)"', line)
            op = op.group(1) if op else ""
            if kind == "while":
                loop = re.search(r"condition=%?([\w.\-]+), body=%?([\w.\-]+)", line)
                trips = trip_count(op)
                if trips is None:
                    launches.append(Launch("while:unknown trip count", op))
                    trips = 1
                launches += launches_of(loop.group(1)) * (trips + 1) + launches_of(loop.group(2)) * trips
                continue
            if kind == "fusion":
                fusion_kind = re.search(r"kind=(\w+)", line)
                kind += ":" + (fusion_kind.group(1) if fusion_kind else "?")
            elif kind == "custom-call":
                target = re.search(r'custom_call_target="([^"]+)"', line)
                kind += ":" + (target.group(1) if target else "?")
            launches.append(Launch(kind, op))
        return launches

    return launches_of("ENTRY")


def entry_loop_trips(hlo_text: str) -> list:
    """The trip count of each `while` loop of the entry computation, in program order (None: unknown)."""
    trip_count, trips = _loop_trips(hlo_text), []
    for line in _computations(hlo_text).get("ENTRY", []):
        if re.match(r"\s*(?:ROOT )?%?[\w.\-]+ = .*? while\(", line):
            op = re.search(r'op_name="([^"]*)"', line)
            trips.append(trip_count(op.group(1) if op else ""))
    return trips


THUNK_LINE = re.compile(r"^( *)(?:\d+: (k\w+)|(condition|body):)")


def host_launches(thunk_text: str, loop_trips: list) -> dict:
    """What the host launches per step when XLA's command buffers are on, from XLA's dump of the
    program's thunks after its thunk passes (`*.thunk_sequence_after_thunk_passes.txt`).

    Each line is a thunk, nested ones indented below theirs: a `kCommandBuffer` is one launch (a
    CUDA graph) however many kernels it holds; a `kWhile` runs its condition and body sequences
    (under "condition:" and "body:") once per iteration, the condition once more, its trip count
    the next of `loop_trips` (the entry's loops in order, `entry_loop_trips`; unknown: 1); a
    `kDynamicSliceFusion`'s nested copy is how it runs, one launch; anything else is one launch.
    Returns {"launches", "graphs", "kernels_in_graphs", "alone" (thunks launched on their own),
    "unknown_trips"} per step."""
    lines = [(len(match.group(1)), match.group(2) or match.group(3))
             for match in map(THUNK_LINE.match, thunk_text.splitlines()) if match]
    trips = iter(loop_trips)
    totals = collections.Counter()

    def nested_end(i: int) -> int:
        # A loop's "condition:" label sits at the loop's own indent; its sequences below it, deeper.
        indent, labels, j = lines[i][0], ("condition", "body") if lines[i][1] == "kWhile" else (), i + 1
        while j < len(lines) and (lines[j][0] > indent or lines[j][1] in labels):
            j += 1
        return j

    def sequence(i: int, indent: int, times: int) -> int:
        """Counts the thunks from `i` at `indent` as run `times` times; returns where they end."""
        while i < len(lines) and lines[i][0] >= indent:
            kind = lines[i][1]
            if lines[i][0] > indent or kind in ("condition", "body"):
                i += 1
                continue
            end = nested_end(i)
            if kind == "kCommandBuffer":
                totals["graphs"] += times
                totals["kernels_in_graphs"] += times * sum(kind.startswith("k") for _, kind in lines[i + 1:end])
            elif kind == "kWhile":
                count = next(trips, None) if indent == 0 else None
                totals["unknown_trips"] += count is None
                count = 1 if count is None else count
                j = i + 1
                while j < end:
                    if lines[j][1] in ("condition", "body") and j + 1 < end:
                        extra = 1 if lines[j][1] == "condition" else 0
                        j = sequence(j + 1, lines[j + 1][0], times * (count + extra))
                    else:
                        j += 1
            else:
                totals["alone"] += times
            i = end
        return i

    sequence(0, 0, 1)
    return {"launches": totals["graphs"] + totals["alone"], "graphs": totals["graphs"],
            "kernels_in_graphs": totals["kernels_in_graphs"], "alone": totals["alone"],
            "unknown_trips": totals["unknown_trips"]}


def op_family(op: str) -> str:
    """A TensorFlow op name without its path and number: "gradient_tape/.../MatMul_3" -> "MatMul"."""
    return re.sub(r"_\d+$", "", op.rsplit("/", 1)[-1]) if op else "(none)"


def launch_summary(launches, top: int = 12) -> list[str]:
    """Lines: launches in all, by kind, by part of the step (`step_profile.kernel_source`) and the
    `top` TensorFlow op families."""
    from step_profile import KERNEL_SOURCES, kernel_source

    by_part = collections.Counter(kernel_source(launch.op) for launch in launches)
    sections = (("by kind", collections.Counter(launch.kind for launch in launches).most_common()),
                ("by part of the step", [(source, by_part[source]) for source in KERNEL_SOURCES]),
                (f"by TensorFlow op (top {top})",
                 collections.Counter(op_family(launch.op) for launch in launches).most_common(top)))
    lines = [f"{len(launches):,} launches per step"]
    for title, rows in sections:
        lines.append(f"  {title}:")
        lines += [f"    {name:52} {count:6,}" for name, count in rows]
    return lines


def hlo_copies_as_reshapes(serialized_module: bytes) -> tuple[bytes, int]:
    """A serialized HloModuleProto with every `copy` instruction turned into a same-shape
    reshape (module docstring), and how many there were."""
    from tensorflow.compiler.xla.service import hlo_pb2

    module = hlo_pb2.HloModuleProto.FromString(serialized_module)
    copies = 0
    for computation in module.computations:
        for instruction in computation.instructions:
            if instruction.opcode == "copy":
                instruction.opcode = "reshape"
                copies += 1
    return module.SerializeToString(), copies


def step_hlo(preset: str, batch: int, precision: str) -> tuple[bytes, dict]:
    """The pre-training step's HLO as TensorFlow lowers it for XLA, and how it was made."""
    import keras
    import tensorflow as tf

    from pretrain_step import benchmark_inputs, compiled_pretrainer

    keras.config.set_dtype_policy(precision)
    config, inputs = benchmark_inputs(preset, batch)
    started = time.perf_counter()
    pretrainer = compiled_pretrainer(config)
    # As the runs trace it (no AutoGraph), compiled whole: one device.
    step = tf.function(pretrainer.train_step, jit_compile=True, autograph=False)
    module = step.experimental_get_compiler_ir(inputs)(stage="hlo_serialized")
    return module, {"preset": preset, "batch": batch, "precision": precision, "tensorflow": tf.__version__,
                    "keras": keras.__version__, "trace_and_lower_s": round(time.perf_counter() - started, 1)}


def compile_for_gpu(module_path: Path, target: str, output_path: Path) -> dict:
    """(In the child process, jax only.) Compiles the HLO module at `module_path` for the GPU
    described by `target` (a GpuTargetConfig in text form) and writes the optimized module's text."""
    os.environ["CUDA_VISIBLE_DEVICES"] = "-1"  # no device is looked for, none is used
    os.environ.setdefault("JAX_SKIP_CUDA_CONSTRAINTS_CHECK", "1")  # the CUDA libraries' versions: no device
    import jax
    import jaxlib
    import numpy as np
    from jax._src.interpreters import mlir
    from jax._src.lib import xla_client
    from jax._src.lib.mlir import ir
    from jax.experimental import topologies

    topology = topologies.get_topology_desc(platform="cuda", target_config=target, topology="1x1x1")
    device = topology.devices[0]
    context = mlir.make_ir_context()
    with context:
        program = ir.Module.parse(xla_client._xla.mlir.hlo_to_stablehlo(module_path.read_bytes()))
        options = xla_client.CompileOptions()
        options.num_replicas = options.num_partitions = 1
        options.executable_build_options.device_assignment = xla_client.DeviceAssignment.create(
            np.zeros((1, 1), np.int32))
        started = time.perf_counter()
        executable = device.client.compile(program, xla_client.DeviceList((device,)), options)
        seconds = time.perf_counter() - started
    output_path.write_text(executable.hlo_modules()[0].to_string())
    return {"device": device.device_kind, "jax": jax.__version__, "jaxlib": jaxlib.__version__,
            "xla_flags": os.environ.get("XLA_FLAGS", ""), "compile_s": round(seconds, 1)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="electra_small")
    parser.add_argument("--batch", type=int, default=128, help="examples of the preset's sequence length per step")
    parser.add_argument("--precision", default="mixed_bfloat16",
                        choices=("float32", "mixed_bfloat16", "mixed_float16"),
                        help="the training precision (default: what `auto` picks on an H100)")
    parser.add_argument("--target_config", type=Path, default=None,
                        help="a GpuTargetConfig in text form for another GPU (default: an H100 SXM)")
    parser.add_argument("--keep", type=Path, default=None,
                        help="a folder to keep the step's HLO, the optimized program and the counts in")
    parser.add_argument("--compile", nargs=2, type=Path, metavar=("MODULE", "OUTPUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    target = args.target_config.read_text() if args.target_config else H100_TARGET

    if args.compile:  # the child: XLA's GPU compiler, no TensorFlow in this process
        print(json.dumps(compile_for_gpu(args.compile[0], target, args.compile[1])))
        return 0

    folder = args.keep or Path(tempfile.mkdtemp(prefix="gpu_kernels_"))
    folder.mkdir(parents=True, exist_ok=True)
    module, made = step_hlo(args.preset, args.batch, args.precision)
    module, copies = hlo_copies_as_reshapes(module)
    (folder / "step.hlo.pb").write_bytes(module)
    print(f"{args.preset}, batch {args.batch}, {args.precision}: traced and lowered in {made['trace_and_lower_s']} s "
          f"(TensorFlow {made['tensorflow']}); compiling for the GPU (a minute or more) ...", flush=True)
    with tempfile.TemporaryDirectory(prefix="xla_dump_") as dump:  # XLA's thunks: what the host launches
        env = {**os.environ, "XLA_FLAGS": " ".join(filter(None, (
            os.environ.get("XLA_FLAGS", ""), COMPILE_FLAGS, f"--xla_dump_to={dump} --xla_gpu_dump_llvmir=false")))}
        child = subprocess.run([sys.executable, __file__, "--compile", str(folder / "step.hlo.pb"),
                                str(folder / "step.gpu.hlo.txt")] + (["--target_config", str(args.target_config)]
                                                                     if args.target_config else []),
                               env=env, capture_output=True, text=True)
        # With command buffers on (XLA's default) the thunk passes' dump says what the host launches;
        # without them the pass does not run, and each thunk of the plain sequence is its own launch.
        dumped = (sorted(Path(dump).glob("*.thunk_sequence_after_thunk_passes.txt"))
                  or sorted(Path(dump).glob("*.thunk_sequence.txt")))
        thunks = dumped[-1].read_text() if dumped else None
    if child.returncode != 0:
        print(child.stderr[-4000:], file=sys.stderr)
        if "No module named 'jax" in child.stderr:
            print("XLA's GPU compiler comes with the gpu-kernels extra: pip install -e \".[gpu-kernels]\"",
                  file=sys.stderr)
        return 1
    compiled = json.loads(child.stdout.strip().splitlines()[-1])
    optimized = (folder / "step.gpu.hlo.txt").read_text()
    launches = launched_instructions(optimized)
    print(f"compiled for {compiled['device']} in {compiled['compile_s']} s (jaxlib {compiled['jaxlib']}'s XLA, "
          f"XLA_FLAGS {compiled['xla_flags']}; {copies} copies passed as reshapes)")
    for line in launch_summary(launches):
        print(line)
    summary = {**made, **compiled, "launches": len(launches),
               "by_kind": dict(collections.Counter(launch.kind for launch in launches))}
    if thunks is not None:
        (folder / "step.thunks.txt").write_text(thunks)
        host = host_launches(thunks, entry_loop_trips(optimized))
        print(f"the host launches {host['launches']:,} per step with XLA's command buffers (CUDA graphs, as "
              f"this XLA forms them for the target): {host['graphs']:,} graph(s) holding "
              f"{host['kernels_in_graphs']:,} kernels and copies, {host['alone']:,} launched on their own"
              + (f"; {host['unknown_trips']} loop(s) of unknown trip count counted once" if host["unknown_trips"]
                 else ""))
        summary["host_launches"] = host
    (folder / "counts.json").write_text(json.dumps(summary, indent=1))
    if args.keep:
        print(f"kept in {folder}: step.hlo.pb (TensorFlow's HLO), step.gpu.hlo.txt (the optimized program), "
              "step.thunks.txt (its thunks, as XLA dumps them), counts.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
