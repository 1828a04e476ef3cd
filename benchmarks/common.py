"""What the benchmarks share: the host they run on, its matrix-multiply peak, the synthetic
pre-training batch, the step's FLOPs, and transformers' PyTorch ELECTRA wired as the official
pre-training wires it (`TorchElectra`, the peer of the speed and parity benchmarks).

The scripts beside this module are run as `python benchmarks/<name>.py` with electra_tf installed
(`pip install -e .`); Python puts this folder on the path, so they import it as `common`.
"""

from __future__ import annotations

import os
import time

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

KEYS = ("token_ids", "segment_ids", "padding_mask", "mask_positions", "mask_ids", "mask_weights")
# The sizes the step benchmarks take: (preset, default batch on this size).
SIZES = {"tiny": ("electra_tiny", 32), "small": ("electra_small", 32), "base": ("electra_base", 8)}


def start(compile_cache: bool = True, xla: bool | None = None):
    """TensorFlow started as the commands start it (the compile cache's flags first, as for a run
    whose `--xla` is `xla`; its start-up lines left out), with GPU memory allocated as needed, so
    a PyTorch peer fits beside it. Returns (TensorFlow, the compile cache folder or None, the GPUs)."""
    from electra_tf.runtime.xla import use_compile_cache
    from electra_tf.utils.logs import start_tensorflow

    cache = use_compile_cache(xla=xla) if compile_cache else None
    tf = start_tensorflow()
    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    return tf, cache, gpus


def host() -> str:
    """One line: TensorFlow's version, the CPU count and the GPUs."""
    import tensorflow as tf

    gpus = [tf.config.experimental.get_device_details(gpu).get("device_name", gpu.name)
            for gpu in tf.config.list_physical_devices("GPU")]
    return f"TensorFlow {tf.__version__}, {os.cpu_count()} CPU(s), {', '.join(gpus) or 'no GPU'}"


def matmul_peak(dtype: str = "float32", repeats: int = 10) -> float:
    """This machine's matmul peak through TensorFlow in GFLOP/s: the best of `repeats` square
    products (2048^3 on a CPU; on a GPU 8192^3, ten chained per call so launches do not hide the
    rate)."""
    import tensorflow as tf

    n, chain = (8192, 10) if tf.config.list_physical_devices("GPU") else (2048, 1)
    a = tf.cast(tf.random.normal((n, n)), dtype)
    b = tf.cast(tf.random.normal((n, n)), dtype) / (n ** 0.5)  # keeps a chain's values finite

    @tf.function
    def products(x, y):
        for _ in range(chain):  # each product feeds the next: none can be skipped
            x = tf.linalg.matmul(x, y)
        return tf.reduce_sum(tf.cast(x[:1, :1], tf.float32))

    products(a, b).numpy()
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        products(a, b).numpy()
        best = min(best, time.perf_counter() - started)
    return chain * 2 * n ** 3 / best / 1e9


def benchmark_config(size: str, batch: int | None = None):
    """(config, batch size) of a size at a batch, its schedule long enough that warm-up ends early."""
    from electra_tf.pretraining.config import PretrainingConfig

    preset, default_batch = SIZES[size]
    batch = batch or default_batch
    config = PretrainingConfig.load(preset).replace(train_batch_size=batch, num_train_steps=10_000, num_warmup_steps=100)
    return config, batch


def synthetic_batch(config, batch_size: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Random in-vocabulary ids masked at `num_masked_predictions` random positions (numpy only:
    the PyTorch peer reads it too). A step's cost does not depend on the ids."""
    rng = np.random.default_rng(seed)
    length, slots = config.run.max_seq_length, config.num_masked_predictions
    token_ids = rng.integers(5, config.model.vocab_size, (batch_size, length)).astype(np.int32)
    positions = np.sort(np.stack([rng.choice(np.arange(1, length), slots, replace=False)
                                  for _ in range(batch_size)]), axis=1).astype(np.int32)
    return {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids),
            "padding_mask": np.ones_like(token_ids), "mask_positions": positions,
            "mask_ids": np.take_along_axis(token_ids, positions, axis=1),
            "mask_weights": np.ones_like(positions)}


