"""What the benchmarks share: the host they run on, its matrix-multiply peak, the synthetic
pre-training batch, the step's FLOPs, and transformers' PyTorch ELECTRA wired as the official
pre-training wires it (`TorchElectra`, the peer of the speed and parity benchmarks), which runs
in a process of its own (`TorchPeer`, or transformers_step.py): torch and TensorFlow loaded in
one process can crash it (with torch 2.14's CUDA wheels, building a transformers model after
`import tensorflow` is a segmentation fault, in triton's libraries).

The scripts beside this module are run as `python benchmarks/<name>.py` with electra_tf installed
(`pip install -e .`); Python puts this folder on the path, so they import it as `common`.
"""

from __future__ import annotations

import multiprocessing
import os
import time
import traceback

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

    def __init__(self, config, state_dicts=None, device="cpu"):
        """`state_dicts`: {"discriminator": ..., "generator": ...} of numpy arrays by
        transformers' names (`reference_state_dicts`: our initial weights), copied in (parity);
        None keeps transformers' own initialisation (speed: benchmarks/transformers_step.py)."""
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
        if state_dicts is not None:
            self._load(state_dicts)
        # One embedding module for both networks; the generator's output layer is its table.
        self.generator.electra.embeddings = self.discriminator.electra.embeddings
        self.generator.generator_lm_head.weight = self.discriminator.electra.embeddings.word_embeddings.weight
        self.generator.to(self.device), self.discriminator.to(self.device)  # moves in place: the ties hold
        self.parameters = list({id(p): p for model in (self.generator, self.discriminator)
                                for p in model.parameters()}.values())
        self.named = {id(p): name for model in (self.generator, self.discriminator)
                      for name, p in model.named_parameters()}

    def _load(self, state_dicts):
        for name, model in (("discriminator", self.discriminator), ("generator", self.generator)):
            state = {key: self.torch.from_numpy(np.array(value)) for key, value in state_dicts[name].items()}
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


def reference_state_dicts(config, values_by_ours: dict) -> dict:
    """Our weights (by variable path) as the two transformers models' state dicts, through the
    interop name table."""
    from electra_tf.interop.huggingface import tensors_for
    from electra_tf.models.weight_names import DISCRIMINATOR, GENERATOR, embedding_names, weight_table

    names = weight_table(config.model, config.generator_model)
    return {"discriminator": tensors_for(names, DISCRIMINATOR, values_by_ours),
            "generator": tensors_for(names + embedding_names(GENERATOR), GENERATOR, values_by_ours)}


class TorchPeer:
    """A `TorchElectra` in a spawned process that never imports TensorFlow, trained and asked
    through a pipe: `first_step`, `train`, `evaluate`, `save` (`_PeerSide`'s methods)."""

    def __init__(self, config, state_dicts: dict, seed: int):
        context = multiprocessing.get_context("spawn")
        self.connection, theirs = context.Pipe()
        self.process = context.Process(target=_serve, args=(theirs, config, state_dicts, seed), daemon=True)
        self.process.start()
        self._reply()

    def __getattr__(self, method):
        def call(*args):
            self.connection.send((method, args))
            return self._reply()
        return call

    def _reply(self):
        if not self.connection.poll(3600):
            raise SystemExit("the PyTorch peer did not answer within an hour")
        kind, value = self.connection.recv()
        if kind == "error":
            raise SystemExit(f"the PyTorch peer failed:\n{value}")
        return value

    def close(self) -> None:
        self.connection.send(("stop", ()))
        self.process.join(timeout=30)


class _PeerSide:
    """What a `TorchPeer` does in its own process."""

    def __init__(self, config, state_dicts, seed):
        import torch

        torch.manual_seed(seed)
        self.config = config
        self.reference = TorchElectra(config, state_dicts)
        self.optimizer, self.schedule = self.reference.optimizer(config)
        self.rng = torch.Generator().manual_seed(seed + 7)
        self.eval_rng = torch.Generator().manual_seed(seed + 11)

    def first_step(self, batch, sampled_ids):
        """(MLM loss, RTD loss, gradient norm) of one step, dropout off, with our samples."""
        reference, torch = self.reference, self.reference.torch
        reference.generator.eval(), reference.discriminator.eval()
        mlm, disc, total, _, _, _ = reference.losses(batch, sampled_ids=sampled_ids)
        for p in reference.parameters:
            p.grad = None
        total.backward()
        norm = float(torch.sqrt(sum((p.grad.double() ** 2).sum() for p in reference.parameters if p.grad is not None)))
        reference.generator.train(), reference.discriminator.train()
        for p in reference.parameters:
            p.grad = None
        return {"mlm loss": float(mlm.detach()), "rtd loss": float(disc.detach()), "gradient norm": norm}

    def train(self, batches):
        for batch in batches:
            self.reference.train_step(batch, self.optimizer, self.schedule, self.config.optimizer.clip_global_norm,
                                      rng=self.rng)

    def evaluate(self, batches):
        return self.reference.evaluate(batches, self.eval_rng)

    def save(self, folders: dict):
        for name, folder in folders.items():
            getattr(self.reference, name).save_pretrained(folder)


def _serve(connection, config, state_dicts, seed) -> None:
    try:
        side = _PeerSide(config, state_dicts, seed)
        connection.send(("ok", None))
        while True:
            method, args = connection.recv()
            if method == "stop":
                return
            connection.send(("ok", getattr(side, method)(*args)))
    except Exception:
        connection.send(("error", traceback.format_exc()))


def news_articles(count: int | None = None) -> list[str]:
    """The first `count` of the 300 ABC news articles beside the Wikipedia sample in gensim's test
    data (one article a line): real English that no run here trains on."""
    from electra_tf.data.corpus import embedded_sample_path

    lines = (embedded_sample_path().parent / "lee_background.cor").read_text(encoding="utf-8", errors="replace")
    return [line.strip() for line in lines.splitlines() if line.strip()][:count]
