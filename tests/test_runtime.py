import json

import pytest

from electra_tf.errors import RunError
from electra_tf.runtime import cpu_has_native_bfloat16, resolve_runtime


def test_cpu_defaults():
    runtime = resolve_runtime(gpus=0, environ={})
    assert (runtime.strategy_name, runtime.precision, runtime.xla) == ("one_device", "float32", False)
    assert any("XLA off" in note for note in runtime.notes)


def test_gpu_defaults():
    hopper = [(9, 0)]
    one = resolve_runtime(gpus=1, environ={}, gpu_capabilities=hopper)
    assert (one.strategy_name, one.precision, one.xla) == ("one_device", "mixed_bfloat16", True)
    several = resolve_runtime(gpus=4, environ={}, gpu_capabilities=hopper * 4)
    assert (several.strategy_name, several.precision, several.xla) == ("mirrored", "mixed_bfloat16", True)
    # bfloat16 needs Ampere or later on every GPU; a V100 (7.0) among them keeps float16's loss scaling.
    older = resolve_runtime(gpus=2, environ={}, gpu_capabilities=[(8, 0), (7, 0)])
    assert older.precision == "mixed_float16" and any("compute capability < 8.0" in n for n in older.notes)
    assert resolve_runtime(gpus=1, environ={}, gpu_capabilities=[(8, 6)]).precision == "mixed_bfloat16"


def test_cluster_and_tpu_from_the_environment():
    cluster = {"cluster": {"worker": ["host1:2222", "host2:2222"]}, "task": {"type": "worker", "index": 0}}
    assert resolve_runtime(gpus=0, environ={"TF_CONFIG": json.dumps(cluster)}).strategy_name == "multi_worker"
    tpu = resolve_runtime(gpus=0, environ={"TPU_NAME": "local"})
    assert (tpu.strategy_name, tpu.precision, tpu.xla) == ("tpu", "mixed_bfloat16", True)
    with pytest.raises(RunError, match="TF_CONFIG"):
        resolve_runtime(gpus=0, environ={"TF_CONFIG": "{not json"})


def test_explicit_choices_win_xla_under_mirrored_included():
    # XLA is never switched off behind the user's back: under MirroredStrategy it compiles
    # each replica's gradients (compiled_gradients.py; the matrix in pretraining/test_runtime_matrix.py).
    runtime = resolve_runtime("mirrored", "mixed_bfloat16", xla=True, gpus=0, environ={})
    assert (runtime.strategy_name, runtime.precision, runtime.xla) == ("mirrored", "mixed_bfloat16", True)
    assert resolve_runtime("one_device", "float32", xla=True, gpus=0, environ={}).xla is True


def test_compile_cache_is_per_user_unless_named_or_off(tmp_path):
    from electra_tf.runtime import use_compile_cache

    environ = {"XDG_CACHE_HOME": str(tmp_path)}
    assert use_compile_cache(environ) == tmp_path / "electra_tf" / "xla"
    assert environ["TF_XLA_FLAGS"] == f"--tf_xla_persistent_cache_directory={tmp_path / 'electra_tf' / 'xla'}"
    assert use_compile_cache(environ) == tmp_path / "electra_tf" / "xla"  # idempotent: named once
    assert environ["TF_XLA_FLAGS"].count("persistent_cache_directory") == 1
    named = {"ELECTRA_TF_COMPILE_CACHE": str(tmp_path / "mine"), "TF_XLA_FLAGS": "--tf_xla_auto_jit=0"}
    assert use_compile_cache(named) == tmp_path / "mine"
    assert not (tmp_path / "mine").exists()  # TensorFlow creates it when XLA first writes
    assert named["TF_XLA_FLAGS"].startswith("--tf_xla_auto_jit=0 --tf_xla_persistent_cache_directory=")
    off = {"ELECTRA_TF_COMPILE_CACHE": "off"}
    assert use_compile_cache(off) is None and "TF_XLA_FLAGS" not in off


