"""Where and how a run executes: distribution strategy, precision policy, XLA.

`resolve_runtime` turns the CLI's choices (`auto` or explicit) into a `Runtime` and says why,
so the decisions are visible in the run summary and testable without the hardware:

- strategy `auto`: TPUStrategy when a TPU is configured (TPU_NAME), MultiWorkerMirrored when
  TF_CONFIG names a cluster, MirroredStrategy on several GPUs, else the default strategy on
  one device.
- precision `auto`: mixed_bfloat16 on TPUs and on GPUs of compute capability 8.0 or later
  (Ampere, Hopper: bfloat16 tensor cores), mixed_float16 (dynamic loss scaling) on older GPUs.
  bfloat16 has float32's range, so nothing overflows and no batch is skipped; on one H200 the
  ELECTRA-Small step in float16 with XLA made no update at all: XLA's Triton GEMM fusions
  returned non-finite gradients at every loss scale, so float16 under XLA on a GPU compiles its
  matmuls with cuBLAS instead (`use_float16_safe_gemms`; docs/results.md "GPUs"). On
  CPU, mixed_bfloat16 for a model of ELECTRA-Small's width or wider on a CPU with native
  bfloat16 instructions (AVX512_BF16 or AMX-BF16), where a step measured 1.24x (Small) and 1.40x
  (Base) faster and Small's pre-training learned as in float32 (docs/results.md,
  "Speed"); float32 otherwise: on a CPU without them bfloat16 measured slower, for the tiny
  default it was level, and float16 matmuls on CPU are slow. Pre-training and fine-tuning pass
  the model's width; without it CPU precision stays float32.
- XLA: on for GPUs and TPUs; off on CPU, where it measured no faster for the tiny step
  (benchmarks/input_pipeline.py). Without a strategy (one device) Keras compiles the whole step
  with XLA (`compile(jit_compile=True)`); under MirroredStrategy, one replica or several, XLA
  compiles each replica's forward and backward pass, and the gradients' all-reduce and the
  update run outside it (`compiled_gradients.py`). Compiled programs are cached on disk across
  processes (with XLA's compiled thunks, so a GPU program loads in seconds), and GPU programs are
  compiled on every core (`use_compile_cache`, which sets these before TensorFlow starts;
  `use_compiled_thunks`, `use_parallel_gpu_compile`).
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import json
import os
import re
from pathlib import Path

from electra_tf.errors import RunError

COLLECTIVE_TIMEOUT_SECONDS = 600.0  # ELECTRA_TF_COLLECTIVE_TIMEOUT overrides it
# The narrowest encoder for which bfloat16 on a CPU with native bfloat16 paid off: ELECTRA-Small
# (256) ran 1.24x faster per step, the tiny default (128) was level.
CPU_BFLOAT16_MIN_HIDDEN_SIZE = 256
# /proc/cpuinfo flags of the instructions oneDNN uses for bfloat16 matmuls.
NATIVE_BFLOAT16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
COMPILE_CACHE_VARIABLE = "ELECTRA_TF_COMPILE_CACHE"  # a folder, or "off"
TRACED_STEPS_FOLDER = "traced_steps"  # inside the compile cache's folder (traced_steps.py)
# "1": under XLA each encoder's transformer stack runs as one loop over its layers
# (models/transformer.looped_layers), a program a fifth the size to trace, lower, compile and
# load, whose step launches 61% more kernels (compiled for an H100: 4,125 against 2,567; each
# layer's activations are saved and read back in kernels of their own; docs/performance.md).
# Off by default: its loops also break the step's CUDA graph (XLA's command buffers): 1,101
# launches from the host per step against one (counted without a GPU, docs/results.md).
LOOP_LAYERS_VARIABLE = "ELECTRA_TF_LOOP_LAYERS"
STRATEGIES = ("auto", "one_device", "mirrored", "multi_worker", "tpu")
PRECISIONS = ("auto", "float32", "mixed_float16", "mixed_bfloat16")


@dataclasses.dataclass
class Runtime:
    strategy_name: str
    precision: str
    xla: bool
    devices: list[str]
    notes: list[str]
    strategy: object = None  # the tf.distribute.Strategy, once created

    @property
    def num_replicas(self) -> int:
        return self.strategy.num_replicas_in_sync if self.strategy is not None else 1

    def describe(self) -> str:
        """One line for a run's header: what was chosen, and why in brackets."""
        return (f"{self.strategy_name} ({self.num_replicas} replica(s)), {self.precision}, "
                f"XLA {'on' if self.xla else 'off'}" + (f" [{'; '.join(self.notes)}]" if self.notes else ""))


