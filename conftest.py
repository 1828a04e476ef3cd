"""Test set-up for tests/ and the doctests in electra_tf/: quiet TensorFlow, XLA compiling quickly,
and two logical CPU devices so MirroredStrategy can run two replicas on this machine. Devices
must be configured before TensorFlow initialises them, so this runs at import, before any test
module touches a tensor."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# One thread per TensorFlow pool (and OpenMP) in every test process and the commands the tests run
# as processes: pytest-xdist runs a process more than cores, and each process's pools of a thread
# per core spin while waiting for work, taking cycles from the others. Measured on 2 cores, the
# fine-tuning, serving and runtime tests: 337 s -> 312 s, 10.0 -> 9.4 CPU minutes (docs/results.md,
# the test suite). Users' runs keep TensorFlow's defaults.
for _variable in ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")
# XLA's CPU backend without LLVM's optimisation passes: the tests compile many small XLA
# programs and run each a few steps, so compiling dominates; the compiled code computes the same
# thing, only slower. Measured on 2 cores, the three MirroredStrategy XLA pre-training cells of
# tests/runtime/test_compiled_step.py: 83.6 s -> 57.5 s. And the CPU backend's older fusion emitter
# (LLVM IR per fusion, where the default lowers each fusion through MLIR first): the tiny XLA
# pre-training step of that file (one layer) compiled in 3.5-3.9 s
# against 5.0-5.9 s (three runs each), the whole file 164 s -> 141 s. Set before TensorFlow
# parses its flags, and inherited by the commands the tests run as processes. Users' runs keep
# XLA's defaults.
os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false")
# The commands keep compiled XLA programs in a per-user folder (runtime/xla.use_compile_cache); the
# tests' runs do not write to the user's, and a test that checks the cache names its own folder.
# "off" also keeps an in-process run from naming a folder in this process's TF_XLA_FLAGS, which
# the commands the tests start as processes would inherit.
os.environ.setdefault("ELECTRA_TF_COMPILE_CACHE", "off")

import pytest  # noqa: E402

from electra_tf.utils.logs import start_tensorflow  # noqa: E402

# As the commands start it: the lines TensorFlow's libraries print while they load (oneDNN, the
# CUDA stub, a failed cuInit), which TF_CPP_MIN_LOG_LEVEL cannot silence, stay out of the output.
tf = start_tensorflow()

_cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(
    _cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)


def pytest_xdist_auto_num_workers(config):
    """`-n auto`: one process more than cores (pytest.ini says why)."""
    return (os.cpu_count() or 1) + 1


@pytest.fixture(autouse=True)
def _fresh_keras_state():
    """Keras' names and global state afresh for each test. Without `gc.collect()`, which
    `clear_session` runs by default: a test process holds the graphs of every model its earlier
    tests traced, so a full collection before each test took seconds late in the suite; Python's
    own collector still frees them, at about the same peak memory (docs/results.md, "The test
    suite")."""
    import keras
    keras.utils.clear_session(free_memory=False)
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
def one_replica_as_on_a_gpu():
    """MirroredStrategy over one logical CPU that reduces as it does on GPUs: what
    `--strategy mirrored` is on one GPU.

    TensorFlow's MirroredStrategy chooses how to sum across replicas by device type
    (`MirroredExtended._use_merge_call`): over CPUs always through `merge_call`; when all its
    devices are GPUs, inside an XLA-compiled function it skips `merge_call` and puts collective
    ops (NCCL's on a GPU) into the compiled program. Only the second path failed on the H100
    (docs/results.md, "GPU"). Here the switch is TensorFlow's own rule without the device test,
    so the CPU takes the GPU's path: compiling the whole step then fails as on the H100
    (tests/runtime/test_compiled_step.py shows the float16 one)."""
    from tensorflow.python.framework import ops
    from tensorflow.python.ops import control_flow_util

    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    # Private: if TensorFlow renames it, fail here rather than test the CPU's path unknowingly.
    assert callable(getattr(type(strategy.extended), "_use_merge_call", None)), "TensorFlow moved _use_merge_call"
    strategy.extended._use_merge_call = lambda: not control_flow_util.GraphOrParentsInXlaContext(
        ops.get_default_graph())
    return strategy
