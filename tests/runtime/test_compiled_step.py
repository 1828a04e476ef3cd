"""Every runtime combination trains: strategy {one_device, mirrored} x precision {float32,
mixed_bfloat16, mixed_float16} x XLA {on, off}, for pre-training and fine-tuning. Pre-training's
cells accumulate two micro-batches per update (the loop, float16's one skip decision on the sum,
the split under XLA); one batch a step is the path of every other test.

On GPUs, MirroredStrategy failed at the first step in every XLA or float16 cell while the whole
step was compiled; on two logical CPUs the same matrix fails that way, so it catches them
without a GPU. MirroredStrategy over one device with XLA is a cell
too (`--strategy mirrored` on one GPU, where the H100's failures were measured). On GPUs
TensorFlow reduces through collective ops inside XLA, on CPUs through `merge_call`; the
one-replica cells run a CPU strategy switched to the GPU's path (conftest.py,
`one_replica_as_on_a_gpu`), where compiling the whole step fails with the H100's two errors
(`CollectiveReduceV2` in the compiled program, float16's `merge_call`): the last test here shows
both, and that the split trains. The model is as small as the step's structure allows: the
matrix's cost is tracing and XLA's CPU compile, about a second or two per non-XLA cell and
several per XLA cell.
"""

import io
import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf

from electra_tf.pretraining.config import PretrainingConfig
from electra_tf.pretraining.pretrainer import ElectraPretrainer, pretraining_optimizer
from electra_tf.pretraining.synthetic import masked_batch
from electra_tf.runtime.optimizer import LayerwiseDecay, create_finetuning_optimizer
from electra_tf.training.callbacks import ProgressPlan, TrainingMonitor
from electra_tf.training.evaluation import PeriodicEvaluation, numbers
from electra_tf.training.resumable_input import ResumableInput

PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
# One replica, as on a GPU, with XLA: float32 (the collective in the compiled program) and
# float16 (loss scaling's merge_call), the two ways the whole-step compile failed on the H100;
# bfloat16 takes float32's path.
CELLS = (list(itertools.product(("one_device", "mirrored"), PRECISIONS, (False, True)))
         + [("mirrored_one_replica", "float32", True), ("mirrored_one_replica", "mixed_float16", True)])
IDS = [f"{strategy}-{precision}-{'xla' if xla else 'no_xla'}" for strategy, precision, xla in CELLS]
# Under -m slow, with what covers them by default: one device, float32, no XLA is what every
# command run of the suite trains in (tests/test_pretrain.py, tests/test_finetune.py, ...); one
# device in bfloat16 is float32's path with another dtype policy, which the mirrored bfloat16
# cells train in (and one_device float32 XLA compiles the whole step); two replicas in bfloat16
# without XLA likewise (float32's two-replica path, below; bfloat16 in the mirrored XLA cell). Two replicas in float32
# without XLA: tests/pretraining/test_pretrainer.py (one and two replicas, the same update),
# tests/runtime/test_accumulation.py (two replicas accumulating), tests/finetuning/text/test_models.py
# (fine-tuning under two replicas); with XLA, the mirrored bfloat16 XLA cell compiles the same
# per-replica gradients and the one-replica float32 XLA cell the float32 ones.
SLOW_CELLS = {("one_device", "float32", False), ("one_device", "mixed_bfloat16", False),
              ("one_device", "mixed_bfloat16", True), ("mirrored", "float32", False), ("mirrored", "float32", True),
              ("mirrored", "mixed_bfloat16", False)}
EVERY_CELL = [pytest.param(*cell, marks=pytest.mark.slow) if cell in SLOW_CELLS else pytest.param(*cell)
              for cell in CELLS]
BATCHES = 4
UPDATES = 4  # at least, in every cell
# float16 starts at Keras' loss scale 2**15, at which the first steps' gradients overflow and are
# skipped (each halves the scale; 3 of them in the one-device cell): enough batches that updates follow.
FLOAT16_BATCHES = 10


def batches_for(precision):
    return FLOAT16_BATCHES if precision == "mixed_float16" else BATCHES


def small_config():
    return PretrainingConfig.load("electra_tiny", {
        "vocab_size": 60, "num_layers": 1, "hidden_size": 32, "embedding_size": 32, "num_heads": 2,
        "intermediate_size": 64, "max_seq_length": 16, "max_position_embeddings": 16,
        "num_train_steps": 40, "num_warmup_steps": 2})


@pytest.fixture
def strategy_for(request):
    """The cell's strategy by name; the mirrored ones are session fixtures (see conftest.py)."""
    def strategy(name):
        if name == "one_device":
            return tf.distribute.get_strategy()
        fixture = {"mirrored": "two_replicas", "mirrored_one_replica": "one_replica_as_on_a_gpu"}[name]
        return request.getfixturevalue(fixture)
    return strategy


