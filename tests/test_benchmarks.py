"""benchmarks/: the pieces of the runtime matrix that run without a GPU or a long run (the
matrix itself runs the commands; it was tried by hand on CPU, docs/results.md), and its
scheduling, with stand-in commands."""

import collections
import csv
import json
import re
import sys

import pytest

from tests.scripts import load_script

# A stand-in for a cell's command: records when it ran, sleeps, writes the metrics.json the
# matrix reads (argv: the run folder, started/ended log, "pretrain" or "finetune").
STAND_IN = """
import json, pathlib, sys, time
run, log, command = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
started = time.time()
time.sleep(0.5)
run.mkdir(parents=True, exist_ok=True)
common = {"runtime": "one_device, float32, XLA off", "gpus": [], "tensorflow": "stand-in"}
if command == "pretrain":
    metrics = {"step": 4, "skipped_steps": 0, "first_step_seconds": 0.5, "step_seconds": 0.01,
               "final_eval": {"disc_auc": 0.5}, **common}
else:
    metrics = {"optimizer_steps": 3, "eval": {"accuracy": 0.5}, **common}
(run / "metrics.json").write_text(json.dumps(metrics))
with open(log, "a") as file:
    file.write(json.dumps([run.parent.name, started, time.time()]) + "\\n")
"""


def load_benchmark(name):
    return load_script(name, "benchmarks")


def test_runtime_matrix_order_task_is_real_sentences_half_shuffled(tmp_path):
    matrix = load_benchmark("runtime_matrix")
    train, dev = matrix.write_order_task(tmp_path)
    rows = {path.name: list(csv.DictReader(open(path, encoding="utf-8"))) for path in (train, dev)}
    assert len(rows["train.csv"]) == matrix.TRAIN_SENTENCES and len(rows["dev.csv"]) == matrix.EVAL_SENTENCES
    every = rows["train.csv"] + rows["dev.csv"]
    assert {row["label"] for row in every} == {"in_order", "shuffled"}
    assert abs(sum(row["label"] == "shuffled" for row in every) - len(every) / 2) <= 1
    assert all(8 <= len(row["text"].split()) <= 40 for row in every)
    assert not {row["text"] for row in rows["train.csv"]} & {row["text"] for row in rows["dev.csv"]}
    assert matrix.write_order_task(tmp_path) == (train, dev)  # kept, not rewritten
    assert list(csv.DictReader(open(train, encoding="utf-8"))) == rows["train.csv"]


def test_runtime_matrix_names_a_failure_by_its_error_line():
    matrix = load_benchmark("runtime_matrix")
    output = ("step 0/40\nTraceback (most recent call last):\n  File x\n"
              "tensorflow.python.framework.errors_impl.InvalidArgumentError: no XLA_GPU_JIT kernel\n"
              "[[{{node CollectiveGatherV2}}]]\n")
    assert matrix.failure_line(output).startswith("tensorflow.python.framework.errors_impl.InvalidArgumentError")
    assert matrix.failure_line("error: --data: no such file\n") == "error: --data: no such file"
    # As a GPU cell failed on one H200: the reason, then TensorFlow's warning at exit.
    gpu = ("step 12/12 (100.0%)\nerror: could not write checkpoint ckpt-12 in model/checkpoints (Failed copying)\n"
           "W0000 00:00:1795666064.157213    1192 generator_dataset_op.cc:113] Error occurred when finalizing "
           "GeneratorDataset iterator: FAILED_PRECONDITION\n")
    assert matrix.failure_line(gpu).startswith("error: could not write checkpoint ckpt-12")
    row = matrix.table_row("pretrain-mirrored-mixed_float16-xla", {
        "returncode": 0, "steps": 40, "skipped": 4, "first_step_seconds": 12.34, "step_ms": 5.6,
        "metric": "disc AUC 0.612", "seconds": 30.0})
    assert row == "| pretrain-mirrored-mixed_float16-xla | trains | 40 (4 skipped) | 12.3 | 5.6 | disc AUC 0.612 | 30.0 |"


def test_runtime_matrix_runs_the_first_cell_alone_only_when_it_may_build_shards(tmp_path, monkeypatch):
    matrix = load_benchmark("runtime_matrix")
    from electra_tf.utils import run_dir

    monkeypatch.setattr(run_dir, "DATA_CACHE", tmp_path)
    assert matrix.may_build_shards([])  # the bundled sample's shards are not built yet
    (tmp_path / "wiki_sample_seq128").mkdir()
    (tmp_path / "wiki_sample_seq128" / "metadata.json").write_text("{}")
    assert not matrix.may_build_shards([])  # built (or carried to a GPU host): no cell waits
    assert matrix.may_build_shards(["--config", "electra_small"])  # another preset may need its own
    assert not matrix.may_build_shards(["--data", "corpus.txt"])
    assert matrix.may_build_shards(["--set=max_seq_length=64"]) and not matrix.may_build_shards(["--data=corpus.txt"])


