"""`ElectraPretrainer`: generator + discriminator trained jointly by a custom `train_step`.

A batch is a dict of int32 tensors produced by the input pipeline (masking already applied):
  token_ids [B, L]       the masked input x^masked
  segment_ids [B, L], padding_mask [B, L]
  mask_positions, mask_ids, mask_weights [B, N]   (see `masking.mask_tokens`)

Per step (equations in `losses.py`): generator logits at the masked slots -> MLM loss;
sample replacements (float32, stop-gradient, temperature); corrupt the input; label
replaced tokens; discriminator logits -> RTD loss; total = gen_weight * MLM + disc_weight * RTD.
With `objective="mlm"` only the first step runs: the BERT-style baseline, which trains a
generator at the discriminator's size so ELECTRA can be compared at equal compute.

Distribution: each loss is a sum over the replica's examples divided by the count over the
*global* batch (an all-reduce of the counts), so the gradients that the optimizer sums over
replicas are exactly the single-device gradients of the global batch, for any replica count.
Every replica folds its replica id into the sampling seed, so replicas draw different samples.
The counts come from the batch alone (masked slots, non-padding tokens), so they are reduced
before the forward pass: under a mirrored strategy with XLA, the forward and backward pass are
one compiled function with no collective inside (`runtime/compiled_step.py`).
"""

from __future__ import annotations

import keras
import tensorflow as tf

from electra_tf.compat import BuiltModelsSkipSymbolicBuild, logs_for_keras_reduction
from electra_tf.models.dropout import RNG_ALGORITHM
from electra_tf.models.embeddings import ElectraEmbeddings, GradientDisentangledEmbeddings
from electra_tf.models.encoders import Discriminator, Generator
from electra_tf.pretraining import losses
from electra_tf.pretraining.config import PretrainingConfig
from electra_tf.runtime.accumulation import accumulate_gradients
from electra_tf.runtime.compiled_step import CompiledGradients, apply_gradients, dense_gradients
from electra_tf.runtime.optimizer import create_optimizer

BATCH_KEYS = ("token_ids", "segment_ids", "padding_mask", "mask_positions", "mask_ids",
              "mask_weights")