def check_compiled_as_asked(model, strategy, xla):
    """XLA is never dropped quietly: without a strategy Keras compiles the whole step; under
    MirroredStrategy, one replica or several, XLA compiles each replica's gradients
    (jit_compile=True functions raise rather than run uncompiled)."""
    mirrored = isinstance(strategy, tf.distribute.MirroredStrategy)
    assert model.compiles_gradients_only == (xla and mirrored)
    assert bool(model.jit_compile) == (xla and not mirrored)
    if xla and mirrored:
        assert model._compiled_gradients is not None  # the gradients' function was built and ran
    # With the whole step compiled, the loop feeds it batch by batch from Python (no outer tf.function).
    from electra_tf.runtime.compiled_step import XlaStepLoop

    assert isinstance(model.train_function, XlaStepLoop) == (xla and not mirrored)


@pytest.mark.parametrize("strategy_name,precision,xla", EVERY_CELL, ids=IDS)
def test_pretraining_trains_in_every_cell(strategy_name, precision, xla, strategy_for):
    trains_in_cell(strategy_for(strategy_name), precision, xla, small_config())


# DeBERTaV3's gradient-disentangled embedding sharing: one cell by default (its gradients, exports
# and resume are tested in tests/pretraining/test_pretrainer.py and tests/interop), every cell with
# -m slow.
@pytest.mark.parametrize("strategy_name,precision,xla", [
    pytest.param(*cell, marks=() if cell == ("one_device", "float32", False) else pytest.mark.slow)
    for cell in CELLS], ids=IDS)
def test_gdes_pretraining_trains_in_every_cell(strategy_name, precision, xla, strategy_for):
    trains_in_cell(strategy_for(strategy_name), precision, xla, small_config().replace(embedding_sharing="gdes"))


def trains_in_cell(strategy, precision, xla, config):
    keras.config.set_dtype_policy(precision)
    keras.utils.set_random_seed(0)  # the initial weights: each cell's losses are then the same every run
    with strategy.scope():
        pretrainer = ElectraPretrainer.from_pretraining_config(config)
        pretrainer.compile(optimizer=pretraining_optimizer(config), jit_compile=xla, gradient_accumulation_steps=2)
    before = [w.numpy().copy() for w in pretrainer.discriminator.trainable_weights]
    resumable = ResumableInput(tf.data.Dataset.from_tensors(masked_batch(config, 8, seed=1)).repeat())
    # The run's own monitor reads the loss scale and step from (mirrored) variables; every
    # update's loss is one window's.
    batches, losses = batches_for(precision), []
    monitor = TrainingMonitor(tf.summary.create_noop_writer(), ProgressPlan(batches, 8, 1, quiet=True),
                              tokens_through=resumable.tokens_through,
                              observers=[lambda step, metrics: losses.append(metrics["masked_lm_loss"])])
    pretrainer.fit(resumable.dataset(), steps_per_epoch=batches, verbose=0, callbacks=[monitor])
    steps = int(pretrainer.optimizer.iterations.numpy())
    skipped = int(monitor.skipped_steps.numpy())
    assert steps + skipped == batches and steps >= UPDATES
    # Only float16 loss scaling skips, and it does at Keras' initial scale: the monitor counts them.
    assert (skipped > 0) == (precision == "mixed_float16")
    # The same batch again and again: the generator's loss on it falls.
    assert len(losses) == steps and np.isfinite(losses).all() and losses[-1] < losses[0] - 0.01, losses
    after = [w.numpy() for w in pretrainer.discriminator.trainable_weights]
    assert any(not np.array_equal(a, b) for a, b in zip(after, before))
    check_compiled_as_asked(pretrainer, strategy, xla)