def test_runtime_matrix_runs_cells_at_once_after_the_first_and_keeps_them(tmp_path, monkeypatch, capsys):
    matrix = load_benchmark("runtime_matrix")
    monkeypatch.setattr(matrix, "may_build_shards", lambda pretrain_args: True)
    log = tmp_path / "ran.jsonl"
    monkeypatch.setattr(matrix, "pretrain_command",
                        lambda args, folder, cell: [sys.executable, "-c", STAND_IN, str(folder / "model"), str(log),
                                                    "pretrain"])
    monkeypatch.setattr(matrix, "finetune_command",
                        lambda args, folder, cell, pretrained, task: [sys.executable, "-c", STAND_IN,
                                                                      str(folder / "run"), str(log), "finetune"])
    argv = ["--output", str(tmp_path / "matrix"), "--strategies", "one_device", "--precisions", "float32",
            "mixed_float16", "--jobs", "2"]
    assert matrix.main(argv) == 0
    ran = {name: (started, ended) for name, started, ended in map(json.loads, log.read_text().splitlines())}
    first = "pretrain-one_device-float32-no_xla"
    assert len(ran) == 8 and all(ran[first][1] <= started for name, (started, _) in ran.items() if name != first)
    others = sorted(times for name, times in ran.items() if name.startswith("pretrain-") and name != first)
    assert others[1][0] < others[0][1]  # two cells ran at once: the second started before the first ended
    assert max(s for n, (s, _) in ran.items() if n.startswith("pretrain-")) <= \
        min(s for n, (s, _) in ran.items() if n.startswith("finetune-"))  # fine-tuning starts from a trained cell
    table = json.loads((tmp_path / "matrix" / "matrix.json").read_text())
    assert list(table) == [matrix.cell_name(command, "one_device", precision, xla)
                           for command in ("pretrain", "finetune") for precision in ("float32", "mixed_float16")
                           for xla in (False, True)]
    assert all(result["returncode"] == 0 and result["jobs"] == 2 for result in table.values())
    assert "8 of 8 cells trained" in capsys.readouterr().out

    assert matrix.main(argv) == 0  # finished cells are kept, not run again
    assert len(log.read_text().splitlines()) == 8
    assert "8 of 8 cells trained" in capsys.readouterr().out


class _Parsed(Exception):
    """Raised in place of running a script once its arguments parsed."""


def _parses(argv: list[str]) -> bool:
    """Whether a command of benchmarks/gpu_checks.sh (the Python arguments after `python3`) parses:
    the script's own `main`, which raises `_Parsed` once `parse_args` has returned (the test
    patches it) and SystemExit on a bad option."""
    from electra_tf import pretrain

    if argv[:2] == ["-m", "electra_tf"]:
        return argv[2:] == ["--check"]
    main = pretrain.main if argv[:2] == ["-m", "electra_tf.pretrain"] else \
        load_script(argv[0].split("/")[-1].removesuffix(".py"), "benchmarks").main
    try:
        main(argv[2:] if argv[0] == "-m" else argv[1:])
    except _Parsed:
        return True
    except SystemExit:
        return False
    return False  # main returned without parsing its arguments


def test_every_command_of_the_gpu_checks_parses(tmp_path, monkeypatch):
    """A GPU session has 15 device minutes: a renamed option in one of the checks' commands must
    fail here, not there. Each part runs with a stand-in Python that records its arguments."""
    import argparse
    import os
    import subprocess

    from tests.scripts import REPO

    parse_args = argparse.ArgumentParser.parse_args

    def parse_then_stop(self, args=None, namespace=None):
        parse_args(self, args, namespace)
        raise _Parsed

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)

    recorder = tmp_path / "python"
    recorder.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                        "open(os.environ['ARGV_LOG'], 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n")
    recorder.chmod(0o755)
    log = tmp_path / "argv.jsonl"
    env = {**os.environ, "PYTHON": str(recorder), "PEER_PYTHON": str(recorder), "ARGV_LOG": str(log),
           "OUT": str(tmp_path / "out")}
    expected = {"all": {"electra_tf", "electra_tf.pretrain", "runtime_matrix.py", "pretrain_step.py",
                        "compile_stages.py"},
                "next": {"electra_tf.pretrain"}, "commands": {"electra_tf.pretrain"},
                "float16_run": {"electra_tf.pretrain"},
                "flags": {"first_step.py"},
                "graphs": {"pretrain_step.py", "compile_stages.py"},
                "legacy_load": {"pretrain_step.py", "compile_stages.py"}, "host_share": {"pretrain_step.py"},
                "loop": {"electra_tf.pretrain"}, "first_step": {"pretrain_step.py", "compile_stages.py"},
                "float16": {"float16_overflow.py"}, "gradients": {"xla_gradients.py"}, "baseline": {"first_step.py"},
                "checkpoints": {"electra_tf.pretrain", "window_rates.py"}, "build": {"startup.py"}}
    for part, scripts in expected.items():
        log.unlink(missing_ok=True)
        subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_checks.sh"), part], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
        commands = [json.loads(line) for line in log.read_text().splitlines()]
        assert {c[1] if c[0] == "-m" else c[0].split("/")[-1] for c in commands} == scripts, part
        if part == "next":  # `commands`: two runs and their extensions; then `loop`: K = 1 and 50
            assert len(commands) == 6
        if part == "build":  # two rounds, each mode once, then the profiled build
            assert [c[c.index("--initializers") + 1] for c in commands[:4]] == ["as_configured", "zeros"] * 2
            assert len(commands) == 5 and "--profile_build" in commands[4]
        for argv in commands:
            assert _parses(argv), (part, argv)
    assert subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_checks.sh"), "nonsense"], cwd=tmp_path, env=env,
                          capture_output=True).returncode == 2