def test_xla_compiles_gpu_programs_on_every_core_unless_xla_flags_say_otherwise(tmp_path):
    from electra_tf.runtime import use_compile_cache, use_parallel_gpu_compile

    environ = {"XLA_FLAGS": "--xla_backend_optimization_level=0", "ELECTRA_TF_COMPILE_CACHE": "off"}
    use_compile_cache(environ)  # the commands' one call sets both caches' and compilers' flags
    flags = environ["XLA_FLAGS"].split()
    assert flags[0] == "--xla_backend_optimization_level=0"  # what was there stays, first
    assert "--xla_gpu_enable_llvm_module_compilation_parallelism=true" in flags
    threads = [f for f in flags if f.startswith("--xla_gpu_force_compilation_parallelism=")]
    assert len(threads) == 1 and int(threads[0].split("=")[1]) >= 1
    assert use_parallel_gpu_compile(environ) == [] and environ["XLA_FLAGS"].split() == flags  # idempotent
    # A flag the user set wins, and only the other is added.
    mine = {"XLA_FLAGS": "--xla_gpu_enable_llvm_module_compilation_parallelism=false"}
    assert use_parallel_gpu_compile(mine) == [threads[0]]
    assert mine["XLA_FLAGS"].count("module_compilation_parallelism") == 1


def test_a_cached_gpu_program_keeps_its_compiled_thunks_unless_xla_flags_say_otherwise(tmp_path):
    # One H200: the rerun's load of a cached program 8.25 s -> 1.56 s with the thunks kept
    # (runtime.COMPILE_CACHE_XLA_FLAGS); only worth setting when programs are cached.
    from electra_tf.runtime import use_compile_cache

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


def test_float16_under_xla_on_a_gpu_compiles_its_matmuls_with_cublas():
    # XLA's Triton GEMMs made non-finite float16 gradients on an H200 (runtime.FLOAT16_GPU_XLA_FLAGS).
    environ = {"XLA_FLAGS": "--xla_backend_optimization_level=0"}
    volta = resolve_runtime(gpus=1, environ=environ, gpu_capabilities=[(7, 0)])
    assert (volta.precision, volta.xla) == ("mixed_float16", True)
    assert environ["XLA_FLAGS"].split() == ["--xla_backend_optimization_level=0", "--xla_gpu_enable_triton_gemm=false"]
    assert any("Triton GEMMs off" in note for note in volta.notes)
    resolve_runtime(gpus=1, environ=environ, gpu_capabilities=[(7, 0)])
    assert environ["XLA_FLAGS"].count("triton_gemm") == 1  # named once
    # bfloat16, float16 without XLA, and float16 on a CPU keep XLA's defaults.
    for choices in ({"gpus": 1, "gpu_capabilities": [(9, 0)]},
                    {"precision": "mixed_float16", "xla": False, "gpus": 1, "gpu_capabilities": [(9, 0)]},
                    {"precision": "mixed_float16", "xla": True, "gpus": 0}):
        untouched = {}
        assert "Triton" not in resolve_runtime(environ=untouched, **choices).describe()
        assert "XLA_FLAGS" not in untouched
    # The user's own setting wins, and the header says so.
    mine = {"XLA_FLAGS": "--xla_gpu_enable_triton_gemm=true"}
    runtime = resolve_runtime("auto", "mixed_float16", gpus=1, environ=mine, gpu_capabilities=[(9, 0)])
    assert mine["XLA_FLAGS"] == "--xla_gpu_enable_triton_gemm=true"
    assert any("as XLA_FLAGS sets them" in note for note in runtime.notes)


def test_the_header_says_when_the_layers_run_as_one_xla_loop():
    hopper = {"gpus": 1, "gpu_capabilities": [(9, 0)]}
    looped = resolve_runtime(environ={"ELECTRA_TF_LOOP_LAYERS": "1"}, **hopper)
    assert any("one XLA loop" in note for note in looped.notes)
    assert not any("XLA loop" in note for note in resolve_runtime(environ={}, **hopper).notes)  # off by default
    # Without XLA there is no loop to run (CPU's default).
    on_cpu = resolve_runtime(gpus=0, environ={"ELECTRA_TF_LOOP_LAYERS": "1"})
    assert not any("XLA loop" in note for note in on_cpu.notes)


def test_rejects_unknown_choices():
    with pytest.raises(RunError, match="--strategy"):
        resolve_runtime("parameter_server", gpus=0, environ={})
    with pytest.raises(RunError, match="--mixed_precision"):
        resolve_runtime("auto", "float8", gpus=0, environ={})