MLM_METRICS = ("masked_lm_loss", "masked_lm_accuracy")
ELECTRA_METRICS = ("sampled_masked_lm_accuracy", "disc_loss", "disc_accuracy", "disc_precision",
                   "disc_recall", "disc_auc")


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraPretrainer(BuiltModelsSkipSymbolicBuild, CompiledGradients, keras.Model):
    """Joint ELECTRA pre-training of `generator` and `discriminator`.

    Example (a real, if tiny, training step):
    >>> from electra_tf.pretraining.config import PretrainingConfig
    >>> from electra_tf.pretraining.synthetic import masked_batch
    >>> config = PretrainingConfig.load("electra_tiny", {"num_layers": 1, "vocab_size": 50})
    >>> pretrainer = ElectraPretrainer.from_pretraining_config(config)
    >>> pretrainer.compile(optimizer=pretraining_optimizer(config))
    >>> logs = pretrainer.train_on_batch(masked_batch(config, batch_size=2), return_dict=True)
    >>> sorted(logs)
    ['disc_accuracy', 'disc_auc', 'disc_loss', 'disc_precision', 'disc_recall', 'loss', \
'masked_lm_accuracy', 'masked_lm_loss', 'sampled_masked_lm_accuracy']
    """

    def __init__(self, generator: Generator, discriminator: Discriminator | None = None,
                 objective: str = "electra", gen_weight: float = 1.0, disc_weight: float = 50.0,
                 temperature: float = 1.0, disallow_correct: bool = False, seed: int = 0,
                 **kwargs):
        kwargs.setdefault("name", "electra_pretrainer")
        super().__init__(**kwargs)
        if objective not in ("electra", "mlm"):
            raise ValueError(f"objective must be 'electra' or 'mlm', got {objective!r}.")
        if objective == "electra" and discriminator is None:
            raise ValueError("objective='electra' needs a discriminator.")
        self.generator = generator
        self.discriminator = discriminator if objective == "electra" else None
        self.objective = objective
        self.gen_weight = gen_weight
        self.disc_weight = disc_weight
        self.temperature = temperature
        self.disallow_correct = disallow_correct
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed, name="sampling_seed")
        self._trackers = _make_trackers(objective)
        self.built = True

    @classmethod
    def from_pretraining_config(cls, config: PretrainingConfig) -> "ElectraPretrainer":
        """Builds both networks with one shared embedding layer (or untied, as configured)."""
        objective = config.objective
        embeddings = ElectraEmbeddings.from_model_config(config.model)
        generator_model = config.generator_model
        discriminator = None
        generator_embeddings = embeddings
        if objective.objective == "electra":
            sharing = objective.sharing
            discriminator = Discriminator.from_model_config(
                config.model, GradientDisentangledEmbeddings(embeddings) if sharing == "gdes" else embeddings)
            if sharing == "untied":
                # Official: an untied generator gets its own embeddings, as wide as its hidden size.
                generator_embeddings = ElectraEmbeddings.from_model_config(
                    config.model, embedding_size=generator_model.hidden_size, name="generator_embeddings")
        generator = Generator.from_model_config(generator_model, generator_embeddings)
        return cls(generator, discriminator, objective=objective.objective, gen_weight=objective.gen_weight,
                   disc_weight=objective.disc_weight, temperature=objective.temperature,
                   disallow_correct=objective.disallow_correct, seed=config.run.seed)

    def standalone_discriminator(self) -> Discriminator:
        """The discriminator as a model of its own, what a run saves and exports: itself, or under
        GDES a copy whose embeddings hold the summed tables (`GradientDisentangledEmbeddings.merged`)."""
        embeddings = self.discriminator.embeddings
        if not isinstance(embeddings, GradientDisentangledEmbeddings):
            return self.discriminator
        config = {key: value for key, value in self.discriminator.get_config().items() if key != "embeddings"}
        standalone = Discriminator(embeddings.merged(), **config)
        for target, source in ((standalone.embeddings_project, self.discriminator.embeddings_project),
                               *zip(standalone.transformer_layers, self.discriminator.transformer_layers),
                               (standalone.head, self.discriminator.head)):
            if source is not None:
                target.set_weights(source.get_weights())
        return standalone

    # --- the step -------------------------------------------------------------------------------
    def compute_pretraining_outputs(self, batch, seed, training=False, global_counts=None):
        """All of one step's tensors: losses (this replica's share), samples, labels, logits.

        `global_counts`: `global_loss_counts(batch)`, when the caller reduced them already."""
        _check_batch(batch)
        if global_counts is None:
            global_counts = global_loss_counts(batch)
        generator_outputs = self.generator(batch, training=training)
        mlm_logits = generator_outputs["logits"]
        mlm_sum, mlm_count = losses.masked_lm_loss(
            mlm_logits, batch["mask_ids"], batch["mask_weights"])
        outputs = {"mlm_logits": mlm_logits, "local_mlm_loss": (mlm_sum, mlm_count),
                   "masked_lm_loss": mlm_sum / global_counts["masked_lm"]}
        if self.objective == "mlm":
            outputs["loss"] = losses.electra_loss(outputs["masked_lm_loss"], gen_weight=self.gen_weight)
            return outputs

        sampled_ids = losses.sample_replacements(
            mlm_logits, seed, self.temperature,
            disallow_ids=batch["mask_ids"] if self.disallow_correct else None, method=self.sampling_method())
        corrupted_ids = losses.corrupt_tokens(
            batch["token_ids"], batch["mask_positions"], sampled_ids, batch["mask_weights"])
        labels = losses.replaced_token_labels(
            batch["mask_ids"], sampled_ids, batch["mask_positions"], batch["mask_weights"],
            batch["token_ids"])
        disc_logits = self.discriminator(
            {"token_ids": corrupted_ids, "segment_ids": batch["segment_ids"],
             "padding_mask": batch["padding_mask"]}, training=training)["logits"]
        disc_sum, disc_count = losses.replaced_token_detection_loss(
            disc_logits, labels, batch["padding_mask"])
        outputs.update(
            sampled_ids=sampled_ids, corrupted_ids=corrupted_ids, replaced_token_labels=labels,
            disc_logits=disc_logits, local_disc_loss=(disc_sum, disc_count),
            disc_loss=disc_sum / global_counts["tokens"])
        outputs["loss"] = losses.electra_loss(
            outputs["masked_lm_loss"], outputs["disc_loss"], self.gen_weight, self.disc_weight)
        return outputs

    def sampling_method(self) -> str:
        """How the generator's samples are drawn (`losses.sample_replacements`): TensorFlow's
        categorical sampler in a step XLA compiles, the inverse-CDF search in a step run by
        TensorFlow's kernels (the CPU default), where it costs less."""
        return "categorical" if self.compiles_with_xla else "inverse_cdf"

    def train_step(self, data):
        data, _, _ = keras.utils.unpack_x_y_sample_weight(data)  # no labels: they are made here
        _check_batch(data)
        # Seed and counts first: both are cross-replica (a replica id, an all-reduce), so they
        # stay out of the gradients' function, which XLA compiles alone under a mirrored strategy.
        # The counts are the whole update's, over its micro-batches too (`accumulation.py`).
        gradients, statistics = self.gradient_function(self._pretraining_gradients)(
            data, self._next_seed(), global_loss_counts(data))
        apply_gradients(self.optimizer, gradients, self.trainable_variables)
        return logs_for_keras_reduction(self._update_metrics(statistics))

    def _pretraining_gradients(self, data, seed, global_counts):
        """(gradients, metric statistics) of the update's batch: in one pass, or summed over
        `gradient_accumulation_steps` micro-batches, each sampling with its own seed."""
        if self.gradient_accumulation_steps == 1:
            return self._micro_batch_gradients(data, seed, global_counts)

        def micro_batch(batch, index):
            gradients, statistics = self._micro_batch_gradients(
                batch, tf.random.experimental.stateless_fold_in(seed, tf.cast(index, tf.int64), alg=RNG_ALGORITHM),
                global_counts)
            return gradients, *_split_statistics(statistics)

        gradients, per_example, totals = accumulate_gradients(
            micro_batch, data, self.gradient_accumulation_steps, self.trainable_variables,
            signature=_statistics_signature(data, self.objective))
        return gradients, {**per_example, **totals}

    def _micro_batch_gradients(self, data, seed, global_counts):
        with tf.GradientTape() as tape:
            outputs = self.compute_pretraining_outputs(data, seed, training=True, global_counts=global_counts)
            scaled_loss = self.optimizer.scale_loss(outputs["loss"])
        return dense_gradients(tape.gradient(scaled_loss, self.trainable_variables)), _statistics(data, outputs)

    def test_step(self, data):
        data, _, _ = keras.utils.unpack_x_y_sample_weight(data)
        outputs = self.compute_pretraining_outputs(data, self._next_seed(), training=False)
        return logs_for_keras_reduction(self._update_metrics(_statistics(data, outputs)))

    def call(self, inputs, training=False):
        return self.compute_pretraining_outputs(inputs, self._next_seed(), training=training)

    def _next_seed(self):
        seed = tf.cast(self.seed_generator.next(), tf.int64)
        replica_id = tf.distribute.get_replica_context().replica_id_in_sync_group
        return tf.random.experimental.stateless_fold_in(
            seed, tf.cast(replica_id, tf.int64), alg=RNG_ALGORITHM)

    # --- metrics --------------------------------------------------------------------------------
    @property
    def metrics(self):
        return list(self._trackers.values())

    def _update_metrics(self, statistics):
        # Every replica feeds its trackers the *global* batch (summed scalars, gathered
        # per-token vectors), so the results Keras averages over replicas are all the same
        # global value: reported metrics match a single-device run exactly.
        t = self._trackers
        slot_weights = _gather(statistics["mask_weights"])
        _update_mean(t["masked_lm_loss"], statistics["mlm_loss_sum"], statistics["mlm_loss_count"])
        t["masked_lm_accuracy"].update_state(_gather(statistics["mlm_correct"]), slot_weights)
        if self.objective == "electra":
            t["sampled_masked_lm_accuracy"].update_state(_gather(statistics["sample_correct"]), slot_weights)
            _update_mean(t["disc_loss"], statistics["disc_loss_sum"], statistics["disc_loss_count"])
            token_weights = _gather(statistics["token_weights"])
            labels, probabilities = _gather(statistics["replaced"]), _gather(statistics["disc_probability"])
            for name in ("disc_accuracy", "disc_precision", "disc_recall", "disc_auc"):
                t[name].update_state(labels, probabilities, sample_weight=token_weights)
        return self.metric_results()

    def metric_results(self):
        results = {name: tracker.result() for name, tracker in self._trackers.items()}
        results["loss"] = losses.electra_loss(results["masked_lm_loss"], results.get("disc_loss"),
                                              self.gen_weight, self.disc_weight)
        return results

    # --- serialization ----------------------------------------------------------------------------
    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "generator": keras.saving.serialize_keras_object(self.generator),
            "discriminator": (keras.saving.serialize_keras_object(self.discriminator)
                              if self.discriminator is not None else None),
            "objective": self.objective,
            "gen_weight": self.gen_weight,
            "disc_weight": self.disc_weight,
            "temperature": self.temperature,
            "disallow_correct": self.disallow_correct,
            "seed": self.seed,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        discriminator = config.pop("discriminator")
        generator_config = dict(config.pop("generator"))
        if discriminator is not None:
            discriminator = keras.saving.deserialize_keras_object(discriminator)
            inner = dict(generator_config["config"])
            # Rebuild the sharing: the generator must get the discriminator's very embedding
            # layer, not a copy, when the saved one was the same layer.
            shared = getattr(discriminator.embeddings, "shared", discriminator.embeddings)  # GDES: the tables it reads
            if inner["embeddings"]["config"]["name"] == shared.name:
                inner["embeddings"] = shared
            generator_config["config"] = inner
        generator = keras.saving.deserialize_keras_object(generator_config)
        return cls(generator, discriminator, **config)


