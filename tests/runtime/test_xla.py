"""The compile cache and the XLA flags a run sets: where they go, what wins, when the cache is on
by default, and that the pinned TensorFlow knows every flag."""

import os
import re
import subprocess
import sys

from electra_tf.runtime import xla
from electra_tf.runtime.xla import (COMPILE_CACHE_XLA_FLAGS, FLOAT16_GPU_XLA_FLAGS, PARALLEL_GPU_COMPILE_FLAGS,
                                    add_xla_flags, compile_cache_usage, use_compile_cache)


def test_compile_cache_is_per_user_unless_named_or_off(tmp_path, monkeypatch):
    monkeypatch.setattr(xla, "nvidia_gpu_visible", lambda environ=None: True)
    environ = {"XDG_CACHE_HOME": str(tmp_path)}
    assert use_compile_cache(environ) == tmp_path / "electra_tf" / "xla"
    assert environ["TF_XLA_FLAGS"] == f"--tf_xla_persistent_cache_directory={tmp_path / 'electra_tf' / 'xla'}"
    assert use_compile_cache(environ) == tmp_path / "electra_tf" / "xla"  # idempotent: named once
    assert environ["TF_XLA_FLAGS"].count("persistent_cache_directory") == 1
    assert use_compile_cache({"XDG_CACHE_HOME": str(tmp_path)}, xla=False) is None  # --no-xla: nothing compiles whole
    named = {"ELECTRA_TF_COMPILE_CACHE": str(tmp_path / "mine"), "TF_XLA_FLAGS": "--tf_xla_auto_jit=0"}
    assert use_compile_cache(named) == tmp_path / "mine"
    assert not (tmp_path / "mine").exists()  # TensorFlow creates it when XLA first writes
    assert named["TF_XLA_FLAGS"].startswith("--tf_xla_auto_jit=0 --tf_xla_persistent_cache_directory=")
    off = {"ELECTRA_TF_COMPILE_CACHE": "off"}
    assert use_compile_cache(off) is None and "TF_XLA_FLAGS" not in off


def test_without_a_gpu_the_cache_is_on_by_default_only_for_a_run_with_xla(tmp_path, monkeypatch):
    """On a CPU host the per-user cache would hold only the small fused functions, and loading
    each prints XLA:CPU's false feature mismatch (the module docstring; the last test shows it)."""
    monkeypatch.setattr(xla, "nvidia_gpu_visible", lambda environ=None: False)
    environ = {"XDG_CACHE_HOME": str(tmp_path)}
    assert use_compile_cache(environ) is None and "TF_XLA_FLAGS" not in environ  # auto
    assert use_compile_cache(environ, xla=False) is None
    assert use_compile_cache(environ, xla=True) == tmp_path / "electra_tf" / "xla"
    named = {"ELECTRA_TF_COMPILE_CACHE": str(tmp_path / "mine")}  # a folder named is always used
    assert use_compile_cache(named) == tmp_path / "mine" and "persistent_cache_directory" in named["TF_XLA_FLAGS"]


def test_a_gpu_is_visible_only_with_a_driver_and_devices_not_hidden(monkeypatch):
    monkeypatch.setattr(xla.nvidia, "driver_installed", lambda: True)
    assert xla.nvidia_gpu_visible({}) and xla.nvidia_gpu_visible({"CUDA_VISIBLE_DEVICES": "0"})
    assert not xla.nvidia_gpu_visible({"CUDA_VISIBLE_DEVICES": ""})
    assert not xla.nvidia_gpu_visible({"CUDA_VISIBLE_DEVICES": "-1"})
    monkeypatch.setattr(xla.nvidia, "driver_installed", lambda: False)
    assert not xla.nvidia_gpu_visible({})


def test_xla_compiles_gpu_programs_on_every_core_unless_xla_flags_say_otherwise(tmp_path):
    environ = {"XLA_FLAGS": "--xla_backend_optimization_level=0", "ELECTRA_TF_COMPILE_CACHE": "off"}
    use_compile_cache(environ)  # the commands' one call sets both caches' and compilers' flags
    flags = environ["XLA_FLAGS"].split()
    assert flags[0] == "--xla_backend_optimization_level=0"  # what was there stays, first
    assert "--xla_gpu_enable_llvm_module_compilation_parallelism=true" in flags
    threads = [f for f in flags if f.startswith("--xla_gpu_force_compilation_parallelism=")]
    assert len(threads) == 1 and int(threads[0].split("=")[1]) >= 1
    assert add_xla_flags(PARALLEL_GPU_COMPILE_FLAGS, environ) == [] and environ["XLA_FLAGS"].split() == flags  # idempotent
    # A flag the user set wins, and only the other is added.
    mine = {"XLA_FLAGS": "--xla_gpu_enable_llvm_module_compilation_parallelism=false"}
    assert add_xla_flags(PARALLEL_GPU_COMPILE_FLAGS, mine) == [threads[0]]
    assert mine["XLA_FLAGS"].count("module_compilation_parallelism") == 1


