"""How alike an encoder's outputs are: the diagnostic behind the downstream tables (docs/results.md).

    python examples/token_similarity.py --texts data/bbc_250/dev.csv \
        --model electra=runs/indomain/electra --model mlm=runs/indomain/mlm --random_init

For the first `--count` texts of a CSV (column `text`), each model's final hidden states are
computed (no dropout) and two means of pairwise cosine similarity printed: between the [CLS]
vectors of different texts, and between the token vectors within one text (averaged over the
texts; padding left out). Near 1 within a text means the encoder maps every token to about
the same vector: what a discriminator that predicts "original" everywhere converges to, and
what fine-tuning then has to undo. `--random_init` adds the first model's architecture with
fresh weights. A `objective: mlm` run is read through its encoder, as fine-tuning reads it.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def mean_pairwise_cosine(vectors: np.ndarray) -> float:
    unit = vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)
    similarity = unit @ unit.T
    count = len(unit)
    return float((similarity.sum() - np.trace(similarity)) / (count * count - count))


def similarities(encoder, preprocessor, texts) -> tuple[float, float]:
    import tensorflow as tf

    batch = preprocessor(tf.constant(texts))
    outputs = encoder.encode(batch, training=False).numpy()
    mask = batch["padding_mask"].numpy().astype(bool)
    within = [mean_pairwise_cosine(outputs[row][mask[row]]) for row in range(len(texts))]
    return mean_pairwise_cosine(outputs[:, 0]), float(np.mean(within))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", required=True, help="a CSV file with a `text` column")
    parser.add_argument("--model", action="append", required=True, metavar="NAME=MODEL_DIR")
    parser.add_argument("--random_init", action="store_true")
    parser.add_argument("--count", type=int, default=64)
    args = parser.parse_args(argv)
    with open(args.texts, newline="", encoding="utf-8") as handle:
        texts = [row["text"] for row in csv.DictReader(handle)][:args.count]
    if len(texts) < 2:
        raise SystemExit(f"error: {args.texts} needs at least 2 texts in a `text` column.")

    from electra_tf.models.encoders import build_discriminator
    from electra_tf.finetuning.pretrained import load_pretrained
    from electra_tf.models.preprocessing import ElectraTextPreprocessor

    models = [value.partition("=") for value in args.model]
    print(f"{'model':14} {'[CLS] across texts':>19} {'tokens within a text':>21}")
    for index, (name, _, path) in enumerate(models):
        pretrained = load_pretrained(path, encoder_only=True)
        preprocessor = ElectraTextPreprocessor(pretrained.tokenizer, pretrained.config.run.max_seq_length)
        arms = [(name, pretrained.discriminator)]
        if args.random_init and index == 0:
            arms.append(("random init", build_discriminator(pretrained.config)))
        for arm, encoder in arms:
            across, within = similarities(encoder, preprocessor, texts)
            print(f"{arm:14} {across:19.3f} {within:21.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