@pytest.mark.parametrize("strategy_name,precision,xla", EVERY_CELL, ids=IDS)
def test_finetuning_trains_in_every_cell(strategy_name, precision, xla, strategy_for):
    from electra_tf.finetuning.text.models import ElectraClassifier
    from electra_tf.models.embeddings import ElectraEmbeddings
    from electra_tf.models.encoders import Discriminator

    keras.config.set_dtype_policy(precision)
    keras.utils.set_random_seed(0)  # the initial weights: each cell's losses are then the same every run
    strategy = strategy_for(strategy_name)
    config = small_config()
    batch = masked_batch(config, 8, seed=2)
    inputs = {key: batch[key] for key in ("token_ids", "segment_ids", "padding_mask")}
    # One class for the whole batch: what a few steps surely learn (the head's bias), so the
    # loss falling is a check of the update, not of how fast a random encoder tells texts apart.
    labels = np.ones(8, "int32")
    with strategy.scope():
        backbone = Discriminator.from_model_config(config.model, ElectraEmbeddings.from_model_config(config.model))
        classifier = ElectraClassifier(backbone, num_classes=2)
        classifier.compile(optimizer=create_finetuning_optimizer(
            2e-3, 2 * batches_for(precision), LayerwiseDecay(0.8, config.model.num_layers)), jit_compile=xla)
    before = classifier.head.kernel.numpy().copy()
    batch = tf.data.Dataset.from_tensors((inputs, labels))
    loss_before = classifier.evaluate(batch, verbose=0, return_dict=True)["loss"]
    batches = batches_for(precision)
    # The run's own callbacks read the step and learning rate from (mirrored) variables: under
    # MirroredStrategy `int(optimizer.iterations)` failed at the first batch of `finetune`.
    monitor = TrainingMonitor(tf.summary.create_noop_writer(), ProgressPlan(2 * batches, 8, 1, quiet=True,
                                                                            window_metrics=False))
    evaluation = PeriodicEvaluation(lambda: ({"score": 0.0}, {}), tf.summary.create_noop_writer(), numbers,
                                    keep_best=True, stream=io.StringIO())
    history = classifier.fit(batch.repeat(batches), epochs=2, verbose=0, callbacks=[monitor, evaluation]).history
    assert np.isfinite(history["loss"]).all()
    # Trained on the same batch: its loss (dropout off) is lower after.
    loss_after = classifier.evaluate(batch, verbose=0, return_dict=True)["loss"]
    assert loss_after < loss_before - 0.01, (loss_before, loss_after)
    steps = int(classifier.optimizer.iterations.numpy())
    assert steps + int(monitor.skipped_steps.numpy()) == 2 * batches and steps >= UPDATES
    assert (int(monitor.skipped_steps.numpy()) > 0) == (precision == "mixed_float16")
    assert [record["epoch"] for record in evaluation.history] == [1, 2]
    assert not np.array_equal(classifier.head.kernel.numpy(), before)
    check_compiled_as_asked(classifier, strategy, xla)


def test_question_answering_trains_under_mirrored_xla_float16(one_replica_as_on_a_gpu):
    # The QA model computes its own loss (compute_loss); the same split must carry it. On the
    # GPU's reduction path (one replica: one XLA compile, where two replicas compile twice).
    from electra_tf.finetuning.question_answering.model import ElectraQuestionAnswerer
    from electra_tf.models.embeddings import ElectraEmbeddings
    from electra_tf.models.encoders import Discriminator

    keras.config.set_dtype_policy("mixed_float16")
    config = small_config()
    batch = masked_batch(config, 8, seed=3)
    inputs = {key: batch[key] for key in ("token_ids", "segment_ids", "padding_mask")}
    inputs["segment_ids"] = np.concatenate([np.zeros([8, 6], np.int32), np.ones([8, 10], np.int32)], axis=1)
    targets = {"start_positions": np.full([8], 8, np.int32), "end_positions": np.full([8], 9, np.int32),
               "is_impossible": np.zeros([8], np.float32)}
    inputs["start_positions"] = targets["start_positions"]  # the official head conditions the end on it
    with one_replica_as_on_a_gpu.scope():
        backbone = Discriminator.from_model_config(config.model, ElectraEmbeddings.from_model_config(config.model))
        model = ElectraQuestionAnswerer(backbone, answerable=False)
        model.compile(optimizer=create_finetuning_optimizer(1e-3, 10, LayerwiseDecay(0.8, config.model.num_layers)), jit_compile=True)
    history = model.fit(tf.data.Dataset.from_tensors((inputs, targets)).repeat(FLOAT16_BATCHES), verbose=0).history
    assert np.isfinite(history["loss"]).all() and int(model.optimizer.iterations.numpy()) >= 1
    check_compiled_as_asked(model, one_replica_as_on_a_gpu, True)


def test_the_gpu_failure_reproduces_when_the_whole_step_is_compiled(one_replica_as_on_a_gpu, monkeypatch):
    """The one-replica cells above stand for the GPU only if the whole-step compile fails on their
    strategy as it did on GPUs: float16's LossScaleOptimizer calls `merge_call` inside a
    compiled `cond`. (The other GPU failure, a collective sum inside the compiled step, needs
    several replicas: the optimizer sums gradients across replicas only when there are several.)"""
    precision, error = "mixed_float16", "merge_call"
    from electra_tf.runtime import compiled_step as compiled_gradients

    monkeypatch.setattr(compiled_gradients, "strategy_reduces_across_replicas", lambda: False)
    keras.config.set_dtype_policy(precision)
    config = small_config()
    with one_replica_as_on_a_gpu.scope():
        pretrainer = ElectraPretrainer.from_pretraining_config(config)
        pretrainer.compile(optimizer=pretraining_optimizer(config), jit_compile=True)
    assert pretrainer.jit_compile and not pretrainer.compiles_gradients_only  # the whole step, compiled
    batches = tf.data.Dataset.from_tensors(masked_batch(config, 8, seed=1)).repeat()
    with pytest.raises((tf.errors.InvalidArgumentError, RuntimeError), match=error):
        pretrainer.fit(batches, steps_per_epoch=2, verbose=0)


