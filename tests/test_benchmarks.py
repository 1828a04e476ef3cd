"""benchmarks/: the pieces of the runtime matrix that run without a GPU or a long run (the
matrix itself runs the commands; it was tried by hand on CPU, docs/results.md)."""

import csv
import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def load_benchmark(name):
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
    row = matrix.table_row("pretrain-mirrored-mixed_float16-xla", {
        "returncode": 0, "steps": 40, "skipped": 4, "first_step_seconds": 12.34, "step_ms": 5.6,
        "metric": "disc AUC 0.612", "seconds": 30.0})
    assert row == "| pretrain-mirrored-mixed_float16-xla | trains | 40 (4 skipped) | 12.3 | 5.6 | disc AUC 0.612 | 30.0 |"
