"""What the example data writers share: a stratified split, a few-labels subsample, the CSV
layout `python -m electra_tf.finetune` reads, and the unlabeled pre-training text.

The unlabeled text is the training split's texts without their labels, one document per
text (a blank line between documents, the format `python -m electra_tf.pretrain --data`
reads): the in-domain pre-training of the downstream tables (docs/results.md). Dev texts are never in it.
"""

from __future__ import annotations

import argparse
import csv
import io
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from electra_tf.utils.files import atomic_write_text  # noqa: E402


def stratified_split(texts_by_label: dict, dev_fraction: float, seed: int):
    """Each label's texts shuffled on their own (by seed and label) and cut; train shuffled."""
    train, dev = [], []
    for label in sorted(texts_by_label):
        texts = list(texts_by_label[label])
        random.Random(f"{seed}/{label}").shuffle(texts)
        cut = round(len(texts) * dev_fraction)
        dev += [(text, label) for text in texts[:cut]]
        train += [(text, label) for text in texts[cut:]]
    random.Random(seed).shuffle(train)
    return train, dev


def subsample(train, per_class: int, seed: int):
    """`per_class` texts of each label, drawn from the shuffled training split."""
    by_label = {}
    for text, label in train:
        by_label.setdefault(label, []).append((text, label))
    short = {label: len(rows) for label, rows in by_label.items() if len(rows) < per_class}
    if short:
        raise SystemExit(f"error: --train_per_class {per_class} is more than the training split has "
                         f"for {short}; use a smaller number.")
    rng = random.Random(seed)
    kept = [row for label in sorted(by_label) for row in rng.sample(by_label[label], per_class)]
    rng.shuffle(kept)
    return kept


def to_csv(rows) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["text", "label"])
    writer.writerows(rows)
    return buffer.getvalue()


def unlabeled_text(rows) -> str:
    return "".join(f"{text}\n\n" for text, _ in rows)


def add_arguments(parser: argparse.ArgumentParser, default_output: str) -> None:
    parser.add_argument("--output", default=default_output)
    parser.add_argument("--dev_fraction", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train_per_class", type=int, default=None,
                        help="keep only this many labelled training texts per label")
    parser.add_argument("--unlabeled", default=None, metavar="FILE",
                        help="also write the whole training split's texts, without labels, for pre-training")


def check_arguments(parser: argparse.ArgumentParser, args) -> None:
    if not 0 < args.dev_fraction < 1:
        parser.error("--dev_fraction must be between 0 and 1.")
    if args.train_per_class is not None and args.train_per_class < 1:
        parser.error("--train_per_class must be at least 1.")


def write(args, train, dev, unit: str) -> None:
    """train.csv / dev.csv (and the unlabeled text) under args.output, each written atomically."""
    if args.unlabeled:
        atomic_write_text(Path(args.unlabeled), unlabeled_text(train))
    labelled = subsample(train, args.train_per_class, args.seed) if args.train_per_class else train
    output = Path(args.output)
    atomic_write_text(output / "train.csv", to_csv(labelled))
    atomic_write_text(output / "dev.csv", to_csv(dev))
    print(f"{len(labelled)} train / {len(dev)} dev {unit} -> {output}/train.csv, {output}/dev.csv"
          + (f"; {len(train)} unlabeled training {unit} -> {args.unlabeled}" if args.unlabeled else ""))
