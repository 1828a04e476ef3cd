"""The training path's fused functions against TensorFlow's composite ops and the gradients
TensorFlow derives for them."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from electra_tf.models import fused

RATE = 0.25


def _values_and_gradients(function, inputs):
    """The output and the gradients of sum(output * weights) with respect to every input."""
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        out = function(*inputs)
        weights = tf.cos(tf.range(tf.size(out), dtype=tf.float32))
        loss = tf.reduce_sum(tf.cast(out, tf.float32) * tf.reshape(weights, out.shape))
    return out, tape.gradient(loss, inputs)


def _assert_same(ours, reference, inputs, rtol):
    out, gradients = _values_and_gradients(ours, inputs)
    expected_out, expected_gradients = _values_and_gradients(reference, inputs)
    assert out.dtype == expected_out.dtype
    np.testing.assert_allclose(tf.cast(out, tf.float32).numpy(), tf.cast(expected_out, tf.float32).numpy(),
                               rtol=rtol, atol=rtol)
    for gradient, expected in zip(gradients, expected_gradients):
        assert gradient.dtype == expected.dtype
        scale = float(tf.reduce_max(tf.abs(tf.cast(expected, tf.float32))))
        np.testing.assert_allclose(tf.cast(gradient, tf.float32).numpy(), tf.cast(expected, tf.float32).numpy(),
                                   rtol=rtol, atol=rtol * scale)


def _normal(shape, seed, dtype=tf.float32):
    return tf.cast(tf.random.stateless_normal(shape, seed=[seed, 1]) * 2.0, dtype)


@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
@pytest.mark.parametrize("dropout", [True, False])
def test_dropout_add_layer_norm(dtype, dropout):
    y, residual = _normal((3, 4, 16), 4, dtype), _normal((3, 4, 16), 5, dtype)
    gamma, beta = _normal((16,), 7, dtype), _normal((16,), 8, dtype)
    keep = tf.random.stateless_uniform(y.shape, seed=[9, 3]) > RATE if dropout else None

    def reference(y, residual, gamma, beta):
        dropped = y if keep is None else tf.where(keep, y * tf.cast(1.0 / (1.0 - RATE), dtype), tf.zeros([], dtype))
        return keras.ops.layer_normalization(dropped + residual, gamma, beta, axis=-1, epsilon=1e-12)

    _assert_same(lambda y, residual, gamma, beta: fused.dropout_add_layer_norm(
                     y, keep, residual, gamma, beta, RATE, 1e-12),
                 reference, [y, residual, gamma, beta], rtol=1e-4 if dtype == tf.float32 else 3e-2)


@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
def test_gelu(dtype):
    x = _normal((3, 4, 16), 10, dtype)

    def reference(x):  # in float32, as the fused function computes it
        return tf.cast(tf.nn.gelu(tf.cast(x, tf.float32), approximate=False), dtype)

    _assert_same(fused.gelu, reference, [x], rtol=1e-5 if dtype == tf.float32 else 2e-2)


def test_a_step_compiled_whole_inlines_them():
    """Inside a function XLA compiles whole (the GPU default), the same values and gradients."""
    y, residual = _normal((3, 4, 16), 12), _normal((3, 4, 16), 13)
    gamma, beta = _normal((16,), 15), _normal((16,), 16)
    keep = tf.random.stateless_uniform(y.shape, seed=[17, 3]) > RATE

    def block(y, residual, gamma, beta):
        return fused.gelu(fused.dropout_add_layer_norm(y, keep, residual, gamma, beta, RATE, 1e-12))

    compiled = tf.function(lambda *a: _values_and_gradients(block, list(a)), jit_compile=True)
    out, gradients = compiled(y, residual, gamma, beta)
    expected_out, expected_gradients = _values_and_gradients(block, [y, residual, gamma, beta])
    np.testing.assert_allclose(out.numpy(), expected_out.numpy(), rtol=1e-5, atol=1e-5)
    for gradient, expected in zip(gradients, expected_gradients):
        np.testing.assert_allclose(gradient.numpy(), expected.numpy(), rtol=1e-4, atol=1e-4)