def training_flops(config, batch: int) -> float:
    """The step's matrix-multiply FLOPs (forward + backward = 3 x forward, a multiply-add 2):
    6 x tokens x the encoders' weights (discriminator, generator, embedding projections) + the
    generator head and tied output layer at the masked positions + the discriminator head +
    attention (QK^T and AV). LayerNorm, GELU, softmax, dropout and the optimizer are the
    memory-bound rest that keeps a step below the peak."""
    def encoder(hidden, intermediate, layers):
        return layers * (4 * hidden * hidden + 2 * hidden * intermediate)

    tokens, length, e = batch * config.run.max_seq_length, config.run.max_seq_length, config.model.embedding_size
    weights = encoder(config.model.hidden_size, config.model.intermediate_size, config.model.num_layers)
    attention = 12 * config.model.num_layers * tokens * length * config.model.hidden_size
    head = 0
    if e != config.model.hidden_size:
        weights += e * config.model.hidden_size
    if config.objective.objective == "electra":
        g = config.generator_model.hidden_size
        weights += encoder(g, config.generator_model.intermediate_size, config.generator_model.num_layers) + (e * g if e != g else 0)
        attention += 12 * config.generator_model.num_layers * tokens * length * g
        head = batch * config.num_masked_predictions * (g * g + g * e + e * config.model.vocab_size)
    return 6 * tokens * weights + 6 * head + 6 * tokens * config.model.hidden_size ** 2 + attention