def loop_layers_under_xla(environ=None) -> bool:
    """Whether `LOOP_LAYERS_VARIABLE` asks for the layers as one XLA loop (read when a step is traced)."""
    return (os.environ if environ is None else environ).get(LOOP_LAYERS_VARIABLE, "0") == "1"


def resolve_runtime(strategy: str = "auto", precision: str = "auto", xla: bool | None = None,
                    gpus: int | None = None, environ=None, hidden_size: int | None = None,
                    native_bfloat16: bool | None = None,
                    gpu_capabilities: list[tuple[int, int]] | None = None) -> Runtime:
    """Decides strategy, precision and XLA from the request and the visible hardware.

    `hidden_size` is the encoder's width, known before the model is built (pre-training and
    fine-tuning pass it; without it CPU precision stays float32). `gpus`, `native_bfloat16` and
    `gpu_capabilities` (each GPU's compute capability) default to what this machine has; tests
    pass them.
    """
    import tensorflow as tf

    environ = os.environ if environ is None else environ
    if strategy not in STRATEGIES:
        raise RunError(f"--strategy must be one of {STRATEGIES}, got {strategy!r}.")
    if precision not in PRECISIONS:
        raise RunError(f"--mixed_precision must be one of {PRECISIONS}, got {precision!r}.")
    gpus = len(tf.config.list_physical_devices("GPU")) if gpus is None else gpus
    notes = []
    chosen = strategy
    if strategy == "auto":
        if environ.get("TPU_NAME"):
            chosen = "tpu"
        elif _cluster_size(environ) > 1:
            chosen = "multi_worker"
        elif gpus > 1:
            chosen = "mirrored"
        else:
            chosen = "one_device"
        notes.append(f"strategy auto -> {chosen} ({gpus} GPU(s)"
                     f"{', TF_CONFIG cluster' if chosen == 'multi_worker' else ''})")
    accelerator = "tpu" if chosen == "tpu" else ("gpu" if gpus else "cpu")

    chosen_precision = precision
    if precision == "auto" and accelerator == "cpu":
        chosen_precision, reason = _cpu_precision(hidden_size, native_bfloat16)
        notes.append(f"precision auto -> {chosen_precision} on CPU ({reason})")
    elif precision == "auto" and accelerator == "gpu":
        chosen_precision, reason = _gpu_precision(gpu_capabilities_now() if gpu_capabilities is None
                                                  else gpu_capabilities)
        notes.append(f"precision auto -> {chosen_precision} on GPU ({reason})")
    elif precision == "auto":
        chosen_precision = "mixed_bfloat16"
        notes.append(f"precision auto -> {chosen_precision} on TPU")

    use_xla = xla
    if use_xla is None:
        use_xla = accelerator in ("gpu", "tpu")
        notes.append(f"XLA {'on' if use_xla else 'off'} by default on {accelerator.upper()}")
    if accelerator == "gpu" and use_xla and chosen_precision == "mixed_float16":
        # First thing after the choice, before anything could compile: XLA reads XLA_FLAGS once.
        kept = not use_float16_safe_gemms(environ)
        notes.append("float16 under XLA: Triton GEMMs " + ("as XLA_FLAGS sets them" if kept else
                     "off, cuBLAS instead (they made non-finite float16 gradients on an H200)"))
    if use_xla and loop_layers_under_xla(environ):
        notes.append(f"transformer layers as one XLA loop ({LOOP_LAYERS_VARIABLE}=1)")
    # Listing logical devices starts TensorFlow's runtime, after which a MultiWorkerMirroredStrategy
    # can no longer configure its collectives ("must be configured at program startup").
    devices = ([] if chosen == "multi_worker" else
               [d.name for d in tf.config.list_logical_devices("GPU" if gpus else "CPU")])
    return Runtime(chosen, chosen_precision, bool(use_xla), devices, notes)


