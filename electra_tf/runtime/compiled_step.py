"""The training step under XLA, under every strategy, and the loop that feeds it.

On one device (no strategy, or OneDeviceStrategy) Keras' `compile(jit_compile=True)` compiles
the whole step, the optimizer's update included: the fastest step. Under MirroredStrategy and
MultiWorkerMirroredStrategy the step also holds the cross-replica gradient sum and float16's
loss-scale decision, which XLA cannot compile (`CollectiveGatherV2` has no XLA GPU kernel, the
LossScaleOptimizer calls `merge_call` inside its `cond`; on CPU a replica reads another device's
variables), and Keras' own `fit` turns XLA off there. Here XLA keeps the model's maths: the step
is traced without XLA and calls a `tf.function(jit_compile=True)` that computes one replica's
loss and gradients (nearly all the FLOPs); the all-reduce, the loss-scale decision and the
update run outside it, as in NVIDIA's TF2 ELECTRA. The split is made for every mirrored
strategy, one replica included: MirroredStrategy on one GPU still reduces through collectives.
`jit_compile=True` guarantees compilation: a function XLA cannot compile raises rather than
running uncompiled.

When Keras compiles the whole step, `fit` and `evaluate` call it from Python (`XlaStepLoop`), a
batch a call, instead of from Keras' outer `tf.function`: TensorFlow's graph optimizer would
otherwise process that outer graph with the whole step inside it, seconds of start-up that XLA
redoes anyway. Under a mirrored strategy Keras' loop stays (its distributed batches are Keras' to
handle).
"""

from __future__ import annotations

import keras
import tensorflow as tf

from electra_tf.runtime.accumulation import accumulate_gradients, pad_batch


def strategy_reduces_across_replicas() -> bool:
    """Whether the strategy in scope sums gradients across replicas (any strategy but the default
    and OneDeviceStrategy), however many replicas it has."""
    return tf.distribute.has_strategy() and not isinstance(tf.distribute.get_strategy(),
                                                           tf.distribute.OneDeviceStrategy)


def dense_gradients(gradients):
    """IndexedSlices (embedding lookups) as dense tensors, inside the compiled function: the
    all-reduce is then one dense sum (NCCL on GPUs) instead of a gather of rows and indices,
    and the optimizer's update densifies them anyway (`optimizer.ElectraAdamW`)."""
    return [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in gradients]


