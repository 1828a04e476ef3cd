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
scale: the loss and its two terms, which of the step's logits (the generator's and the
discriminator's) hold a non-finite value, how many gradient tensors hold one, how many of those
belong to each network (generator, discriminator, the shared embeddings), and the first of them
by name, in the order of the model's variables. A loss that is already non-finite points at the forward
pass; finite outputs with non-finite gradients at every scale point at the backward pass of the
named variables' layers. On a GPU, XLA compiles with the package's parallel compile (as the
runs do) and memory grows as needed; XLA_FLAGS are otherwise taken as given, so the runs' fix is
not applied here unless named.

Found with it (one H200, 2026-11-27): with XLA, 7-13 of the 402 gradients (the discriminator's
attention query and value kernels, other layers in each call) were not finite at every scale;
with `XLA_FLAGS=--xla_gpu_enable_triton_gemm=false` none at scales 1 and 2^-20. float16 runs
under XLA on a GPU now set that flag (`electra_tf.runtime.devices.use_float16_safe_gemms`).
"""

from __future__ import annotations

import argparse
import collections
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

    float_outputs = ("mlm_logits", "disc_logits")

    keras.backend.clear_session()
    keras.config.set_dtype_policy("mixed_float16")
    config, batch = benchmark_inputs(SIZES[size][0], batch_size)
    pretrainer = compiled_pretrainer(config)
    names = [variable.path for variable in pretrainer.trainable_variables]
    batch = {key: tf.constant(value) for key, value in batch.items()}

    @tf.function(jit_compile=xla)
    def loss_and_gradients(batch, seed):
        gradients, outputs = pretrainer._pretraining_gradients(batch, seed, global_loss_counts(batch))
        finite = tf.stack([all_finite(g) for g in gradients])
        outputs_finite = tf.stack([all_finite(outputs[name]) for name in float_outputs])
        return outputs["loss"], outputs["masked_lm_loss"], outputs["disc_loss"], finite, outputs_finite

    rows = []
    for scale in scales:
        pretrainer.optimizer.dynamic_scale.assign(scale)
        loss, mlm, disc, finite, outputs_finite = (
            t.numpy() for t in loss_and_gradients(batch, tf.constant([1, 2], tf.int64)))
        bad = [name for name, ok in zip(names, finite) if not ok]
        rows.append({"scale": scale, "loss": float(loss), "mlm": float(mlm), "disc": float(disc),
                     "outputs_nonfinite": [name for name, ok in zip(float_outputs, outputs_finite) if not ok],
                     "nonfinite": len(bad), "of": len(names), "by_part": count_by_part(bad), "first": bad[:6]})
    keras.config.set_dtype_policy("float32")
    return rows


def all_finite(tensor):
    import tensorflow as tf

    return tf.reduce_all(tf.math.is_finite(tf.cast(tensor, tf.float32)))


def count_by_part(paths: list[str]) -> dict[str, int]:
    """Variable paths -> how many under each top-level layer (generator, discriminator, ...)."""
    return dict(collections.Counter(path.split("/")[0] for path in paths))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="small", choices=("tiny", "small", "base"))
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--xla", nargs="+", default=["off", "on"], choices=["off", "on"])
    args = parser.parse_args(argv)
    from pretrain_step import benchmark_session

    _, gpus = benchmark_session(compile_cache=False)  # before TensorFlow's first compile
    where = "GPU" if gpus else "CPU"
    print(f"{args.size}, batch {args.batch} x 128, mixed_float16, on the {where}")
    print(f"XLA_FLAGS: {os.environ.get('XLA_FLAGS', '')}")
    print("| XLA | loss scale | loss | MLM | RTD | outputs not finite | gradients not finite | by network | "
          "first of them |\n|---|---|---|---|---|---|---|---|---|")
    for xla in args.xla:
        for row in diagnose(args.size, args.batch, xla == "on"):
            print(f"| {xla} | {row['scale']:g} | {row['loss']:.4g} | {row['mlm']:.4g} | {row['disc']:.4g} | "
                  f"{', '.join(row['outputs_nonfinite']) or 'none'} | {row['nonfinite']} of {row['of']} | "
                  f"{', '.join(f'{k} {v}' for k, v in row['by_part'].items())} | {', '.join(row['first'])} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
