"""How far a keras-hub preset's outputs are from ours: a run's discriminator exported with
`export --format keras_hub`, then keras-hub's ElectraBackbone and our encoder on the same real
text the model never trained on (ABC news articles, gensim's `lee_background.cor`).

    python benchmarks/keras_hub_parity.py --model_dir runs/electra_tiny

Prints, over the real (unpadded) tokens: the largest and mean absolute difference of the hidden
states, beside their RMS; the same for our encoder run with keras-hub's tanh GELU (what is left
when the GELU forms agree); and the largest change in the replaced-token probability when our
replaced-token head reads keras-hub's hidden states instead of ours. See docs/interop.md.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

import common


def packed(tokenizer, texts: list[str], length: int) -> dict:
    rows = tokenizer.tokenize(texts).to_list()
    ids = np.full((len(rows), length), tokenizer.pad_id, "int32")
    for i, row in enumerate(rows):
        row = [tokenizer.cls_id] + row[: length - 2] + [tokenizer.sep_id]
        ids[i, : len(row)] = row
    mask = (ids != tokenizer.pad_id).astype("int32")
    return {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": mask}


def our_outputs(discriminator, batch: dict, tanh_gelu: bool) -> np.ndarray:
    """Our hidden states; with `tanh_gelu`, the transformer layers' GELU in keras-hub's form."""
    from electra_tf.models.transformer import gelu_form

    with gelu_form("tanh" if tanh_gelu else "exact"):
        return discriminator(batch, training=False)["sequence_output"].numpy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model_dir", default="runs/electra_tiny")
    parser.add_argument("--texts", type=int, default=200, help="news articles to run")
    parser.add_argument("--max_seq_length", type=int, default=128)
    args = parser.parse_args()
    common.start(compile_cache=False)  # TensorFlow as the commands start it, quietly
    import keras_hub

    from electra_tf.finetuning.pretrained import load_pretrained
    from electra_tf.interop.keras_hub_presets import write_preset

    ours = load_pretrained(args.model_dir)
    batch = packed(ours.tokenizer, common.news_articles(args.texts), args.max_seq_length)
    with tempfile.TemporaryDirectory() as folder:
        preset = write_preset(ours, Path(folder) / "preset")
        theirs = keras_hub.models.ElectraBackbone.from_preset(str(preset)).predict(batch, batch_size=32, verbose=0)
    real = batch["padding_mask"].astype(bool)
    exact, tanh = (our_outputs(ours.discriminator, batch, tanh_gelu) for tanh_gelu in (False, True))
    head = ours.discriminator.head

    def probability(hidden):
        return 1 / (1 + np.exp(-np.asarray(head(hidden), "float64")))

    print(f"{args.model_dir}: {real.sum():,} tokens of {len(real)} news articles, keras-hub's sequence_output "
          f"against ours (hidden-state RMS {np.sqrt(np.mean(exact[real] ** 2)):.3f})")
    for name, hidden in (("ours (exact GELU)", exact), ("ours with tanh GELU", tanh)):
        difference = np.abs(hidden - theirs["sequence_output"])[real]
        print(f"  {name:20s} max |diff| {difference.max():.2e}  mean |diff| {difference.mean():.2e}")
    change = np.abs(probability(exact) - probability(theirs["sequence_output"]))[real]
    print(f"  replaced-token probability from keras-hub's hidden states: max change {change.max():.2e}, "
          f"mean {change.mean():.2e}")


if __name__ == "__main__":
    main()
