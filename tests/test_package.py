"""The public names load lazily, and every one resolves."""

import subprocess
import sys

import electra_tf


def test_every_public_name_resolves():
    for name in electra_tf.__all__:
        assert getattr(electra_tf, name) is not None, name


def test_importing_the_package_does_not_start_tensorflow():
    code = "import sys, electra_tf, electra_tf.pretrain; print('tensorflow' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "False", result.stderr[-2000:]
