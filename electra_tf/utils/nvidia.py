"""Whether an NVIDIA driver is installed, judged without starting TensorFlow.

Asked before TensorFlow starts, when its start-up flags are still open (the compile cache's
default, `runtime/xla.py`), and of its start-up lines (a failed `cuInit` is noise only where no
driver is installed, `utils/logs.py`). The test is the driver's library, `libcuda.so.1`, which
TensorFlow loads for a GPU: present on every Linux host with the driver, WSL's included, which
has no /dev/nvidiactl.
"""

from __future__ import annotations

import ctypes


def driver_installed() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True
