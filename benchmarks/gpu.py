"""A GPU host end to end, as a user with a GPU checks it: every figure written to one folder.

    pip install -e ".[gpu,reference]"
    python benchmarks/gpu.py --output runs/gpu                  # all four parts, about 20-30 minutes
    python benchmarks/gpu.py --output runs/gpu --parts check step
    python benchmarks/gpu.py --output runs/gpu --parts matrix --jobs 4

The parts, each into OUTPUT/<part>.md (the matrix's cells also into OUTPUT/matrix/<cell>/):

- `check`: `python -m electra_tf --check`: the devices, what `auto` chooses, a matmul with and
  without XLA on each device.
- `step`: `pretrain_step.py` at the paper's ELECTRA-Small batch (128 x 128) with the GPU
  defaults (mixed_bfloat16, XLA; `--precision` to change), against transformers' PyTorch
  ELECTRA on the same GPU when torch is installed, and the GPU's matmul peak.
- `first_step`: the package's own command, `python -m electra_tf.pretrain --config
  electra_small --batch_size 128`, in a fresh process over an empty compile cache (XLA compiles
  the step), then extended to more steps in a second process (it loads the compiled programs):
  each one's first step, step time and the programs it added to the cache.
- `matrix`: `pretrain` and `finetune` in every cell of strategy {one_device, mirrored} x
  precision {float32, mixed_bfloat16, mixed_float16} x XLA {off, on}, a short run each (each a
  process of its own, over one compile cache): whether it trains, its optimizer steps and
  float16's skipped batches, its first step and step time. A rerun skips the cells already done
  (delete a cell's folder to run it again). Fine-tuning reads a task made from the bundled
  sample (a sentence as written, or its words shuffled) and starts from the first pre-training
  cell that trained.
"""

from __future__ import annotations

import argparse
import csv
import io
import itertools
import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

import common

PARTS = ("check", "step", "first_step", "matrix")
STRATEGIES = ("one_device", "mirrored")
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
MATRIX_HEADER = ["cell", "result", "optimizer steps", "first step s", "step ms", "last metric", "seconds"]
TRAIN_SENTENCES, EVAL_SENTENCES = 512, 128  # the matrix's fine-tuning task


def run(command: list[str], log: Path, timeout: int, environ: dict | None = None) -> tuple[int | None, str]:
    """(exit status or None when it timed out, output); the command and its output go to `log`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=environ)
        output, status = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as timed_out:
        output = "".join((part or b"").decode(errors="replace") for part in (timed_out.stdout, timed_out.stderr))
        status = None
    log.write_text(" ".join(command) + "\n\n" + output, encoding="utf-8")
    return status, output


def failure_line(output: str) -> str:
    """Why a command failed: its own `error:` line, else the last error-looking line that is not
    one of TensorFlow's log lines."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    own = [line for line in lines if line.startswith("error:")]
    if own:
        return own[-1][:200]
    for line in reversed(lines):
        if "Error" in line and not re.match(r"[IWEF]\d{4} ", line):
            return line[:200]
    return lines[-1][:200] if lines else "no output"


def check(args) -> str:
    status, output = run([sys.executable, "-m", "electra_tf", "--check"], args.output / "logs" / "check.txt", 600)
    return f"`python -m electra_tf --check` (exit {status}):\n\n```\n{output.strip()}\n```\n"


def step(args) -> str:
    command = [sys.executable, str(Path(__file__).with_name("pretrain_step.py")), "--sizes", "small", "--batch", "128",
               "--precisions", args.precision, "--xla", "on", "--steps", "50", "--rounds", "3"]
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
        command.append("--peer")
    except ImportError:
        pass
    status, output = run(command, args.output / "logs" / "step.txt", args.timeout)
    table = [line for line in output.splitlines() if line.startswith("|")]
    return f"`{' '.join(command[1:])}` (exit {status}):\n\n" + "\n".join(table) + "\n"


def first_step(args) -> str:
    folder, cache = args.output / "first_step", args.output / "first_step_cache"
    environ = dict(os.environ, ELECTRA_TF_COMPILE_CACHE=str(cache.resolve()))
    rows = []
    for name, steps in (("fresh process, empty compile cache", 100), ("its extension, a new process", 200)):
        command = [sys.executable, "-m", "electra_tf.pretrain", "--config", "electra_small", "--batch_size", "128",
                   "--steps", str(steps), "--model_dir", str(folder), "--checkpoint_every", "100", "--log_every", "50",
                   "--eval_batches", "2", "--mixed_precision", args.precision]
        status, output = run(command, args.output / "logs" / f"first_step_{steps}.txt", args.timeout, environ)
        metrics = json.loads((folder / "metrics.json").read_text()) if status == 0 else {}
        step_seconds = metrics.get("step_seconds")
        rows.append([name, "trains" if status == 0 else f"fails: {failure_line(output)}",
                     metrics.get("first_step_seconds", ""), f"{1000 * step_seconds:.1f}" if step_seconds else "",
                     (metrics.get("compile_cache") or {}).get("programs_added", "")])
    return common.markdown_table(["run", "result", "first step s", "step ms", "programs compiled"], rows) + "\n"