def test_the_gpu_kernel_summary_reads_stream_lines_once_and_splits_idle_time():
    """step_profile's GPU half, on a hand-made trace: a GPU plane with one stream line and a
    derived "XLA Ops" line over the same kernels (left out, or each would count twice), and a
    host plane (not the GPU's)."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    step_profile = load_benchmark("step_profile")
    space = xplane_pb2.XSpace()
    gpu = space.planes.add(name="/device:GPU:0")
    names = {1: "sm90_xmma_gemm_bf16bf16_bf16f32", 2: "loop_add_fusion", 3: "input_reduce_fusion", 4: "MemcpyH2D"}
    for metadata_id, name in names.items():
        gpu.event_metadata[metadata_id].name = name
    stream = gpu.lines.add(name="Stream #7(Compute)", timestamp_ns=1000)
    us = 10**6  # picoseconds
    kernels = [(1, 0, 50), (2, 52, 4), (3, 58, 6), (4, 500, 2), (2, 502, 4)]  # id, start us, length us
    for metadata_id, start, length in kernels:
        stream.events.add(metadata_id=metadata_id, offset_ps=start * us, duration_ps=length * us)
    derived = gpu.lines.add(name="XLA Ops", timestamp_ns=1000)
    derived.events.add(metadata_id=2, offset_ps=0, duration_ps=506 * us)
    host = space.planes.add(name="/host:CPU")
    host.event_metadata[1].name = "loop_add_fusion"
    host.lines.add(name="python").events.add(metadata_id=1, offset_ps=0, duration_ps=10**9)

    found = step_profile.device_kernels(space)
    assert [(name, start) for name, start, *_ in found] == [
        (names[i], 1000 * 1000 + start * us) for i, start, _ in kernels]
    lines = step_profile.kernel_summary(found, steps=2)
    # 5 kernels in 2 steps; busy 66 us of the 506 they span; idle 440 us: gaps of 2 and 2 us (short)
    # and 436 us (long).
    assert lines[0].startswith("GPU, per step (2 traced): 2 kernels and copies, busy 0.03 ms of the 0.25 ms")
    assert "idle 0.22 ms: 0.00 ms in 1.0 gaps under 100 us (between kernels), 0.22 ms in 0.5 longer ones" in lines[0]
    by_kind = {line[:54].strip(): float(line[54:].split()[0]) for line in lines[3:10]}
    assert by_kind == {"collectives (NCCL)": 0.0, "matrix multiplies (cuBLAS, cuBLASLt, Triton GEMMs)": 0.025,
                       "fused attention (cuDNN)": 0.0, "reductions (softmax, LayerNorm, losses, sums)": 0.003,
                       "gathers and scatters (embeddings, masked slots)": 0.0, "transposes and copies": 0.001,
                       "elementwise fusions (the rest)": 0.004}
    assert lines[11].split()[:2] == ["sm90_xmma_gemm_bf16bf16_bf16f32", "0.5"]  # the longest first
    assert step_profile.kernel_summary([], steps=1)[0].startswith("no GPU kernels")


def test_gpu_kernels_are_attributed_to_the_part_of_the_step_their_annotation_names():
    """XLA annotates each kernel launch with the TensorFlow op its HLO came from; the profiler keeps
    the annotation stack as the event's "annotation" stat (inline or as a reference to a stat
    metadata name). The summary counts kernels, their time and the gaps before them by part."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    step_profile = load_benchmark("step_profile")
    space = xplane_pb2.XSpace()
    gpu = space.planes.add(name="/device:GPU:0")
    gpu.event_metadata[1].name = "loop_fusion"
    gpu.stat_metadata[7].name = "annotation"
    gpu.stat_metadata[8].name = "XlaModule:#hlo_module=a_inference_one_step_on_data_1000000#::" \
                                "Thunk:#name=gradient_tape/discriminator_1/transformer_layer_0_1/MatMul,hlo_op=fusion.3#"
    stream = gpu.lines.add(name="Stream #7(Compute)", timestamp_ns=0)
    us = 10**6
    annotations = ["Thunk:#name=electra_adam_w/global_norm/L2Loss_4,hlo_op=input_reduce_fusion.2#",
                   "Thunk:#name=electra_adam_w/ResourceApplyAdam_12,hlo_op=loop_fusion.9#",
                   "Thunk:#name=electra_adam_w/AssignSubVariableOp_3,hlo_op=loop_fusion.10#",
                   "Thunk:#name=discriminator_1/embeddings_1/Gather,hlo_op=fusion.1#",
                   None,  # by reference, the backward pass
                   "",  # no annotation
                   "tf_op"]  # a "tf_op" stat instead, "name:type"
    gpu.stat_metadata[9].name = "tf_op"
    for i, annotation in enumerate(annotations):
        event = stream.events.add(metadata_id=1, offset_ps=10 * i * us, duration_ps=4 * us)
        if annotation is None:
            event.stats.add(metadata_id=7, ref_value=8)
        elif annotation == "tf_op":
            event.stats.add(metadata_id=9, str_value="electra_adam_w/clip/global_norm/Sum_2:Sum")
        elif annotation:
            event.stats.add(metadata_id=7, str_value=annotation)
    found = step_profile.device_kernels(space)
    assert [kernel.op for kernel in found] == [
        "electra_adam_w/global_norm/L2Loss_4", "electra_adam_w/ResourceApplyAdam_12",
        "electra_adam_w/AssignSubVariableOp_3", "discriminator_1/embeddings_1/Gather",
        "gradient_tape/discriminator_1/transformer_layer_0_1/MatMul", "", "electra_adam_w/clip/global_norm/Sum_2"]
    sources = step_profile.KERNEL_SOURCES
    assert [step_profile.kernel_source(kernel.op) for kernel in found] == [
        sources[0], sources[1], sources[1], sources[3], sources[2], sources[4], sources[0]]
    lines = step_profile.kernel_summary(found, steps=1)
    table = {line[:54].strip(): [float(value) for value in line[54:].split()] for line in lines[-5:]}
    # kernels, their ms, the ms of short gaps before them (6 us before each kernel but the first)
    assert table == {sources[0]: [2, 0.008, 0.006], sources[1]: [2, 0.008, 0.012], sources[2]: [1, 0.004, 0.006],
                     sources[3]: [1, 0.004, 0.006], sources[4]: [1, 0.004, 0.006]}
    scopes = step_profile.op_prefixes(found, steps=1, top=3)
    assert [line.split()[0] for line in scopes[1:]] == ["electra_adam_w/global_norm", "electra_adam_w/ResourceApplyAdam_12",
                                                        "electra_adam_w/AssignSubVariableOp_3"]
    assert step_profile.op_prefixes(found, steps=1, depth=1)[1].split() == ["electra_adam_w", "4.0"]
    # Another optimizer's scope is its own name (`model.optimizer.name`).
    assert step_profile.kernel_source("adam/ResourceApplyAdam", optimizer_scope="adam") == sources[1]
    assert step_profile.kernel_source("electra_adam_w/ResourceApplyAdam", optimizer_scope="adam") == sources[3]


