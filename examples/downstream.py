"""The downstream tables of docs/results.md: fine-tune each pre-trained model, and the same architecture
from random initialisation, on each task with several seeds; print dev accuracy per seed and
the mean.

    python examples/downstream.py --task bbc_news=data/bbc_news_250 --task spam=data/spam_200 \
        --model electra=runs/indomain/electra --model mlm=runs/indomain/mlm \
        --seeds 0 1 2 --output runs/downstream

Each run is `python -m electra_tf.finetune` (its `main`, in this process) with the CLI's
defaults unless `--epochs` or `--learning_rate` are given; `random init` builds the first
model's architecture with fresh weights and uses its vocabulary. A run whose metrics.json
exists is read, not repeated, so an interrupted table resumes. Accuracy is the best epoch's
dev accuracy, as metrics.json reports it (the tasks have no separate test split). A task
folder holding train.conll / dev.conll (e.g. from examples/brown_pos.py) is a tagging task
(`--tagging`, per-word accuracy).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from electra_tf.utils.files import atomic_write_text  # noqa: E402

RANDOM_INIT = "random init"


def named_paths(values, flag):
    pairs = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name or not path:
            raise SystemExit(f"error: {flag} {value!r}: expected NAME=PATH.")
        pairs[name] = Path(path)
    return pairs


def finetune(task_dir: Path, model: Path, random_init: bool, seed: int, output: Path, args) -> dict:
    import keras

    from electra_tf import finetune

    if (output / "metrics.json").is_file():
        return json.loads((output / "metrics.json").read_text())
    keras.backend.clear_session()
    suffix = task_files(task_dir)
    argv = ["--pretrained", str(model), "--train", str(task_dir / f"train{suffix}"), "--eval",
            str(task_dir / f"dev{suffix}"), "--output_dir", str(output), "--overwrite", "--seed", str(seed)]
    argv += ["--random_init"] * random_init + ["--tagging"] * (suffix == ".conll")
    for key in ("epochs", "learning_rate"):
        if getattr(args, key) is not None:
            argv += [f"--{key}", str(getattr(args, key))]
    if finetune.main(argv) != 0:
        raise SystemExit(f"fine-tuning {task_dir} into {output} failed (its error is above)")
    return json.loads((output / "metrics.json").read_text())


def task_files(folder: Path) -> str:
    """The suffix of the folder's train/dev files: .csv (classification) or .conll (tagging)."""
    for suffix in (".csv", ".conll"):
        if all((folder / f"{split}{suffix}").is_file() for split in ("train", "dev")):
            return suffix
    raise SystemExit(f"error: {folder} needs train.csv and dev.csv (classification) or train.conll and "
                     "dev.conll (tagging).")


def table(results: dict, seeds) -> str:
    lines = ["| task | initialisation | dev accuracy, seeds " + " / ".join(map(str, seeds)) + " | mean |",
             "|---|---|---|---|"]
    for task, by_model in results.items():
        for model, accuracies in by_model.items():
            lines.append(f"| {task} | {model} | {' / '.join(f'{a:.3f}' for a in accuracies)} | "
                         f"{statistics.mean(accuracies):.3f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", action="append", required=True, metavar="NAME=FOLDER",
                        help="a folder with train.csv and dev.csv (columns text, label), or train.conll "
                             "and dev.conll (word tags)")
    parser.add_argument("--model", action="append", required=True, metavar="NAME=MODEL_DIR")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=None, help="default: the CLI's")
    parser.add_argument("--learning_rate", type=float, default=None, help="default: the CLI's, by model size")
    parser.add_argument("--output", default="runs/downstream")
    args = parser.parse_args(argv)
    tasks, models = named_paths(args.task, "--task"), named_paths(args.model, "--model")
    for folder in tasks.values():
        task_files(folder)
    arms = [(name, path, False) for name, path in models.items()]
    arms.append((RANDOM_INIT, next(iter(models.values())), True))
    output = Path(args.output)
    results = {}
    for task, folder in tasks.items():
        for arm, model, random_init in arms:
            for seed in args.seeds:
                run = output / task / arm.replace(" ", "_") / f"seed{seed}"
                summary = finetune(folder, model, random_init, seed, run, args)
                accuracy = summary["eval"]["accuracy"]
                results.setdefault(task, {}).setdefault(arm, []).append(accuracy)
                print(f"{task} | {arm} | seed {seed}: accuracy {accuracy:.4f} (best epoch "
                      f"{summary['best_epoch']}, {summary['seconds']:.0f} s)", flush=True)
    text = table(results, args.seeds)
    atomic_write_text(output / "table.md", text + "\n")
    atomic_write_text(output / "results.json", json.dumps(results, indent=2) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