def pretraining_optimizer(config: PretrainingConfig):
    """The optimizer of a pre-training run of `config`: its schedule ends at the run's last
    step and warms up from its phase's first."""
    return create_optimizer(config.optimizer, config.run.num_train_steps, config.run.phase_start_step)


def _make_trackers(objective):
    trackers = {
        "masked_lm_loss": keras.metrics.Mean(name="masked_lm_loss"),
        "masked_lm_accuracy": keras.metrics.Mean(name="masked_lm_accuracy"),
    }
    if objective == "electra":
        trackers.update(
            sampled_masked_lm_accuracy=keras.metrics.Mean(name="sampled_masked_lm_accuracy"),
            disc_loss=keras.metrics.Mean(name="disc_loss"),
            disc_accuracy=keras.metrics.BinaryAccuracy(name="disc_accuracy", threshold=0.5),
            disc_precision=keras.metrics.Precision(name="disc_precision", thresholds=0.5),
            disc_recall=keras.metrics.Recall(name="disc_recall", thresholds=0.5),
            disc_auc=keras.metrics.AUC(name="disc_auc", num_thresholds=200),
        )
    return trackers


# What the metrics read from a step, float32: per example ([batch, slots] or [batch, tokens]) and
# summed (the losses' local sums and counts). Small, so a compiled gradients function returns
# them rather than the [batch, slots, vocabulary] logits, and micro-batches' are concatenated.
_PER_SLOT = ("mask_weights", "mlm_correct", "sample_correct")
_PER_TOKEN = ("token_weights", "replaced", "disc_probability")
_TOTALS = ("mlm_loss_sum", "mlm_loss_count", "disc_loss_sum", "disc_loss_count")


