import json

import pytest

from electra_tf.utils.errors import RunError
from electra_tf.runtime.devices import cpu_has_native_bfloat16, resolve_runtime


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
    # each replica's gradients (compiled_step.py; the matrix in test_compiled_step.py).
    runtime = resolve_runtime("mirrored", "mixed_bfloat16", xla=True, gpus=0, environ={})
    assert (runtime.strategy_name, runtime.precision, runtime.xla) == ("mirrored", "mixed_bfloat16", True)
    assert resolve_runtime("one_device", "float32", xla=True, gpus=0, environ={}).xla is True


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