def order_task(folder: Path, seed: int = 0) -> tuple[Path, Path]:
    """train.csv and dev.csv (text,label): sentences of the bundled Wikipedia sample, each as
    written (`in_order`) or with its words shuffled (`shuffled`), half and half."""
    from electra_tf.data.corpus import Skips, embedded_sample_path, iter_raw_documents, to_sentences
    from electra_tf.utils.files import atomic_write_text

    train, dev = folder / "train.csv", folder / "dev.csv"
    if train.is_file() and dev.is_file():
        return train, dev
    skips, sentences = Skips(), []
    for document in iter_raw_documents(embedded_sample_path(), skips):
        sentences += [s for s in to_sentences(document, skips) if 8 <= len(s.split()) <= 40]
        if len(sentences) >= TRAIN_SENTENCES + EVAL_SENTENCES:
            break
    rng = np.random.default_rng(seed)
    rows = [(" ".join(rng.permutation(s.split())), "shuffled") if number % 2 else (s, "in_order")
            for number, s in enumerate(sentences[:TRAIN_SENTENCES + EVAL_SENTENCES])]
    rng.shuffle(rows)

    def as_csv(part):
        text = io.StringIO()
        writer = csv.writer(text)
        writer.writerow(["text", "label"])
        writer.writerows(part)
        return text.getvalue()

    atomic_write_text(dev, as_csv(rows[TRAIN_SENTENCES:]))
    atomic_write_text(train, as_csv(rows[:TRAIN_SENTENCES]))  # last: its presence means both are whole
    return train, dev


def matrix_cell(args, command: str, cell: tuple, environ: dict, pretrained: Path | None) -> list:
    strategy, precision, xla = cell
    name = f"{command}-{strategy}-{precision}-{'xla' if xla else 'no_xla'}"
    folder = args.output / "matrix" / name
    saved = folder / "cell.json"
    if saved.is_file():
        return json.loads(saved.read_text())
    runtime = ["--strategy", strategy, "--mixed_precision", precision, "--xla" if xla else "--no-xla"]
    if command == "pretrain":
        steps = "40"
        argv = [sys.executable, "-m", "electra_tf.pretrain", "--model_dir", str(folder / "run"), "--steps", steps,
                "--checkpoint_every", steps, "--sample_every", steps, "--log_every", "10", "--eval_batches", "2",
                *runtime]
    else:
        train, dev = order_task(args.output / "matrix" / "order_task")
        argv = [sys.executable, "-m", "electra_tf.finetune", "--pretrained", str(pretrained), "--train", str(train),
                "--eval", str(dev), "--epochs", "1", "--log_every", "4", "--output_dir", str(folder / "run"),
                "--overwrite", *runtime]
    started = time.monotonic()
    status, output = run(argv, folder / "log.txt", args.timeout, environ)
    seconds = round(time.monotonic() - started, 1)
    metrics_file = folder / "run" / "metrics.json"
    row = [name, "trains" if status == 0 else f"fails: {failure_line(output) if status else 'timed out'}",
           "", "", "", "", seconds]
    if status == 0 and metrics_file.is_file():
        metrics = json.loads(metrics_file.read_text())
        if command == "pretrain":
            step_seconds = metrics.get("step_seconds")
            row[2:6] = [f"{metrics['step']}" + (f" ({metrics['skipped_steps']} skipped)" if metrics["skipped_steps"]
                                                else ""),
                        metrics.get("first_step_seconds", ""), f"{1000 * step_seconds:.1f}" if step_seconds else "",
                        f"disc AUC {metrics['final_eval'].get('disc_auc', float('nan')):.3f}"]
        else:
            row[2], row[5] = metrics["optimizer_steps"], f"accuracy {metrics['eval']['accuracy']:.3f}"
    saved.parent.mkdir(parents=True, exist_ok=True)
    saved.write_text(json.dumps(row) + "\n")
    print("| " + " | ".join(str(cell) for cell in row) + " |", flush=True)
    return row


def matrix(args) -> str:
    environ = dict(os.environ, ELECTRA_TF_COMPILE_CACHE=str((args.output / "matrix_cache").resolve()))
    if args.jobs > 1:  # TensorFlow otherwise takes nearly all of a GPU's memory for one process
        environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
    cells = list(itertools.product(STRATEGIES, PRECISIONS, (False, True)))
    rows = [matrix_cell(args, "pretrain", cells[0], environ, None)]  # alone: it may build the sample's shards
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        rows += list(pool.map(lambda cell: matrix_cell(args, "pretrain", cell, environ, None), cells[1:]))
    trained = [row[0] for row in rows if row[1] == "trains"]
    if trained:
        pretrained = args.output / "matrix" / trained[0] / "run"
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            rows += list(pool.map(lambda cell: matrix_cell(args, "finetune", cell, environ, pretrained), cells))
    note = " (cells ran several at once: their times shared the machine)" if args.jobs > 1 else ""
    return f"{sum(row[1] == 'trains' for row in rows)} of {len(rows)} cells trained{note}.\n\n" + \
        common.markdown_table(MATRIX_HEADER, rows) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", type=Path, required=True, help="the folder every figure and log goes to")
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--precision", default="mixed_bfloat16", choices=PRECISIONS,
                        help="the step's and first step's precision (default: auto's on Ampere and later)")
    parser.add_argument("--jobs", type=int, default=1, help="matrix cells at once (times then share the machine)")
    parser.add_argument("--timeout", type=int, default=1200, help="seconds a command may take")
    args = parser.parse_args(argv)
    args.output.mkdir(parents=True, exist_ok=True)
    parts = {"check": check, "step": step, "first_step": first_step, "matrix": matrix}
    for name in args.parts:
        started = time.monotonic()
        print(f"== {name}", flush=True)
        text = parts[name](args)
        (args.output / f"{name}.md").write_text(
            f"# {name} ({time.strftime('%Y-%m-%d %H:%M')}, {time.monotonic() - started:.0f} s)\n\n{text}")
        print(text, flush=True)
    print(f"Figures in {args.output}/*.md, logs in {args.output}/logs and {args.output}/matrix/<cell>/log.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
