"""`python -m electra_tf --check`: what this machine offers and what `auto` would choose on it,
proven by running a matmul, and an XLA-compiled one, on each device."""

from __future__ import annotations

import os

from electra_tf.runtime.cluster import use_cluster
from electra_tf.runtime.devices import resolve_runtime
from electra_tf.runtime.xla import COMPILE_CACHE_VARIABLE, compile_cache_usage, use_compile_cache
from electra_tf.utils.logs import start_tensorflow


def check(preset: str = "electra_small", hidden_size: int = 256) -> int:
    """Prints the TensorFlow build, the GPUs, what `pretrain --config PRESET` (an encoder of
    `hidden_size`) would run with, the compile cache and the XLA flags, then runs the matmuls.
    Returns an exit status (1 when a device or XLA fails)."""
    cache = use_compile_cache()  # with the XLA flags a run sets, before TensorFlow starts
    tf = start_tensorflow()

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
    print(f"cluster: {use_cluster().describe()}")
    runtime = resolve_runtime(hidden_size=hidden_size)
    print(f"pretrain --config {preset} with the defaults would run: {runtime.describe()}")
    if cache:
        held = f"holds {compile_cache_usage(cache)}; delete the folder to clear it; "
    else:  # off by default here, or turned off
        held = "" if os.environ.get(COMPILE_CACHE_VARIABLE) else "on by default with a GPU or in a run with --xla; "
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
