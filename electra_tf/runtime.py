"""Where and how a run executes: distribution strategy, precision policy, XLA.

`resolve_runtime` turns the CLI's choices (`auto` or explicit) into a `Runtime` and says why,
so the decisions are visible in the run summary and testable without the hardware:

- strategy `auto`: TPUStrategy when a TPU is configured (TPU_NAME), MultiWorkerMirrored when
  TF_CONFIG names a cluster, MirroredStrategy on several GPUs, else the default strategy on
  one device.
- precision `auto`: mixed_float16 (dynamic loss scaling) on GPUs, mixed_bfloat16 on TPUs,
  float32 on CPU (bfloat16 is selectable on CPU; float16 matmuls there are slow).
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


def resolve_runtime(strategy: str = "auto", precision: str = "auto", xla: bool | None = None,
                    gpus: int | None = None, environ=None) -> Runtime:
    """Decides strategy, precision and XLA from the request and the visible hardware."""
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
    if precision == "auto":
        chosen_precision = {"gpu": "mixed_float16", "tpu": "mixed_bfloat16", "cpu": "float32"}[accelerator]
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
