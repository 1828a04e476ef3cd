"""ELECTRA's optimizer: AdamW, no decay on LayerNorm/bias, global-norm clipping, and the
official learning-rate schedule.

Official behaviour (`optimization.py` of google-research/electra) and where we differ:
- schedule: linear decay from the peak to 0 over all training steps, *multiplied* by the
  warmup factor min(1, step / warmup_steps) -> `WarmupLinearDecay` (same formula);
- Adam with decoupled weight decay 0.01, epsilon 1e-6, betas 0.9/0.999; decay skipped for
  variables whose name matches "LayerNorm", "layer_norm" or "bias" -> `ElectraAdamW`, matching
  on the full variable path with the same patterns. Deviation: Keras' Adam applies bias
  correction to the moment estimates, the official optimizer does not; with 10k warmup steps
  the two differ only during the first few thousand steps, where the learning rate is tiny.
  The update's equations are in `ElectraAdamW.update_flat`; the moments of all weights are
  kept in two flat variables (the official optimizer and Keras keep two per weight), which
  changes no value and spares the host work every step (`FlatMomentsOptimizer`).
- layer-wise learning-rate decay for fine-tuning (`layerwise_lr_multiplier`): a variable's
  rate is multiplied by decay ** (head depth - its depth), with depth 0 for the embeddings
  (and embeddings_project), i + 1 for transformer layer i, and the task head at the top.
  The official `_get_layer_lrs` puts the head at depth num_layers + 2, one above the top
  layer's num_layers + 1 it would need, so the top layer gets decay^2 and the embeddings
  decay^(num_layers + 2); upstream acknowledged this as a bug, but the published GLUE
  numbers were made with it. Default `layer_decay_schedule="official"` reproduces it;
  "corrected" gives the top layer decay^1 and the embeddings decay^(num_layers + 1). As in
  the official optimizer, the multiplier scales the weight-decay step too.
- global-norm clipping at 1.0. Deviation: the official TPU code clips each core's gradient
  before the cross-core sum, and Keras' `global_clipnorm` also clips before the cross-replica
  sum; we clip the *summed* gradient, so an update does not depend on the replica count.
  The norm is taken over the flat gradient the update concatenates anyway
  (`clip_flat_gradient`, one reduction and one multiply), not tensor by tensor as TensorFlow's:
  the same norm up to float32 rounding.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re

import keras
import tensorflow as tf

from electra_tf.runtime.config import LAYER_DECAY_SCHEDULES, OptimizerConfig

NO_DECAY_PATTERNS = ("LayerNorm", "layer_norm", "bias")
def layer_depth(path: str, num_layers: int) -> int | None:
    """0 for embedding variables, i + 1 for transformer layer i, None for anything else
    (the task head)."""
    if re.search(r"(^|/)embeddings(_project)?/", path):
        return 0
    match = re.search(r"transformer_layer_(\d+)/", path)
    if match:
        index = int(match.group(1))
        if index >= num_layers:
            raise ValueError(f"{path}: layer {index} but the model has {num_layers} layers.")
        return index + 1
    return None


def layerwise_lr_multiplier(path: str, num_layers: int, decay: float,
                            schedule: str = "official") -> float:
    """The factor on the learning rate of the variable at `path`.

    Example (2 layers, decay 0.5):
    >>> [layerwise_lr_multiplier(p, 2, 0.5) for p in
    ...  ("embeddings/word_embeddings/embeddings", "discriminator/transformer_layer_0/x",
    ...   "discriminator/transformer_layer_1/x", "electra_classifier/task_specific/kernel")]
    [0.0625, 0.125, 0.25, 1.0]
    >>> [layerwise_lr_multiplier(p, 2, 0.5, "corrected") for p in
    ...  ("embeddings/word_embeddings/embeddings", "discriminator/transformer_layer_0/x",
    ...   "discriminator/transformer_layer_1/x", "electra_classifier/task_specific/kernel")]
    [0.125, 0.25, 0.5, 1.0]
    """
    if schedule not in LAYER_DECAY_SCHEDULES:
        raise ValueError(f"layer_decay_schedule must be one of {LAYER_DECAY_SCHEDULES}, got {schedule!r}.")
    head_depth = num_layers + 2 if schedule == "official" else num_layers + 1
    depth = layer_depth(path, num_layers)
    return float(decay ** (head_depth - (head_depth if depth is None else depth)))


@keras.saving.register_keras_serializable(package="electra_tf")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """lr(step) = peak * (1 - min(s, T) / T) ** power * min(1, s / warmup), with s = step - start
    and T = total - start: a phase that starts at step `start_step` (a run's second phase at a
    longer sequence length) warms up and decays over its own steps, as NVIDIA's phase 2 does.

    Example:
    >>> schedule = WarmupLinearDecay(1e-3, total_steps=100, warmup_steps=10)
    >>> [round(float(schedule(s)), 6) for s in (0, 5, 10, 55, 100)]
    [0.0, 0.000475, 0.0009, 0.00045, 0.0]
    >>> phase_2 = WarmupLinearDecay(1e-3, total_steps=200, warmup_steps=10, start_step=100)
    >>> [round(float(phase_2(s)), 6) for s in (100, 105, 110, 155, 200)]
    [0.0, 0.000475, 0.0009, 0.00045, 0.0]
    """

    def __init__(self, peak_learning_rate: float, total_steps: int, warmup_steps: int = 0,
                 power: float = 1.0, start_step: int = 0):
        self.peak_learning_rate = peak_learning_rate
        self.warmup_steps = warmup_steps
        self.power = power
        self.start_step = start_step
        # The end of the schedule is read from a variable, not written into the compiled step
        # as a constant: an extended run (a larger --steps) then traces the same program and
        # loads it from the compile cache instead of compiling it again (minutes on a GPU).
        # Not saved in checkpoints (the config gives it on every start).
        self._total_steps = tf.Variable(float(total_steps), trainable=False, name="schedule_total_steps")

    @property
    def total_steps(self) -> int:
        return int(self._total_steps.numpy())

    def __call__(self, step):
        step = tf.cast(step, tf.float32) - float(self.start_step)
        total = tf.cast(self._total_steps, tf.float32) - float(self.start_step)
        decayed = self.peak_learning_rate * (1.0 - tf.minimum(step, total) / total) ** self.power
        if self.warmup_steps > 0:
            decayed *= tf.minimum(1.0, step / float(self.warmup_steps))
        return decayed

    def get_config(self):
        return {"peak_learning_rate": self.peak_learning_rate, "total_steps": self.total_steps,
                "warmup_steps": self.warmup_steps, "power": self.power, "start_step": self.start_step}


class FlatMomentsOptimizer(keras.optimizers.Optimizer):
    """A Keras optimizer whose two moment estimates for all weights are two flat float32
    variables, updated in one pass, with ELECTRA's weight-decay and clipping rules.

    Why flat: a compiled step takes every variable it reads or updates as an input, and each
    launch of the step looks every one up on the host; two moments per weight tripled that
    count. The update over the concatenated gradient is also one fused pass on a GPU.

    `apply(gradients, variables)` (Keras' public method, which `fit`, the train steps and the
    LossScaleOptimizer call) sums the gradients over replicas, clips the sum to
    `clip_global_norm` and updates every replica's copies through `tf.distribute`'s public
    `extended.update`. Weight decay skips variables whose path matches `no_decay_patterns`; a
    variable's learning rate is scaled by its layer multiplier (`layerwise_lr_multiplier`).
    Subclasses give the update (`update_flat`).
    """

    def __init__(self, learning_rate, weight_decay: float = 0.01, beta_1: float = 0.9, beta_2: float = 0.999,
                 epsilon: float = 1e-6, clip_global_norm: float | None = 1.0, no_decay_patterns=NO_DECAY_PATTERNS,
                 layerwise_lr_decay: float | None = None, num_layers: int | None = None,
                 layer_decay_schedule: str = "official", **kwargs):
        for unsupported in ("clipnorm", "global_clipnorm", "clipvalue", "use_ema", "gradient_accumulation_steps",
                            "loss_scale_factor"):
            if kwargs.get(unsupported):
                raise ValueError(f"{type(self).__name__}: {unsupported} is not supported"
                                 + (" (use clip_global_norm)" if "clip" in unsupported else "") + ".")
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.weight_decay_rate = weight_decay
        self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon
        self.clip_global_norm = clip_global_norm
        self.no_decay_patterns = tuple(no_decay_patterns)
        if layerwise_lr_decay is not None and (num_layers is None or not 0 < layerwise_lr_decay <= 1):
            raise ValueError("layerwise_lr_decay needs num_layers and a value in (0, 1], got "
                             f"{layerwise_lr_decay} with num_layers={num_layers}.")
        if layer_decay_schedule not in LAYER_DECAY_SCHEDULES:
            raise ValueError(f"layer_decay_schedule must be one of {LAYER_DECAY_SCHEDULES}, "
                             f"got {layer_decay_schedule!r}.")
        self.layerwise_lr_decay = layerwise_lr_decay
        self.num_layers = num_layers
        self.layer_decay_schedule = layer_decay_schedule

    def build(self, variables):
        if self.built:
            return
        not_float32 = [v.path for v in variables if v.dtype != "float32"]
        if not_float32:
            raise ValueError(f"{type(self).__name__} keeps float32 moments for float32 weights; {not_float32[:3]} are "
                             "not float32 (mixed precision keeps its weights in float32: use a mixed_* policy).")
        super().build(variables)
        self.built_variables = list(variables)
        self.variable_paths = [v.path for v in variables]
        self.position = {id(variable): index for index, variable in enumerate(variables)}
        self.moment_sizes = [int(math.prod(v.shape)) for v in variables]
        self.decays_weights = [self.weight_decay_rate > 0 and not any(
            re.search(pattern, v.path) for pattern in self.no_decay_patterns) for v in variables]
        self.lr_multipliers = [1.0 if self.layerwise_lr_decay is None else layerwise_lr_multiplier(
            v.path, self.num_layers, self.layerwise_lr_decay, self.layer_decay_schedule) for v in variables]
        self.momentum = self.add_variable((sum(self.moment_sizes),), initializer="zeros", dtype="float32",
                                          name="momentum")
        self.velocity = self.add_variable((sum(self.moment_sizes),), initializer="zeros", dtype="float32",
                                          name="velocity")

    def apply(self, grads, trainable_variables=None):
        variables = list(self.built_variables if trainable_variables is None else trainable_variables)
        if not self.built:
            self.build(variables)
        present = [(self.position[id(v)], g, v) for g, v in zip(grads, variables) if g is not None]
        if present:
            indices, gradients, variables = (list(column) for column in zip(*present))
            gradients = [tf.convert_to_tensor(g) for g in gradients]  # IndexedSlices: dense, as on TPU
            context = tf.distribute.get_replica_context()
            if context is not None and context.num_replicas_in_sync > 1:
                gradients = context.all_reduce(tf.distribute.ReduceOp.SUM, gradients)
            learning_rate = tf.cast(self.learning_rate, tf.float32)
            # Each replica's function gets its own copies of the moments, gradients and weights.
            tf.distribute.get_strategy().extended.update(
                self.momentum.value, functools.partial(self._update, indices=indices),
                args=(self.velocity.value, gradients, [v.value for v in variables], learning_rate), group=False)
        self.iterations.assign_add(1)

    def update_step(self, gradient, variable, learning_rate):
        raise NotImplementedError(f"{type(self).__name__} updates every variable at once (apply).")

    def _update(self, momentum, velocity, gradients, variables, learning_rate, indices):
        flat = {index: tf.reshape(tf.cast(gradient, tf.float32), [-1]) for index, gradient in zip(indices, gradients)}
        gradient = tf.concat([flat[i] if i in flat else tf.zeros([size], tf.float32)
                              for i, size in enumerate(self.moment_sizes)], axis=0)
        if self.clip_global_norm is not None:
            # The summed gradient; the zeros of variables without a gradient add nothing.
            gradient = clip_flat_gradient(gradient, self.clip_global_norm)
        step = tf.cast(self.iterations + 1, tf.float32)
        has_gradient = None
        if len(flat) < len(self.moment_sizes):  # variables without a gradient keep their moments
            has_gradient = tf.repeat([i in flat for i in range(len(self.moment_sizes))], self.moment_sizes)
        updates = self.update_flat(momentum, velocity, gradient, step, learning_rate, indices, variables,
                                   has_gradient)
        for variable, update in zip(variables, updates):
            variable.assign_sub(update)

    def update_flat(self, momentum, velocity, gradient, step, learning_rate, indices, variables, has_gradient):
        """Updates the flat moments from the flat (clipped) `gradient`; returns each variable's
        update, subtracted from it."""
        raise NotImplementedError

    def moments(self, momentum, velocity, gradient, has_gradient):
        """Adam's moment estimates, assigned; returns the new (m, v).
            m <- m + (g - m)(1 - beta1);  v <- v + (g^2 - v)(1 - beta2)"""
        new_momentum = momentum + (gradient - momentum) * (1.0 - self.beta_1)
        new_velocity = velocity + (tf.square(gradient) - velocity) * (1.0 - self.beta_2)
        if has_gradient is not None:
            new_momentum = tf.where(has_gradient, new_momentum, momentum)
            new_velocity = tf.where(has_gradient, new_velocity, velocity)
        momentum.assign(new_momentum)
        velocity.assign(new_velocity)
        return new_momentum, new_velocity

    def decayed_paths(self) -> list[str]:
        """The paths of the variables weight decay applies to (once built)."""
        return [path for path, decays in zip(self.variable_paths, self.decays_weights) if decays]

    def get_config(self):
        config = super().get_config()
        for unused in ("weight_decay", "clipnorm", "global_clipnorm", "clipvalue", "use_ema", "ema_momentum",
                       "ema_overwrite_frequency", "loss_scale_factor", "gradient_accumulation_steps"):
            config.pop(unused, None)
        return {**config, "weight_decay": self.weight_decay_rate, "beta_1": self.beta_1, "beta_2": self.beta_2,
                "epsilon": self.epsilon, "clip_global_norm": self.clip_global_norm,
                "no_decay_patterns": list(self.no_decay_patterns), "layerwise_lr_decay": self.layerwise_lr_decay,
                "num_layers": self.num_layers, "layer_decay_schedule": self.layer_decay_schedule}


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraAdamW(FlatMomentsOptimizer):
    """ELECTRA's AdamW (module docstring): decoupled decay, clipping of the summed gradient.

    Example (one update of a weight of 2, gradient 1, from zero moments: Adam's bias-corrected
    step moves it by the learning rate, decay adds lr x 0.01 x 2):
    >>> import keras
    >>> weight = keras.Variable([2.0], name="kernel")
    >>> optimizer = ElectraAdamW(learning_rate=0.1, clip_global_norm=None)
    >>> optimizer.apply([tf.constant([1.0])], [weight])
    >>> round(float(weight.numpy()[0]), 4)
    1.898
    """

    def update_flat(self, momentum, velocity, gradient, step, learning_rate, indices, variables, has_gradient):
        """Keras' Adam update (TensorFlow's `ResourceApplyAdam`: bias-corrected step size, epsilon
        outside the square root), then decoupled decay of the pre-update weight:
            w <- w - (lr_w * sqrt(1 - beta2^t) / (1 - beta1^t) * m / (sqrt(v) + epsilon) + lr_w * wd * w)
        with lr_w the learning rate times the variable's layer multiplier."""
        new_momentum, new_velocity = self.moments(momentum, velocity, gradient, has_gradient)
        step_size = learning_rate * tf.sqrt(1.0 - tf.pow(self.beta_2, step)) / (1.0 - tf.pow(self.beta_1, step))
        direction = new_momentum / (tf.sqrt(new_velocity) + self.epsilon)
        multipliers = {self.lr_multipliers[index] for index in indices}
        one_rate = multipliers == {1.0}  # pre-training: one step size, applied once to all
        if one_rate:
            direction *= step_size
        direction = tf.split(direction, self.moment_sizes)
        updates = []
        for index, variable in zip(indices, variables):
            multiplier = self.lr_multipliers[index]
            update = tf.reshape(direction[index], variable.shape)
            if not one_rate:
                update *= step_size * multiplier
            if self.decays_weights[index]:
                # Decoupled decay of the pre-update value, scaled like the update, in the same
                # subtraction (the official `param - lr * (adam_update + decay_rate * param)`).
                update += variable * (learning_rate * (self.weight_decay_rate * multiplier))
            updates.append(update)
        return updates


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraLamb(FlatMomentsOptimizer):
    """LAMB (You et al., 2020, "Large Batch Optimization for Deep Learning"), for large effective
    batches: Adam's direction plus decoupled weight decay, scaled per weight by the trust ratio
    ||w|| / ||update||, so every layer moves by a similar fraction of its norm whatever the batch.

    As NVIDIA's TF2 ELECTRA recipe runs it (TensorFlow Addons' LAMB with `--skip_adaptive`):
    variables matching `no_decay_patterns` (LayerNorm, bias) get neither weight decay nor the
    trust ratio; clipping of the summed gradient and the layer multipliers are ELECTRA's, as for
    `ElectraAdamW`. The moments stay flat; the ratio needs each weight's norms, taken per weight.

    Example (one update of a weight [3, 4] with gradient [1, 1], no decay: Adam's direction is
    [1, 1], the trust ratio ||w|| / ||direction|| = 5 / sqrt(2), so the weight moves by
    lr x 5 / sqrt(2) in each coordinate):
    >>> import keras
    >>> weight = keras.Variable([3.0, 4.0], name="kernel")
    >>> optimizer = ElectraLamb(learning_rate=0.01, weight_decay=0.0, clip_global_norm=None)
    >>> optimizer.apply([tf.constant([1.0, 1.0])], [weight])
    >>> [round(float(x), 4) for x in weight.numpy()]
    [2.9646, 3.9646]
    """

    def update_flat(self, momentum, velocity, gradient, step, learning_rate, indices, variables, has_gradient):
        """    m^ = m / (1 - beta1^t),  v^ = v / (1 - beta2^t),  u = m^ / (sqrt(v^) + epsilon) + wd * w
            w <- w - lr_w * r * u,   r = ||w|| / ||u|| (1 if either is 0, or for LayerNorm and bias)
        with lr_w the learning rate times the variable's layer multiplier."""
        new_momentum, new_velocity = self.moments(momentum, velocity, gradient, has_gradient)
        corrected_momentum = new_momentum / (1.0 - tf.pow(self.beta_1, step))
        corrected_velocity = new_velocity / (1.0 - tf.pow(self.beta_2, step))
        direction = tf.split(corrected_momentum / (tf.sqrt(corrected_velocity) + self.epsilon), self.moment_sizes)
        updates = []
        for index, variable in zip(indices, variables):
            update = tf.reshape(direction[index], variable.shape)
            if self.decays_weights[index]:
                update += self.weight_decay_rate * variable
            if not self.skips_adaptation(index):
                weight_norm, update_norm = tf.norm(variable), tf.norm(update)
                ratio = tf.where((weight_norm > 0.0) & (update_norm > 0.0),
                                 weight_norm / tf.maximum(update_norm, 1e-30), 1.0)
                update *= ratio
            updates.append(update * (learning_rate * self.lr_multipliers[index]))
        return updates

    def skips_adaptation(self, index: int) -> bool:
        """No trust ratio for LayerNorm and bias (NVIDIA's `--skip_adaptive`: the decay patterns)."""
        return any(re.search(pattern, self.variable_paths[index]) for pattern in self.no_decay_patterns)


