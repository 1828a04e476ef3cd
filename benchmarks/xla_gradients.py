"""The compiled step's gradients under two sets of XLA flags, variable by variable.

    python benchmarks/xla_gradients.py                    # ELECTRA-Small, batch 128, bfloat16: Triton's GEMMs on vs off
    python benchmarks/xla_gradients.py --precision mixed_float16 --size tiny --batch 32
    python benchmarks/xla_gradients.py --flags "--xla_gpu_autotune_level=0"

Why: on one H200 (2026-11-27) XLA's Triton GEMM fusions made non-finite float16 gradients for
the discriminator's attention query and value kernels, in different layers on each call of the
same batch (`float16_overflow.py`; the runs now turn them off for float16). A kernel that is
wrong without overflowing would not show as a skipped step, and bfloat16, the GPUs' default,
has float32's range. This computes the pre-training step's loss and gradients (compiled, on
`pretrain_step.py`'s synthetic batch, from the same seeded weights and random draws) in two
processes, one with XLA_FLAGS as given and one with `--flags` added (XLA reads its flags once per
process), and prints how far apart they are: the losses, the replaced tokens the generator
sampled, and per network (generator, discriminator, shared embeddings) the largest difference
of a gradient element relative to the network's largest gradient element, with the variables
where it is largest, and any non-finite gradients.

Two programs that differ only in how they compute a matmul round differently, so small
differences are expected; the sampled tokens can also differ where two candidates' noisy
scores are within rounding, and each such token changes the discriminator's labels there. A
kernel that computes the wrong thing shows as differences of the order of the gradients
themselves, or as non-finite values on one side. Compiled and uncompiled steps are not
compared: their random draws differ (the generator's samples and the dropout masks: TensorFlow's
stateless random kernels and XLA's lowering of them give other numbers from one seed).
On a CPU the GPU flags change nothing, and the two processes agree exactly.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def save_gradients(size: str, batch_size: int, precision: str, path: Path) -> None:
    """In this process: the compiled step's loss, sampled tokens and gradients, to `path` (.npz)."""
    import keras
    import numpy as np
    import tensorflow as tf

    from pretrain_step import SIZES, benchmark_inputs, benchmark_session, compiled_pretrainer

    from electra_tf.pretraining.pretrainer import global_loss_counts

    benchmark_session(compile_cache=False)  # each process compiles its own program with its own flags
    keras.utils.set_random_seed(0)  # the same initial weights in both processes
    keras.config.set_dtype_policy(precision)
    config, batch = benchmark_inputs(SIZES[size][0], batch_size)
    pretrainer = compiled_pretrainer(config)
    if precision == "mixed_float16":
        pretrainer.optimizer.dynamic_scale.assign(1.0)  # the gradients themselves, unscaled
    batch = {key: tf.constant(value) for key, value in batch.items()}

    @tf.function(jit_compile=True)
    def loss_and_gradients(batch, seed):
        gradients, outputs = pretrainer._pretraining_gradients(batch, seed, global_loss_counts(batch))
        return outputs["loss"], outputs["sampled_ids"], [tf.cast(gradient, tf.float32) for gradient in gradients]

    loss, sampled, gradients = loss_and_gradients(batch, tf.constant([1, 2], tf.int64))
    names = [variable.path for variable in pretrainer.trainable_variables]
    np.savez(path, loss=loss.numpy(), sampled=sampled.numpy(), names=np.array(names),
             **{f"g{i}": gradient.numpy() for i, gradient in enumerate(gradients)})


def compare(first: Path, second: Path, worst: int = 3) -> dict:
    """Per network, the largest gradient difference relative to the network's largest gradient."""
    import numpy as np

    a, b = np.load(first), np.load(second)
    names = [str(name) for name in a["names"]]
    networks = {}
    for i, name in enumerate(names):
        networks.setdefault(name.split("/")[0], []).append((name, a[f"g{i}"], b[f"g{i}"]))
    rows = []
    for network, entries in networks.items():
        finite = [bool(np.isfinite(x).all() and np.isfinite(y).all()) for _, x, y in entries]
        scale = max([float(np.abs(x).max()) for (_, x, _), ok in zip(entries, finite) if ok] or [0.0]) or 1.0
        differences = sorted(((float(np.abs(y - x).max()) / scale, name)
                              for (name, x, y), ok in zip(entries, finite) if ok), reverse=True)
        rows.append({"network": network, "variables": len(entries), "largest_gradient": scale,
                     "difference": differences[0][0] if differences else float("nan"),
                     "worst": [name for _, name in differences[:worst]],
                     "nonfinite": [name for (name, _, _), ok in zip(entries, finite) if not ok]})
    return {"losses": [float(a["loss"]), float(b["loss"])],
            "sampled_equal": float((a["sampled"] == b["sampled"]).mean()), "networks": rows}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="small", choices=("tiny", "small", "base"))
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--precision", default="mixed_bfloat16", choices=("float32", "mixed_bfloat16", "mixed_float16"))
    parser.add_argument("--flags", default="--xla_gpu_enable_triton_gemm=false",
                        help="XLA_FLAGS added in the second process (default: Triton's GEMMs off)")
    parser.add_argument("--save", type=Path, help=argparse.SUPPRESS)  # a child: compute and save, then exit
    args = parser.parse_args(argv)
    if args.save:
        save_gradients(args.size, args.batch, args.precision, args.save)
        return 0
    from electra_tf.runtime.devices import use_parallel_gpu_compile

    use_parallel_gpu_compile()  # the children's XLA_FLAGS, as the runs compile
    given = os.environ.get("XLA_FLAGS", "")
    print(f"{args.size}, batch {args.batch} x 128, {args.precision}; first XLA_FLAGS: {given}; the second adds "
          f"{args.flags}", flush=True)
    with tempfile.TemporaryDirectory(prefix="xla_gradients_") as folder:
        paths = [Path(folder) / "first.npz", Path(folder) / "second.npz"]
        for path, flags in zip(paths, (given, f"{given} {args.flags}".strip())):
            command = [sys.executable, __file__, "--size", args.size, "--batch", str(args.batch),
                       "--precision", args.precision, "--save", str(path)]
            environ = dict(os.environ, XLA_FLAGS=flags)
            # A persistent cache named there would hand the second process the first one's program.
            environ.pop("TF_XLA_FLAGS", None)
            child = subprocess.run(command, env=environ, capture_output=True, text=True)
            if child.returncode != 0:
                print(f"the process with XLA_FLAGS={flags!r} failed:\n{child.stderr[-3000:]}")
                return 1
        result = compare(*paths)
    print(f"loss: {result['losses'][0]:.6g} and {result['losses'][1]:.6g}; sampled tokens equal: "
          f"{result['sampled_equal']:.1%}")
    print("| network | variables | largest gradient element | largest difference / it | where largest | "
          "non-finite |\n|---|---|---|---|---|---|")
    for row in result["networks"]:
        print(f"| {row['network']} | {row['variables']} | {row['largest_gradient']:.3g} | {row['difference']:.2g} | "
              f"{', '.join(row['worst'])} | {', '.join(row['nonfinite'][:4]) or 'none'} |")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
