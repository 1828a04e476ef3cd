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
  The update's equations are in `ElectraAdamW._adam_update`; the moments of all weights are
  kept in two flat variables (the official optimizer and Keras keep two per weight), which
  changes no value and spares the host work every step (that method's docstring).
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

import functools
import math
import re

import keras
import tensorflow as tf

from electra_tf.config import ElectraConfig

NO_DECAY_PATTERNS = ("LayerNorm", "layer_norm", "bias")
LAYER_DECAY_SCHEDULES = ("official", "corrected")


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
    """lr(step) = peak * (1 - min(step, total) / total) ** power * min(1, step / warmup).

    Example:
    >>> schedule = WarmupLinearDecay(1e-3, total_steps=100, warmup_steps=10)
    >>> [round(float(schedule(s)), 6) for s in (0, 5, 10, 55, 100)]
    [0.0, 0.000475, 0.0009, 0.00045, 0.0]
    """

    def __init__(self, peak_learning_rate: float, total_steps: int, warmup_steps: int = 0,
                 power: float = 1.0):
        self.peak_learning_rate = peak_learning_rate
        self.warmup_steps = warmup_steps
        self.power = power
        # The end of the schedule is read from a variable, not written into the compiled step
        # as a constant: an extended run (a larger --steps) then traces the same program and
        # loads it from the compile cache instead of compiling it again (minutes on a GPU).
        # Not saved in checkpoints (the config gives it on every start).
        self._total_steps = tf.Variable(float(total_steps), trainable=False, name="schedule_total_steps")

    @property
    def total_steps(self) -> int:
        return int(self._total_steps.numpy())

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        total = tf.cast(self._total_steps, tf.float32)
        decayed = self.peak_learning_rate * (1.0 - tf.minimum(step, total) / total) ** self.power
        if self.warmup_steps > 0:
            decayed *= tf.minimum(1.0, step / float(self.warmup_steps))
        return decayed

    def get_config(self):
        return {"peak_learning_rate": self.peak_learning_rate, "total_steps": self.total_steps,
                "warmup_steps": self.warmup_steps, "power": self.power}


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraAdamW(keras.optimizers.AdamW):
    """AdamW that skips decay by variable-path pattern and clips the cross-replica sum.

    The update of all weights at once (clipping included) overrides a private method of Keras'
    TensorFlow optimizer (keras>=3.15,<4, pinned in setup.py); tests/test_optimization.py checks
    the update against keras.optimizers.AdamW over several steps, clipped and not, and the
    clipping of a sum over replicas.
    """

    def __init__(self, *args, clip_global_norm: float | None = 1.0,
                 no_decay_patterns=NO_DECAY_PATTERNS, layerwise_lr_decay: float | None = None,
                 num_layers: int | None = None, layer_decay_schedule: str = "official", **kwargs):
        for unsupported in ("clipnorm", "global_clipnorm", "clipvalue"):
            if kwargs.get(unsupported) is not None:
                raise ValueError(f"ElectraAdamW: use clip_global_norm, not {unsupported}.")
        super().__init__(*args, **kwargs)
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
        if self.amsgrad:
            raise ValueError("ElectraAdamW: amsgrad is not supported (the official optimizer has none).")
        float32 = [v.path for v in variables if v.dtype != "float32"]
        if float32:
            raise ValueError(f"ElectraAdamW keeps float32 moments for float32 weights; {float32[:3]} are not "
                             "float32 (mixed precision keeps its weights in float32: use a mixed_* policy).")
        # Decided once, on the Keras variables' full paths; the update later sees unwrapped
        # tf.Variables, which Keras matches by key.
        self.exclude_from_weight_decay(var_list=[
            v for v in variables
            if any(re.search(pattern, v.path) for pattern in self.no_decay_patterns)])
        self.lr_multipliers = [1.0 if self.layerwise_lr_decay is None else layerwise_lr_multiplier(
            v.path, self.num_layers, self.layerwise_lr_decay, self.layer_decay_schedule)
            for v in variables]
        # Keras' Adam.build would add two slot variables per weight (`_momentums`, `_velocities`);
        # here the optimizer's own build, then both moments as one flat variable each.
        super(keras.optimizers.Adam, self).build(variables)
        self.moment_sizes = [int(math.prod(v.shape)) for v in variables]
        self.decays_weights = [self._use_weight_decay(v) for v in variables]
        self.momentum = self.add_variable((sum(self.moment_sizes),), initializer="zeros", dtype="float32",
                                          name="momentum")
        self.velocity = self.add_variable((sum(self.moment_sizes),), initializer="zeros", dtype="float32",
                                          name="velocity")

    def _apply_weight_decay(self, variables):
        # Applied in the update instead, where the variable's layer multiplier is known.
        return

    def update_step(self, gradient, variable, learning_rate):
        raise NotImplementedError("ElectraAdamW updates every variable at once (_distributed_tf_update_step).")

    def _distributed_tf_update_step(self, distribution, grads_and_vars, learning_rate):
        # Overrides a private method of Keras' TensorFlow optimizer (like the clipping below),
        # which updates one variable at a time: here all of them in one update of the flat
        # moments, on each replica's copies (`extended.update` hands each replica's function its
        # own copies of the moments, the gradients and the weights).
        updated = [(self._get_variable_index(var), grad, var) for grad, var in grads_and_vars if grad is not None]
        if not updated:
            return
        indices, gradients, variables = (list(column) for column in zip(*updated))
        distribution.extended.update(
            self.momentum.value, functools.partial(self._adam_update, indices=indices),
            args=(self.velocity.value, gradients, variables, learning_rate), group=False)

    def _adam_update(self, momentum, velocity, gradients, variables, learning_rate, indices):
        """AdamW over all of `variables` (the trainable variables at `indices`), their moments in
        two flat float32 variables. Keras' Adam update, the same formula as TensorFlow's
        `ResourceApplyAdam` (bias-corrected step size, epsilon outside the square root):
            m <- m + (g - m)(1 - beta1);  v <- v + (g^2 - v)(1 - beta2)
            w <- w - (lr_w * sqrt(1 - beta2^t) / (1 - beta1^t) * m / (sqrt(v) + epsilon)
                      + lr_w * wd * w)               (the decay term for decayed variables only)
        with lr_w the learning rate times the variable's layer multiplier, the decay taken from the
        weight before the update (decoupled, as the official optimizer).

        Why flat moments: a compiled step takes every variable it reads or updates as an input,
        and TensorFlow's launch of the step looks each one up, locks it, and hands its buffer to
        XLA, every step, on the host. With two moments per weight, ELECTRA-Small's step had 1,200
        such variables; flat, 400 (docs/results.md, "The host's share of a step"). Checkpoints
        keep the two flat variables (`RunCheckpoint` reads earlier checkpoints' per-variable
        moments into them)."""
        dtype = tf.float32
        step = tf.cast(self.iterations + 1, dtype)
        beta_1, beta_2 = tf.constant(self.beta_1, dtype), tf.constant(self.beta_2, dtype)
        learning_rate = tf.cast(learning_rate, dtype)
        step_size = learning_rate * tf.sqrt(1.0 - tf.pow(beta_2, step)) / (1.0 - tf.pow(beta_1, step))
        # convert_to_tensor: an embedding lookup's gradient may come as IndexedSlices, one row per
        # lookup with repeated indices not yet summed; dense, the norm below is the gradient's (88,
        # not the listed rows' 67, on the tiny preset's first step), as on TPU (one-hot lookups)
        # and in PyTorch. The models' steps densify already (`compiled_gradients.dense_gradients`).
        flat = {index: tf.reshape(tf.cast(tf.convert_to_tensor(gradient), dtype), [-1])
                for index, gradient in zip(indices, gradients)}
        gradient = tf.concat([flat[i] if i in flat else tf.zeros([size], dtype)
                              for i, size in enumerate(self.moment_sizes)], axis=0)
        if self.clip_global_norm is not None:
            # Here, on the summed gradient (`_distributed_tf_update_step` runs after the
            # cross-replica sum), with the zeros of variables without a gradient adding nothing.
            gradient = clip_flat_gradient(gradient, self.clip_global_norm)
        new_momentum = momentum + (gradient - momentum) * (1.0 - beta_1)
        new_velocity = velocity + (tf.square(gradient) - velocity) * (1.0 - beta_2)
        if len(flat) < len(self.moment_sizes):  # variables without a gradient keep their moments
            has_gradient = tf.repeat([i in flat for i in range(len(self.moment_sizes))], self.moment_sizes)
            new_momentum = tf.where(has_gradient, new_momentum, momentum)
            new_velocity = tf.where(has_gradient, new_velocity, velocity)
        momentum.assign(new_momentum)
        velocity.assign(new_velocity)
        direction = new_momentum / (tf.sqrt(new_velocity) + tf.constant(self.epsilon, dtype))
        multipliers = {self.lr_multipliers[index] for index in indices}
        one_rate = multipliers == {1.0}  # pre-training: one step size, applied once to all
        if one_rate:
            direction *= step_size
        direction = tf.split(direction, self.moment_sizes)
        # Each layer multiplier's step size and decay rate, made once (a multiplier of 1 adds no op).
        step_sizes = {m: step_size if m == 1.0 else step_size * m for m in multipliers}
        decay_rates = {m: learning_rate * (self.weight_decay * m) for m in multipliers} if self.weight_decay else {}
        for index, variable in zip(indices, variables):
            multiplier = self.lr_multipliers[index]
            update = tf.reshape(direction[index], variable.shape)
            if not one_rate:
                update *= step_sizes[multiplier]
            if self.weight_decay and self.decays_weights[index]:
                # Decoupled decay of the pre-update value, scaled like the update, in the same
                # subtraction (the official `param - lr * (adam_update + decay_rate * param)`).
                update += variable * decay_rates[multiplier]
            variable.assign_sub(update)

    def get_config(self):
        return {**super().get_config(), "clip_global_norm": self.clip_global_norm,
                "no_decay_patterns": list(self.no_decay_patterns),
                "layerwise_lr_decay": self.layerwise_lr_decay, "num_layers": self.num_layers,
                "layer_decay_schedule": self.layer_decay_schedule}


def clip_flat_gradient(gradient, clip_norm: float):
    """`tf.clip_by_global_norm` of the gradients whose concatenation is `gradient` (one flat
    float32 tensor): scaled by clip_norm / max(norm, clip_norm), NaN everywhere when the norm is
    not finite. The norm is summed in another order than TensorFlow's (one reduction, not one
    per tensor): it can differ in its last bits.

    Why flat: per tensor, the norm of ELECTRA-Small's 402 gradients took 800 of the 4,701
    fusions of its optimized XLA:CPU step, and a multiply per gradient writes each clipped
    gradient out (314 kernels on a GPU) before the update concatenates them. On the flat
    gradient that the update builds anyway, the norm is one reduction and the multiply fuses
    into the moments' update (docs/performance.md).

    Example:
    >>> clip_flat_gradient(tf.constant([3.0, 4.0]), 1.0).numpy().tolist()
    [0.6000000238418579, 0.800000011920929]
    """
    # Named as TensorFlow's, so a profile finds these ops (benchmarks/step_profile.py).
    with tf.name_scope("clip_by_global_norm"):
        norm = tf.sqrt(tf.reduce_sum(tf.square(gradient)), name="global_norm")
        # As TensorFlow's: min(1 / norm, 1 / clip_norm) keeps gradients under the bound as they
        # are, and adding (norm - norm) makes every gradient NaN when the norm is inf or NaN.
        scale = clip_norm * tf.minimum(1.0 / norm, 1.0 / clip_norm) + (norm - norm)
        return gradient * scale


def create_optimizer(config: ElectraConfig) -> ElectraAdamW:
    """The pre-training optimizer for `config` (official hyperparameters by default)."""
    schedule = WarmupLinearDecay(config.learning_rate, config.num_train_steps,
                                 config.num_warmup_steps)
    return ElectraAdamW(learning_rate=schedule, weight_decay=config.weight_decay, beta_1=0.9,
                        beta_2=0.999, epsilon=config.adam_epsilon,
                        clip_global_norm=config.clip_global_norm)


def decayed_variable_paths(optimizer: ElectraAdamW, variables) -> list[str]:
    """The paths of the variables that a built `optimizer` applies weight decay to."""
    return [v.path for v in variables if optimizer._use_weight_decay(v)]


def create_finetuning_optimizer(learning_rate: float, total_steps: int, num_layers: int,
                                warmup_proportion: float = 0.1, layerwise_lr_decay: float | None = 0.8,
                                layer_decay_schedule: str = "official", weight_decay: float = 0.01,
                                adam_epsilon: float = 1e-6, clip_global_norm: float | None = 1.0) -> ElectraAdamW:
    """The official fine-tuning optimizer: AdamW, warmup over the first `warmup_proportion`
    of the steps then linear decay to 0, layer-wise learning-rate decay."""
    schedule = WarmupLinearDecay(learning_rate, total_steps, int(round(warmup_proportion * total_steps)))
    return ElectraAdamW(learning_rate=schedule, weight_decay=weight_decay, beta_1=0.9, beta_2=0.999,
                        epsilon=adam_epsilon, clip_global_norm=clip_global_norm,
                        layerwise_lr_decay=layerwise_lr_decay, num_layers=num_layers,
                        layer_decay_schedule=layer_decay_schedule)


def optimizer_step(model) -> int:
    """The step the model's optimizer has reached (a run's step counter: float16's skipped
    batches do not count), under any strategy."""
    return int(keras.ops.convert_to_numpy(model.optimizer.iterations))


def current_learning_rate(optimizer) -> float:
    """The learning rate the optimizer's next update uses, for logs, computed on the host.

    Why the host: a schedule is a few eager ops (cast, minimum, division, power) on the step
    counter; on a GPU each would load a GPU kernel at its first use in the process, and Hopper
    gets TensorFlow's elementwise kernels as PTX only, compiled then (docs/results.md,
    "TensorFlow's kernels on Hopper"). The suspect in a pre-training run's first progress line
    taking 1.1 s on one H200 (later lines 11-22 ms); unmeasured on a GPU since."""
    with tf.device("/cpu:0"):
        return as_float(optimizer.learning_rate)


def as_float(value) -> float:
    """A Keras or tf variable (a MirroredVariable under a strategy, which float() and int()
    refuse), a schedule's tensor or a number, as a Python float."""
    return float(keras.ops.convert_to_numpy(value))
