"""Test set-up for tests/ and the doctests in electra_tf/: quiet TensorFlow, XLA compiling quickly,
and two logical CPU devices so MirroredStrategy can run two replicas on this machine. Devices
must be configured before TensorFlow initialises them, so this runs at import, before any test
module touches a tensor."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# XLA's CPU backend without LLVM's optimisation passes: the tests compile many small XLA
# programs and run each a few steps, so compiling dominates; the compiled code computes the same
# thing, only slower. Measured on 2 cores, the three MirroredStrategy XLA pre-training cells of
# tests/test_compiled_gradients.py: 83.6 s -> 57.5 s. Set before TensorFlow parses its flags, and
# inherited by the commands the tests run as processes. Users' runs keep XLA's default.
os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0")

import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

_cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(
    _cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)


@pytest.fixture(autouse=True)
def _fresh_keras_state():
    import keras
    keras.utils.clear_session()
    keras.config.set_dtype_policy("float32")
    yield
    keras.config.set_dtype_policy("float32")


@pytest.fixture(scope="session")
def two_replicas():
    """One MirroredStrategy over the two logical CPUs for the whole session: a second strategy
    over the same devices would restart the collective instance keys and clash with the
    first one's cached collectives."""
    return tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])


@pytest.fixture(scope="session")
def one_mirrored_replica():
    """MirroredStrategy over one logical CPU: what `--strategy mirrored` is on one GPU."""
    return tf.distribute.MirroredStrategy(["/cpu:0"])
