"""transformers' PyTorch ELECTRA taking the pre-training step that `pretrain_step.py` times: the
peer its ratio is measured against. Needs the optional extra `.[reference]`.

    python benchmarks/transformers_step.py --preset electra_small --batch 128 --precision mixed_bfloat16
    python benchmarks/pretrain_step.py --sizes small --batch 128 --peer     # both, and the ratio

`pretrain_step.py --peer` runs it in a process of its own (TensorFlow keeps GPU memory and CUDA
libraries of its own) and reads the JSON line it prints last. The step is the official one as
`common.TorchElectra` wires it (checked against ours to 1e-4 by reference_parity.py): the
generator and the discriminator sharing one embedding module, the output layer tied to it,
Gumbel-max sampling, MLM + 50 x RTD, backward, global-norm clipping to 1.0, AdamW (fused on
CUDA) and the warmup-times-decay schedule. Precisions: float32 (TF32 matmuls on a GPU, as
TensorFlow's float32 there), mixed_bfloat16 as bfloat16 autocast, mixed_float16 as float16
autocast with a GradScaler. Eager, as transformers trains by default.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

import common

PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")


def measure(config, batch: dict, precision: str, steps: int, warmup: int, device: str | None = None) -> dict:
    """Times `warmup + steps` updates on one batch (kept on the device); the first step apart."""
    import torch
    import transformers

    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    torch.manual_seed(0)
    started = time.perf_counter()
    reference = common.TorchElectra(config, device=device)
    optimizer, schedule = reference.optimizer(config, fused=device.type == "cuda")
    autocast = {"float32": None, "mixed_bfloat16": torch.bfloat16, "mixed_float16": torch.float16}[precision]
    scaler = torch.amp.GradScaler(device.type) if precision == "mixed_float16" else None
    on_device = {key: reference.ids(value) for key, value in batch.items()}
    times = []
    for _ in range(warmup + steps):
        reference.train_step(on_device, optimizer, schedule, config.optimizer.clip_global_norm, autocast=autocast, scaler=scaler)
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter())
    step = (times[-1] - times[warmup]) / (steps - 1) if steps > 1 else float("nan")
    return {"first_step_s": times[0] - started, "step_s": step,
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU",
            "torch": torch.__version__, "transformers": transformers.__version__}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="electra_small")
    parser.add_argument("--batch", type=int, default=32, help="examples a step (without --batch_file)")
    parser.add_argument("--batch_file", default=None, help="an .npz of the batch's fields (pretrain_step.py writes it)")
    parser.add_argument("--precision", default="float32", choices=PRECISIONS)
    parser.add_argument("--steps", type=int, default=10, help="timed steps (after warm-up)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when there is one)")
    args = parser.parse_args(argv)
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        print("error: the peer needs torch and transformers: pip install -e \".[reference]\"", file=sys.stderr)
        return 2
    from electra_tf.pretraining.config import PretrainingConfig

    if args.batch_file:
        with np.load(args.batch_file) as stored:
            batch = {key: stored[key] for key in stored.files}
    else:
        batch = None
    size = len(batch["token_ids"]) if batch else args.batch
    config = PretrainingConfig.load(args.preset).replace(train_batch_size=size, num_train_steps=10_000, num_warmup_steps=100)
    batch = batch or common.synthetic_batch(config, size)
    print(json.dumps(measure(config, batch, args.precision, args.steps, args.warmup, args.device)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
