"""XLA under a distribution strategy: each replica's forward and backward pass compiled, the
cross-replica work outside.

Keras' `compile(jit_compile=True)` compiles the whole per-replica step with XLA, the
optimizer's update included. On one device that is the fastest step. Under MirroredStrategy
(and MultiWorkerMirroredStrategy) the step also holds the cross-replica gradient sum and the
loss-scale decision, and XLA cannot compile those: measured on one H100 and reproduced on two
logical CPUs, the step fails at once (`CollectiveGatherV2` has no XLA_GPU_JIT kernel; float16's
LossScaleOptimizer calls `merge_call` inside its `cond`; on CPU, a replica's variables are read
from the other device). Keras' own `fit` therefore turns `jit_compile="auto"` off under a
strategy.

Here XLA keeps the model's math. Under a mirrored strategy, `compile(jit_compile=True)`
makes Keras trace a plain step, and that step calls a `tf.function(jit_compile=True)` that
computes one replica's loss and gradients (the forward and backward pass: nearly all of the
FLOPs). What is left outside XLA is what the strategy does anyway in its own runtime: the
gradients' all-reduce (NCCL on GPUs), the loss-scale decision and the optimizer's update
(`optimization.ElectraAdamW`: elementwise work over the moments and the weights). This is the
arrangement of NVIDIA's TF2 ELECTRA (DeepLearningExamples), whose XLA step computes gradients
and leaves Horovod's all-reduce and the update to the runtime.

The split is made for every mirrored strategy, one replica included: MirroredStrategy on one GPU
still reduces through NCCL collectives (TensorFlow picks `CollectiveAllReduce` whenever all its
devices are GPUs, and inside XLA it skips `merge_call` and emits the collective in the compiled
step), so `--strategy mirrored` on one GPU is where the H100's failures were measured. On CPU the
same strategy reduces by `merge_call` instead, which is why one CPU replica never showed them;
the tests switch a CPU strategy to the GPU's path, where the whole-step compile fails with both of
the H100's errors and this split trains (tests/test_compiled_gradients.py).
Only the default strategy and OneDeviceStrategy, which reduce nothing, compile the whole step.

`jit_compile=True` guarantees compilation: a function XLA cannot compile raises instead of
running uncompiled, so a step that trains in this mode did run its gradients through XLA.

One more change under XLA, to the loop rather than the step: Keras' `fit` and `evaluate` take
each batch from a tf.data iterator inside an outer `tf.function` that then calls the step. When
that outer graph first runs, TensorFlow's graph optimizer (grappler) and function runtime
process it with every function it calls, the XLA step's whole body included (17,686 ops for
ELECTRA-Small), although XLA optimizes its own program afterwards: 5.0-5.4 s before XLA started,
measured on the 2 CPU cores. When Keras compiles the whole step (no reducing strategy), the
models here call the compiled step from Python instead, one batch a call (`XlaStepLoop`): that
wait fell to about 1 s, and the rerun's first step (ELECTRA-Small, 32 x 128, float32, warm
compile cache) from a median of 25.9 s (24.3-30.3, nine processes) to 23.4 s (20.8-28.1, eight)
on that noisy host; later steps unchanged (docs/results.md). Under MirroredStrategy Keras' loop
stays (its distributed batches are Keras' to handle). The step's HLO differs slightly (grappler
no longer rewrites it first), so a cache filled before this change compiles the step once more.
"""

from __future__ import annotations

import keras
import tensorflow as tf
# Private (keras>=3.15,<4 is pinned): Keras' own train_step reports the loss with it.
from keras.src.losses.loss import unscale_loss_for_distribution

from electra_tf.runtime import align_function_names
from electra_tf.traced_steps import step_variables


def strategy_reduces_across_replicas() -> bool:
    """Whether the strategy in scope sums gradients across replicas (any strategy but the default
    and OneDeviceStrategy), however many replicas it has."""
    return tf.distribute.has_strategy() and not isinstance(tf.distribute.get_strategy(),
                                                           tf.distribute.OneDeviceStrategy)