def test_gpu_kernel_names_fall_into_their_kinds():
    kind_of = load_benchmark("step_profile").kernel_kind
    for name, kind in [("nvjet_tst_64x8_64x16_4x1_v_bz_TNT", "matrix"), ("gemm_fusion_dot_12", "matrix"),
                       ("cutlass_80_tensorop_bf16_s16816gemm", "matrix"), ("cudnn_fmha_fwd", "fused attention"),
                       ("input_reduce_fusion_3", "reductions"), ("triton_softmax_fusion", "reductions"),
                       ("input_scatter_fusion", "gathers"), ("loop_transpose_fusion_1", "transposes"),
                       ("MemcpyD2D", "transposes"), ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "collectives"),
                       ("loop_multiply_fusion_7", "elementwise")]:
        assert kind_of(name).startswith(kind), name


# An optimized HLO module's entry computation as XLA prints it, shortened: a cuBLAS GEMM, a loop
# fusion of the backward pass, the AdamW update, a copy with no op, and what launches nothing.
OPTIMIZED_HLO = """HloModule a_inference_one_step_on_data_1000000, is_scheduled=true

%fused_add (param_0: f32[4]) -> f32[4] {
  %param_0 = f32[4]{0} parameter(0)
  ROOT %add.1 = f32[4]{0} add(%param_0, %param_0), metadata={op_name="not/an/entry/op"}
}

ENTRY %main.9 (XLA_Args.1: f32[4,4], XLA_Args.2: s64[2]) -> (f32[4], s64[2]) {
  %XLA_Args.1 = f32[4,4]{1,0} parameter(0), metadata={op_name="XLA_Args"}
  %XLA_Args.2 = s64[2]{0} parameter(1)
  %constant_1 = f32[] constant(0)
  %custom-call.1 = (bf16[4,4]{1,0}, s8[0]{0}) custom-call(%XLA_Args.1, %XLA_Args.1), custom_call_target="__cublas$lt$matmul", metadata={op_name="discriminator_1/transformer_layer_0_1/MatMul_2"}
  %get-tuple-element.1 = bf16[4,4]{1,0} get-tuple-element(%custom-call.1), index=0
  %bitcast.1 = f32[4]{0} bitcast(%XLA_Args.1)
  %loop_add_fusion = f32[4]{0} fusion(%bitcast.1), kind=kLoop, calls=%fused_add, metadata={op_name="gradient_tape/generator_1/transformer_layer_3_1/BiasAdd_1"}
  %input_reduce_fusion.2 = f32[] fusion(%loop_add_fusion), kind=kInput, calls=%fused_add, metadata={op_name="electra_adam_w/clip_by_global_norm/Sum_3"}
  %loop_fusion.7 = (f32[4]{0}, f32[4]{0}) fusion(%loop_add_fusion), kind=kLoop, calls=%fused_add, metadata={op_name="electra_adam_w/ResourceApplyAdam_12"}
  %copy.3 = s64[2]{0} copy(%XLA_Args.2), metadata={scheduling_name="copy.3"}
  ROOT %tuple.9 = (f32[4]{0}, s64[2]{0}) tuple(%loop_add_fusion, %copy.3)
}
"""


def test_gpu_kernels_counts_what_the_entry_computation_launches():
    gpu_kernels = load_benchmark("gpu_kernels")
    launches = gpu_kernels.launched_instructions(OPTIMIZED_HLO)
    assert launches == [
        ("custom-call:__cublas$lt$matmul", "discriminator_1/transformer_layer_0_1/MatMul_2"),
        ("fusion:kLoop", "gradient_tape/generator_1/transformer_layer_3_1/BiasAdd_1"),
        ("fusion:kInput", "electra_adam_w/clip_by_global_norm/Sum_3"),
        ("fusion:kLoop", "electra_adam_w/ResourceApplyAdam_12"),
        ("copy", "")]
    lines = gpu_kernels.launch_summary(launches)
    assert lines[0] == "5 launches per step"
    counts = {line[:56].strip(): int(line[56:].replace(",", "")) for line in lines if line.startswith("    ")}
    assert counts["fusion:kLoop"] == 2 and counts["copy"] == 1
    assert counts["optimizer: gradient clipping (global norm)"] == 1
    assert counts["optimizer: AdamW update and weight decay"] == 1
    assert counts["backward pass"] == 1 and counts["forward pass, losses and sampling"] == 1
    assert counts["unattributed (no annotation)"] == 1
    assert counts["ResourceApplyAdam"] == 1 and counts["BiasAdd"] == 1 and counts["(none)"] == 1


