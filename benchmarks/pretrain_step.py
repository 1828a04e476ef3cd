"""Speed of the pre-training step against this machine's matrix-multiply peak, in one run.

    python benchmarks/pretrain_step.py                         # ELECTRA-Small and -Base, all variants
    python benchmarks/pretrain_step.py --sizes small --precisions float32 --xla off --steps 20
    python benchmarks/pretrain_step.py --sizes small --batch 128 --precisions mixed_float16 mixed_bfloat16 \
        --xla on --steps 50 --peer                             # on a GPU: the paper's Small batch, and PyTorch
    python benchmarks/pretrain_step.py --sizes small --batch 128 --precisions mixed_bfloat16 --xla on \
        --profile 5                                            # and where the GPU's time goes (step_profile.py)

For each model size, precision and XLA setting the project's own step (`ElectraPretrainer`,
compiled with `create_optimizer` and driven by `fit`, as `python -m electra_tf.pretrain` drives
it) runs on synthetic batches already in memory, so the input pipeline costs nothing. Printed:
the first step's time (tracing, compiling, variable and optimizer-slot creation), tokens/s over
the timed steps after warm-up, the analytic training FLOPs per step, achieved GFLOP/s and the
fraction of the matmul peak measured by this script (large square matmuls through TensorFlow,
in float32 and in bfloat16, on the GPU when there is one) in the same process: each row is
compared with the peak of its own precision (float16 rows with the bfloat16 peak: the same
tensor-core rate). Ratios, not absolute times, are comparable between machines.

The row's loop (as the run's) reads every step's logs on the host before dispatching the next:
Keras' `fit` on TensorFlow converts them to floats for the callbacks (its asynchronous callback
dispatch is for thread-safe backends only: `IS_THREAD_SAFE` is False for TensorFlow in Keras
3.15), so on a GPU the host's per-step work (Python, the launch of a step over every variable)
adds to the GPU's. Under each XLA row, the step called directly, nothing read in between
(`direct_steps`): with the batch in host memory, with copies already on the device (a different
one each step, as tf.data would hand them), and with one device copy reused. On a CPU the rows
agree: there a call returns when the step has run.

`--peer` adds transformers' PyTorch ELECTRA taking the same step on the same batch and device
(benchmarks/transformers_step.py, in a subprocess: needs the `.[reference]` extra, or
`--peer_python` naming an interpreter that has torch and transformers), one row per precision,
and each row's speed as a multiple of it: the ratio measured in one run.

The first step includes XLA's compile unless TensorFlow's persistent compilation cache holds
the program (`runtime.use_compile_cache`, on for every XLA row here): run twice to see both the
cold start and the rerun's; `ELECTRA_TF_COMPILE_CACHE=off` measures a cold start every time.

Training FLOPs per step (forward + backward = 3 x forward, each multiply-add 2 FLOPs):
  6 x tokens x (encoder weights of the discriminator + generator, embedding projections)
  + 6 x masked positions x (generator head dense + tied output layer: vocab x embedding)
  + 6 x tokens x hidden (discriminator head dense; the 1-unit output is negligible)
  + attention: 12 x layers x tokens x seq_length x hidden per network (QK^T and AV, x3 for backward)
Embedding lookups, softmax, LayerNorm, GELU and the optimizer are not counted as FLOPs: they
are the memory-bound part the fraction below 1 is made of.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

SIZES = {"tiny": ("electra_tiny", 32), "small": ("electra_small", 32), "base": ("electra_base", 8),
         "small_layout": ("electra_small_layout", 2)}
# "small_layout": ELECTRA-Small's layers, variables and ops at widths of 16 and sequences of 16,
# next to no arithmetic: its step time is what the host spends on each step (Python, TensorFlow's
# launch of a step over 1,200 variables), which on a GPU adds to the GPU's time unless the host
# runs ahead (`direct_steps`).
LAYOUT_ONLY = {"hidden_size": 16, "num_heads": 4, "intermediate_size": 16, "embedding_size": 16,
               "vocab_size": 64, "max_seq_length": 16}


def matmul_rate(dims, repeats: int = 10, dtype: str = "float32", chain: int = 1) -> float:
    """GFLOP/s of one matmul of `dims` ((b,) m, k, n) in `dtype`, best of `repeats` after a
    warm-up. `chain` matmuls run per timed call, so a fast GPU's launch and copy-back cost
    (about 0.1 ms) does not hide its rate."""
    import tensorflow as tf

    *leading, m, k, n = dims
    a = tf.cast(tf.random.normal((*leading, m, k)), dtype)
    b = tf.cast(tf.random.normal((*leading, k, n)), dtype) / (k ** 0.5)  # keeps a chain's values finite

    if chain > 1 and not m == k == n:
        raise ValueError("a chain of matmuls needs square matrices")

    @tf.function
    def matmuls(x, y):
        for _ in range(chain):  # each product feeds the next: none can be skipped
            x = tf.linalg.matmul(x, y)
        return tf.reduce_sum(tf.cast(x[..., :1, :1], tf.float32))

    matmuls(a, b).numpy()
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        matmuls(a, b).numpy()
        best = min(best, time.perf_counter() - started)
    return chain * 2 * m * k * n * (leading[0] if leading else 1) / best / 1e9


def gemm_peak(n: int = 2048, repeats: int = 10, dtype: str = "float32") -> float:
    """This machine's matmul peak through TensorFlow: GFLOP/s of an n x n x n matmul in `dtype`
    (on a GPU, 8192^3 chained 10 times: a 2048^3 matmul is too short to fill an H100)."""
    import tensorflow as tf

    if tf.config.list_physical_devices("GPU"):
        return matmul_rate((8192, 8192, 8192), repeats, dtype, chain=10)
    return matmul_rate((n, n, n), repeats, dtype)


def encoder_weights(hidden: int, intermediate: int, layers: int) -> int:
    return layers * (4 * hidden * hidden + 2 * hidden * intermediate)


def training_flops(config, batch: int) -> float:
    tokens = batch * config.max_seq_length
    masked = batch * config.num_masked_predictions
    e, length = config.embedding_size, config.max_seq_length
    weights = encoder_weights(config.hidden_size, config.intermediate_size, config.num_layers)
    attention = 12 * config.num_layers * tokens * length * config.hidden_size
    dense = 6 * tokens * config.hidden_size * config.hidden_size  # RTD head dense
    head = 0
    if config.embedding_size != config.hidden_size:
        weights += e * config.hidden_size
    if config.objective == "electra":
        g = config.generator_hidden_size
        weights += encoder_weights(g, config.generator_intermediate_size, config.generator_num_layers)
        weights += e * g if e != g else 0
        attention += 12 * config.generator_num_layers * tokens * length * g
        head = masked * (g * g + g * e + e * config.vocab_size)  # generator dense (+ projection) + tied output
    return 6 * tokens * weights + 6 * head + dense + attention


def benchmark_inputs(preset: str, batch_size: int):
    """The preset at `batch_size` (a schedule long enough that warm-up ends early) and one
    masked batch of synthetic ids, the same for every benchmark of the step."""
    from electra_tf.models.config import ElectraConfig
    from electra_tf.pretraining.synthetic import masked_batch

    layout_only = preset.endswith("_layout")
    config = ElectraConfig.load(preset.removesuffix("_layout")).replace(
        train_batch_size=batch_size, num_train_steps=10_000, num_warmup_steps=100,
        **(LAYOUT_ONLY if layout_only else {}))
    return config, masked_batch(config, batch_size, seed=0)


def compiled_pretrainer(config, xla: bool = False):
    """The pre-trainer as `run_pretraining` builds it, seeded: compiled with `create_optimizer`
    and the optimizer built before `fit` (left unbuilt, Keras 3 traces the step twice before the
    first update, about 25 s more for ELECTRA-Small here)."""
    import keras

    from electra_tf.runtime.optimizer import create_optimizer
    from electra_tf.pretraining.pretrainer import ElectraPretrainer

    keras.utils.set_random_seed(0)
    pretrainer = ElectraPretrainer.from_electra_config(config)
    pretrainer.compile(optimizer=create_optimizer(config), jit_compile=xla)
    pretrainer.optimizer.build(pretrainer.trainable_variables)
    return pretrainer


def measure(size: str, precision: str, xla: bool, steps: int, warmup: int, batch_size: int | None = None,
            profile: int = 0, compile_cache: Path | None = None) -> dict:
    """One row: the first step and its parts, the timed steps, the direct calls, and with
    `profile` that many more steps traced (`step_profile.profiled_steps`'s lines). With
    `compile_cache` (`benchmark_session`'s folder) the XLA step's trace is kept there as runs keep
    it (traced_steps.py): a process that finds it there traces nothing (trace 0 s)."""
    import keras
    import tensorflow as tf

    preset, default_batch = SIZES[size]
    batch_size = batch_size or default_batch
    keras.backend.clear_session()
    keras.config.set_dtype_policy(precision)
    config, batch = benchmark_inputs(preset, batch_size)
    dataset = tf.data.Dataset.from_tensors(batch).repeat()
    from electra_tf.runtime.devices import align_function_names

    # The compile cache keys a program by its function's name: aligned, the step is named alike
    # in this script, first_step.py's processes and a rerun, whatever ran before it here.
    names_from = align_function_names()
    started = time.perf_counter()
    pretrainer = compiled_pretrainer(config, xla)
    if xla and compile_cache is not None:
        from electra_tf.traced_steps import TracedStepCache

        pretrainer.traced_steps = TracedStepCache(compile_cache, {"benchmark": config.to_dict()})
    built = time.perf_counter()
    # Python runs the step only while TensorFlow traces it: its time there is the tracing.
    tracing = []
    traced_step = pretrainer.train_step

    def train_step(data):
        begun = time.perf_counter()
        outputs = traced_step(data)
        tracing.append(time.perf_counter() - begun)
        return outputs

    pretrainer.train_step = train_step  # Keras builds its step function from this attribute

    class StepTimes(keras.callbacks.Callback):
        """The time at each step's end (its logs on the host)."""

        def __init__(self):
            super().__init__()
            self.times = []

        def on_train_batch_end(self, step, logs=None):
            self.times.append(time.perf_counter())

    synced = StepTimes()
    pretrainer.fit(dataset, steps_per_epoch=warmup + steps, epochs=1, verbose=0, shuffle=False, callbacks=[synced])
    times = synced.times
    first = times[0] - started
    timed = (times[-1] - times[warmup]) / (steps - 1) if steps > 1 else float("nan")

    direct = direct_steps(pretrainer, dataset, steps) if xla else {}
    profiled = []
    if profile:
        import step_profile  # beside this script (its directory is on sys.path when it runs)

        profiled = step_profile.profiled_steps(pretrainer, dataset, profile,
                                               tempfile.mkdtemp(prefix="electra_profile_"))
    keras.config.set_dtype_policy("float32")
    flops = training_flops(config, batch_size)
    batches = warmup + steps + profile + sum(run["batches"] for run in direct.values())  # every step's
    # The first step in three parts: building the networks and the optimizer's slots; tracing the
    # step; the rest (Keras' set-up, graph optimization, XLA's lowering and compile or cache load,
    # the step's first run).
    parts = {"build_s": built - started, "trace_s": sum(tracing), "rest_s": first - (built - started) - sum(tracing)}
    return {"first_step_s": first, **parts, "step_s": timed,
            "tokens_per_s": batch_size * config.max_seq_length / timed,
            "gflops_per_step": flops / 1e9, "gflops_per_s": flops / timed / 1e9, "batch": batch_size,
            "sequence": config.max_seq_length,
            "batches": batches, "skipped": batches - int(pretrainer.optimizer.iterations.numpy()),
            "names_from": names_from, "session_config": session_config_hash(), "profile": profiled,
            "direct": direct}


DEVICE_COPIES = 3  # batches on the device taken in turn: the buffers move between steps
DIRECT_ROWS = {"host": "the batch in host memory", "device_copies": f"{DEVICE_COPIES} batches on the device in turn",
               "device": "one batch on the device, reused"}


def direct_steps(pretrainer, dataset, steps: int) -> dict:
    """The compiled step called `steps` times in a row with nothing read in between: the batch in
    host memory (as tf.data hands it to the loop), then already on the step's device, in
    `DEVICE_COPIES` copies taken in turn, then in one copy reused. Returns
    {"host"|"device_copies"|"device": {"step_s", "launch_s", "batches"}}: `step_s`, wall time per
    step over the stretch, is the step's rate when the host may run ahead of the device;
    `launch_s`, the median time until a call returned, how long the host spends launching one
    step (on a GPU the call returns once the step is queued; on a CPU when it has run, so there
    the two agree); `batches`, the steps taken (a warm-up call and `steps`).

    Why: TensorFlow copies a host tensor to a GPU only after the GPU has finished all the work
    queued before (`GPUUtil::CopyCPUTensorToGPU` makes the copy stream wait on the compute stream,
    and an eager copy waits for the copy), so a batch from the host holds every step's launch
    until the previous step has run: the host's launch time adds to the GPU's. The device rows
    show what is left without that wait (docs/results.md, "The host's share of a step"). The
    two device rows differ only in whether the batch's buffers move between steps: XLA records
    a GPU step's kernels into CUDA graphs (command buffers) and records them again when an
    argument's address changes, which a new batch each step does; if the reused copy's row is
    the faster, that recording is paid every step."""
    import tensorflow as tf

    from electra_tf.runtime.compiled_step import XlaStepLoop

    loop = pretrainer.make_train_function()
    if not isinstance(loop, XlaStepLoop):
        return {}
    step = loop.traced_step(dataset.element_spec)
    with tf.device("/CPU:0"):
        host = {key: tf.identity(value) for key, value in next(iter(dataset)).items()}
    device = loop.device  # where the compiled step runs
    with tf.device(device):
        # Each copied from the host: a buffer of its own on the device.
        copies = [{key: tf.identity(value) for key, value in host.items()} for _ in range(DEVICE_COPIES)]
    results = {}
    for where, batches in (("host", [host]), ("device_copies", copies), ("device", copies[:1])):
        step(batches[-1])
        pretrainer.optimizer.iterations.numpy()  # everything before has run
        returns = []
        started = time.perf_counter()
        for index in range(steps):
            called = time.perf_counter()
            step(batches[index % len(batches)])
            returns.append(time.perf_counter() - called)
        pretrainer.optimizer.iterations.numpy()
        results[where] = {"step_s": (time.perf_counter() - started) / steps,
                          "launch_s": sorted(returns)[len(returns) // 2], "batches": steps + 1}
    return results


def benchmark_session(compile_cache: bool = True):
    """What every process that measures the step sets first, alike, so they share compiled
    programs (this script's, first_step.py's and step_profile.py's, a fresh one and its rerun):
    the compile cache on (`runtime.use_compile_cache`, with the package's parallel GPU compile),
    and memory growth on every GPU (the peer needs it: TensorFlow would otherwise reserve nearly
    all GPU memory before it starts). The cache's key holds TensorFlow's session config, memory
    growth included: set only with `--peer`, a rerun without it missed the fresh process's
    program and compiled again (one H200, 2026-11-26; docs/results.md). `compile_cache=False`
    (the numerical checks, float16_overflow.py and xla_gradients.py): the parallel compile and
    memory growth only, every program compiled here, since the cache's key does not hold
    XLA_FLAGS and a process with other flags would load another's program. Returns (the cache
    folder or None, the GPUs)."""
    import tensorflow as tf

    from electra_tf.runtime.devices import use_compile_cache, use_parallel_gpu_compile

    if compile_cache:
        cache = use_compile_cache()
    else:
        cache = None
        use_parallel_gpu_compile()
    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    return cache, gpus


def session_config_hash() -> str:
    """A short hash of the TensorFlow session config that function calls carry (`config_proto`
    in a compiled program's cache key: thread counts, GPU memory growth): two processes whose
    hashes differ do not share compiled programs."""
    from tensorflow.python.eager import context  # private: no public reader of the call's config

    return hashlib.sha1(context.context().function_call_options.config_proto_serialized).hexdigest()[:12]


def peer_step(size: str, precision: str, steps: int, warmup: int, batch_size: int | None = None,
              python: str | None = None, compile_loss: bool = False) -> dict:
    """transformers' step on this size's benchmark batch, measured by benchmarks/transformers_step.py
    in a subprocess (`python`: the interpreter with torch; default this one). Raises with the
    peer's last words when it fails."""
    import numpy as np

    preset, default_batch = SIZES[size]
    batch_size = batch_size or default_batch
    _, batch = benchmark_inputs(preset, batch_size)
    with tempfile.TemporaryDirectory() as folder:
        batch_file = Path(folder) / "batch.npz"
        np.savez(batch_file, **batch)
        command = [python or sys.executable, str(Path(__file__).with_name("transformers_step.py")),
                   "--preset", preset, "--batch", str(batch_size), "--batch_file", str(batch_file),
                   "--precision", precision, "--steps", str(steps), "--warmup", str(warmup)]
        done = subprocess.run(command + (["--compile"] if compile_loss else []), capture_output=True, text=True)
    lines = done.stdout.strip().splitlines()
    if done.returncode or not lines:
        said = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"the PyTorch peer failed (exit {done.returncode}): {said}")
    return {**json.loads(lines[-1]), "batch": batch_size}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=["small", "base"], choices=sorted(SIZES))
    parser.add_argument("--precisions", nargs="+", default=["float32", "mixed_bfloat16"],
                        choices=["float32", "mixed_bfloat16", "mixed_float16"])
    parser.add_argument("--xla", nargs="+", default=["off", "on"], choices=["off", "on"])
    parser.add_argument("--batch", type=int, default=None,
                        help="examples per step (default: 32 for small, 8 for base; the paper's Small used 128)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps (after warm-up)")
    parser.add_argument("--warmup", type=int, default=3,
                        help="untimed steps first (float16: the loss scale's first overflowing steps fall here)")
    parser.add_argument("--peer", action="store_true",
                        help="also time transformers' PyTorch ELECTRA on the same batch and print each row's ratio")
    parser.add_argument("--peer_python", default=None, metavar="PYTHON",
                        help="the interpreter that has torch and transformers (default: this one)")
    parser.add_argument("--peer_compile", action="store_true", help="the peer runs torch.compile'd (default: eager)")
    parser.add_argument("--profile", type=int, default=0, metavar="STEPS",
                        help="after each row's timed steps, trace STEPS more with the TensorFlow profiler and print "
                             "where the GPU's time went (step_profile.kernel_summary; the trace stays in a temporary "
                             "folder, printed)")
    args = parser.parse_args(argv)
    layouts = [size for size in args.sizes if SIZES[size][0].endswith("_layout")]
    if args.peer and layouts:
        parser.error(f"--peer with --sizes {' '.join(layouts)}: a layout-only size measures the host's work per step "
                     "at widths of 16, where a ratio to PyTorch means nothing; time it without --peer, or give "
                     "--sizes small|base for the comparison")
    import tensorflow as tf

    cache, gpus = benchmark_session()
    if gpus and "mixed_float16" in args.precisions and "on" in args.xla:
        # As runs do (runtime.resolve_runtime): XLA's Triton GEMMs made non-finite float16 gradients.
        # XLA reads its flags once, so this process's other compiled rows run without them too.
        from electra_tf.runtime.devices import use_float16_safe_gemms

        added = use_float16_safe_gemms()
        print(f"float16 under XLA: {' '.join(added) or 'XLA_FLAGS already names Triton GEMMs'} "
              f"(for every XLA row of this process; compare other precisions in a process of their own)")
    where = ", ".join(tf.config.experimental.get_device_details(gpu).get("device_name", gpu.name) for gpu in gpus)
    print(f"TensorFlow {tf.__version__}, {os.cpu_count()} CPU(s), {where or 'no GPU'}, intra-op threads "
          f"{tf.config.threading.get_intra_op_parallelism_threads() or 'default'}; XLA compile cache: {cache or 'off'}")
    peaks = {"float32": gemm_peak(), "bfloat16": gemm_peak(dtype="bfloat16")}
    shape = "8192^3 x 10 on the GPU" if gpus else "2048^3"
    print(f"matmul peak through TensorFlow ({shape}, best of 10): float32 {peaks['float32']:.1f} GFLOP/s, "
          f"bfloat16 {peaks['bfloat16']:.1f} GFLOP/s\n")
    header = (f"{'step':12} {'size':6} {'precision':15} {'XLA':4} {'batch':>7} {'first step s':>12} {'step ms':>8} "
              f"{'tokens/s':>9} {'GFLOP/step':>10} {'GFLOP/s':>8} {'of peak':>8}" + ("  x PyTorch" if args.peer else ""))
    print(header)

    def row(name, size, precision, xla, result, flops, extra=""):
        peak = peaks["float32" if precision == "float32" else "bfloat16"]
        rate = flops / result["step_s"] / 1e9
        print(f"{name:12} {size:6} {precision:15} {xla:4} {result['batch']:>3}x{result.get('sequence', 128):<3} {result['first_step_s']:12.1f} "
              f"{1000 * result['step_s']:8.1f} {result['tokens_per_s']:9.0f} {flops / 1e9:10.1f} {rate:8.1f} "
              f"{rate / peak:8.1%}{extra}", flush=True)

    for size in args.sizes:
        for precision in args.precisions:
            peer = None
            if args.peer:
                peer = peer_step(size, precision, args.steps, args.warmup, args.batch, args.peer_python,
                                 args.peer_compile)
                flops = measure_flops(size, peer["batch"])
                how = "compiled" if peer["compiled"] else "eager"
                row("transformers", size, precision, "-", peer, flops,
                    f"  1.00  (torch {peer['torch']}, transformers {peer['transformers']}, {how}, {peer['device']})")
            for xla in args.xla:
                result = measure(size, precision, xla == "on", args.steps, args.warmup, args.batch, args.profile,
                                 cache)
                skipped = f"  ({result['skipped']} steps skipped by loss scaling)" if result["skipped"] else ""
                if result["skipped"] >= result["batches"]:  # seen on one H200 (float16_overflow.py)
                    skipped = "  (EVERY step skipped by loss scaling: no update made, not a training step's time)"
                ratio = f"  {peer['step_s'] / result['step_s']:5.2f}" if peer else ""
                row("electra_tf", size, precision, xla, result, result["gflops_per_step"] * 1e9, ratio + skipped)
                print(f"{'':12} first step: build {result['build_s']:.1f} s, trace {result['trace_s']:.1f} s, the rest "
                      f"(graph optimization, {'XLA lowering, compile or cache load, ' if xla == 'on' else ''}"
                      f"the first run) {result['rest_s']:.1f} s", flush=True)
                for where, run in result["direct"].items():
                    print(f"{'':12} called directly, {DIRECT_ROWS[where]}, nothing read between steps: {1000 * run['step_s']:.1f} ms/step; a call returned in "
                          f"{1000 * run['launch_s']:.1f} ms (median: the host's launch)", flush=True)
                if xla == "on":  # what the compile cache's key is made of, besides the step's HLO
                    print(f"{'':12} compile cache key: function-name counter aligned at {result['names_from']:,}, "
                          f"session config {result['session_config']}", flush=True)
                for line in result["profile"]:
                    print(f"{'':12} {line}", flush=True)
    return 0


def measure_flops(size: str, batch_size: int) -> float:
    return training_flops(benchmark_inputs(SIZES[size][0], batch_size)[0], batch_size)


if __name__ == "__main__":
    sys.exit(main())