def dense_gradients(gradients):
    """IndexedSlices (embedding lookups) as dense tensors, inside the compiled function: the
    all-reduce is then one dense sum (NCCL on GPUs) instead of a gather of rows and indices,
    and the optimizer's update densifies them anyway (`optimization.ElectraAdamW`)."""
    return [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in gradients]


class CompiledGradients:
    """Mixin for a `keras.Model` (put it before `keras.Model` in the bases).

    `compile(jit_compile=True)` under a mirrored strategy (one replica or several) sets
    `compiles_gradients_only`: Keras then traces its step without XLA, and the step computes the
    loss and gradients through `gradient_function`, a `tf.function(jit_compile=True)`. Without a
    strategy, or under OneDeviceStrategy, nothing changes: Keras compiles the whole step. Keras'
    default `train_step` is split here for the fine-tuning models; `ElectraPretrainer` splits its
    own step the same way.
    """

    compiles_gradients_only = False
    traced_steps = None  # a traced_steps.TracedStepCache, where a caller keeps XLA steps' traces
    _compiled_gradients = None  # the model's one compiled gradients function, once built

    def compile(self, *args, jit_compile="auto", **kwargs):
        self.compiles_gradients_only = jit_compile is True and strategy_reduces_across_replicas()
        self._compiled_gradients = None
        super().compile(*args, jit_compile=False if self.compiles_gradients_only else jit_compile, **kwargs)

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

    def make_predict_function(self, force=False):
        if self.predict_function is None or force:
            super().make_predict_function(force=True)
            if self.jit_compile is True and not self.run_eagerly:
                self.predict_function = _NamedAlike(self.predict_function)
        return self.predict_function

    def _loop(self, step_function, keras_function):
        """Keras' loop function, or `XlaStepLoop` when Keras compiles the whole step with XLA (no
        reducing strategy)."""
        if self.jit_compile is True and not self.run_eagerly:
            return XlaStepLoop(self.distribute_strategy, step_function, keras_function, model=self)
        return keras_function

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
        # Keras' default train_step (backend/tensorflow/trainer.py) with its gradients computed
        # by `_loss_and_gradients`, and the replicas agreeing on float16 overflow.
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        y_pred, loss, gradients = self.gradient_function(self._loss_and_gradients)(x, y, sample_weight)
        batch_size = tf.shape(next(i for i in tf.nest.flatten(x) if i is not None))[0]
        self._loss_tracker.update_state(unscale_loss_for_distribution(loss), sample_weight=batch_size)
        apply_gradients(self.optimizer, gradients, self.trainable_weights)
        return self.compute_metrics(x, y, y_pred, sample_weight=sample_weight)

    def _loss_and_gradients(self, x, y, sample_weight):
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self._compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=True)
            scaled_loss = self.optimizer.scale_loss(loss)
        gradients = dense_gradients(tape.gradient(scaled_loss, self.trainable_weights))
        return y_pred, loss, gradients


class _NamedAlike:
    """Keras' compiled predict function, its trace named alike in a run and its rerun: the
    compile cache keys a program by its function's name, which carries TensorFlow's process-wide
    counter (`runtime.align_function_names`), and a rerun that loads its kept training step
    (traced_steps.py) has traced less before it predicts, so its predict function got another
    name and compiled again (measured: a fine-tuning's rerun added 1 program)."""

    def __init__(self, function):
        self.function, self.aligned = function, False

    def __call__(self, *args, **kwargs):
        if not self.aligned:
            align_function_names()
            self.aligned = True
        return self.function(*args, **kwargs)


