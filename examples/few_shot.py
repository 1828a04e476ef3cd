"""The zero- and few-shot table of docs/results.md: for each task and pre-trained model, zero-shot
prompting (the replaced-token head scoring a template, no training), few-shot prompt fine-tuning
and standard fine-tuning on the same K examples per class, seeds 0, 1, 2; dev accuracy.

    python examples/few_shot.py --task bbc_news=data/bbc_250 --task spam=data/spam_200 \\
        --model indomain=runs/indomain/electra_7000 --model readme=runs/electra_tiny \\
        --shots 16 --seeds 0 1 2 --output runs/few_shot

Each run is `python -m electra_tf.finetune` (its `main`, in this process) with the CLI's defaults;
`random` adds the first model's architecture with fresh weights (`--random_init`), where zero-shot
must come out at chance. The templates and label words are the ones below (TASKS), chosen once and
not tuned on the dev sets. A run whose metrics.json exists is read, not repeated. Accuracy is the
best epoch's dev accuracy (zero-shot: the one evaluation), as metrics.json reports it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from downstream import named_paths  # noqa: E402

RANDOM = "random"
# task name -> (template, label words): one template a task, the words a reader would pick.
TASKS = {
    "bbc_news": ("{text} This is about {label}.",
                 ["business=business", "entertainment=entertainment|film|music", "politics=politics|government",
                  "sports=sport", "tech=technology|computer"]),
    "spam": ("{text} This email is {label}.", ["ham=personal", "spam=spam|advertisement"]),
}


def run(argv: list, output: Path) -> dict:
    import keras

    from electra_tf import finetune

    if (output / "metrics.json").is_file():
        return json.loads((output / "metrics.json").read_text())
    keras.backend.clear_session()
    if finetune.main([*argv, "--output_dir", str(output), "--overwrite", "--no-export"]) != 0:
        raise SystemExit(f"the run into {output} failed (its error is above)")
    return json.loads((output / "metrics.json").read_text())


def accuracies(task: str, folder: Path, model: Path, random_init: bool, args, output: Path) -> dict:
    """{method: [dev accuracy per seed]} for one task and model."""
    template, words = TASKS[task]
    common = ["--pretrained", str(model), "--eval", str(folder / "dev.csv")] + ["--random_init"] * random_init
    prompt = ["--kind", "prompt", "--template", template, "--label_words", *words]
    train = ["--train", str(folder / "train.csv"), "--shots", str(args.shots)]
    results = {"zero-shot": [run([*common, *prompt, "--eval_only"], output / "zero_shot")["eval"]["accuracy"]]}
    for method, extra in (("prompt", [*prompt, *train]), ("standard", train)):
        results[f"{method}, {args.shots} a class"] = [
            run([*common, *extra, "--seed", str(seed)], output / f"{method}_seed{seed}")["eval"]["accuracy"]
            for seed in args.seeds]
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", action="append", required=True, metavar="NAME=FOLDER",
                        help=f"a task folder (train.csv, dev.csv); NAME one of {', '.join(TASKS)}")
    parser.add_argument("--model", action="append", required=True, metavar="NAME=PATH")
    parser.add_argument("--shots", type=int, default=16)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--random", action=argparse.BooleanOptionalAction, default=True,
                        help="also the first model's architecture with fresh weights (default: yes)")
    args = parser.parse_args(argv)
    tasks, models = named_paths(args.task, "--task"), named_paths(args.model, "--model")
    unknown = [name for name in tasks if name not in TASKS]
    if unknown:
        raise SystemExit(f"error: --task {unknown[0]}: no template for it; tasks: {', '.join(TASKS)}.")
    first = next(iter(models.values()))
    rows = []
    for task, folder in tasks.items():
        for name, path in [*models.items(), *([(RANDOM, first)] if args.random else [])]:
            results = accuracies(task, folder, path, name == RANDOM, args, args.output / task / name)
            for method, values in results.items():
                shown = " / ".join(f"{v:.3f}" for v in values)
                rows.append(f"| {task} | {name} | {method} | {statistics.mean(values):.3f} | {shown} |")
                print(rows[-1], flush=True)
    print("\n| task | model | method | mean accuracy | per seed |\n|---|---|---|---|---|\n" + "\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
