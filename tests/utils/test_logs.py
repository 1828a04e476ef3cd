"""TensorFlow's start-up lines left out of a command's output, and every other line kept."""

import os
import subprocess
import sys

from electra_tf.utils.logs import is_start_up_noise


def test_start_up_lines_are_recognised_and_real_errors_are_not():
    assert is_start_up_noise("I0000 00:00:1795507637.096271   13736 port.cc:153] oneDNN custom operations are on. "
                             "You may see slightly different numerical results")
    assert is_start_up_noise("WARNING: All log messages before absl::InitializeLog() is called are written to STDERR")
    assert not is_start_up_noise("E0000 00:00:1795507638.858280   13736 some_op.cc:12] a real error")


def test_what_is_written_to_stderr_inside_comes_back_less_the_start_up_lines():
    code = ("import os, sys\nfrom electra_tf.utils.logs import start_up_lines_left_out\n"
            "with start_up_lines_left_out():\n"
            "    os.write(2, b'I0000 00:00:1.0 1 port.cc:153] oneDNN custom operations are on\\n')\n"
            "    os.write(2, b'a line that stays\\n')\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                            env=dict(os.environ, ELECTRA_TF_TF_LOGS="0"))
    assert result.stderr == "a line that stays\n"


def test_a_command_imports_tensorflow_quietly_without_starting_its_runtime():
    code = ("import sys\nfrom electra_tf.utils.logs import import_tensorflow\nimport_tensorflow()\n"
            "import tensorflow as tf\nprint(tf.config.list_logical_devices() != [])")
    env = {key: value for key, value in os.environ.items() if key != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0 and "oneDNN custom operations" not in result.stderr, result.stderr