def compile_cache_directory(environ=None) -> Path | None:
    """Where compiled XLA programs are kept between processes: ELECTRA_TF_COMPILE_CACHE, or
    `$XDG_CACHE_HOME/electra_tf/xla` (`~/.cache/electra_tf/xla`); None when it is "off"."""
    environ = os.environ if environ is None else environ
    setting = environ.get(COMPILE_CACHE_VARIABLE, "")
    if setting.lower() == "off":
        return None
    if setting:
        return Path(setting).expanduser()
    return Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "electra_tf" / "xla"


def use_compile_cache(environ=None) -> Path | None:
    """Turns on TensorFlow's persistent XLA compilation cache for this process; returns the folder.

    XLA compiles a step the first time it runs (minutes on a GPU for ELECTRA-Small; ptxas and
    autotuning are most of it). TensorFlow can keep each compiled program on disk, keyed by a
    fingerprint of the program and the device, and load it in the next process instead of
    compiling: `--tf_xla_persistent_cache_directory` in TF_XLA_FLAGS. TensorFlow reads those
    flags once, when its runtime starts, so this must run before anything starts it: after
    `import tensorflow` is fine, after listing devices is too late (measured: with
    `tf.config.list_physical_devices` before it, a compiled function left the folder empty).
    The commands call it first thing (tests/test_pretrain.py checks that a run's steps land in
    the folder and that its resumed extension loads them); it also turns on XLA's parallel GPU
    compile (`use_parallel_gpu_compile`), which TensorFlow reads at the same moment, and, with a
    cache, has GPU programs cached with their compiled thunks (`use_compiled_thunks`). One folder
    per user serves every run: a changed model, batch shape, precision or TensorFlow version is
    another fingerprint, a new entry. TF_XLA_FLAGS that name a cache already win.
    """
    environ = os.environ if environ is None else environ
    use_parallel_gpu_compile(environ)
    flags = environ.get("TF_XLA_FLAGS", "")
    named = re.search(r"--tf_xla_persistent_cache_directory=(\S+)", flags)
    directory = Path(named.group(1)) if named else compile_cache_directory(environ)
    if directory is None:
        return None
    use_compiled_thunks(environ)
    if not named:
        # Not created here: TensorFlow makes the folder (and its parents) on its first write, so
        # a run without XLA leaves nothing behind.
        environ["TF_XLA_FLAGS"] = f"{flags} --tf_xla_persistent_cache_directory={directory}".strip()
    return directory


def parallel_gpu_compile_flags() -> dict[str, str]:
    """The XLA_FLAGS that let XLA compile a GPU program on every core (flag -> value).

    XLA's GPU backend turns the program's fusions into LLVM modules and each into GPU code
    (LLVM's passes, then `ptxas`). It compiles them on a thread pool only when the framework
    hands it one or `--xla_gpu_force_compilation_parallelism` asks for N threads, and splits the
    program into modules only with `--xla_gpu_enable_llvm_module_compilation_parallelism`
    (XLA's `GpuLLVMCompiler::CompileAndLink`; JAX turns it on with its kernel cache).
    TensorFlow's JIT does neither, so every kernel of the step was compiled on one core
    (ELECTRA-Small's first step: 183 s on one H100; 148 s with Triton's GEMMs off and less
    autotuning). The split modules are linked afterwards (nvJitLink or the driver), as JAX
    links them. With these flags the same first step took 125.2 s on one H200 with 16 cores;
    the one-core compile was not rerun on that host, so the gain is not yet measured on one
    machine (benchmarks/gpu_checks.sh baseline). The CPU backend ignores them.
    """
    return {"--xla_gpu_enable_llvm_module_compilation_parallelism": "true",
            "--xla_gpu_force_compilation_parallelism": str(os.cpu_count() or 1)}


def use_parallel_gpu_compile(environ=None) -> list[str]:
    """Adds `parallel_gpu_compile_flags` to XLA_FLAGS, each unless XLA_FLAGS already names it
    (so `XLA_FLAGS=--xla_gpu_enable_llvm_module_compilation_parallelism=false` restores XLA's
    own one-core compile); returns the flags added. Like the compile cache, it must run before
    TensorFlow first compiles: XLA reads XLA_FLAGS once (`use_compile_cache` calls it)."""
    return _add_xla_flags(parallel_gpu_compile_flags(), environ)