# A forward loop of 3 iterations and TensorFlow's gradient loop, whose trip count XLA does not
# know, shortened from the step of ELECTRA_TF_LOOP_LAYERS=1.
LOOPED_HLO = """HloModule a_inference_one_step_on_data_1000001, is_scheduled=true

%body (p: (s32[], f32[4])) -> (s32[], f32[4]) {
  %p = (s32[], f32[4]{0}) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %f = f32[4]{0} fusion(%p), kind=kLoop, calls=%fused_add, metadata={op_name="generator_1/foldl/while/MatMul"}
  %c = f32[4]{0} custom-call(%f), custom_call_target="__cublas$lt$matmul", metadata={op_name="generator_1/foldl/while/MatMul_1"}
  ROOT %t = (s32[], f32[4]{0}) tuple(%i, %c)
}

%condition (p: (s32[], f32[4])) -> pred[] {
  %p = (s32[], f32[4]{0}) parameter(0)
  ROOT %less = pred[] fusion(%p), kind=kLoop, calls=%fused_less, metadata={op_name="generator_1/foldl/while/Less"}
}

%grad_body (p: (s32[], f32[4])) -> (s32[], f32[4]) {
  %p = (s32[], f32[4]{0}) parameter(0)
  ROOT %g = (s32[], f32[4]{0}) fusion(%p), kind=kLoop, calls=%fused_add, metadata={op_name="gradient_tape/generator_1/foldl/while/TensorListPopBack"}
}

ENTRY %main.9 (XLA_Args.1: f32[4]) -> f32[4] {
  %XLA_Args.1 = f32[4]{0} parameter(0)
  %tuple.1 = (s32[], f32[4]{0}) tuple(%XLA_Args.1, %XLA_Args.1)
  %while.1 = (s32[], f32[4]{0}) while(%tuple.1), condition=%condition, body=%body, metadata={op_name="generator_1/foldl/while"}, backend_config={"known_trip_count":{"n":"3"},"known_init_step":{"init":"0","step":"1"}}
  %while.2 = (s32[], f32[4]{0}) while(%while.1), condition=%condition, body=%grad_body, metadata={op_name="gradient_tape/generator_1/foldl/while/generator_1/foldl/while_grad"}
  %while.3 = (s32[], f32[4]{0}) while(%while.2), condition=%condition, body=%grad_body, metadata={op_name="some/other/while"}
  ROOT %out = f32[4]{0} get-tuple-element(%while.3), index=1
}
"""


def test_gpu_kernels_counts_each_loop_iteration():
    """A loop launches its condition and body per iteration; TensorFlow's gradient loop runs
    its forward loop's count, which XLA does not annotate; an unknown count is shown as such."""
    gpu_kernels = load_benchmark("gpu_kernels")
    launches = gpu_kernels.launched_instructions(LOOPED_HLO)
    kinds = collections.Counter(launch.kind for launch in launches)
    # forward: 4 condition tests + 3 x (fusion + GEMM); gradient: 4 tests + 3 bodies;
    # the unknown loop: once, marked, with its condition and body once.
    assert kinds["custom-call:__cublas$lt$matmul"] == 3
    assert kinds["while:unknown trip count"] == 1
    assert kinds["fusion:kLoop"] == (4 + 3) + (4 + 3) + (2 + 1)
    assert len(launches) == 3 + 14 + 3 + 1


# XLA's thunk dump after its thunk passes, shaped as jaxlib 0.10.2 writes it (shortened): a command
# buffer, a kernel and a matmul on their own, a loop (its "condition:" label at the loop's indent)
# whose body holds a dynamic-slice fusion (its copy nested under it) and a command buffer, a second
# loop, and a last command buffer.
THUNKS = """000: kCommandBuffer  [source       | next=004 (1)  ]
    001: kCustomKernel [source        | sink         ] loop_multiply_fusion grid: [1, 1, 1]
    002: kCopy         [source        | next=003 (1) ] kCopy
    003: kCublasLtMatmul [prev=002 (1) | sink ] kCublasLtMatmul
004: kCustomKernel   [prev=000 (1) | next=005 (1)  ] input_reduce_fusion grid: [32, 1, 1]
005: kCublasLtMatmul [prev=004 (1) | next=006 (1)  ] kCublasLtMatmul
006: kWhile          [prev=005 (1)  | next=014 (1) ]
condition:
    007: kCustomKernel [source | sink] loop_compare_fusion grid: [1, 1, 1]
  body:
    008: kDynamicSliceFusion [source        | next=010 (1) ] params=1, results=1
        009: kCopy [source | sink] kCopy
    000: kCommandBuffer      [prev=008 (1)  | next=013 (1) ]
        010: kCustomKernel [source | sink] loop_dynamic_update_slice_fusion grid: [128, 1, 1]
        011: kCublasLtMatmul [source | sink] kCublasLtMatmul
    013: kCustomKernel       [prev=010 (1)  | sink         ] loop_add_fusion grid: [1, 1, 1]
014: kWhile          [prev=006 (1)  | next=000 (1) ]
condition:
    015: kCustomKernel [source | sink] loop_compare_fusion grid: [1, 1, 1]
  body:
    016: kCustomKernel [source | sink] loop_add_fusion grid: [1, 1, 1]
000: kCommandBuffer  [prev=014 (1) | sink          ]
    017: kCustomKernel [source | sink] loop_convert_fusion grid: [1, 1, 1]
"""


