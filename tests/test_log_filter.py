"""The commands' stderr filter: TensorFlow's known noise goes, everything else stays, even
from a process that dies at once."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NOISE = (b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
         b"I0000 00:00:1795507637.095929   13736 port.cc:153] oneDNN custom operations are on. You may see\n"
         b"E0000 00:00:1795507642.172578   13736 util.cc:131] oneDNN supports DT_INT64 only on platforms with AVX-512.\n")


def run(code: str):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("ELECTRA_TF_TF_LOGS", None)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, env=env, timeout=60)


def test_noise_goes_and_everything_else_stays_in_order():
    result = run("import os, sys\nfrom electra_tf import log_filter\n"
                 "def main():\n"
                 f"    os.write(2, {NOISE!r} + b'first\\n')\n"
                 "    print('second', file=sys.stderr)\n"
                 "    os.write(2, b'E0000 00:00:1.5 9 some_op.cc:12] a real error\\n')\n"
                 "    return 4\n"
                 "sys.exit(log_filter.run(main))")
    assert result.returncode == 4
    assert result.stderr.decode().splitlines() == ["first", "second", "E0000 00:00:1.5 9 some_op.cc:12] a real error"]


def test_the_last_lines_of_a_process_that_dies_at_once_still_arrive():
    result = run("import os, sys\nfrom electra_tf import log_filter\n"
                 f"log_filter.run(lambda: (os.write(2, {NOISE!r} + b'F0000 fatal: check failed\\n'), os.abort()))")
    assert result.returncode != 0
    assert result.stderr.decode().splitlines() == ["F0000 fatal: check failed"]


def test_the_compile_caches_load_messages_are_noise_and_other_parse_errors_are_not():
    from electra_tf.log_filter import is_noise

    # As printed on one H200 when a rerun loaded its cached step, and on CPU for a cached program.
    assert is_noise("E0000 00:00:1795666496.463813   19701 text_format.cc:378] Error parsing text-format "
                    "tensorflow.XlaSerializedCacheEntry: 2:1: Expected identifier, got: 6")
    assert is_noise("E0000 00:00:1795665826.416064    4188 cpu_aot_loader.cc:220] Loading XLA:CPU AOT result. "
                    "Target machine feature +prefer-no-scatter is not  supported on the host machine. Machine type")
    assert not is_noise("E0000 00:00:1795666496.463813   19701 text_format.cc:378] Error parsing text-format "
                        "tensorflow.ConfigProto: 2:1: Expected identifier, got: 6")
    assert not is_noise("E0000 00:00:1795665826.416064    4188 cpu_aot_loader.cc:220] Loading XLA:CPU AOT result. "
                        "Target machine feature +avx512f is not supported on the host machine.")