class XlaStepLoop:
    """What `fit` / `evaluate` call per batch when XLA compiles the whole step: the step as Keras
    compiles it (`strategy.run(step)` in a `tf.function(jit_compile=True)`), fed from Python
    (module docstring).

    The step is traced from the iterator's element spec before any batch is read, right after
    `runtime.align_function_names`: the compile cache keys the program by its function's name,
    which carries TensorFlow's process-wide counter, and reading a batch first would let the
    input pipeline's threads move that counter differently in a fresh run and in its resume
    (measured: a resumed run's step was named 6 lower and compiled again). Iterators other than
    a local tf.data one (train_on_batch's generator, a distributed dataset's) go to Keras' own
    function. The end of the data is the StopIteration Keras' epoch loop expects.

    Each batch goes to the traced (concrete) function, not through the `tf.function`: the latter
    looks its trace up again at every call, hashing the type of every variable the step captures
    (448 for ELECTRA-Small; 1,250 while the optimizer kept two slots per weight).
    Measured on the 2 CPU cores (docs/results.md, "The host's share of a step"): about 3 ms a
    step of Python; on a GPU the host's work adds to the step's time. When the model's
    `traced_steps` is set (pre-training and fine-tuning runs set it beside the compile cache), the trace is kept
    on disk and a rerun calls the kept one without tracing (traced_steps.py).

    A call runs the model's `steps_per_execution` steps (Keras' `compile` argument; the run's
    `--steps_per_loop`), as Keras' own loop does, and returns the last step's logs. Why several:
    Keras' `fit` reads every call's logs on the host before the next call (on TensorFlow it
    converts them to floats for the callbacks), which waits for the step, so with one step a call
    a GPU idles while the host launches the next step. With several, the calls' batches are first
    copied to the step's device, all of them, and the steps are then launched back to back: an
    eager copy of a host batch waits for the GPU to finish its queued work (docs/results.md, "The
    host's share of a step"), so a copy between launches would hold each launch until the step
    before it has run.
    """

    def __init__(self, strategy, step_function, keras_function, model):
        def one_step_on_data(data):
            return strategy.run(step_function, args=(data,))

        # Without AutoGraph, as Keras' own loop (its `one_step_on_data` is `do_not_convert`): the
        # step traces as it does there, and converting it cost 1.2 s of ELECTRA-Small's tracing.
        self.step = tf.function(one_step_on_data, jit_compile=True, reduce_retracing=True, autograph=False)
        self.keras_function = keras_function
        self.model = model  # whose steps_per_execution a call runs, and traced_steps
        self.step_name = step_function.__name__  # train_step, test_step
        self._traces = []  # (element spec, step: concrete or traced_steps.TracedStep): one per kind of input

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
        return weights[0].value.device if weights else ""  # "": built in the step's first trace

    def traced_step(self, element_spec):
        """The step traced for batches of `element_spec` (traced at the first call for it)."""
        for spec, step in self._traces:
            if spec == element_spec:
                return step
        if not self._traces:  # the first trace: named alike in a run and its resume (above)
            align_function_names()
        cache = getattr(self.model, "traced_steps", None)
        if cache is None:
            step = self.step.get_concrete_function(element_spec)
        else:  # a rerun finds its trace on disk (traced_steps.py)
            build_lazy_state(self.model, element_spec)
            variables = step_variables(self.model)
            key = cache.key(self.step_name, element_spec, variables, self.device)
            step = cache.load(key, variables)
            if step is None:
                concrete = self.step.get_concrete_function(element_spec)
                step = cache.save(key, self.step_name, concrete, variables) or concrete
        self._traces.append((element_spec, step))
        return step


def build_lazy_state(model, element_spec) -> None:
    """Creates the variables Keras would otherwise create inside a step's first trace: the
    optimizer's (its moments) and the compiled metrics' (a fine-tuning model's accuracy). A kept
    trace (traced_steps.py) reads variables found by a walk of the model before the step runs, so
    they must exist by then, in a fresh run and in its rerun alike. Keras builds them this way
    itself when a strategy is set (`_symbolic_build`, private in Keras 3.15: the model and its
    metrics run on symbolic inputs of the batch's shapes, then `optimizer.build`); without one
    it defers them to the trace. Nothing to do for the pre-trainer, which builds its optimizer
    before training and keeps no compiled metrics."""
    optimizer = getattr(model, "optimizer", None)
    metrics = getattr(model, "_compile_metrics", None)
    if (optimizer is not None and not optimizer.built) or (metrics is not None and not metrics.built):
        model._symbolic_build(data_batch=element_spec)  # TensorSpecs serve as its symbolic batch


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