def test_a_cached_gpu_program_keeps_its_compiled_thunks_unless_xla_flags_say_otherwise(tmp_path):
    # Only worth setting when programs are cached (xla.COMPILE_CACHE_XLA_FLAGS).
    flag = "--xla_gpu_experimental_aot_compiled_thunks"
    cached = {"ELECTRA_TF_COMPILE_CACHE": str(tmp_path)}
    assert use_compile_cache(cached) == tmp_path and f"{flag}=true" in cached["XLA_FLAGS"].split()
    named = {"TF_XLA_FLAGS": f"--tf_xla_persistent_cache_directory={tmp_path}"}
    assert use_compile_cache(named) == tmp_path and f"{flag}=true" in named["XLA_FLAGS"].split()
    off = {"ELECTRA_TF_COMPILE_CACHE": "off"}
    assert use_compile_cache(off) is None and flag not in off["XLA_FLAGS"]
    mine = {"ELECTRA_TF_COMPILE_CACHE": str(tmp_path), "XLA_FLAGS": f"{flag}=false"}
    use_compile_cache(mine)
    assert mine["XLA_FLAGS"].count(flag) == 1 and f"{flag}=false" in mine["XLA_FLAGS"]


def test_compile_cache_usage_counts_programs_and_bytes(tmp_path):
    assert compile_cache_usage(None) == "empty"
    assert compile_cache_usage(tmp_path / "missing") == "empty"
    (tmp_path / "program_a.pb").write_bytes(b"x" * 2**20)
    (tmp_path / "program_b.pb").write_bytes(b"x" * 2**19)
    assert compile_cache_usage(tmp_path) == "2 program(s), 1.5 MiB"


def test_the_pinned_tensorflow_knows_every_flag_the_package_sets(tmp_path):
    """XLA and TensorFlow refuse to start with a flag they do not know ("Unknown flags in
    XLA_FLAGS"): a process with every flag the package may set compiles a function, so each
    exists in the installed TensorFlow (and in its GPU backend's flag table: XLA registers all
    of them, whatever the device)."""
    flags = {**PARALLEL_GPU_COMPILE_FLAGS, **COMPILE_CACHE_XLA_FLAGS, **FLOAT16_GPU_XLA_FLAGS}
    environ = dict(os.environ, XLA_FLAGS=" ".join(f"{name}={value}" for name, value in flags.items()),
                   TF_XLA_FLAGS=f"--tf_xla_persistent_cache_directory={tmp_path / 'cache'}",
                   TF_CPP_MIN_LOG_LEVEL="1")
    code = ("import tensorflow as tf\n"
            "with tf.device('/CPU:0'):\n"  # a CPU program wherever the suite runs (the loader lines below)
            "    print(float(tf.function(lambda x: x * 2.0, jit_compile=True)(tf.constant(3.0))))\n")
    done = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "6.0", done.stderr[-2000:]
    assert "Unknown flag" not in done.stderr
    assert any((tmp_path / "cache").iterdir())  # the cache flag took effect: the program was written
    # A second process loads the program, and on a CPU the pinned TensorFlow logs XLA:CPU's false
    # feature mismatch (openxla/xla#44565) and its text-format attempt for it: why the cache is
    # off by default on a CPU (runtime/xla.py). When this fails, the CPU default can be revisited.
    loaded = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True, text=True, timeout=300)
    assert loaded.returncode == 0 and loaded.stdout.strip() == "6.0", loaded.stderr[-2000:]
    assert re.search(r"Target machine feature \+prefer-no-(gather|scatter) is not\s+supported", loaded.stderr)
    assert "Error parsing text-format tensorflow.XlaSerializedCacheEntry" in loaded.stderr
    # And an unknown flag would have been refused, so the check can fail.
    environ["XLA_FLAGS"] += " --xla_no_such_flag=true"
    refused = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True, text=True, timeout=300)
    assert refused.returncode != 0 and "xla_no_such_flag" in refused.stderr
