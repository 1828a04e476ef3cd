"""XLA's persistent compilation cache, and the XLA flags a run sets.

XLA compiles a step the first time it runs: minutes on a GPU for ELECTRA-Small, where ptxas and
autotuning are most of it. TensorFlow can keep each compiled program on disk, keyed by a
fingerprint of the program and the device, and load it in the next process instead of compiling
(`--tf_xla_persistent_cache_directory` in TF_XLA_FLAGS). One folder per user serves every run:
another model, batch shape, precision or TensorFlow version is another fingerprint, a new entry.
Nothing is ever deleted from it; `python -m electra_tf --check` shows what it holds, and
deleting the folder clears it. A program is found again only when its function carries the
same name, and TensorFlow numbers function names in the order a process traces them: the runs
trace their steps before anything that differs between a fresh run and its resume (restoring a
checkpoint, reading data), so a resume or an extension finds its program
(`pretraining/task.py`'s `build_model`, `tests/test_pretrain.py`).

The per-user folder is the default where XLA compiles whole steps: on a host with an NVIDIA
GPU, or in a run asked for `--xla`. On a CPU host otherwise the only XLA programs are the small
fused functions of `models/fused.py` (about a second of a first step to compile), and loading a
CPU program from the cache logs three ERROR lines per program, which a rerun of any command would
print: XLA:CPU's loader counts two LLVM tuning preferences (`+prefer-no-gather`,
`+prefer-no-scatter`) as machine features the host lacks (openxla/xla#44565; the program still
loads and runs), and TensorFlow tries the entry as text before binary ("Error parsing
text-format tensorflow.XlaSerializedCacheEntry"). There the cache is off unless
ELECTRA_TF_COMPILE_CACHE names a folder (`tests/runtime/test_xla.py` shows the lines, so a
TensorFlow that stops printing them is noticed).

Flags are read once, when TensorFlow's runtime starts: `use_compile_cache` must run before
anything starts it (after `import tensorflow` is fine; listing devices is too late). Each flag
set here is one XLA or TensorFlow parses at start-up and rejects when unknown, so
`tests/runtime/test_xla.py` proves they exist in the pinned TensorFlow by compiling with them.
Flags the user sets in XLA_FLAGS or TF_XLA_FLAGS win.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from electra_tf.utils import nvidia

COMPILE_CACHE_VARIABLE = "ELECTRA_TF_COMPILE_CACHE"  # a folder, or "off"

# XLA's GPU backend compiles a program's kernels on one core unless asked for a thread pool
# (`--xla_gpu_force_compilation_parallelism`) and a split of the program into modules
# (`--xla_gpu_enable_llvm_module_compilation_parallelism`, as JAX sets it); TensorFlow's JIT
# asks for neither. The CPU backend ignores both.
PARALLEL_GPU_COMPILE_FLAGS = {"--xla_gpu_enable_llvm_module_compilation_parallelism": "true",
                              "--xla_gpu_force_compilation_parallelism": str(os.cpu_count() or 1)}
# With the cache on: a cached GPU program keeps its thunks (what launches each kernel, copy and
# CUDA graph), so a process loads it instead of emitting them again from the HLO, seconds of a
# rerun's first step. CPU programs ignore it.
COMPILE_CACHE_XLA_FLAGS = {"--xla_gpu_experimental_aot_compiled_thunks": "true"}
# float16 under XLA on a GPU: XLA's Triton GEMM fusions returned non-finite gradients for
# ELECTRA-Small at every loss scale, so dynamic loss scaling skipped every step; with cuBLAS for
# every matmul the gradients are finite. bfloat16 keeps Triton's GEMMs.
FLOAT16_GPU_XLA_FLAGS = {"--xla_gpu_enable_triton_gemm": "false"}


def nvidia_gpu_visible(environ=None) -> bool:
    """Whether TensorFlow would find an NVIDIA GPU, judged before it starts (the guess `auto`'s
    XLA choice, `devices.resolve_runtime`, makes once it has): a driver installed, and
    CUDA_VISIBLE_DEVICES not hiding every device."""
    environ = os.environ if environ is None else environ
    return environ.get("CUDA_VISIBLE_DEVICES") not in ("", "-1") and nvidia.driver_installed()


def compile_cache_directory(environ=None, xla: bool | None = None) -> Path | None:
    """Where compiled XLA programs are kept between processes: ELECTRA_TF_COMPILE_CACHE, or
    `$XDG_CACHE_HOME/electra_tf/xla` (`~/.cache/electra_tf/xla`) where XLA compiles whole steps
    (`xla` True, or None with a GPU visible: module docstring); None when it is "off" or not
    wanted here."""
    environ = os.environ if environ is None else environ
    setting = environ.get(COMPILE_CACHE_VARIABLE, "")
    if setting.lower() == "off":
        return None
    if setting:
        return Path(setting).expanduser()
    compiles_whole_steps = nvidia_gpu_visible(environ) if xla is None else xla
    if not compiles_whole_steps:
        return None
    return Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "electra_tf" / "xla"


def use_compile_cache(environ=None, xla: bool | None = None) -> Path | None:
    """Turns on the persistent compilation cache for this process (and XLA's parallel GPU
    compile, and with the cache the compiled thunks); returns the folder, or None when off.
    `xla`: the run's `--xla` choice (None for `auto`), which decides the default
    (`compile_cache_directory`). TF_XLA_FLAGS that name a cache folder already win. Call it
    before TensorFlow starts."""
    environ = os.environ if environ is None else environ
    add_xla_flags(PARALLEL_GPU_COMPILE_FLAGS, environ)
    flags = environ.get("TF_XLA_FLAGS", "")
    named = re.search(r"--tf_xla_persistent_cache_directory=(\S+)", flags)
    directory = Path(named.group(1)) if named else compile_cache_directory(environ, xla)
    if directory is None:
        return None
    add_xla_flags(COMPILE_CACHE_XLA_FLAGS, environ)
    if not named:
        # Not created here: TensorFlow makes the folder on its first write, so a run without
        # XLA leaves nothing behind.
        environ["TF_XLA_FLAGS"] = f"{flags} --tf_xla_persistent_cache_directory={directory}".strip()
    return directory


def use_float16_safe_gemms(environ=None) -> list[str]:
    """Adds `FLOAT16_GPU_XLA_FLAGS` for float16 runs compiled by XLA on a GPU
    (`devices.resolve_runtime` calls it before anything compiles); returns the flags added."""
    return add_xla_flags(FLOAT16_GPU_XLA_FLAGS, environ)


def add_xla_flags(wanted: dict[str, str], environ=None) -> list[str]:
    """Adds each flag to XLA_FLAGS unless XLA_FLAGS already names it (the user's choice wins);
    returns the flags added.

    >>> environ = {"XLA_FLAGS": "--xla_gpu_enable_triton_gemm=true"}
    >>> add_xla_flags({"--xla_gpu_enable_triton_gemm": "false", "--xla_dump_to": "/tmp/x"}, environ)
    ['--xla_dump_to=/tmp/x']
    """
    environ = os.environ if environ is None else environ
    flags = environ.get("XLA_FLAGS", "")
    added = [f"{name}={value}" for name, value in wanted.items() if not re.search(rf"{name}(=|\s|$)", flags)]
    if added:
        environ["XLA_FLAGS"] = " ".join([flags, *added]).strip()
    return added


def cached_programs(folder: Path | None) -> int:
    """How many compiled programs the cache folder holds (one file each)."""
    if folder is None or not folder.is_dir():
        return 0
    return sum(1 for path in folder.iterdir() if path.is_file())


def compile_cache_usage(folder: Path | None) -> str:
    """What the cache folder holds, for `--check`: its programs and their size on disk."""
    if folder is None or not folder.is_dir():
        return "empty"
    size = sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())
    return f"{cached_programs(folder)} program(s), {size / 2**20:,.1f} MiB"


def compile_cache_report(folder: Path | None, programs_before: int) -> dict | None:
    """For a run's metrics.json: the cache folder and the programs the run added to it (0 when
    it loaded every compiled step; another process writing to the same folder counts too)."""
    if folder is None:
        return None
    return {"folder": str(folder), "programs_added": cached_programs(folder) - programs_before}