# A cached GPU program's load. Without this flag (off in TensorFlow 2.21, on in jaxlib) XLA keeps
# a GPU program in the compile cache in a legacy form, the optimized HLO and the compiled binary,
# and a process that loads it emits the program's thunks (what runs each kernel, copy and CUDA
# graph) from the HLO again; with it the thunks are kept too. One H200 (2026-11-28, TensorFlow
# 2.21.0, `benchmarks/gpu_checks.sh next`: ELECTRA-Small, 128 x 128, mixed_bfloat16, the same
# session): "load the cached executable" 8.25 s -> 1.56 s, a rerun's first step 19.6 s -> 11.1 s;
# the fresh compile (104.0 s against 112.3 s) and the step (18.0-19.2 ms against 18.1-18.4 ms;
# 12.6-12.8 ms called directly either way) unchanged. XLA calls the flag experimental: it is the
# package's deliberate choice, and XLA_FLAGS naming it (`=false`) turns it off. CPU programs
# ignore it. Entries written without it still load (in the legacy form).
COMPILE_CACHE_XLA_FLAGS = {"--xla_gpu_experimental_aot_compiled_thunks": "true"}


def use_compiled_thunks(environ=None) -> list[str]:
    """Adds `COMPILE_CACHE_XLA_FLAGS` to XLA_FLAGS unless XLA_FLAGS already names the flag;
    returns the flags added (`use_compile_cache` calls it when the cache is on)."""
    return _add_xla_flags(COMPILE_CACHE_XLA_FLAGS, environ)


# float16 under XLA on a GPU: XLA's Triton GEMM fusions made non-finite gradients. One H200
# (2026-11-27, TensorFlow 2.21.0, benchmarks/float16_overflow.py): ELECTRA-Small's step at batch
# 128 returned finite losses and logits but 7-13 of its 402 gradients not finite (the
# discriminator's attention query and value kernels, different layers in each call) at every
# loss scale from 2^15 down to 2^-20, so dynamic loss scaling skipped every step. With
# `--xla_gpu_enable_triton_gemm=false` (cuBLAS for every matmul) the same call's gradients were
# finite at scales 1 and 2^-20, as without XLA and as on CPU, and `pretrain_step.py` skipped 1
# of 35 steps (the loss scale's first calibration). Turning split-K off instead did not help.
# bfloat16 runs keep Triton's GEMMs: they trained there, with nothing skipped.
FLOAT16_GPU_XLA_FLAGS = {"--xla_gpu_enable_triton_gemm": "false"}


def use_float16_safe_gemms(environ=None) -> list[str]:
    """Adds `FLOAT16_GPU_XLA_FLAGS` to XLA_FLAGS unless XLA_FLAGS already names the flag (a
    user's own choice wins); returns the flags added. For float16 runs compiled by XLA on a GPU
    (`resolve_runtime` calls it); like the other XLA flags it takes effect only if it is set
    before the process's first XLA compile."""
    return _add_xla_flags(FLOAT16_GPU_XLA_FLAGS, environ)


def _add_xla_flags(wanted: dict[str, str], environ=None) -> list[str]:
    environ = os.environ if environ is None else environ
    flags = environ.get("XLA_FLAGS", "")
    added = [f"{name}={value}" for name, value in wanted.items() if not re.search(rf"{name}(=|\s|$)", flags)]
    if added:
        environ["XLA_FLAGS"] = " ".join([flags, *added]).strip()
    return added


# Function names are numbered from this block's next multiple before a command traces its steps.
FUNCTION_NAME_BLOCK = 1_000_000


