"""Where and how a run executes: distribution strategy, precision policy, XLA.

`resolve_runtime` turns the command's choices (`auto` or explicit) into a `Runtime` and says
why, so the decisions are visible in the run's header and testable without the hardware:

- strategy `auto`: TPUStrategy when a TPU is configured (TPU_NAME), MultiWorkerMirrored when
  TF_CONFIG names a cluster, MirroredStrategy on several GPUs, else the default strategy on
  one device.
- precision `auto`: mixed_bfloat16 on TPUs and on GPUs of compute capability 8.0 or later
  (bfloat16 tensor cores; float32's range, so no loss scaling and no skipped batch),
  mixed_float16 with dynamic loss scaling on older GPUs (under XLA with cuBLAS matmuls:
  `xla.use_float16_safe_gemms`). On a CPU, mixed_bfloat16 for an encoder of ELECTRA-Small's
  width or wider where the CPU has native bfloat16 instructions (AVX512_BF16, AMX-BF16), the
  only case where it measured faster; float32 otherwise.
- XLA: on for GPUs and TPUs, off on CPU, where it measured slower
  ([results](../../docs/results.md#speed-on-a-cpu)). How a step is compiled under each strategy:
  `compiled_step.py`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import resource

import tensorflow as tf

from electra_tf.runtime.config import PRECISIONS, STRATEGIES
from electra_tf.runtime.xla import use_float16_safe_gemms
from electra_tf.utils.errors import RunError

COLLECTIVE_TIMEOUT_SECONDS = 600.0  # ELECTRA_TF_COLLECTIVE_TIMEOUT overrides it
# The narrowest encoder for which bfloat16 on a CPU with native bfloat16 pays off: faster for
# ELECTRA-Small's width (256), level for the tiny default's (128).
CPU_BFLOAT16_MIN_HIDDEN_SIZE = 256
# /proc/cpuinfo flags of the instructions oneDNN uses for bfloat16 matmuls.
NATIVE_BFLOAT16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")


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
                     "off, cuBLAS instead (they made non-finite float16 gradients)"))
    # Listing logical devices starts TensorFlow's runtime, after which a MultiWorkerMirroredStrategy
    # can no longer configure its collectives ("must be configured at program startup").
    devices = ([] if chosen == "multi_worker" else
               [d.name for d in tf.config.list_logical_devices("GPU" if gpus else "CPU")])
    return Runtime(chosen, chosen_precision, bool(use_xla), devices, notes)


def gpu_capabilities_now() -> list[tuple[int, int]]:
    """Each visible GPU's compute capability, e.g. (9, 0) for an H100 (read from the physical
    devices: TensorFlow's runtime is not started by it)."""
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
    return [tf.config.experimental.get_device_details(gpu).get("device_name", gpu.name)
            for gpu in tf.config.list_physical_devices("GPU")]


def peak_memory() -> dict:
    """The run's peak memory so far: on GPUs, the largest peak TensorFlow's allocator reached on
    any of them (`tf.config.experimental.get_memory_info`); on a CPU, the process's peak resident
    memory (`resource.getrusage`, kilobytes on Linux). {"where", "bytes"}."""
    gpus = tf.config.list_logical_devices("GPU")
    if gpus:
        peaks = [tf.config.experimental.get_memory_info(device.name)["peak"] for device in gpus]
        return {"where": f"GPU memory (largest of {len(gpus)} device(s), TensorFlow allocator peak)",
                "bytes": int(max(peaks))}
    return {"where": "process resident memory (CPU run)",
            "bytes": int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024}