def test_gpu_kernels_counts_what_the_host_launches_with_command_buffers():
    """A command buffer is one launch whatever it holds; a loop's condition runs trips + 1 times and
    its body trips times, the trip counts those of the entry's loops in order (unknown: once,
    flagged); a dynamic-slice fusion is one launch with its nested copy."""
    gpu_kernels = load_benchmark("gpu_kernels")
    assert gpu_kernels.entry_loop_trips(LOOPED_HLO) == [3, 3, None]
    host = gpu_kernels.host_launches(THUNKS, [3, None])
    # outside loops: 2 graphs (3 + 1 kernels), 2 alone; loop 1 (3 trips): 4 conditions, 3 x (fusion,
    # graph of 2, kernel); loop 2 (unknown: 1 trip): 2 conditions, 1 body kernel.
    assert host == {"graphs": 2 + 3, "kernels_in_graphs": 4 + 3 * 2, "alone": 2 + (4 + 3 * 2) + (2 + 1),
                    "launches": 5 + 15, "unknown_trips": 1}
    # Command buffers off: the plain sequence, every thunk its own launch.
    plain = "\n".join(f"{i:03d}: kCustomKernel [source | sink] fusion_{i}" for i in range(7))
    assert gpu_kernels.host_launches(plain, []) == {"graphs": 0, "kernels_in_graphs": 0, "alone": 7,
                                                     "launches": 7, "unknown_trips": 0}


def test_gpu_kernels_passes_copies_to_the_gpu_compiler_as_reshapes():
    """jaxlib's HLO import rejects `copy`; a same-shape reshape is the same value."""
    from tensorflow.compiler.xla.service import hlo_pb2

    gpu_kernels = load_benchmark("gpu_kernels")
    module = hlo_pb2.HloModuleProto(name="m")
    computation = module.computations.add(name="main")
    for opcode in ("parameter", "copy", "add", "copy"):
        computation.instructions.add(opcode=opcode)
    rewritten, copies = gpu_kernels.hlo_copies_as_reshapes(module.SerializeToString())
    opcodes = [i.opcode for i in hlo_pb2.HloModuleProto.FromString(rewritten).computations[0].instructions]
    assert copies == 2 and opcodes == ["parameter", "reshape", "add", "reshape"]


def test_compile_stages_times_each_part_of_a_first_call_from_tensorflows_log():
    """Lines as TensorFlow 2.21 logged a rerun's load on CPU (shortened), a small compile between
    them, and a fresh compile with a clock-time prefix."""
    compile_stages = load_benchmark("compile_stages")
    signature = "__inference_train_step_7[_XlaMustCompile=true,config_proto=1]"
    rerun = f"""I0000 00:00:100.000000   12 xla_compiler.cc:820] XlaCompiler::CompileFunction {signature}
I0000 00:00:101.050000   12 xla_compiler.cc:899] ====================================================
I0000 00:00:101.060000   12 xla_compiler.cc:1519] Executing graph symbolically to populate XlaBuilder.: {signature}
I0000 00:00:101.100000   12 xla_compiler.cc:820] XlaCompiler::CompileFunction __inference_body_3[x]
I0000 00:00:101.110000   12 xla_compiler.cc:899] ====================================================
I0000 00:00:101.120000   12 xla_compiler.cc:1519] Executing graph symbolically to populate XlaBuilder.: body
I0000 00:00:101.130000   12 xla_compiler.cc:229] Building new computation
I0000 00:00:101.140000   12 xla_compiler.cc:923] ====================================================
W0000 00:00:102.000000   12 some_pass.cc:1] unrelated
I0000 00:00:102.890000   12 xla_compiler.cc:229] Building new computation
I0000 00:00:103.070000   12 xla_compiler.cc:923] ====================================================
I0000 00:00:103.830000   12 device_executable_persistor.h:360] Try loading serialized cache entry:{signature}
I0000 00:00:103.960000   12 device_executable_persistor.h:371] Loading cached entry for: {signature}
I0000 00:00:107.340000   12 device_compiler.h:538] Compilation of XLA executable time: 7.34 s (7340000 us)
I0000 00:00:108.000000   12 xla_compiler.cc:820] XlaCompiler::CompileFunction __inference_tiny_4[x]
I0000 00:00:108.100000   12 device_compiler.h:538] Compilation of XLA executable time: 0.10 s
""".splitlines()
    found = compile_stages.compiles(rerun)
    assert [c["function"] for c in found] == ["__inference_train_step_7", "__inference_tiny_4"]
    stages = dict(found[0]["stages"])
    # A loop body's lowering inside the step's stays in the step's lowering stage.
    assert abs(found[0]["total"] - 7.34) < 1e-6
    assert [round(s, 2) for s in stages.values()] == [1.06, 1.83, 0.18, 0.76, 0.13, 3.38]
    assert list(stages)[3] == "hash the HLO (the cache's key)"
    assert list(stages)[-1] == "load the cached executable"
    table = compile_stages.format_compiles(found)
    assert table.startswith("__inference_train_step_7: 7.34 s") and "(1 more under 0.5 s each)" in table

    fresh = """I1127 23:59:58.500000   12 xla_compiler.cc:820] XlaCompiler::CompileFunction __inference_step_1[x]
I1127 23:59:59.000000   12 xla_compiler.cc:1519] Executing graph symbolically to populate XlaBuilder.: x
I1128 00:00:01.000000   12 xla_compiler.cc:229] Building new computation
I1128 00:00:01.500000   12 xla_compiler.cc:923] ====================================================
I1128 00:00:01.600000   12 device_executable_persistor.h:360] Try loading serialized cache entry:x
I1128 00:01:01.600000   12 device_executable_persistor.h:392] Serializing and saving cache entry: x
I1128 00:01:01.700000   12 device_compiler.h:538] Compilation of XLA executable time: 63.20 s
""".splitlines()
    (only,) = compile_stages.compiles(fresh)  # across midnight: the clock's wrap is not a negative stage
    assert [(stage.split()[0], round(seconds, 2)) for stage, seconds in only["stages"]] == [
        ("prepare", 0.5), ("lower", 2.0), ("build", 0.5), ("hash", 0.1), ("read", 60.0), ("write", 0.1)]
    assert compile_stages.format_compiles([]).startswith("no XLA compile in the log")


