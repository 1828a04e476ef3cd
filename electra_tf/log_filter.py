"""The lines TensorFlow prints that carry no information for a run on CPU, and the one place
the commands drop them.

TensorFlow 2.21 prints banners while it loads that its own switch, TF_CPP_MIN_LOG_LEVEL, does
not silence (tensorflow/tensorflow#100442), and two lines at level E(rror) that are not errors
here. A command started from the shell (`python -m electra_tf.<command>`) passes its stderr
through `filtered_stderr`, which drops exactly the lines in NOISE and passes everything else
unchanged, in order. `ELECTRA_TF_TF_LOGS=1` keeps every line.

The filter is a small process of its own (`python -m electra_tf.log_filter`), not a thread:
if the command dies at once (a fatal error from TensorFlow's C++, SIGKILL), the pipe still
holds its last lines and the filter still passes them on. It ignores SIGINT and SIGTERM and
ends when the pipe closes, or, when the command is done but a child process it started (such as
multiprocessing's resource tracker) still holds the pipe, on SIGUSR1 once the pipe is empty.

>>> [is_noise(line) for line in (
...     "I0000 00:00:1795507637.096271   13736 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not be used.",
...     "E0000 00:00:1795507638.858280   13736 some_op.cc:12] a real error")]
[True, False]
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import subprocess
import sys

_PREFIX = r"^[IWE]\d{4} [\d:. ]+\d+ "
NOISE = [
    # absl's note that TensorFlow never initialises its logging.
    r"^WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR$",
    _PREFIX + r"port\.cc:\d+\] oneDNN custom operations are on",
    _PREFIX + r"cudart_stub\.cc:\d+\] Could not find cuda drivers on your machine, GPU will not be used",
    _PREFIX + r"cpu_feature_guard\.cc:\d+\] This TensorFlow binary is optimized",
    r"^To enable the following instructions: .* rebuild TensorFlow with the appropriate compiler flags\.$",
    # Printed on CPUs with AVX-512 too; the op then runs on Eigen, as on any other CPU.
    _PREFIX + r"util\.cc:\d+\] oneDNN supports DT_INT64 only on platforms with AVX-512",
    _PREFIX + r"generator_dataset_op\.cc:\d+\] Memory patch applied",
    # The Python hop that makes the input position checkpointable is a generator dataset.
    _PREFIX + r"dataset\.cc:\d+\] Input of GeneratorDatasetOp::Dataset will not be optimized",
    # The compile cache reads each entry as text, then as binary (TensorFlow's
    # ReadTextOrBinaryProto): the text parser's complaint comes before every cached program's load
    # (on one H200 the rerun then loaded its step: no new entry, 27.8 s first step against 125.2 s).
    _PREFIX + r"text_format\.cc:\d+\] Error parsing text-format tensorflow\.XlaSerializedCacheEntry",
    # Loading a cached CPU program: LLVM's scheduling preferences, which are not instructions.
    _PREFIX + r"cpu_aot_loader\.cc:\d+\] Loading XLA:CPU AOT result\. Target machine feature "
              r"\+prefer-no-(scatter|gather) is not +supported",
]
# cuInit fails on every host without an NVIDIA driver; on a host with one it is a real error.
CUDA_WITHOUT_DRIVER = _PREFIX + r"cuda_platform\.cc:\d+\] failed call to cuInit"
_NOISE = re.compile("|".join(NOISE + ([] if os.path.exists("/dev/nvidiactl") else [CUDA_WITHOUT_DRIVER])))


def is_noise(line: str) -> bool:
    return bool(_NOISE.search(line.rstrip("\n")))


@contextlib.contextmanager
def filtered_stderr():
    """Within it, file descriptor 2 (Python's and TensorFlow's C++ stderr alike, and that of
    any child process started meanwhile) goes through the filter process to the real stderr."""
    sys.stderr.flush()
    real = os.dup(2)
    try:
        process = subprocess.Popen([sys.executable, "-m", "electra_tf.log_filter"], stdin=subprocess.PIPE,
                                   stdout=real, stderr=real)
    except OSError:  # no filter: the command still runs, with TensorFlow's lines
        os.close(real)
        yield
        return
    os.dup2(process.stdin.fileno(), 2)
    process.stdin.close()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(real, 2)  # the pipe's last write end in this process closes: the filter drains it
        os.close(real)
        try:
            process.wait(timeout=0.5)
        except subprocess.TimeoutExpired:  # a child process still holds the pipe open
            process.send_signal(signal.SIGUSR1)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass


def _filter(source: int, target) -> None:
    """Copies lines from file descriptor `source` to `target`, leaving out noise, until the
    pipe ends or, after SIGUSR1, until it is empty."""
    done = []
    signal.signal(signal.SIGUSR1, lambda number, frame: done.append(True))
    pending = b""
    while True:
        readable, _, _ = select.select([source], [], [], 0.1)
        if not readable:
            if done:
                break
            continue
        chunk = os.read(source, 1 << 16)
        if not chunk:
            break
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            if not is_noise(line.decode("utf-8", errors="replace")):
                target.write(line + b"\n")
        target.flush()
    if pending and not is_noise(pending.decode("utf-8", errors="replace")):
        target.write(pending)
        target.flush()


def run(main) -> int:
    """A command's `main()` as the shell runs it: TensorFlow's INFO lines off (TF_CPP_MIN_LOG_LEVEL
    1, unless set; they chronicle gRPC servers, record readers and the like), and stderr filtered;
    ELECTRA_TF_TF_LOGS=1 keeps both as TensorFlow has them."""
    if os.environ.get("ELECTRA_TF_TF_LOGS") == "1":
        return main()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    with filtered_stderr():
        return main()


if __name__ == "__main__":
    for number in (signal.SIGINT, signal.SIGTERM):  # only the end of the pipe ends the filter
        signal.signal(number, signal.SIG_IGN)
    _filter(sys.stdin.fileno(), sys.stdout.buffer)