def _statistics(batch, outputs):
    """The metrics' inputs from one batch's outputs."""
    predicted_ids = tf.argmax(outputs["mlm_logits"], axis=-1, output_type=tf.int32)
    statistics = {"mask_weights": tf.cast(batch["mask_weights"], tf.float32),
                  "mlm_correct": tf.cast(tf.equal(predicted_ids, batch["mask_ids"]), tf.float32),
                  "mlm_loss_sum": tf.cast(outputs["local_mlm_loss"][0], tf.float32),
                  "mlm_loss_count": tf.cast(outputs["local_mlm_loss"][1], tf.float32)}
    if "disc_logits" in outputs:
        statistics.update(
            sample_correct=tf.cast(tf.equal(outputs["sampled_ids"], batch["mask_ids"]), tf.float32),
            token_weights=tf.cast(batch["padding_mask"], tf.float32),
            replaced=tf.cast(outputs["replaced_token_labels"], tf.float32),
            disc_probability=tf.cast(tf.sigmoid(outputs["disc_logits"]), tf.float32),
            disc_loss_sum=tf.cast(outputs["local_disc_loss"][0], tf.float32),
            disc_loss_count=tf.cast(outputs["local_disc_loss"][1], tf.float32))
    return statistics


def _split_statistics(statistics):
    """(per-example statistics, summed statistics)."""
    return ({k: v for k, v in statistics.items() if k not in _TOTALS},
            {k: v for k, v in statistics.items() if k in _TOTALS})


