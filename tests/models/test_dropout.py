import keras
import numpy as np
import pytest
import tensorflow as tf

from electra_tf.models.dropout import Dropout, stateless_dropout


def _pair(rate=0.1):
    """Keras' Dropout and this package's, with the same seed."""
    return keras.layers.Dropout(rate, seed=11), Dropout(rate, seed=11)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_same_numbers_as_keras_dropout_eagerly_and_under_xla(dtype):
    x = tf.cast(tf.random.stateless_normal((4, 9, 33), seed=[1, 2]), dtype)
    theirs, ours = _pair()
    for _ in range(2):  # both seed generators advance alike from call to call
        np.testing.assert_array_equal(ours(x, training=True), theirs(x, training=True))
    np.testing.assert_array_equal(ours.seed_generator.state.numpy(), theirs.seed_generator.state.numpy())

    theirs, ours = _pair()
    compiled = [tf.function(lambda x, layer=layer: layer(x, training=True), jit_compile=True) for layer in (theirs, ours)]
    np.testing.assert_array_equal(compiled[1](x), compiled[0](x))
    np.testing.assert_array_equal(ours(x, training=False), x)  # inference: the identity


def test_xla_compiles_far_fewer_instructions_than_for_keras_dropout():
    """The reason for the layer: Keras leaves the algorithm to TensorFlow ("auto_select"), whose
    XLA kernel scrambles the seed in 267 scalar HLO instructions per draw."""
    x = tf.ones((2, 8, 16))
    theirs, ours = _pair()

    def instructions(function):
        hlo = tf.function(function, jit_compile=True).experimental_get_compiler_ir(x)(stage="hlo")
        return sum(" = " in line for line in hlo.splitlines())

    keras_count = instructions(lambda x: theirs(x, training=True))
    our_count = instructions(lambda x: ours(x, training=True))
    assert our_count < 0.6 * keras_count, (our_count, keras_count)


def test_rate_and_scale():
    y = stateless_dropout(tf.ones((200, 500)), 0.25, tf.constant([3, 4], tf.int32)).numpy()
    assert abs((y == 0).mean() - 0.25) < 0.01
    np.testing.assert_allclose(np.unique(y), [0.0, 1 / 0.75], rtol=1e-6)


def test_noise_shape_is_refused():
    with pytest.raises(ValueError, match="noise_shape"):
        Dropout(0.1, noise_shape=(None, 1))