@pytest.mark.parametrize("xla", [True, False], ids=["xla", "no_xla"])
def test_several_steps_a_call_train_as_one_a_call(xla):
    """`compile(steps_per_execution=3)` (the run's --steps_per_loop): each call takes three
    batches, in order, and the weights after six batches are those of six calls of one step;
    with XLA through `XlaStepLoop` (one trace), without it through Keras' own loop."""
    from electra_tf.runtime.compiled_step import XlaStepLoop

    config = small_config()
    batches = tf.data.Dataset.from_tensor_slices(
        {key: np.stack([masked_batch(config, 4, seed=seed)[key] for seed in range(6)])
         for key in masked_batch(config, 4, seed=0)})
    weights = []
    for steps_per_execution in (1, 3):
        keras.utils.set_random_seed(0)
        pretrainer = ElectraPretrainer.from_pretraining_config(config)
        pretrainer.compile(optimizer=pretraining_optimizer(config), jit_compile=xla,
                           steps_per_execution=steps_per_execution)
        calls = []

        class Calls(keras.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):
                calls.append((batch, int(pretrainer.optimizer.iterations.numpy())))

        pretrainer.fit(batches, steps_per_epoch=6, verbose=0, callbacks=[Calls()])
        assert calls == ([(b, b + 1) for b in range(6)] if steps_per_execution == 1 else [(2, 3), (5, 6)])
        assert isinstance(pretrainer.train_function, XlaStepLoop) == xla
        if xla:
            assert len(pretrainer.train_function._traces) == 1
        weights.append([w.numpy() for w in pretrainer.trainable_weights])
    for several, one in zip(*reversed(weights)):
        np.testing.assert_allclose(several, one, rtol=1e-5, atol=1e-6)


def test_evaluate_under_xla_reads_every_batch_once():
    """`evaluate` through `XlaStepLoop`: the same loss as without XLA, over all batches
    of a finite dataset (the last one shorter), and the loop ends with the data. A dataset of
    another element spec (a fixed batch size) through the same loop gets its own trace."""
    from electra_tf.runtime.compiled_step import XlaStepLoop
    from electra_tf.finetuning.text.models import ElectraClassifier
    from electra_tf.models.embeddings import ElectraEmbeddings
    from electra_tf.models.encoders import Discriminator

    config = small_config()
    batch = masked_batch(config, 7, seed=4)
    inputs = {key: batch[key] for key in ("token_ids", "segment_ids", "padding_mask")}
    examples = tf.data.Dataset.from_tensor_slices((inputs, np.arange(7) % 2))
    datasets = (examples.batch(3), examples.batch(2, drop_remainder=True))  # 3 + 3 + 1; 2 + 2 + 2
    losses = []
    for xla in (False, True):
        keras.utils.set_random_seed(0)
        backbone = Discriminator.from_model_config(config.model, ElectraEmbeddings.from_model_config(config.model))
        classifier = ElectraClassifier(backbone, num_classes=2)
        classifier.compile(optimizer=create_finetuning_optimizer(1e-3, 10, LayerwiseDecay(0.8, config.model.num_layers)), jit_compile=xla)
        losses.append([classifier.evaluate(data, verbose=0, return_dict=True)["loss"] for data in datasets])
        assert isinstance(classifier.test_function, XlaStepLoop) == xla
    assert len(classifier.test_function._traces) == 2  # [None, 16] and [2, 16] batches
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5)


def test_compile_builds_the_optimizer_so_the_step_is_traced_once():
    """A tf.function that creates variables is traced twice; without a strategy Keras would build
    the optimizer (its moments) inside the first trace of the step, so `compile` builds it."""
    config = small_config()
    pretrainer = ElectraPretrainer.from_pretraining_config(config)
    pretrainer.compile(optimizer=pretraining_optimizer(config))
    assert pretrainer.optimizer.built
    traces = []
    step = pretrainer.train_step

    def counted_step(data):
        traces.append(1)
        return step(data)

    pretrainer.train_step = counted_step
    pretrainer.fit(tf.data.Dataset.from_tensors(masked_batch(config, 4, seed=0)).repeat(2), verbose=0)
    assert len(traces) == 1
