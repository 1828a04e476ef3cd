"""A step's trace kept on disk (electra_tf/traced_steps.py): a second model built alike calls it
without tracing and trains the same weights; a changed description, a damaged entry or a step that
reads a tensor that is not a variable is traced again. tests/test_pretrain.py checks a real run's
resume: both steps loaded, no program compiled."""

import keras
import numpy as np
import tensorflow as tf

from electra_tf.compiled_gradients import CompiledGradients, XlaStepLoop
from electra_tf.optimization import create_optimizer
from electra_tf.pretraining.pretrainer import ElectraPretrainer
from electra_tf.pretraining.synthetic import masked_batch
from electra_tf.traced_steps import TracedStepCache, step_variables
from tests.test_compiled_gradients import small_config


def compiled_pretrainer(compile_cache, description=None):
    """The tiny pre-trainer compiled with XLA and seeded, as a run builds it, counting the
    Python calls of its training step (each is a trace). Keras' names start again, as in a new
    process (a second model would be named `electra_pretrainer_1`, another key)."""
    keras.backend.clear_session()
    keras.utils.set_random_seed(0)
    config = small_config()
    pretrainer = ElectraPretrainer.from_electra_config(config)
    pretrainer.compile(optimizer=create_optimizer(config), jit_compile=True)
    pretrainer.optimizer.build(pretrainer.trainable_variables)
    pretrainer.traced_steps = TracedStepCache(compile_cache, description or {"run": "a"})
    pretrainer.traces = 0
    traced_step = pretrainer.train_step

    def train_step(data):
        pretrainer.traces += 1
        return traced_step(data)

    pretrainer.train_step = train_step
    return pretrainer, config


def train(pretrainer, config, steps=2):
    dataset = tf.data.Dataset.from_tensors(masked_batch(config, 4, seed=1)).repeat()
    history = pretrainer.fit(dataset, steps_per_epoch=steps, verbose=0)
    assert isinstance(pretrainer.train_function, XlaStepLoop)
    return history.history, [w.numpy() for w in pretrainer.trainable_weights]


def test_a_model_built_alike_loads_the_trace_and_trains_the_same_weights(tmp_path):
    first, config = compiled_pretrainer(tmp_path)
    logs, weights = train(first, config)
    assert first.traces == 1 and (first.traced_steps.saved, first.traced_steps.loaded) == (1, 0)
    assert len(list(tmp_path.glob("traced_steps/*.step"))) == 1

    second, _ = compiled_pretrainer(tmp_path)
    again, weights_again = train(second, config)
    assert second.traces == 0 and (second.traced_steps.saved, second.traced_steps.loaded) == (0, 1)
    assert again == logs
    for a, b in zip(weights, weights_again):
        np.testing.assert_array_equal(a, b)


def test_another_description_or_a_damaged_entry_is_traced_again(tmp_path, capsys):
    first, config = compiled_pretrainer(tmp_path)
    train(first, config, steps=1)
    other, _ = compiled_pretrainer(tmp_path, description={"run": "b"})
    train(other, config, steps=1)
    assert other.traces == 1 and other.traced_steps.saved == 1
    assert len(list(tmp_path.glob("traced_steps/*.step"))) == 2

    entry = next(iter(sorted(tmp_path.glob("traced_steps/*.step"), key=lambda p: p.stat().st_mtime)))
    entry.write_bytes(entry.read_bytes()[:1000])  # cut short, as by a full disk
    damaged, _ = compiled_pretrainer(tmp_path)
    logs, _ = train(damaged, config, steps=1)
    assert damaged.traces == 1 and damaged.traced_steps.saved == 1  # traced and written whole again
    assert f"traced step {entry} not used" in capsys.readouterr().err
    assert np.isfinite(logs["loss"][0])
    reloaded, _ = compiled_pretrainer(tmp_path)
    train(reloaded, config, steps=1)
    assert reloaded.traces == 0


def test_the_walk_finds_every_variable_the_step_reads_including_the_schedules(tmp_path):
    pretrainer, config = compiled_pretrainer(tmp_path)
    variables = step_variables(pretrainer)
    handles = {id(v.handle) for v in variables}
    concrete = pretrainer.make_train_function().step.get_concrete_function(
        tf.data.Dataset.from_tensors(masked_batch(config, 4, seed=1)).element_spec)
    assert all(id(captured) in handles for captured in concrete.captured_inputs)
    assert any(v is pretrainer.optimizer._learning_rate._total_steps for v in variables)  # the schedule's end
    rebuilt, _ = compiled_pretrainer(tmp_path)
    assert [v.name for v in step_variables(rebuilt)] == [v.name for v in variables]


class Scaled(CompiledGradients, keras.Model):
    """A model whose step reads an eager tensor that is no variable: it cannot be kept."""

    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(1)
        self.scale = tf.constant(2.0)

    def call(self, x):
        return self.dense(x) * self.scale


def test_a_step_that_reads_other_tensors_is_traced_and_not_kept(tmp_path, capsys):
    model = Scaled()
    model(tf.ones((4, 3)))  # built: its weights are variables the walk finds, the scale is not one
    model.compile(optimizer="sgd", loss="mse", jit_compile=True)
    model.traced_steps = TracedStepCache(tmp_path, {})
    data = tf.data.Dataset.from_tensors((tf.ones((4, 3)), tf.ones((4, 1)))).repeat()
    model.fit(data, steps_per_epoch=1, verbose=0)
    assert isinstance(model.train_function, XlaStepLoop)
    assert "the traced train_step is not kept for reruns: it reads 1 tensor(s)" in capsys.readouterr().err
    assert not list(tmp_path.glob("traced_steps/*.step"))
