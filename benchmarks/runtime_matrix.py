"""Every runtime cell, as a user runs it: `pretrain` and `finetune` in each combination of
strategy x precision x XLA, a short run each, one table.

    python benchmarks/runtime_matrix.py                        # 12 pre-training + 12 fine-tuning cells
    python benchmarks/runtime_matrix.py --commands pretrain --strategies mirrored --steps 60
    python benchmarks/runtime_matrix.py --jobs 4               # 4 cells at once (a GPU with many cores)

`tests/test_compiled_gradients.py` trains the same matrix in-process on two logical CPUs. This
runs the commands themselves on the machine's own devices, which the CPU tests cannot stand in
for: on a GPU, MirroredStrategy reduces with NCCL collectives, and float16 runs on real float16
kernels (docs/performance.md, "On GPUs"). Each cell is a fresh process: its first step includes
its own XLA compile (the cells share one compile cache under OUTPUT, so rerunning the matrix
also shows the cached first step).

The cells are kept: OUTPUT/<command>-<strategy>-<precision>-<xla>/ holds the run, its log and
`cell.json`; a rerun skips finished cells (delete one to run it again), so a matrix cut off by a
time limit continues where it stopped. Pre-training uses the bundled Wikipedia sample and the
default preset unless `--pretrain_args="--config electra_small ..."` says otherwise. Fine-tuning reads a sentence task made
here from the same sample (`order.csv`: a sentence as written, or with its words shuffled) and
starts from `--pretrained`, or else from the first pre-training cell that trained.

Prints one markdown row per cell (what trained, the optimizer steps and float16 skips, the
first step's seconds, the step time, the last metric), and writes OUTPUT/matrix.json.

A cell's time is mostly its process starting and XLA compiling, work for the host's cores (the
compiler and `ptxas` are CPU programs), while its short run leaves the GPU mostly idle; `--jobs N`
runs N cells at once to spend a GPU host's cores on the matrix. Their first-step and step
times then include the other cells' load, and `cell.json` says so (`jobs`): what trains is the
result; time the cells with `--jobs 1`.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import shlex
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "examples"))  # labelled_text: the CSV layout finetune reads

from electra_tf.utils.files import atomic_write_text  # noqa: E402

STRATEGIES = ("one_device", "mirrored")
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
TABLE_HEADER = ("| cell | result | optimizer steps | first step (s) | step (ms) | last metric | seconds |\n"
                "|---|---|---|---|---|---|---|")
# The sentence task's size: about a dozen steps at the CLI's batch, enough to see updates after
# float16's first skipped batches.
TRAIN_SENTENCES, EVAL_SENTENCES = 512, 128


def cell_name(command: str, strategy: str, precision: str, xla: bool) -> str:
    return f"{command}-{strategy}-{precision}-{'xla' if xla else 'no_xla'}"


def write_order_task(folder: Path, seed: int = 0) -> tuple[Path, Path]:
    """train.csv and dev.csv: sentences of the bundled Wikipedia sample, each as written
    (`in_order`) or with its words shuffled (`shuffled`), half and half."""
    from electra_tf.data.corpus import Skips, embedded_sample_path, iter_raw_documents, to_sentences

    folder.mkdir(parents=True, exist_ok=True)
    train, dev = folder / "train.csv", folder / "dev.csv"
    if train.is_file() and dev.is_file():
        return train, dev
    skips, sentences = Skips(), []
    for document in iter_raw_documents(embedded_sample_path(), skips):
        sentences += [s for s in to_sentences(document, skips) if 8 <= len(s.split()) <= 40]
        if len(sentences) >= TRAIN_SENTENCES + EVAL_SENTENCES:
            break
    rng = np.random.default_rng(seed)
    rows = []
    for number, sentence in enumerate(sentences[:TRAIN_SENTENCES + EVAL_SENTENCES]):
        words = sentence.split()
        if number % 2:
            rows.append((" ".join(rng.permutation(words)), "shuffled"))
        else:
            rows.append((sentence, "in_order"))
    rng.shuffle(rows)
    from labelled_text import to_csv

    atomic_write_text(dev, to_csv(rows[TRAIN_SENTENCES:]))
    atomic_write_text(train, to_csv(rows[:TRAIN_SENTENCES]))  # last: its presence means both are whole
    return train, dev


def runtime_args(strategy: str, precision: str, xla: bool) -> list[str]:
    return ["--strategy", strategy, "--mixed_precision", precision, "--xla" if xla else "--no-xla"]


def pretrain_command(args, folder: Path, cell: tuple) -> list[str]:
    every = str(args.steps)  # one checkpoint and one sample panel, at the end
    return [sys.executable, "-m", "electra_tf.pretrain", "--model_dir", str(folder / "model"),
            "--steps", str(args.steps), "--checkpoint_every", every, "--sample_every", every,
            "--log_every", str(max(1, args.steps // 4)), "--eval_batches", "2",
            *runtime_args(*cell), *args.pretrain_args]


def finetune_command(args, folder: Path, cell: tuple, pretrained: Path, task: tuple[Path, Path]) -> list[str]:
    return [sys.executable, "-m", "electra_tf.finetune", "--pretrained", str(pretrained),
            "--train", str(task[0]), "--eval", str(task[1]), "--epochs", "1", "--log_every", "4",
            "--output_dir", str(folder / "run"), "--overwrite", *runtime_args(*cell), *args.finetune_args]


def failure_line(output: str) -> str:
    """The line that says why a command failed: the command's own `error:` line, else the last
    error-looking line that is not one of TensorFlow's log lines (on a GPU, a failed run ends
    with "Error occurred when finalizing GeneratorDataset iterator" after the reason)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    own = [line for line in lines if line.startswith("error:")]
    if own:
        return own[-1][:200]
    for line in reversed(lines):
        if "Error" in line and not re.match(r"[IWEF]\d{4} ", line):
            return line[:200]
    return lines[-1][:200] if lines else "no output"


