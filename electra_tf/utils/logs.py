"""TensorFlow's start-up lines, left out of a command's output.

TensorFlow's own switch, TF_CPP_MIN_LOG_LEVEL, silences its INFO lines (the commands set it to 1
unless it is set: gRPC servers, record readers, XLA's service). It cannot silence what its
libraries print while they load, before logging is set up (tensorflow/tensorflow#100442): the
absl warning, the oneDNN and CUDA-stub notes, printed once per library, and on a machine
without an NVIDIA driver the failed `cuInit` when the devices are first listed (an error only
where a driver exists). One more comes at the first int64 transpose (every tokenizer's ragged
ops make one): oneDNN's once-per-process notice that its int64 kernels are not used on this
CPU, logged as an error although nothing fails. `start_tensorflow` imports TensorFlow and lists
its devices with file descriptor 2 pointed at a temporary file, then writes back everything
that is not one of those lines: nothing but the start-up is held, and an import that fails
prints all it said; `int64_notice_left_out` makes the transpose the same way, once TensorFlow's
runtime may start (a strategy's devices configured).
`ELECTRA_TF_TF_LOGS=1` keeps every line.

>>> [is_start_up_noise(line) for line in (
...     "I0000 00:00:1795507637.096271   13736 cudart_stub.cc:31] Could not find cuda drivers on your machine, "
...     "GPU will not be used.", "E0000 00:00:1795507638.858280   13736 some_op.cc:12] a real error")]
[True, False]
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile

from electra_tf.utils import nvidia

KEEP_ALL_VARIABLE = "ELECTRA_TF_TF_LOGS"
_PREFIX = r"^[IWE]\d{4} [\d:. ]+\d+ "
START_UP_NOISE = [
    r"^WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR$",
    _PREFIX + r"port\.cc:\d+\] oneDNN custom operations are on",
    _PREFIX + r"cudart_stub\.cc:\d+\] Could not find cuda drivers on your machine, GPU will not be used",
    _PREFIX + r"cpu_feature_guard\.cc:\d+\] This TensorFlow binary is optimized",
    r"^To enable the following instructions: .* rebuild TensorFlow with the appropriate compiler flags\.$",
    _PREFIX + r"util\.cc:\d+\] oneDNN supports DT_INT64 only on platforms with AVX-512",
]
# What LiteRT's converter and interpreter say of every file `serving/litert.py` writes: the
# tensorflow-text ops it keeps as custom ops (their kernels come from tensorflow-text's registrar;
# the file is run once to prove it), two options TF 2.21's converter ignores, the CPU delegate.
LITERT_NOISE = [
    _PREFIX + r"tf_tfl_flatbuffer_helpers\.cc:\d+\] Ignored (output_format|drop_control_dependency)\.",
    _PREFIX + r"flatbuffer_export\.cc:\d+\] The following operation\(s\) need TFLite custom op implementation",
    r"^Custom ops: ", r"^Details:$", r"^\ttf\.", r"^See instructions: https://www\.tensorflow\.org/lite/guide/ops_custom$",
    r"^INFO: Created TensorFlow Lite XNNPACK delegate for CPU\.$",
]
# cuInit fails on every host without an NVIDIA driver; on a host with one it is a real error.
CUDA_WITHOUT_DRIVER = _PREFIX + r"cuda_platform\.cc:\d+\] failed call to cuInit"


def _noise_pattern(extra: tuple = ()) -> re.Pattern:
    driver = nvidia.driver_installed()
    return re.compile("|".join(START_UP_NOISE + list(extra) + ([] if driver else [CUDA_WITHOUT_DRIVER])))


def is_start_up_noise(line: str) -> bool:
    return bool(_noise_pattern().search(line.rstrip("\n")))


@contextlib.contextmanager
def start_up_lines_left_out(extra: tuple = ()):
    """Within it, file descriptor 2 goes to a temporary file; at its end what was written there
    goes to the real stderr, less `START_UP_NOISE` and the `extra` patterns (all of it when the
    block raised)."""
    sys.stderr.flush()
    real = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        failed = True
        try:
            yield
            failed = False
        finally:
            sys.stderr.flush()
            os.dup2(real, 2)
            os.close(real)
            held.seek(0)
            noise = _noise_pattern(extra)
            for line in held.read().decode("utf-8", errors="replace").splitlines(keepends=True):
                if failed or not noise.search(line.rstrip("\n")):
                    sys.stderr.write(line)
            sys.stderr.flush()


def import_tensorflow():
    """Imports TensorFlow with its start-up lines left out, without starting its runtime: a
    command may then import the package's modules (and read its kinds) before the run sets the
    XLA flags TensorFlow reads when its runtime starts (`runtime.xla.use_compile_cache`)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    if os.environ.get(KEEP_ALL_VARIABLE) == "1" or "tensorflow" in sys.modules:
        import tensorflow as tf
    else:
        with start_up_lines_left_out():
            import tensorflow as tf
    return tf


_devices_listed = False


def start_tensorflow():
    """Imports TensorFlow and lists its devices with the start-up lines left out (module
    docstring); returns the module. Set the XLA flags a run needs before this
    (`runtime.xla.use_compile_cache`): listing devices starts TensorFlow's runtime, which reads
    them once."""
    global _devices_listed
    tf = import_tensorflow()
    if not _devices_listed:
        _devices_listed = True
        if os.environ.get(KEEP_ALL_VARIABLE) == "1":
            tf.config.list_physical_devices("GPU")
        else:
            with start_up_lines_left_out():
                tf.config.list_physical_devices("GPU")
    return tf


def litert_notes_left_out():
    """`start_up_lines_left_out` for a LiteRT conversion and its first run (`LITERT_NOISE`)."""
    if os.environ.get(KEEP_ALL_VARIABLE) == "1":
        return contextlib.nullcontext()
    return start_up_lines_left_out(tuple(LITERT_NOISE))


def int64_notice_left_out() -> None:
    """Makes the process's first int64 transpose with the start-up lines left out (module
    docstring). It runs an op, so it starts TensorFlow's runtime: call it after the devices (and
    a multi-worker strategy's collectives) are configured."""
    import tensorflow as tf

    if os.environ.get(KEEP_ALL_VARIABLE) == "1":
        return
    with start_up_lines_left_out():
        tf.transpose(tf.zeros([1, 1], tf.int64))