def align_function_names(block: int = FUNCTION_NAME_BLOCK) -> int:
    """Moves TensorFlow's function-name counter to the next multiple of `block`; returns it.

    The compile cache keys a compiled program by its function's name, which carries a
    process-wide counter (`__inference_one_step_on_data_6226`), and by its HLO, which carries
    the name too. A resumed run restores its checkpoint before training, which advances the
    counter (to `_6597` in a measured tiny run): the same step got another name and compiled
    again. Calling this right before the steps are traced gives a fresh run, its rerun and
    its resume the same names, as long as the counter is below the same multiple (a block of a
    million: a run's setup uses tens of thousands). The counter is TensorFlow's `ops.uid`, which
    only counts up, one per call: the calls run from C (`itertools`), 0.09 s a million on 2 CPU
    cores where a Python loop took 0.17 s (a run aligns its training step, its evaluation step,
    its sample panel and its export).
    """
    from tensorflow.python.framework import ops  # private: no public way to read the counter

    target = (ops.uid() // block + 1) * block
    calls = target - 1 - ops.uid()  # the last of them returns target - 1; the next name gets target
    collections.deque(itertools.starmap(ops.uid, itertools.repeat((), calls)), maxlen=0)
    return target


def cached_programs(folder: Path | None) -> int:
    """How many compiled programs the cache folder holds (one file each; the traced steps'
    subfolder, traced_steps.py, is not counted)."""
    return _files_in(folder)


def _files_in(folder: Path | None) -> int:
    if folder is None or not folder.is_dir():
        return 0
    return sum(1 for path in folder.iterdir() if path.is_file())


def compile_cache_usage(folder: Path | None) -> str:
    """What the cache folder holds, for `--check`: its programs, its traced steps and their size
    on disk. Nothing is ever deleted from it (each new model, batch, precision, TensorFlow or
    package version adds entries; a traced ELECTRA-Small step is 3 MB), so a user sees here when
    it is time to delete it."""
    if folder is None or not folder.is_dir():
        return "empty"
    size = sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())
    return (f"{cached_programs(folder)} program(s) and {_files_in(folder / TRACED_STEPS_FOLDER)} traced step(s), "
            f"{size / 2**20:,.1f} MiB")


def compile_cache_report(folder: Path | None, programs_before: int, traced_steps=None) -> dict | None:
    """For a run's metrics.json: the cache folder and the programs the run added to it (0 when
    it loaded every compiled step; another process writing to the same folder counts too), and
    the traced steps it loaded and saved (`traced_steps.TracedStepCache`)."""
    if folder is None:
        return None
    report = {"folder": str(folder), "programs_added": cached_programs(folder) - programs_before}
    if traced_steps is not None:
        report["traced_steps"] = {"loaded": traced_steps.loaded, "saved": traced_steps.saved}
    return report


def gpu_capabilities_now() -> list[tuple[int, int]]:
    """Each visible GPU's compute capability, e.g. (9, 0) for an H100 (read from the physical
    devices: TensorFlow's runtime is not started by it)."""
    import tensorflow as tf

    return [tuple(tf.config.experimental.get_device_details(gpu).get("compute_capability", (0, 0)))
            for gpu in tf.config.list_physical_devices("GPU")]


def _gpu_precision(capabilities: list[tuple[int, int]]) -> tuple[str, str]:
    if capabilities and min(capabilities) >= (8, 0):
        return "mixed_bfloat16", "compute capability >= 8.0: bfloat16 tensor cores, no loss scaling"
    return "mixed_float16", "compute capability < 8.0: no bfloat16 tensor cores; dynamic loss scaling"


def _cpu_precision(hidden_size: int | None, native_bfloat16: bool | None) -> tuple[str, str]:
    if hidden_size is None:
        return "float32", "model width not given"
    if hidden_size < CPU_BFLOAT16_MIN_HIDDEN_SIZE:
        return "float32", f"hidden_size {hidden_size} < {CPU_BFLOAT16_MIN_HIDDEN_SIZE}, where bfloat16 measured no faster"
    if not (cpu_has_native_bfloat16() if native_bfloat16 is None else native_bfloat16):
        return "float32", "this CPU has no native bfloat16 instructions"
    return "mixed_bfloat16", f"native bfloat16 and hidden_size {hidden_size} >= {CPU_BFLOAT16_MIN_HIDDEN_SIZE}"