def test_a_gpu_profile_says_whether_its_kernels_ran_as_graphs():
    """XLA replays command buffers kernel by kernel under a profiler unless a flag keeps them; with
    command buffers off (the flag's empty set) there is nothing to replay."""
    note = load_benchmark("step_profile").command_buffer_note
    assert "kernel by kernel while a profiler is on" in note("")
    assert "kernel by kernel while a profiler is on" in note("--xla_gpu_enable_command_buffer=FUSION,CUBLAS")
    assert "command buffers off" in note("--xla_gpu_autotune_level=0 --xla_gpu_enable_command_buffer=")
    assert "command buffers off" in note("--xla_gpu_enable_command_buffer= --xla_gpu_autotune_level=0")
    assert "kept under the profiler" in note("--xla_enable_command_buffers_during_profiling=true")
    assert "kept under the profiler" not in note("--xla_enable_command_buffers_during_profiling=false")


def test_compile_stages_sums_up_how_the_command_buffers_ran():
    """command_buffer_thunk's lines as TensorFlow 2.21's XLA words them (its VLOG(3) and, under a
    profiler, VLOG(1)): two graphs recorded, launched, one re-recorded after its buffers moved,
    then a profiled launch that ran kernel by kernel."""
    compile_stages = load_benchmark("compile_stages")
    prefix = "I0000 00:00:100.000000   12 command_buffer_thunk.cc:200] "
    log = [prefix + line for line in (
        "Initialize command buffer on device #0 by recoding command buffer cmd sequence; num_commands=40",
        "Initialized command buffer on device #0 in 900 \u03bcs; num_commands=40",
        "Initialized command buffer on device #0 in 100 \u03bcs; num_commands=7",
        "Execute command buffer on device #0; num_executions=1",
        "Execute command buffer on device #0; num_executions=1",
        "Update command buffer on device #0 by recoding command buffer cmd sequence after 1 executions since "
        "last update; num_commands=40",
        "Updated command buffer in 700 \u03bcs; num_commands=40",
        "Execute command buffer on device #0; num_executions=1",
        "Execute command buffer thunk as a regular thunk sequence because we detected active profiling session",
    )] + ["Execute command buffer on device #0; printed without absl's prefix: not counted"]
    found = compile_stages.command_buffers(log)
    assert (found["recorded"], found["recorded_us"], found["commands"]) == (2, 1000, [40, 7])
    assert (found["launched"], found["rerecorded"], found["rerecorded_us"], found["op_by_op"]) == (3, 1, 700, 1)
    assert found["executions_before_rerecording"] == [1]
    text = compile_stages.format_command_buffers(found)
    assert "2 recorded (1.0 ms; commands each: 7 to 40, 47 in all), launched 3 times" in text
    assert "1 times kernel by kernel" in text and "re-recorded 1 times" in text and "700 us each" in text
    quiet = compile_stages.command_buffers(log[:4])
    assert "never re-recorded" in compile_stages.format_command_buffers(quiet)
    assert compile_stages.format_command_buffers(compile_stages.command_buffers([])).startswith(
        "no command buffer in the log")


def test_xla_gradients_compares_each_network_against_its_largest_gradient(tmp_path):
    """Two saved runs of the step: the difference is relative to the network's largest gradient
    element (near-zero gradients are rounding noise on both sides), and a non-finite gradient on
    one side is named, not compared."""
    import numpy as np

    xla_gradients = load_benchmark("xla_gradients")
    names = np.array(["generator/dense/kernel", "generator/dense/bias", "discriminator/head/kernel"])
    first = {"g0": np.array([2.0, -4.0]), "g1": np.array([1e-9]), "g2": np.array([1.0, 1.0])}
    second = {"g0": np.array([2.0, -3.0]), "g1": np.array([5e-9]), "g2": np.array([np.nan, 1.0])}
    for name, gradients, loss, sampled in (("a.npz", first, 1.0, [1, 2, 3, 4]), ("b.npz", second, 1.5, [1, 2, 3, 5])):
        np.savez(tmp_path / name, loss=loss, sampled=np.array(sampled), names=names, **gradients)
    result = xla_gradients.compare(tmp_path / "a.npz", tmp_path / "b.npz")
    assert result["losses"] == [1.0, 1.5] and result["sampled_equal"] == 0.75
    generator, discriminator = result["networks"]
    assert generator["network"] == "generator" and generator["largest_gradient"] == 4.0
    assert generator["difference"] == 0.25 and generator["worst"][0] == "generator/dense/kernel"
    assert generator["nonfinite"] == [] and discriminator["nonfinite"] == ["discriminator/head/kernel"]


