"""Where and how a run executes: distribution strategy, precision policy, XLA.

`resolve_runtime` turns the CLI's choices (`auto` or explicit) into a `Runtime` and says why,
so the decisions are visible in the run summary and testable without the hardware:

- strategy `auto`: TPUStrategy when a TPU is configured (TPU_NAME), MultiWorkerMirrored when
  TF_CONFIG names a cluster, MirroredStrategy on several GPUs, else the default strategy on
  one device.
- precision `auto`: mixed_float16 (dynamic loss scaling) on GPUs, mixed_bfloat16 on TPUs. On
  CPU, mixed_bfloat16 for a model of ELECTRA-Small's width or wider on a CPU with native
  bfloat16 instructions (AVX512_BF16 or AMX-BF16), where a step measured 1.24x (Small) and 1.40x
  (Base) faster and Small's pre-training learned as in float32 (docs/results.md,
  "Speed"); float32 otherwise: on a CPU without them bfloat16 measured slower, for the tiny
  default it was level, and float16 matmuls on CPU are slow. Pre-training and fine-tuning pass
  the model's width; without it CPU precision stays float32.
- XLA: on for GPUs and TPUs; off on CPU, where it measured no faster for the tiny step
  (benchmarks/input_pipeline.py) and cannot place a MirroredStrategy's per-replica step over
  logical CPU devices. With a strategy, Keras compiles the per-replica step function with XLA
  (`compile(jit_compile=True)` under `strategy.scope()`).
"""

from __future__ import annotations

import dataclasses
import json
import os

from electra_tf.errors import RunError

COLLECTIVE_TIMEOUT_SECONDS = 600.0  # ELECTRA_TF_COLLECTIVE_TIMEOUT overrides it
# The narrowest encoder for which bfloat16 on a CPU with native bfloat16 paid off: ELECTRA-Small
# (256) ran 1.24x faster per step, the tiny default (128) was level.
CPU_BFLOAT16_MIN_HIDDEN_SIZE = 256
# /proc/cpuinfo flags of the instructions oneDNN uses for bfloat16 matmuls.
NATIVE_BFLOAT16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
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


def resolve_runtime(strategy: str = "auto", precision: str = "auto", xla: bool | None = None,
                    gpus: int | None = None, environ=None, hidden_size: int | None = None,
                    native_bfloat16: bool | None = None) -> Runtime:
    """Decides strategy, precision and XLA from the request and the visible hardware.

    `hidden_size` is the encoder's width, known before the model is built (pre-training and
    fine-tuning pass it; without it CPU precision stays float32). `gpus` and `native_bfloat16`
    default to what this machine has; tests pass them.
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
    elif precision == "auto":
        chosen_precision = {"gpu": "mixed_float16", "tpu": "mixed_bfloat16"}[accelerator]
        notes.append(f"precision auto -> {chosen_precision} on {accelerator.upper()}")

    use_xla = xla
    if use_xla is None:
        use_xla = accelerator in ("gpu", "tpu")
        notes.append(f"XLA {'on' if use_xla else 'off'} by default on {accelerator.upper()}")
    if use_xla and accelerator == "cpu" and chosen in ("mirrored", "multi_worker"):
        use_xla = False
        notes.append("XLA turned off: a MirroredStrategy step over CPU devices does not compile "
                     "with XLA (resources on one logical device are read from another)")
    # Listing logical devices starts TensorFlow's runtime, after which a MultiWorkerMirroredStrategy
    # can no longer configure its collectives ("must be configured at program startup").
    devices = ([] if chosen == "multi_worker" else
               [d.name for d in tf.config.list_logical_devices("GPU" if gpus else "CPU")])
    return Runtime(chosen, chosen_precision, bool(use_xla), devices, notes)


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