def run_cell(command: list[str], folder: Path, timeout: int, environ: dict) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=environ, cwd=REPO)
        output, returncode = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as timed_out:
        output = (timed_out.stdout or b"").decode(errors="replace") + (timed_out.stderr or b"").decode(errors="replace")
        returncode = None
    (folder / "log.txt").write_text(" ".join(command) + "\n\n" + output, encoding="utf-8")
    result = {"command": " ".join(command[1:]), "seconds": round(time.monotonic() - started, 1),
              "returncode": returncode}
    if returncode != 0:
        result["failure"] = "timed out" if returncode is None else failure_line(output)
    return result


def read_metrics(command: str, folder: Path, result: dict) -> dict:
    """`result` with what the finished run's metrics.json says (nothing when it failed)."""
    metrics_file = folder / ("model" if command == "pretrain" else "run") / "metrics.json"
    if result["returncode"] != 0 or not metrics_file.is_file():
        return result
    metrics = json.loads(metrics_file.read_text())
    if command == "pretrain":
        step_seconds = metrics.get("step_seconds")
        found = {"steps": metrics["step"], "skipped": metrics["skipped_steps"],
                 "first_step_seconds": metrics.get("first_step_seconds"),
                 "step_ms": round(1000 * step_seconds, 1) if step_seconds else None,
                 "metric": f"disc AUC {metrics['final_eval'].get('disc_auc', float('nan')):.3f}"}
    else:
        found = {"steps": metrics["optimizer_steps"], "metric": f"accuracy {metrics['eval']['accuracy']:.3f}"}
    return {**result, **found, **{key: metrics[key] for key in ("runtime", "gpus", "tensorflow")}}


def table_row(name: str, result: dict) -> str:
    trained = "trains" if result["returncode"] == 0 else f"fails: {result['failure']}"
    steps = f"{result['steps']}" + (f" ({result['skipped']} skipped)" if result.get("skipped") else "") \
        if "steps" in result else ""
    first = f"{result['first_step_seconds']:.1f}" if result.get("first_step_seconds") is not None else ""
    step_ms = f"{result['step_ms']}" if result.get("step_ms") is not None else ""
    return f"| {name} | {trained} | {steps} | {first} | {step_ms} | {result.get('metric', '')} | {result['seconds']} |"


def may_build_shards(pretrain_args: list[str]) -> bool:
    """Whether a pre-training cell may build the bundled sample's shards: not when `--data` names
    the text, nor when the default preset's shards are built already (carried to a GPU host, or
    left by an earlier run), which saves a cell's time of a short GPU lease. Any other preset or
    `--set` may need its own shards, so then: yes."""
    def names(flag):
        return any(arg == flag or arg.startswith(flag + "=") for arg in pretrain_args)

    if names("--data"):
        return False
    if names("--config") or names("--set"):
        return True
    from electra_tf.models.config import ElectraConfig
    from electra_tf.pretrain import DEFAULT_CONFIG
    from electra_tf.utils.run_dir import bundled_data_dir

    return not (bundled_data_dir(ElectraConfig.load(DEFAULT_CONFIG).max_seq_length) / "metadata.json").is_file()


