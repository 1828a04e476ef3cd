"""transformers' PyTorch ELECTRA taking the pre-training step that benchmarks/pretrain_step.py
times: the peer its ratio is measured against. Needs the optional extra `.[reference]`.

    python benchmarks/transformers_step.py --preset electra_small --batch 128 --precision mixed_bfloat16
    python benchmarks/pretrain_step.py --sizes small --batch 128 --peer     # both, and the ratio

`pretrain_step.py --peer` runs this in a subprocess and reads the JSON line it prints last:
TensorFlow reserves GPU memory for its own process, and the two frameworks load different CUDA
libraries, so they do not share one.

The step is the official one as `reference_parity.TorchElectra` wires it (checked there against
ours to 1e-4): `ElectraForMaskedLM` + `ElectraForPreTraining` sharing one embedding module, the
output layer tied to it, Gumbel-max sampling, MLM + 50 x RTD, backward, global-norm clipping to
1.0, AdamW (fused on CUDA: one kernel per update) and the warmup-times-decay schedule. The batch
is pretrain_step.py's synthetic masked batch (`--batch_file`, the .npz it writes; without one,
the same synthetic language drawn here), placed on the device once, as the TensorFlow side keeps
its batch in memory. Precisions: float32 (TF32 matmuls on an Ampere-or-later GPU, as
TensorFlow's float32), mixed_bfloat16 -> autocast bfloat16, mixed_float16 -> autocast float16
with a GradScaler (dynamic loss scaling, as Keras' LossScaleOptimizer). Eager, as transformers
trains by default; `--compile` wraps the loss in `torch.compile` (the counterpart of XLA).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")


def synthetic_batch(config, batch_size: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Random in-vocabulary ids masked at num_masked_predictions random positions (no TensorFlow
    here, so not pretrain_step.py's exact batch; the step's cost does not depend on the ids)."""
    rng = np.random.default_rng(seed)
    length, slots = config.max_seq_length, config.num_masked_predictions
    token_ids = rng.integers(5, config.vocab_size, (batch_size, length))
    positions = np.sort(np.stack([rng.choice(np.arange(1, length), slots, replace=False)
                                  for _ in range(batch_size)]), axis=1)
    return {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids),
            "padding_mask": np.ones_like(token_ids), "mask_positions": positions,
            "mask_ids": np.take_along_axis(token_ids, positions, axis=1),
            "mask_weights": np.ones_like(positions)}


def measure(config, batch: dict, precision: str, steps: int, warmup: int, device: str | None = None,
            compile_loss: bool = False) -> dict:
    """Times `warmup + steps` updates of the reference on one batch; like pretrain_step.measure,
    the first step (first use of the kernels, compile with --compile) is reported apart."""
    import torch
    import transformers

    from reference_parity import TorchElectra

    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True  # TensorFlow's float32 on the GPU uses TF32 too
        torch.backends.cudnn.allow_tf32 = True
    torch.manual_seed(0)
    started = time.perf_counter()
    reference = TorchElectra(config, device=device)
    optimizer, schedule = reference.optimizer(config, fused=device.type == "cuda")
    autocast = {"float32": None, "mixed_bfloat16": torch.bfloat16, "mixed_float16": torch.float16}[precision]
    scaler = torch.amp.GradScaler(device.type) if precision == "mixed_float16" else None
    on_device = {key: reference.ids(value) for key, value in batch.items()}
    if compile_loss:
        reference.losses = torch.compile(reference.losses)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    times = []
    for _ in range(warmup + steps):
        reference.train_step(on_device, optimizer, schedule, config.clip_global_norm, autocast=autocast,
                             scaler=scaler)
        sync()
        times.append(time.perf_counter())
    timed = (times[-1] - times[warmup]) / (steps - 1) if steps > 1 else float("nan")
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    return {"first_step_s": times[0] - started, "step_s": timed,
            "tokens_per_s": len(batch["token_ids"]) * config.max_seq_length / timed,
            "device": name, "torch": torch.__version__, "transformers": transformers.__version__,
            "compiled": compile_loss}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="electra_small")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--batch_file", default=None, help="an .npz of the batch's fields (pretrain_step.py's)")
    parser.add_argument("--precision", default="mixed_bfloat16", choices=PRECISIONS)
    parser.add_argument("--steps", type=int, default=20, help="timed steps (after warm-up)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when there is one)")
    parser.add_argument("--compile", action="store_true", help="torch.compile the loss (default: eager)")
    args = parser.parse_args(argv)
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        print("error: the peer needs torch and transformers: pip install -e \".[reference]\"", file=sys.stderr)
        return 2
    from electra_tf.models.config import ElectraConfig

    config = ElectraConfig.load(args.preset).replace(train_batch_size=args.batch, num_train_steps=10_000,
                                                     num_warmup_steps=100)
    if args.batch_file:
        with np.load(args.batch_file) as stored:
            batch = {key: stored[key] for key in stored.files}
    else:
        batch = synthetic_batch(config, args.batch)
    print(json.dumps(measure(config, batch, args.precision, args.steps, args.warmup, args.device, args.compile)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