def test_pretrain_step_calls_the_compiled_step_directly_from_host_and_device_memory():
    """`pretrain_step.direct_steps`: the XLA step called in a row with the batch in host memory,
    then already on the step's device (copies in turn, then one reused), each run taking its
    steps (the optimizer counts them)."""
    import tensorflow as tf

    from electra_tf.models.config import ElectraConfig
    from electra_tf.pretraining.synthetic import masked_batch

    pretrain_step = load_benchmark("pretrain_step")
    config = ElectraConfig.load("electra_tiny", {"num_layers": 1, "vocab_size": 50, "max_seq_length": 16})
    pretrainer = pretrain_step.compiled_pretrainer(config, xla=True)
    dataset = tf.data.Dataset.from_tensors(masked_batch(config, 2, seed=0)).repeat()
    pretrainer.fit(dataset, steps_per_epoch=1, verbose=0)
    runs = pretrain_step.direct_steps(pretrainer, dataset, steps=3)
    assert sorted(runs) == ["device", "device_copies", "host"]
    assert all(run["batches"] == 4 and run["step_s"] > 0 and run["launch_s"] > 0 for run in runs.values())
    assert int(pretrainer.optimizer.iterations.numpy()) == 1 + 3 * 4
    without_xla = pretrain_step.compiled_pretrainer(config, xla=False)
    without_xla.fit(dataset, steps_per_epoch=1, verbose=0)
    assert pretrain_step.direct_steps(without_xla, dataset, steps=3) == {}  # Keras' own loop: no step to call


def test_pretrain_step_refuses_a_pytorch_ratio_for_a_layout_only_size(capsys):
    """`--sizes small_layout` times the host's work at widths of 16; the PyTorch peer has no such
    preset, and a ratio there would mean nothing: refused before anything is built."""
    pretrain_step = load_benchmark("pretrain_step")
    with pytest.raises(SystemExit) as stopped:
        pretrain_step.main(["--sizes", "small", "small_layout", "--peer"])
    assert stopped.value.code == 2
    assert "--peer with --sizes small_layout" in capsys.readouterr().err


def test_startup_builds_the_networks_from_zeros_when_asked():
    """`gpu_checks.sh build` times the networks' build with their initializers and from zeros
    (what a rerun could skip), and profiles it: the zeros arm patches Keras' variable class, so a
    Keras release that moved it must fail here, not on a GPU."""
    import subprocess

    from tests.cli_runs import environment
    from tests.scripts import REPO

    printed = {}
    for init, more in (("as_configured", ["--profile_build", "3"]), ("zeros", [])):
        result = subprocess.run([sys.executable, str(REPO / "benchmarks" / "startup.py"), "--preset", "electra_tiny",
                                 "--build_only", "--initializers", init, *more], env=environment(),
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr[-3000:]
        printed[init] = result.stdout
    counts = {init: re.search(r"(\d+) variables \((\d+) not all zeros\)", out).groups() for init, out in printed.items()}
    total, nonzero = map(int, counts["as_configured"])
    assert total > 20 and nonzero > total // 2 and counts["zeros"] == (str(total), "0")
    assert "from zeros" in printed["zeros"] and "from zeros" not in printed["as_configured"]
    # The imports are timed apart from the build; --profile_build adds pstats' table of the top 3.
    assert all("import the models and keras-hub" in out for out in printed.values())
    table = printed["as_configured"].split("filename:lineno(function)")[1].strip().splitlines()
    assert len(table) == 3 and all(re.match(r"\s*[\d/]+\s+\d+\.\d{3}\s+\d+\.\d{3}\s+\d", row) for row in table)
    assert "tottime" in printed["as_configured"] and "tottime" not in printed["zeros"]


def test_window_rates_compares_the_windows_holding_a_save_with_the_others(tmp_path, capsys):
    """window_rates.py on a hand-made log: lines every 50 steps, a save every 100, which the
    window after its step's line holds (the monitor logs before the saver saves); the compile's
    window and the one after the first line are left out of the reference."""
    window_rates = load_benchmark("window_rates")
    rates = {50: 10, 100: 300, 150: 400, 200: 1000, 250: 600, 300: 1100, 350: 500, 400: 900}
    log = tmp_path / "run.log"
    log.write_text("ELECTRA pre-training: a header line\n" + "".join(
        f"step {end}/400 ({end / 4:.1f}%) | {rate:,} examples/s | 1,280 tokens/s | loss 30.0 | ETA 0:00:01\n"
        for end, rate in rates.items()))
    found = window_rates.windows(log.read_text().splitlines(), checkpoint_every=100)
    assert [w["save"] for w in found] == [False, False, True, False, True, False, True, False]
    reference, rows = window_rates.shares(found)
    assert reference == 1000  # the median of 1000, 1100 and 900 (steps 200, 300, 400)
    assert [round(row["share"], 2) for row in rows[2:]] == [0.4, 1.0, 0.6, 1.1, 0.5, 0.9]
    assert window_rates.main([str(log), "--checkpoint_every", "100"]) == 0
    printed = capsys.readouterr().out
    assert "| 150 | 400 | yes | 40% |" in printed
    assert "the 3 holding a save: median 50%, lowest 40%" in printed
    # A save between two lines (every 75 here) is held by the window it falls in.
    assert [w["save"] for w in window_rates.windows(log.read_text().splitlines(), checkpoint_every=75)] == \
        [False, True, False, True, True, False, True, True]  # saves at 75, 150, 225, 300, 375
    assert window_rates.main([str(tmp_path / "missing.log")]) == 2
