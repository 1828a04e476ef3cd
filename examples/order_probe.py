"""Does a pre-trained ELECTRA use word order? Compare each network on real and shuffled text.

    python examples/order_probe.py --pretrained runs/electra_tiny [--data runs/data/wiki_sample_seq128]

Held-out batches are masked and corrupted as in training. Then, within every sequence, the
word pieces are shuffled ([CLS], [SEP] and padding stay where they are; a replaced token keeps
its label, a masked slot keeps its target). A model that reads context in order scores worse
on the shuffled copy; a model that scores the same treats each sequence as a bag of words.

Prints, for both copies: the discriminator's replaced-token AUC and the generator's masked-LM
accuracy. The shuffled-text AUC of docs/results.md, "The embedded default".
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from electra_tf.utils.errors import command  # noqa: E402  (after the path set-up)


def shuffle_permutations(token_ids: np.ndarray, fixed_ids, rng: np.random.Generator) -> np.ndarray:
    """Per row, a permutation of positions that moves every position except those holding one
    of `fixed_ids` (the sequence structure: padding, [CLS], [SEP]). new[j] = old[perm[j]]."""
    permutations = np.tile(np.arange(token_ids.shape[1]), (token_ids.shape[0], 1))
    for row, ids in enumerate(token_ids):
        movable = np.flatnonzero(~np.isin(ids, fixed_ids))
        permutations[row, movable] = rng.permutation(movable)
    return permutations


def permute(values: np.ndarray, permutations: np.ndarray) -> np.ndarray:
    return np.take_along_axis(values, permutations, axis=1)


def moved_positions(positions: np.ndarray, permutations: np.ndarray) -> np.ndarray:
    """Where each old position ends up after `permute` (for the generator's mask positions)."""
    return np.take_along_axis(np.argsort(permutations, axis=1), positions, axis=1)


def auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve (Mann-Whitney U, ties averaged)."""
    from scipy.stats import rankdata

    labels = np.asarray(labels, bool)
    positives, negatives = labels.sum(), (~labels).sum()
    if positives == 0 or negatives == 0:
        return float("nan")
    ranks = rankdata(scores)
    return float((ranks[labels].sum() - positives * (positives + 1) / 2) / (positives * negatives))


def probe(pretrainer, batches, fixed_ids, seed: int = 0) -> dict[str, dict[str, float]]:
    """{"in order" | "shuffled": {"disc_auc", "masked_lm_accuracy"}} over `batches`."""
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    collected = {"in order": ([], [], []), "shuffled": ([], [], [])}

    def collect(name, labels, disc_logits, padding_mask, generator_logits, batch):
        auc_labels, auc_scores, correct = collected[name]
        real = padding_mask > 0
        auc_labels.append(labels[real])
        auc_scores.append(disc_logits[real])
        used = batch["mask_weights"] > 0
        correct.append((generator_logits.argmax(-1) == batch["mask_ids"])[used])

    for index, batch in enumerate(batches):
        batch = {key: np.asarray(value) for key, value in batch.items()}
        # In order: the training step's own outputs (inference mode).
        outputs = {key: np.asarray(value) for key, value in pretrainer.compute_pretraining_outputs(
            batch, tf.constant([seed, index], tf.int64)).items()
            if key in ("corrupted_ids", "replaced_token_labels", "disc_logits", "mlm_logits")}
        collect("in order", outputs["replaced_token_labels"], outputs["disc_logits"],
                batch["padding_mask"], outputs["mlm_logits"], batch)
        # Shuffled: the same corrupted tokens, labels and masked slots, moved together.
        order = shuffle_permutations(batch["token_ids"], fixed_ids, rng)
        features = {key: permute(batch[key], order) for key in ("token_ids", "segment_ids", "padding_mask")}
        disc_logits = pretrainer.discriminator(
            {**features, "token_ids": permute(outputs["corrupted_ids"], order)})["logits"]
        generator_logits = pretrainer.generator(
            {**features, "mask_positions": moved_positions(batch["mask_positions"], order)})["logits"]
        collect("shuffled", permute(outputs["replaced_token_labels"], order), np.asarray(disc_logits),
                features["padding_mask"], np.asarray(generator_logits), batch)
    return {name: {"disc_auc": auc(np.concatenate(y), np.concatenate(s)),
                   "masked_lm_accuracy": float(np.concatenate(c).mean())}
            for name, (y, s, c) in collected.items()}


@command
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pretrained", required=True, help="a pre-training model_dir")
    parser.add_argument("--data", help="a build_data folder (default: the bundled sample the default run built, "
                        "runs/data/wiki_sample_seq<L>)")
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    from electra_tf.pretraining.restore import restore_pretrainer
    from electra_tf.pretraining.input_pipeline import pretraining_dataset
    from electra_tf.utils.run_dir import bundled_data_dir

    pretrainer, tokenizer, config, checkpoint = restore_pretrainer(args.pretrained)
    data = args.data or str(bundled_data_dir(config.run.max_seq_length))
    batches = pretraining_dataset(data, config, tokenizer, config.run.train_batch_size,
                                  seed=args.seed + 1000).take(args.batches)
    results = probe(pretrainer, batches, [tokenizer.pad_id, tokenizer.cls_id, tokenizer.sep_id],
                    args.seed)
    print(f"{checkpoint} on {args.batches} batches of {data}")
    print(f"{'':10} {'disc AUC':>9} {'MLM accuracy':>13}")
    for name, values in results.items():
        print(f"{name:10} {values['disc_auc']:9.3f} {values['masked_lm_accuracy']:13.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