def test_cpu_precision_is_bfloat16_only_for_wide_models_on_native_bfloat16():
    def cpu_precision(**hardware):
        return resolve_runtime(gpus=0, environ={}, **hardware).precision

    assert cpu_precision(hidden_size=256, native_bfloat16=True) == "mixed_bfloat16"
    assert cpu_precision(hidden_size=768, native_bfloat16=True) == "mixed_bfloat16"
    assert cpu_precision(hidden_size=128, native_bfloat16=True) == "float32"  # the tiny default: level
    assert cpu_precision(hidden_size=768, native_bfloat16=False) == "float32"  # emulated bfloat16: slower
    assert cpu_precision(native_bfloat16=True) == "float32"  # width unknown (fine-tuning)
    runtime = resolve_runtime(gpus=0, environ={}, hidden_size=256, native_bfloat16=True)
    assert any("native bfloat16" in note for note in runtime.notes)
    # An explicit choice and the GPU default do not depend on the CPU.
    assert resolve_runtime("auto", "float32", gpus=0, environ={}, hidden_size=768,
                           native_bfloat16=True).precision == "float32"
    assert resolve_runtime(gpus=1, environ={}, hidden_size=768, native_bfloat16=True,
                           gpu_capabilities=[(7, 0)]).precision == "mixed_float16"
    assert resolve_runtime(gpus=1, environ={}, hidden_size=128, native_bfloat16=False,
                           gpu_capabilities=[(9, 0)]).precision == "mixed_bfloat16"


def test_native_bfloat16_is_read_from_the_cpu_flags(tmp_path):
    def cpuinfo(flags):
        path = tmp_path / "cpuinfo"
        path.write_text(f"processor\t: 0\nmodel name\t: some CPU\nflags\t\t: fpu sse2 {flags}\n\n")
        return str(path)

    assert cpu_has_native_bfloat16(cpuinfo("avx2 avx512f avx512_bf16"))
    assert cpu_has_native_bfloat16(cpuinfo("avx2 amx_tile amx_bf16"))
    assert not cpu_has_native_bfloat16(cpuinfo("avx2 avx512f avx512_vnni"))
    assert not cpu_has_native_bfloat16(str(tmp_path / "missing"))  # not Linux: keep float32


def test_check_shows_the_devices_the_choice_and_runs_a_compiled_matmul(capsys, monkeypatch, tmp_path):
    from electra_tf import runtime
    from electra_tf.__main__ import main

    # The suite runs with the cache off (conftest.py); here a folder stands in for the user's.
    (tmp_path / "program.pb").write_bytes(b"x" * 2**20)
    monkeypatch.setattr(runtime, "use_compile_cache", lambda: tmp_path)
    assert main(["--check"]) == 0
    printed = capsys.readouterr().out
    assert "TensorFlow 2." in printed and "no GPU visible" in printed and 'pip install -e ".[gpu]"' in printed
    assert "pretrain --config electra_small with the defaults would run: one_device" in printed
    assert (f"XLA compile cache: {tmp_path} (holds 1 program(s) and 0 traced step(s), 1.0 MiB; "
            "delete the folder to reclaim its space;") in printed
    assert "ok   /device:CPU:0: a 256 x 256 matmul compiled by XLA" in printed


def test_function_names_are_aligned_to_the_next_block():
    """The next name TensorFlow hands out after `align_function_names` is the block's multiple,
    wherever the counter stood, so a run and its resume name their steps alike."""
    import tensorflow as tf
    from tensorflow.python.framework import ops

    from electra_tf.runtime import align_function_names

    first = align_function_names(block=50_000)
    assert first % 50_000 == 0 and ops.uid() == first
    tf.function(lambda: tf.constant(1.0)).get_concrete_function()  # uses some names
    second = align_function_names(block=50_000)
    assert second == first + 50_000 and ops.uid() == second


def test_compile_cache_usage_counts_programs_traced_steps_and_bytes(tmp_path):
    from electra_tf.runtime import compile_cache_usage

    assert compile_cache_usage(None) == "empty"
    assert compile_cache_usage(tmp_path / "missing") == "empty"
    (tmp_path / "program_a.pb").write_bytes(b"x" * 2**20)
    (tmp_path / "program_b.pb").write_bytes(b"x" * 2**19)
    (tmp_path / "traced_steps").mkdir()
    (tmp_path / "traced_steps" / "entry").write_bytes(b"x" * 2**19)
    assert compile_cache_usage(tmp_path) == "2 program(s) and 1 traced step(s), 2.0 MiB"