def clip_flat_gradient(gradient, clip_norm: float):
    """`tf.clip_by_global_norm` of the gradients whose concatenation is `gradient` (one flat
    float32 tensor): scaled by clip_norm / max(norm, clip_norm), NaN everywhere when the norm is
    not finite. One reduction instead of one per tensor, and the multiply fuses into the
    moments' update; the norm is summed in another order than TensorFlow's, so it can differ in
    its last bits.

    Example:
    >>> clip_flat_gradient(tf.constant([3.0, 4.0]), 1.0).numpy().tolist()
    [0.6000000238418579, 0.800000011920929]
    """
    with tf.name_scope("clip_by_global_norm"):
        norm = tf.sqrt(tf.reduce_sum(tf.square(gradient)), name="global_norm")
        # As TensorFlow's: min(1 / norm, 1 / clip_norm) keeps gradients under the bound as they
        # are, and adding (norm - norm) makes every gradient NaN when the norm is inf or NaN.
        scale = clip_norm * tf.minimum(1.0 / norm, 1.0 / clip_norm) + (norm - norm)
        return gradient * scale


def create_optimizer(config: OptimizerConfig, total_steps: int, start_step: int = 0) -> FlatMomentsOptimizer:
    """The pre-training optimizer: AdamW with the official hyperparameters by default, or LAMB
    (`optimizer: lamb`), its schedule ending at `total_steps` (warming up from `start_step`,
    a phase's first step)."""
    schedule = WarmupLinearDecay(config.learning_rate, total_steps, config.num_warmup_steps,
                                 power=config.lr_decay_power, start_step=start_step)
    optimizer = ElectraLamb if config.optimizer == "lamb" else ElectraAdamW
    return optimizer(learning_rate=schedule, weight_decay=config.weight_decay, beta_1=config.adam_beta_1,
                     beta_2=config.adam_beta_2, epsilon=config.adam_epsilon, clip_global_norm=config.clip_global_norm)