def markdown_table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve by ranks (ties averaged)."""
    from scipy.stats import rankdata

    positives = labels.sum()
    negatives = len(labels) - positives
    if positives == 0 or negatives == 0:
        return float("nan")
    ranks = rankdata(scores)
    return float((ranks[labels == 1].sum() - positives * (positives + 1) / 2) / (positives * negatives))


class TorchElectra:
    """The reference: transformers' classes wired as the official pre-training wires them."""

    def __init__(self, config, values_by_ours=None, device="cpu"):
        """`values_by_ours`: our initial weights by variable path, copied in (parity); None keeps
        transformers' own initialisation (speed: benchmarks/transformers_step.py)."""
        import torch
        import transformers

        self.torch = torch
        self.device = torch.device(device)
        # Held like our pretrainer holds it, so training and evaluation cannot sample differently.
        self.temperature = config.objective.temperature
        common = dict(vocab_size=config.model.vocab_size, embedding_size=config.model.embedding_size,
                      max_position_embeddings=config.model.max_position_embeddings,
                      type_vocab_size=config.model.type_vocab_size, layer_norm_eps=config.model.layer_norm_epsilon,
                      hidden_act="gelu", hidden_dropout_prob=config.model.dropout,
                      attention_probs_dropout_prob=config.model.dropout)
        self.discriminator = transformers.ElectraForPreTraining(transformers.ElectraConfig(
            hidden_size=config.model.hidden_size, num_hidden_layers=config.model.num_layers,
            num_attention_heads=config.model.num_heads, intermediate_size=config.model.intermediate_size, **common))
        self.generator = transformers.ElectraForMaskedLM(transformers.ElectraConfig(
            hidden_size=config.generator_model.hidden_size, num_hidden_layers=config.generator_model.num_layers,
            num_attention_heads=config.generator_model.num_heads,
            intermediate_size=config.generator_model.intermediate_size, **common))
        if values_by_ours is not None:
            self._load(config, values_by_ours)
        # One embedding module for both networks; the generator's output layer is its table.
        self.generator.electra.embeddings = self.discriminator.electra.embeddings
        self.generator.generator_lm_head.weight = self.discriminator.electra.embeddings.word_embeddings.weight
        self.generator.to(self.device), self.discriminator.to(self.device)  # moves in place: the ties hold
        self.parameters = list({id(p): p for model in (self.generator, self.discriminator)
                                for p in model.parameters()}.values())
        self.named = {id(p): name for model in (self.generator, self.discriminator)
                      for name, p in model.named_parameters()}

    def _load(self, config, values_by_ours):
        from electra_tf.interop.huggingface import tensors_for
        from electra_tf.interop.names import DISCRIMINATOR, GENERATOR, embedding_names, weight_table

        names = weight_table(config)
        for model, which in ((self.discriminator, DISCRIMINATOR), (self.generator, GENERATOR)):
            extra = embedding_names(GENERATOR) if which == GENERATOR else []
            tensors = tensors_for(names + extra, which, values_by_ours)
            state = {key: self.torch.from_numpy(np.array(value)) for key, value in tensors.items()}
            missing, unexpected = model.load_state_dict(state, strict=False)
            assert not unexpected and set(missing) <= {"generator_lm_head.weight"}, (missing, unexpected)

    def ids(self, value):
        """A batch field as int64 on this model's device (a tensor already there is not copied)."""
        torch = self.torch
        value = value if isinstance(value, torch.Tensor) else torch.from_numpy(np.asarray(value))
        return value.to(self.device).long()

    def losses(self, batch, sampled_ids=None, rng=None):
        """(mlm loss, disc loss, total, mlm logits at the slots, disc logits, labels) of one batch."""
        torch = self.torch
        t = {key: self.ids(value) for key, value in batch.items()}
        positions, weights = t["mask_positions"], t["mask_weights"].float()
        hidden = self.generator.electra(t["token_ids"], attention_mask=t["padding_mask"],
                                        token_type_ids=t["segment_ids"]).last_hidden_state
        at_slots = torch.gather(hidden, 1, positions[..., None].expand(-1, -1, hidden.shape[-1]))
        mlm_logits = self.generator.generator_lm_head(self.generator.generator_predictions(at_slots))
        per_slot = torch.nn.functional.cross_entropy(mlm_logits.transpose(1, 2), t["mask_ids"], reduction="none")
        mlm_loss = (per_slot * weights).sum() / weights.sum().clamp(min=1)
        if sampled_ids is None:
            uniform = torch.rand(mlm_logits.shape, generator=rng, device=self.device).clamp(1e-9, 1 - 1e-9)
            gumbel = -torch.log(-torch.log(uniform))
            sampled = (mlm_logits.detach() / self.temperature + gumbel).argmax(-1)
        else:
            sampled = self.ids(sampled_ids)
        original = t["token_ids"].clone()
        original.scatter_(1, positions, torch.where(weights > 0, t["mask_ids"], original.gather(1, positions)))
        corrupted = original.clone()
        corrupted.scatter_(1, positions, torch.where(weights > 0, sampled, original.gather(1, positions)))
        labels = (corrupted != original).float()
        disc_logits = self.discriminator(corrupted, attention_mask=t["padding_mask"],
                                         token_type_ids=t["segment_ids"]).logits
        mask = t["padding_mask"].float()
        per_token = torch.nn.functional.binary_cross_entropy_with_logits(disc_logits, labels, reduction="none")
        disc_loss = (per_token * mask).sum() / mask.sum()
        return mlm_loss, disc_loss, mlm_loss + 50.0 * disc_loss, mlm_logits, disc_logits, labels

    def optimizer(self, config, fused: bool = False):
        """AdamW as ours (no decay on LayerNorm and biases) and the official schedule; `fused`: one
        kernel for the whole update (CUDA), as the speed peer runs it."""
        torch = self.torch
        no_decay = [p for p in self.parameters if "LayerNorm" in self.named[id(p)] or "bias" in self.named[id(p)]]
        decay = [p for p in self.parameters if all(p is not q for q in no_decay)]
        optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": config.optimizer.weight_decay},
                                       {"params": no_decay, "weight_decay": 0.0}],
                                      lr=config.optimizer.learning_rate, eps=config.optimizer.adam_epsilon, betas=(0.9, 0.999),
                                      fused=fused or None)
        warmup, total = config.optimizer.num_warmup_steps, config.run.num_train_steps

        def factor(step):  # the step about to be taken is step + 1 in ours (iterations before apply)
            return max(0.0, 1.0 - step / total) * (min(1.0, step / warmup) if warmup else 1.0)

        return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, factor)

    def train_step(self, batch, optimizer, schedule, clip_norm, rng=None, autocast=None, scaler=None):
        """One update, the official step: the loss, its gradients, global-norm clipping, AdamW, the
        schedule. `autocast`: torch.bfloat16 / torch.float16 for mixed precision; `scaler`: a
        GradScaler (dynamic loss scaling, which float16 needs). Returns the loss, on the device."""
        torch = self.torch
        with torch.autocast(self.device.type, dtype=autocast or torch.bfloat16, enabled=autocast is not None):
            total = self.losses(batch, rng=rng)[2]
        optimizer.zero_grad(set_to_none=True)
        (scaler.scale(total) if scaler else total).backward()
        if scaler:
            scaler.unscale_(optimizer)  # clip the true gradients
        torch.nn.utils.clip_grad_norm_(self.parameters, clip_norm)
        if scaler:
            scaler.step(optimizer)  # skipped when a gradient overflowed, as Keras' LossScaleOptimizer does
            scaler.update()
        else:
            optimizer.step()
        schedule.step()
        return total.detach()

    def evaluate(self, batches, rng):
        torch = self.torch
        self.generator.eval(), self.discriminator.eval()
        correct = slots = 0.0
        scores, labels, losses = [], [], []
        with torch.no_grad():
            for batch in batches:
                _, disc_loss, _, mlm_logits, disc_logits, label = self.losses(batch, rng=rng)
                weights = batch["mask_weights"].astype(bool)
                correct += float((mlm_logits.argmax(-1).cpu().numpy() == batch["mask_ids"])[weights].sum())
                slots += weights.sum()
                real = batch["padding_mask"].astype(bool)
                scores.append(disc_logits.float().cpu().numpy()[real]), labels.append(label.cpu().numpy()[real])
                losses.append(float(disc_loss))
        self.generator.train(), self.discriminator.train()
        return {"masked_lm_accuracy": correct / slots, "disc_auc": auc(np.concatenate(scores), np.concatenate(labels)),
                "disc_loss": float(np.mean(losses))}
