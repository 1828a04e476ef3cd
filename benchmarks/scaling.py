"""Multi-worker pre-training: the engines' overhead measured on this machine, and the speed-up
projected for N machines from each preset's all-reduce volume.

    python benchmarks/scaling.py                      # measure (one process, launch, Ray) and project
    python benchmarks/scaling.py --skip_measure       # the projection only (seconds)
    python benchmarks/scaling.py --arms one launch --steps 300 --rounds 3

Measured: the same `python -m electra_tf.pretrain` run (the default preset and data, `--steps`)
as one process, as `python -m electra_tf.launch --workers 2` and as `--engine ray --workers 2`
(needs the `.[ray]` extra), in `--rounds` alternating rounds after an untimed two-step run (it
prepares the bundled sample once); each row is the median of the chief's steady-state step time
(metrics.json's `step_seconds`: from the end of the first step to the last) and of the command's
wall time. Local workers share this machine's cores (each its share of the threads), so the
rows measure what the multi-worker path costs (the gradients' all-reduce through gRPC,
coordination), not a speed-up.

Projected: a step's gradients are all-reduced once, in float32 (the variables' dtype in every
precision), after the backward pass (no overlap), so with N workers

    step(N) = compute + 2 (N - 1) / N x gradient bytes / bus bandwidth      (ring all-reduce)
    speed-up(N) = N x compute / step(N)                                     (weak scaling)

with `compute` one worker's step on its own batch (K micro-batches of it with
`gradient_accumulation_steps` K, which all-reduces once per update). Gradient bytes are counted from each
preset's built pre-trainer (generator and discriminator, shared embeddings); compute is the
reference GPU's: NVIDIA's TF2 ELECTRA-Base phase-1 throughput on one A100 (955 sequences/s
with AMP at 128 tokens, batch 176 per GPU: DeepLearningExamples'
TensorFlow2/LanguageModeling/ELECTRA), scaled to the other presets by their training FLOPs
(common.training_flops). Checked against the same source's 8-GPU weak scaling, 7.87x, over a
DGX A100's NVSwitch (bus bandwidth stated below, an assumption the check is sensitive to).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import common

# The reference GPU step (module docstring): ELECTRA-Base, A100, AMP, 128 tokens.
REFERENCE_SEQUENCES_PER_SECOND = 955.0
REFERENCE_BATCH = 176
PUBLISHED_8_GPU_SPEEDUP = 7.87
# Bus bandwidths (bytes/s) of the links projected over: the all-reduce time of B bytes over N
# workers is 2 (N - 1) / N x B / bus bandwidth (nccl-tests' definition of "busbw"). The NVSwitch
# figure is an assumption (not measured here); the 100 GB/s row shows how much the check rests on it.
LINKS = {"NVSwitch, DGX A100 (230 GB/s)": 230e9, "NVSwitch at 100 GB/s": 100e9,
         "100 Gb/s Ethernet/InfiniBand": 12.5e9, "25 Gb/s Ethernet": 3.125e9, "10 Gb/s Ethernet": 1.25e9}
PRESETS = ("electra_small", "electra_base", "electra_large")
WORKER_COUNTS = (2, 8, 32)
ACCUMULATION = 4  # gradient_accumulation_steps of the last column


class PresetVolume(NamedTuple):
    """What the projection needs of a preset: its all-reduce volume and one worker's step."""

    parameters: int
    gradient_bytes: int  # float32, every trainable variable
    compute_seconds: float  # a step of REFERENCE_BATCH x 128 tokens on the reference GPU


def preset_volume(preset: str) -> PresetVolume:
    return PresetVolume(*gradient_bytes(preset), compute_seconds(preset, REFERENCE_BATCH))


def gradient_bytes(preset: str) -> tuple[int, int]:
    """(trainable parameters, bytes of their float32 gradients) of a preset's pre-trainer."""
    import numpy as np

    from electra_tf.pretraining.config import PretrainingConfig
    from electra_tf.pretraining.pretrainer import ElectraPretrainer
    from electra_tf.pretraining.synthetic import masked_batch

    config = PretrainingConfig.load(preset).replace(max_seq_length=128)
    pretrainer = ElectraPretrainer.from_pretraining_config(config)
    pretrainer(masked_batch(config, batch_size=1))
    count = int(sum(np.prod(variable.shape) for variable in pretrainer.trainable_variables))
    return count, 4 * count


def compute_seconds(preset: str, batch: int) -> float:
    """One worker's step of `preset` at `batch` x 128 tokens on the reference GPU: its FLOPs at
    the FLOP rate of NVIDIA's ELECTRA-Base step."""
    from electra_tf.pretraining.config import PretrainingConfig

    def flops(name, size):
        return common.training_flops(PretrainingConfig.load(name).replace(max_seq_length=128), size)

    reference_seconds = REFERENCE_BATCH / REFERENCE_SEQUENCES_PER_SECOND
    return reference_seconds * flops(preset, batch) / flops("electra_base", REFERENCE_BATCH)


def speed_up(compute: float, bytes_: float, bandwidth: float, workers: int) -> float:
    all_reduce = 2 * (workers - 1) / workers * bytes_ / bandwidth
    return workers * compute / (compute + all_reduce)