@dataclasses.dataclass(frozen=True)
class LayerwiseDecay:
    """Fine-tuning's layer-wise learning-rate decay (`layerwise_lr_multiplier`): `decay` per
    layer below the head over `num_layers` layers; decay 1 is none."""

    decay: float
    num_layers: int
    schedule: str = "official"


def create_finetuning_optimizer(learning_rate: float, total_steps: int, layers: LayerwiseDecay,
                                warmup_proportion: float = 0.1, weight_decay: float = 0.01,
                                adam_epsilon: float = 1e-6, clip_global_norm: float | None = 1.0) -> ElectraAdamW:
    """The official fine-tuning optimizer: AdamW, warmup over the first `warmup_proportion`
    of the steps then linear decay to 0, layer-wise learning-rate decay."""
    schedule = WarmupLinearDecay(learning_rate, total_steps, int(round(warmup_proportion * total_steps)))
    return ElectraAdamW(learning_rate=schedule, weight_decay=weight_decay, beta_1=0.9, beta_2=0.999,
                        epsilon=adam_epsilon, clip_global_norm=clip_global_norm,
                        layerwise_lr_decay=layers.decay if layers.decay < 1 else None, num_layers=layers.num_layers,
                        layer_decay_schedule=layers.schedule)


def optimizer_step(model) -> int:
    """The step the model's optimizer has reached (a run's step counter: float16's skipped
    batches do not count), under any strategy."""
    return int(keras.ops.convert_to_numpy(model.optimizer.iterations))


def current_learning_rate(optimizer) -> float:
    """The learning rate the optimizer's next update uses, for logs, computed on the host.

    Why the host: a schedule is a few eager ops on the step counter; on a GPU each would load a
    GPU kernel at its first use in the process (on Hopper, compiled from PTX then), a pause in
    the run's first progress line."""
    with tf.device("/cpu:0"):
        return as_float(optimizer.learning_rate)


def as_float(value) -> float:
    """A Keras or tf variable (a MirroredVariable under a strategy, which float() and int()
    refuse), a schedule's tensor or a number, as a Python float."""
    return float(keras.ops.convert_to_numpy(value))