def cpu_has_native_bfloat16(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether the CPU reports bfloat16 matrix instructions (AVX512_BF16 or AMX-BF16).

    TensorFlow has no public query for this; Linux lists the CPU's flags in /proc/cpuinfo.
    Elsewhere, or if it cannot be read, the answer is False, which keeps float32.
    """
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as lines:
            flags = next((line.split(":", 1)[1].split() for line in lines if line.startswith("flags")), [])
    except OSError:
        return False
    return any(flag in flags for flag in NATIVE_BFLOAT16_CPU_FLAGS)


def create_strategy(runtime: Runtime):
    import tensorflow as tf

    if runtime.strategy_name == "one_device":
        strategy = tf.distribute.get_strategy()  # the default strategy: one device, no copies
    elif runtime.strategy_name == "mirrored":
        strategy = tf.distribute.MirroredStrategy(runtime.devices if len(runtime.devices) > 1 else None)
    elif runtime.strategy_name == "multi_worker":
        # A peer that vanishes without closing its connections (a lost host) would otherwise
        # leave the others waiting in the next all-reduce forever; the timeout must exceed the
        # slowest first step (tracing and compiling, minutes for large models).
        timeout = float(os.environ.get("ELECTRA_TF_COLLECTIVE_TIMEOUT", COLLECTIVE_TIMEOUT_SECONDS))
        strategy = tf.distribute.MultiWorkerMirroredStrategy(
            communication_options=tf.distribute.experimental.CommunicationOptions(timeout_seconds=timeout))
    else:
        # TPU_NAME names a TPU node; on a Cloud TPU VM the TPU is local to this host.
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=os.environ.get("TPU_NAME", "local"))
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        strategy = tf.distribute.TPUStrategy(resolver)
    runtime.strategy = strategy
    return strategy


def _cluster_size(environ) -> int:
    try:
        cluster = json.loads(environ.get("TF_CONFIG", "{}")).get("cluster", {})
    except json.JSONDecodeError:
        raise RunError("TF_CONFIG is not valid JSON.") from None
    return sum(len(tasks) for name, tasks in cluster.items() if name in ("chief", "worker"))


def gpu_names() -> list[str]:
    """The visible GPUs by name (e.g. "NVIDIA H100 80GB HBM3"), for a run's metrics.json."""
    import tensorflow as tf

    return [tf.config.experimental.get_device_details(gpu).get("device_name", gpu.name)
            for gpu in tf.config.list_physical_devices("GPU")]


def check(preset: str = "electra_small") -> int:
    """`python -m electra_tf --check`: what this machine offers and what `auto` would choose,
    proven by running a matmul, and an XLA-compiled one, on each device. Returns an exit status
    (1 when a device or XLA fails)."""
    import tensorflow as tf

    from electra_tf.config import ElectraConfig

    cache = use_compile_cache()  # with the XLA flags a run sets, before TensorFlow starts
    build = tf.sysconfig.get_build_info()
    cuda = (f"built for CUDA {build.get('cuda_version')}, cuDNN {build.get('cudnn_version')}"
            if build.get("is_cuda_build") else "a build without CUDA")
    print(f"TensorFlow {tf.__version__} ({cuda})")
    gpus = tf.config.list_physical_devices("GPU")
    for index, gpu in enumerate(gpus):
        details = tf.config.experimental.get_device_details(gpu)
        capability = ".".join(str(part) for part in details.get("compute_capability", ()))
        print(f"  GPU {index}: {details.get('device_name', gpu.name)} (compute capability {capability or '?'})")
    if not gpus:
        print("  no GPU visible. For one: pip install -e \".[gpu]\" (TensorFlow's CUDA 12 libraries from PyPI) "
              "and an NVIDIA driver; if one is installed and still unseen, rerun with TF_CPP_MIN_LOG_LEVEL=0 "
              "TF_CPP_VMODULE=dso_loader=2 to see which library failed to load.")
    config = ElectraConfig.load(preset)
    runtime = resolve_runtime(hidden_size=config.hidden_size)
    print(f"pretrain --config {preset} with the defaults would run: {runtime.describe()}")
    held = f"holds {compile_cache_usage(cache)}; delete the folder to reclaim its space; " if cache else ""
    print(f"XLA compile cache: {cache or 'off'} ({held}{COMPILE_CACHE_VARIABLE}=DIR or off to change); "
          f"XLA_FLAGS: {os.environ.get('XLA_FLAGS', '')}")
    failed = False
    for device in runtime.devices or ["/CPU:0"]:
        for xla in (False, True):
            what = f"{device}: a 256 x 256 matmul{' compiled by XLA' if xla else ''}"
            try:
                with tf.device(device):
                    x = tf.random.normal([256, 256])
                    result = tf.function(lambda a: tf.reduce_sum(tf.matmul(a, a)), jit_compile=xla)(x)
                    ok = bool(tf.math.is_finite(result))
                print(f"  ok   {what}" if ok else f"  FAIL {what}: a non-finite result")
                failed |= not ok
            except Exception as error:  # a missing ptxas or libdevice shows here, not at import
                print(f"  FAIL {what}: {type(error).__name__}: {str(error).strip().splitlines()[0][:300]}")
                failed = True
    return 1 if failed else 0