def run_cells(command: str, pending: list, make_command, args, environ: dict, results: dict) -> None:
    """Run the pending cells of one command, `args.jobs` at a time, each row printed as its cell
    ends. With several jobs the first pre-training cell runs alone when it may build the bundled
    sample's shards, which the others then read (`may_build_shards`)."""
    def run(cell):
        name = cell_name(command, *cell)
        folder = args.output / name
        result = read_metrics(command, folder, run_cell(make_command(folder, cell), folder, args.timeout, environ))
        if args.jobs > 1:
            result["jobs"] = args.jobs  # its times shared the machine with other cells
        atomic_write_text(folder / "cell.json", json.dumps(result, indent=2) + "\n")
        results[name] = result
        print(table_row(name, result), flush=True)

    alone = pending[:1] if command == "pretrain" and args.jobs > 1 and may_build_shards(args.pretrain_args) else []
    for cell in alone:
        run(cell)
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for future in [pool.submit(run, cell) for cell in pending[len(alone):]]:
            future.result()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", type=Path, default=Path("runs/runtime_matrix"))
    parser.add_argument("--commands", nargs="+", choices=("pretrain", "finetune"), default=["pretrain", "finetune"])
    parser.add_argument("--strategies", nargs="+", choices=STRATEGIES, default=list(STRATEGIES))
    parser.add_argument("--precisions", nargs="+", choices=PRECISIONS, default=list(PRECISIONS))
    parser.add_argument("--xla", nargs="+", choices=("on", "off"), default=["off", "on"])
    parser.add_argument("--steps", type=int, default=40, help="pre-training steps per cell")
    parser.add_argument("--pretrained", type=Path, default=None,
                        help="what fine-tuning starts from (default: the first pre-training cell that trained)")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    parser.add_argument("--jobs", type=int, default=1,
                        help="cells run at once (each its own process; on a GPU they share it, each "
                             "process growing its memory as it needs). Their times then share the "
                             "machine: use 1 for the timing columns")
    parser.add_argument("--pretrain_args", type=shlex.split, default=[],
                        help='more pretrain arguments, as one string: --pretrain_args="--config electra_small"')
    parser.add_argument("--finetune_args", type=shlex.split, default=[],
                        help='more finetune arguments, as one string: --finetune_args="--batch_size 16"')
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")

    environ = dict(os.environ, ELECTRA_TF_COMPILE_CACHE=str((args.output / "xla_cache").resolve()))
    if args.jobs > 1:
        # TensorFlow takes nearly all of a GPU's memory for its process unless told to grow.
        environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
    cells = list(itertools.product(args.strategies, args.precisions, [x == "on" for x in args.xla]))
    results = {}
    print(TABLE_HEADER, flush=True)
    for command in [c for c in ("pretrain", "finetune") if c in args.commands]:
        pending = []
        for cell in cells:
            name = cell_name(command, *cell)
            if (args.output / name / "cell.json").is_file():
                results[name] = json.loads((args.output / name / "cell.json").read_text())
                print(table_row(name, results[name]), flush=True)
            else:
                pending.append(cell)
        if command == "pretrain":
            run_cells(command, pending, lambda folder, cell: pretrain_command(args, folder, cell), args, environ,
                      results)
            continue
        trained = [name for name in (cell_name("pretrain", *cell) for cell in cells)  # in cell order, not finish order
                   if name in results and results[name]["returncode"] == 0]
        pretrained = args.pretrained or (args.output / trained[0] / "model" if trained else None)
        if pending and pretrained is None:
            for cell in pending:
                print(f"| {cell_name(command, *cell)} | not run: no --pretrained and no pre-training cell trained "
                      "| | | | | |")
            continue
        task = write_order_task(args.output / "order_task") if pending else None
        run_cells(command, pending, lambda folder, cell: finetune_command(args, folder, cell, pretrained, task), args,
                  environ, results)

    names = [cell_name(command, *cell) for command in ("pretrain", "finetune") for cell in cells]
    ordered = {name: results[name] for name in names if name in results}
    atomic_write_text(args.output / "matrix.json", json.dumps(ordered, indent=2) + "\n")
    if args.jobs > 1:  # rows were printed as cells ended: the table once more, in order
        print(f"\n{TABLE_HEADER}\n" + "\n".join(table_row(n, r) for n, r in ordered.items()))
    failed = [name for name, result in ordered.items() if result["returncode"] != 0]
    print(f"\n{len(ordered) - len(failed)} of {len(ordered)} cells trained"
          + (f"; failed: {', '.join(failed)}" if failed else "") + f". Logs: {args.output}/<cell>/log.txt")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
