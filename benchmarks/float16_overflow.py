"""Where float16 gradients overflow: the pre-training step's loss and gradients at several loss
scales, and which variables' gradients are not finite.

    python benchmarks/float16_overflow.py                          # ELECTRA-Small, batch 128, XLA off and on
    python benchmarks/float16_overflow.py --size tiny --batch 32 --xla off

Why: on one H200 (2026-11-26) `benchmarks/pretrain_step.py --sizes small --batch 128
--precisions mixed_float16 --xla on` made no update in 35 steps (dynamic loss scaling skipped
every one, down to a scale of 2^-20), while the tiny preset's runs on the same GPU skipped 0-4
batches, and ELECTRA-Small on 2 CPU cores skipped 4 (batch 128 without XLA, batch 32 with it).
An overflow left at a scale of 2^-20 does not come from the scale. This computes the step's
loss and gradients (`ElectraPretrainer._pretraining_gradients`, as a training step does,
compiled by XLA or not) on `pretrain_step.py`'s synthetic batch at each scale, and prints per
scale: the loss and its two terms, whether each is finite, how many gradient tensors hold a
non-finite value and the first of them by name, in the order of the model's variables. A loss
that is already non-finite points at the forward pass; finite losses with non-finite gradients
at every scale point at the backward pass of the named variables' layers.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

SCALES = (2.0 ** 15, 1.0, 2.0 ** -20)


def diagnose(size: str, batch_size: int, xla: bool, scales=SCALES) -> list[dict]:
    import keras
    import tensorflow as tf

    from pretrain_step import SIZES, benchmark_inputs, compiled_pretrainer

    from electra_tf.pretraining.pretrainer import global_loss_counts

    keras.backend.clear_session()
    keras.config.set_dtype_policy("mixed_float16")
    config, batch = benchmark_inputs(SIZES[size][0], batch_size)
    pretrainer = compiled_pretrainer(config)
    names = [variable.path for variable in pretrainer.trainable_variables]
    batch = {key: tf.constant(value) for key, value in batch.items()}

    @tf.function(jit_compile=xla)
    def loss_and_gradients(batch, seed):
        gradients, outputs = pretrainer._pretraining_gradients(batch, seed, global_loss_counts(batch))
        finite = tf.stack([tf.reduce_all(tf.math.is_finite(tf.cast(g, tf.float32))) for g in gradients])
        return outputs["loss"], outputs["masked_lm_loss"], outputs["disc_loss"], finite

    rows = []
    for scale in scales:
        pretrainer.optimizer.dynamic_scale.assign(scale)
        loss, mlm, disc, finite = (t.numpy() for t in loss_and_gradients(batch, tf.constant([1, 2], tf.int64)))
        bad = [name for name, ok in zip(names, finite) if not ok]
        rows.append({"scale": scale, "loss": float(loss), "mlm": float(mlm), "disc": float(disc),
                     "nonfinite": len(bad), "of": len(names), "first": bad[:3]})
    keras.config.set_dtype_policy("float32")
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="small", choices=("tiny", "small", "base"))
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--xla", nargs="+", default=["off", "on"], choices=["off", "on"])
    args = parser.parse_args(argv)
    import tensorflow as tf

    where = "GPU" if tf.config.list_physical_devices("GPU") else "CPU"
    print(f"{args.size}, batch {args.batch} x 128, mixed_float16, on the {where}")
    print("| XLA | loss scale | loss | MLM | RTD | gradients not finite | first of them |\n|---|---|---|---|---|---|---|")
    for xla in args.xla:
        for row in diagnose(args.size, args.batch, xla == "on"):
            print(f"| {xla} | {row['scale']:g} | {row['loss']:.4g} | {row['mlm']:.4g} | {row['disc']:.4g} | "
                  f"{row['nonfinite']} of {row['of']} | {', '.join(row['first'])} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