def projection() -> str:
    """Weak-scaling speed-ups per link: each preset on 8 workers, Base on 2 to 32; above the
    table each preset's gradient volume and reference step."""
    sizes = {preset: preset_volume(preset) for preset in PRESETS}
    # (preset, workers, micro-batches per update): accumulation all-reduces once per update.
    columns = ([(preset, 8, 1) for preset in PRESETS] + [("electra_base", n, 1) for n in WORKER_COUNTS if n != 8]
               + [("electra_base", 8, ACCUMULATION)])
    rows = [[link] + [f"{speed_up(k * sizes[preset].compute_seconds, sizes[preset].gradient_bytes, bandwidth, n):.2f}x"
                      for preset, n, k in columns] for link, bandwidth in LINKS.items()]
    short = {preset: preset.removeprefix("electra_").capitalize() for preset in PRESETS}
    lines = [f"{short[preset]}: {count / 1e6:.1f}M parameters, {bytes_ / 1e6:.0f} MB of gradients a step, "
             f"{compute * 1e3:.0f} ms a step of {REFERENCE_BATCH} x 128 tokens on the reference A100"
             for preset, (count, bytes_, compute) in sizes.items()]
    names = [f"{short[preset]}, {n} workers" + (f", accumulation {k}" if k > 1 else "") for preset, n, k in columns]
    table = common.markdown_table(["link"] + names, rows)
    base = sizes["electra_base"]
    check = "; ".join(f"{link}: {speed_up(base.compute_seconds, base.gradient_bytes, bandwidth, 8):.2f}x"
                      for link, bandwidth in LINKS.items() if link.startswith("NVSwitch"))
    return "\n".join(lines) + "\n\n" + table + (f"\n\nCheck, ELECTRA-Base on 8 A100s: {check} projected; "
                                                f"{PUBLISHED_8_GPU_SPEEDUP}x published")


def arm_command(arm: str, model_dir: Path, steps: int, workers: int) -> list[str]:
    run = ["--model_dir", str(model_dir), "--steps", str(steps), "--no-export", "--eval_batches", "1",
           "--checkpoint_every", str(steps)]
    if arm == "one":
        return [sys.executable, "-m", "electra_tf.pretrain", *run]
    engine = ["--engine", "ray", "--cpus_per_worker", "1"] if arm == "ray" else []
    return [sys.executable, "-m", "electra_tf.launch", "--workers", str(workers), *engine, "--", *run]


def measure_arm(arm: str, steps: int, workers: int, log: Path) -> dict:
    """One run of `arm`: the chief's steady step and first step (metrics.json), the command's wall time."""
    with tempfile.TemporaryDirectory(prefix=f"scaling_{arm}_") as folder, log.open("a") as output:
        run_dir = Path(folder) / "run"
        started = time.perf_counter()
        status = subprocess.run(arm_command(arm, run_dir, steps, workers), stdout=output,
                                stderr=subprocess.STDOUT).returncode
        wall = time.perf_counter() - started
        if status != 0:
            raise SystemExit(f"{arm}: exited with status {status}; its output is in {log}")
        metrics = json.loads((run_dir / "metrics.json").read_text())
    return {"step": metrics["step_seconds"], "first": metrics["first_step_seconds"], "wall": wall}


def measurement(arms: list[str], steps: int, rounds: int, workers: int) -> str:
    log = Path(tempfile.gettempdir()) / "scaling_benchmark.log"
    log.write_text("")
    results = {arm: [] for arm in arms}
    measure_arm("one", 2, workers, log)  # untimed: prepares the bundled sample once, warms the caches
    for round_ in range(rounds):
        for arm in arms:
            results[arm].append(measure_arm(arm, steps, workers, log))
            print(f"  round {round_ + 1}/{rounds} {arm}: step {results[arm][-1]['step'] * 1e3:.0f} ms, "
                  f"wall {results[arm][-1]['wall']:.0f} s", flush=True)
    names = {"one": "one process", "launch": f"launch --workers {workers}",
             "ray": f"launch --engine ray --workers {workers} --cpus_per_worker 1"}
    base = statistics.median(run["step"] for run in results[arms[0]])
    rows = []
    for arm in arms:
        step = statistics.median(run["step"] for run in results[arm])
        rows.append([names[arm], f"{step * 1e3:.0f}", f"{step / base:.2f}",
                     f"{statistics.median(run['first'] for run in results[arm]):.1f}",
                     f"{statistics.median(run['wall'] for run in results[arm]):.0f}"])
    header = ["engine", "step ms (median)", f"vs {names[arms[0]]}", "first step s", "command wall s"]
    return common.markdown_table(header, rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arms", nargs="+", choices=("one", "launch", "ray"), default=["one", "launch", "ray"])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--skip_measure", action="store_true")
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    common.start(compile_cache=False)
    print(f"host: {common.host()}\n")
    if not args.skip_measure:
        print(f"Measured: {args.steps} steps of the default run, {args.rounds} round(s)", flush=True)
        print(measurement(args.arms, args.steps, args.rounds, args.workers) + "\n", flush=True)
    print("Projected (weak scaling, float32 gradients, ring all-reduce after the backward pass):")
    print(projection())
    return 0


if __name__ == "__main__":
    sys.exit(main())