def _statistics_signature(batch, objective: str):
    """`accumulation.accumulate_gradients`' signature of `_statistics`: one example's and the sums'."""
    slots, tokens = batch["mask_weights"].shape[1:], batch["padding_mask"].shape[1:]
    per_example = {k: tf.TensorSpec(slots, tf.float32) for k in _PER_SLOT}
    per_example.update({k: tf.TensorSpec(tokens, tf.float32) for k in _PER_TOKEN})
    totals = {k: tf.TensorSpec([], tf.float32) for k in _TOTALS}
    if objective == "mlm":
        per_example = {k: v for k, v in per_example.items() if k in ("mask_weights", "mlm_correct")}
        totals = {k: v for k, v in totals.items() if k.startswith("mlm")}
    return per_example, totals


def _update_mean(tracker, total, count):
    """Adds the global mean, weighted by the global count, to a Mean tracker."""
    total, count = _sum_over_replicas(total), _sum_over_replicas(count)
    tracker.update_state(total / tf.maximum(count, 1.0), sample_weight=count)


def global_loss_counts(batch):
    """The two losses' denominators (`losses.masked_slot_count`, `losses.token_count`) summed
    over all replicas in one all-reduce (at least 1)."""
    counts = tf.stack([losses.masked_slot_count(batch["mask_weights"]), losses.token_count(batch["padding_mask"])])
    counts = tf.maximum(_sum_over_replicas(counts), 1.0)
    return {"masked_lm": counts[0], "tokens": counts[1]}


def _sum_over_replicas(value):
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return value
    return context.all_reduce(tf.distribute.ReduceOp.SUM, value)


def _gather(values):
    """Flattens `values` and concatenates them over replicas (a no-op on one replica)."""
    flat = tf.reshape(values, [-1])
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return flat
    return context.all_gather(flat, axis=0)


def _check_batch(batch):
    if not isinstance(batch, dict):
        raise TypeError(f"ElectraPretrainer expects a dict batch with keys {BATCH_KEYS}, "
                        f"got {type(batch).__name__}.")
    missing = [key for key in BATCH_KEYS if key not in batch]
    if missing:
        raise KeyError(f"ElectraPretrainer batch is missing {missing}; it has {sorted(batch)}. "
                       "Build batches with electra_tf.pretraining.masking.mask_tokens (or the data pipeline).")
