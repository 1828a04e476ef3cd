"""The workarounds in electra_tf/compat.py: each test fails if the behaviour a workaround relies on
changes upstream (then check the upstream issue: the workaround may be needed no longer)."""

import keras
import numpy as np
import tensorflow as tf

from electra_tf import compat


def test_the_pinned_versions_are_the_checked_ones():
    assert tf.__version__.startswith(compat.CHECKED_ON["tensorflow"] + ".")
    assert keras.__version__.startswith(compat.CHECKED_ON["keras"] + ".")


class Counting(keras.Model):
    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(1)
        self.dense.build((None, 2))

    def call(self, x):
        return self.dense(x)


def pulled_batches(model_class, strategy) -> int:
    """How many batches `fit` pulls for 3 steps of a built model under `strategy`."""
    pulled = []

    def generate():
        for index in range(100):
            pulled.append(index)
            yield np.full((2, 2), index, np.float32), np.zeros((2, 1), np.float32)

    dataset = tf.data.Dataset.from_generator(generate, output_signature=(
        tf.TensorSpec((2, 2), tf.float32), tf.TensorSpec((2, 1), tf.float32)))
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    with strategy.scope():
        model = model_class()
        model.compile(optimizer="sgd", loss="mse")
        model.optimizer.build(model.trainable_variables)
    seen = []

    class Batches(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            seen.append(len(pulled))

    model.fit(dataset.with_options(options), steps_per_epoch=3, epochs=1, verbose=0, callbacks=[Batches()])
    return seen[0]


def test_keras_pulls_a_batch_to_build_under_a_strategy_and_the_mixin_stops_it(two_replicas):
    """keras-team/keras#20585: under a strategy, Keras' private `_maybe_symbolic_build` takes a
    batch out of fit's iterator before the first step. The mixin overrides that hook; if Keras
    renames or stops calling it, the first two counts agree and this fails."""

    class Skipping(compat.BuiltModelsSkipSymbolicBuild, Counting):
        pass

    assert hasattr(keras.Model, "_maybe_symbolic_build")
    keras_pulls, ours = pulled_batches(Counting, two_replicas), pulled_batches(Skipping, two_replicas)
    assert keras_pulls > ours, (keras_pulls, ours)


def test_scalar_logs_take_shape_one_under_multi_worker_only(two_replicas, monkeypatch):
    """keras-team/keras#20329: Keras reduces a step's logs over a MultiWorkerMirroredStrategy
    along axis 0, which a scalar lacks (two real workers train through it in tests/test_launch.py,
    marked slow). Other strategies keep their scalars."""
    logs = {"loss": tf.constant(2.0)}
    assert compat.logs_for_keras_reduction(logs)["loss"].shape == ()
    with two_replicas.scope():
        assert compat.logs_for_keras_reduction(logs)["loss"].shape == ()

    class Workers(tf.distribute.MultiWorkerMirroredStrategy):
        def __init__(self):  # the type alone: a real one would configure this process's collectives
            pass

    monkeypatch.setattr(tf.distribute, "get_strategy", Workers)
    assert compat.logs_for_keras_reduction(logs)["loss"].shape == (1,)