class CompiledGradients:
    """Mixin for a `keras.Model` (put it before `keras.Model` in the bases).

    `compile(jit_compile=True)` under a mirrored strategy (one replica or several) sets
    `compiles_gradients_only`: Keras then traces its step without XLA, and the step computes the
    loss and gradients through `gradient_function`, a `tf.function(jit_compile=True)`. Without a
    strategy, or under OneDeviceStrategy, Keras compiles the whole step and `XlaStepLoop` feeds
    it. Keras' default `train_step` is split here for the fine-tuning models; `ElectraPretrainer`
    splits its own step the same way.
    """

    compiles_gradients_only = False
    gradient_accumulation_steps = 1  # micro-batches per update (`accumulation.py`)
    _compiled_gradients = None  # the model's one compiled gradients function, once built

    def compile(self, *args, jit_compile="auto", gradient_accumulation_steps: int = 1, **kwargs):
        """Keras' `compile`, and `gradient_accumulation_steps`: K > 1 makes each update from the
        batch `fit` gives a step, split into K micro-batches whose gradients are summed (the
        batch holds K x the micro-batch)."""
        if gradient_accumulation_steps < 1:
            raise ValueError(f"gradient_accumulation_steps must be at least 1, got {gradient_accumulation_steps}.")
        self.gradient_accumulation_steps = gradient_accumulation_steps
        self.compiles_gradients_only = jit_compile is True and strategy_reduces_across_replicas()
        self._compiled_gradients = None
        super().compile(*args, jit_compile=False if self.compiles_gradients_only else jit_compile, **kwargs)
        if self.built and self.optimizer is not None:
            # The optimizer's variables now, not in the first trace of the step: a tf.function
            # that creates variables is traced twice (once creating them, once without), and
            # Keras defers this build to that trace when no strategy is set.
            self.optimizer.build(self.trainable_variables)

    @property
    def compiles_with_xla(self) -> bool:
        """Whether XLA compiles this model's loss and gradients: the whole step (one device),
        or the gradients' function (`compiles_gradients_only`, under a mirrored strategy)."""
        return self.compiles_gradients_only or self.jit_compile is True

    def make_train_function(self, force=False):
        if self.train_function is None or force:
            super().make_train_function(force=True)
            self.train_function = self._loop(self.train_step, self.train_function)
        return self.train_function

    def make_test_function(self, force=False):
        if self.test_function is None or force:
            super().make_test_function(force=True)
            self.test_function = self._loop(self.test_step, self.test_function)
        return self.test_function

    def _loop(self, step_function, keras_function):
        """Keras' loop function, or `XlaStepLoop` when Keras compiles the whole step with XLA (no
        reducing strategy)."""
        if self.jit_compile is True and not self.run_eagerly:
            return XlaStepLoop(self.distribute_strategy, step_function, keras_function, model=self)
        return keras_function

    def trace_steps(self, element_spec, eval_element_spec=None) -> None:
        """Traces the training and evaluation steps for batches of `element_spec` (evaluation:
        `eval_element_spec`, if other) now, not at their first batch. A run calls it before
        anything that differs between a fresh run and its resume (restoring a checkpoint,
        reading data): TensorFlow numbers a function's name
        by the order of tracing, and the compile cache finds a program by that name
        (`xla.py`), so the resumed run's steps then load the fresh run's programs."""
        for loop, spec in ((self.make_train_function(), element_spec),
                           (self.make_test_function(), eval_element_spec or element_spec)):
            if isinstance(loop, XlaStepLoop):
                loop.traced_step(spec)

    def gradient_function(self, function):
        """`function` (the model's loss-and-gradients) compiled on its own when
        `compiles_gradients_only`, else as it is (inside a step Keras compiles whole, or none)."""
        if not self.compiles_gradients_only:
            return function
        if self._compiled_gradients is None:
            # Without AutoGraph, as Keras traces a step (see XlaStepLoop).
            self._compiled_gradients = tf.function(function, jit_compile=True, reduce_retracing=True, autograph=False)
        return self._compiled_gradients

    def train_step(self, data):
        # Keras' default train_step with its gradients computed by `_loss_and_gradients` (in
        # XLA under a mirrored strategy), and the replicas agreeing on float16 overflow.
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        function = self._loss_and_gradients if self.gradient_accumulation_steps == 1 else self._accumulated_gradients
        y_pred, loss, gradients = self.gradient_function(function)(x, y, sample_weight)
        batch_size = tf.shape(next(i for i in tf.nest.flatten(x) if i is not None))[0]
        self.loss_metric.update_state(loss_per_replica_sum(loss), sample_weight=batch_size)
        apply_gradients(self.optimizer, gradients, self.trainable_weights)
        return self.compute_metrics(x, y, y_pred, sample_weight=sample_weight)

    @property
    def loss_metric(self):
        """The mean loss `fit` reports, which `compile` makes (named "loss")."""
        return next(metric for metric in self.metrics if metric.name == "loss")

    def _loss_and_gradients(self, x, y, sample_weight, loss_scale=None):
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=True)
            scaled_loss = self.optimizer.scale_loss(loss if loss_scale is None else loss * tf.cast(loss_scale, loss.dtype))
        gradients = dense_gradients(tape.gradient(scaled_loss, self.trainable_weights))
        return y_pred, loss, gradients

    def _accumulated_gradients(self, x, y, sample_weight):
        """`_loss_and_gradients` of the batch as the sum over K micro-batches. Keras' losses are
        means over the batch's examples (sum_over_batch_size), so a micro-batch's loss counts
        micro / batch of the whole; a last, smaller batch of an epoch is padded with rows of
        weight 0 to K equal micro-batches (equal shapes for XLA), which add nothing."""
        steps = self.gradient_accumulation_steps
        batch_size = tf.shape(next(i for i in tf.nest.flatten(x) if i is not None))[0]
        (x_, y_, weight_), real = pad_batch((x, y, sample_weight), steps)
        micro_size = tf.shape(real)[0] // steps
        share = tf.cast(micro_size, tf.float32) / tf.cast(batch_size, tf.float32)

        def micro_batch(batch, index):
            (x_micro, y_micro, weight_micro), real_micro = batch
            # The padding rows' weight is 0; the real rows keep theirs (or 1).
            weight_micro = real_micro if weight_micro is None else weight_micro * tf.cast(real_micro, weight_micro.dtype)
            y_pred, loss, gradients = self._loss_and_gradients(x_micro, y_micro, weight_micro, loss_scale=share)
            return gradients, y_pred, {"loss": tf.cast(loss, tf.float32) * share}

        gradients, y_pred, totals = accumulate_gradients(
            micro_batch, ((x_, y_, weight_), real), steps, self.trainable_weights)
        y_pred = tf.nest.map_structure(lambda t: t[:batch_size], y_pred)  # without the padding rows
        return y_pred, totals["loss"], gradients


def loss_per_replica_sum(loss):
    """The global batch's mean loss from one replica's share: `compute_loss` divides each
    replica's loss by the replica count, so that the summed gradients are the global batch's."""
    replicas = tf.distribute.get_strategy().num_replicas_in_sync
    return loss * tf.cast(replicas, loss.dtype) if replicas > 1 else loss


class XlaStepLoop:
    """What `fit` / `evaluate` call per batch when XLA compiles the whole step: the step as Keras
    compiles it (`strategy.run(step)` in a `tf.function(jit_compile=True)`), fed from Python
    (module docstring). Iterators other than a local tf.data one (a distributed dataset's) go to
    Keras' own function. The end of the data is the StopIteration Keras' epoch loop expects.

    Each batch goes to the traced (concrete) function, not through the `tf.function`, which
    would look its trace up again at every call, hashing every variable the step captures.

    A call runs the model's `steps_per_execution` steps (the run's `--steps_per_loop`), as
    Keras' own loop does, and returns the last step's logs: Keras reads every call's logs on the
    host before the next call, so with one step a call a GPU idles while the host launches the
    next. With several, the call's batches are first copied to the step's device, all of them,
    and the steps are then launched back to back (an eager copy of a host batch waits for the
    GPU's queued work, so a copy between launches would hold each launch).
    """

    def __init__(self, strategy, step_function, keras_function, model):
        def one_step_on_data(data):
            return strategy.run(step_function, args=(data,))

        # Without AutoGraph, as Keras' own loop traces its step (`do_not_convert`).
        self.step = tf.function(one_step_on_data, jit_compile=True, reduce_retracing=True, autograph=False)
        self.keras_function = keras_function
        self.model = model  # whose steps_per_execution a call runs
        self._traces = []  # (element spec, concrete function): one per kind of input

    def __call__(self, iterator):
        if not isinstance(iterator, tf.data.Iterator):  # a distributed dataset's iterator is not one
            return self.keras_function(iterator)
        step = self.traced_step(iterator.element_spec)
        steps = self.model.steps_per_execution
        if steps == 1:
            return step(next(iterator))
        batches = []
        for _ in range(steps):  # as Keras' loop: the steps the data has left, up to `steps`
            try:
                batches.append(next(iterator))
            except StopIteration:
                break
        if not batches:
            raise StopIteration
        with tf.device(self.device):
            batches = [tf.nest.map_structure(tf.identity, batch) for batch in batches]
        for batch in batches:
            logs = step(batch)
        return logs

    @property
    def device(self) -> str:
        """Where the compiled step runs: a weight's device (the optimizer's int64 step counter
        may be placed on the host)."""
        weights = self.model.trainable_variables
        return weights[0].value.device if weights else ""

    def traced_step(self, element_spec):
        """The step traced for batches of `element_spec` (traced at the first call for it)."""
        for spec, step in self._traces:
            if spec == element_spec:
                return step
        step = self.step.get_concrete_function(element_spec)
        self._traces.append((element_spec, step))
        return step


def apply_gradients(optimizer, gradients, variables):
    """`optimizer.apply`, after the replicas agree on whether a float16 step overflowed."""
    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        gradients = agree_on_finiteness(gradients)
    optimizer.apply(gradients, variables)


def agree_on_finiteness(gradients):
    """Makes every replica's gradients non-finite if any replica's are.

    Keras' LossScaleOptimizer decides to skip a step from the first replica's local gradients,
    before they are summed; an overflow on another replica alone would then be applied. One
    scalar all-reduce makes the decision the same everywhere. No-op on one replica.
    """
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return gradients
    present = [g for g in gradients if g is not None]
    finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(g)) for g in present])
    overflowing = context.all_reduce(tf.distribute.ReduceOp.SUM, 1.0 - tf.cast(finite, tf.float32))
    poison = tf.where(overflowing > 0, float("nan"), 0.0)
    return [None if g is None else g + tf.cast(poison, g.dtype) for g in gradients]
