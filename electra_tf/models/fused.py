"""The transformer layer's elementwise stretches in training, each as two XLA-compiled functions:
one for the forward pass and one for its gradient.

Between its matrix multiplies a training step of BERT's block makes a dozen passes over each
[tokens, width] tensor (dropout, residual, LayerNorm, GELU and their gradients), one TensorFlow
kernel per operation, each reading and writing the whole tensor. On a CPU these passes are a
large share of the step (the matmuls run near the machine's peak). XLA fuses each stretch into
one loop over its tensors on the way forward and one on the way back (results.md, speed on a
CPU). The functions are `tf.function(jit_compile=True)` joined by `tf.custom_gradient`, public
TensorFlow both: a step that XLA compiles whole (the GPU default) inlines them; a step that it
does not runs each one as a small compiled program, compiled once per shape in a process. What
XLA's CPU code does more slowly than TensorFlow's kernels stays outside: each product's bias
(oneDNN adds it inside the product, BiasAddGrad sums its gradient), the sums over tokens of the
LayerNorm parameters' gradients, and the attention's softmax (oneDNN's kernel).

Only training uses them: inference runs the same equations as TensorFlow ops
(`transformer.py`), so exported SavedModels hold no XLA-compiled function, which TensorFlow
Serving runs only with XLA enabled.

Equations (x_hat = (s - mean(s)) / sqrt(var(s) + epsilon) over the last axis, Phi and phi the
standard normal's CDF and density, `keep` a dropout mask and r its rate):
  dropout_add_layer_norm:  s = keep * y / (1 - r) + residual;  out = gamma * x_hat + beta
      g = d out * gamma;  d s = (g - mean(g) - x_hat * mean(g * x_hat)) / sqrt(var(s) + epsilon)
      d residual = d s;  d y = keep * d s / (1 - r);  d gamma = sum(d out * x_hat);  d beta = sum(d out)
  gelu:  out = x * Phi(x);  d x = d out * (Phi(x) + x * phi(x))
`keep=None` is the same without dropout. LayerNorm and GELU compute in float32 whatever the
input dtype (as Keras' LayerNormalization does); results are cast back.
"""

from __future__ import annotations

import math

import tensorflow as tf

from electra_tf.models.dropout import apply_keep_mask

_compiled = tf.function(jit_compile=True, autograph=False)


def gelu_float32(x):
    """x * Phi(x), exact GELU (`tf.nn.gelu(approximate=False)`), for a float32 x."""
    return x * (0.5 * tf.math.erfc(x * (-1.0 / math.sqrt(2.0))))


def gelu_derivative_float32(x):
    """Phi(x) + x * phi(x), GELU's derivative, for a float32 x."""
    cdf = 0.5 * tf.math.erfc(x * (-1.0 / math.sqrt(2.0)))
    return cdf + x * (tf.exp(tf.square(x) * -0.5) * (1.0 / math.sqrt(2.0 * math.pi)))


def normalized_float32(x, epsilon: float):
    """(x_hat, 1 / sqrt(var + epsilon)) of LayerNorm over the last axis, x in float32."""
    centered = x - tf.reduce_mean(x, axis=-1, keepdims=True)
    inverse_std = tf.math.rsqrt(tf.reduce_mean(tf.square(centered), axis=-1, keepdims=True) + epsilon)
    return centered * inverse_std, inverse_std


def _sum_over_leading_axes(x):
    return tf.reduce_sum(x, axis=list(range(len(x.shape) - 1)))


# --- dropout, residual and LayerNorm ---------------------------------------------------------------

@_compiled
def _add_layer_norm_forward(y, keep, residual, gamma, beta, rate, epsilon):
    summed = tf.cast(apply_keep_mask(y, keep, rate) + residual, tf.float32)
    x_hat, inverse_std = normalized_float32(summed, epsilon)
    return tf.cast(x_hat * tf.cast(gamma, tf.float32) + tf.cast(beta, tf.float32), y.dtype), x_hat, inverse_std


@_compiled
def _add_layer_norm_gradient(upstream, x_hat, inverse_std, gamma, keep, rate):
    upstream32 = tf.cast(upstream, tf.float32)
    g = upstream32 * tf.cast(gamma, tf.float32)
    summed = inverse_std * (g - tf.reduce_mean(g, axis=-1, keepdims=True)
                            - x_hat * tf.reduce_mean(g * x_hat, axis=-1, keepdims=True))
    return tf.cast(apply_keep_mask(summed, keep, rate), upstream.dtype), tf.cast(summed, upstream.dtype)


def dropout_add_layer_norm(y, keep, residual, gamma, beta, rate: float, epsilon: float):
    """LayerNorm(Dropout(y) + residual) over the last axis, in y's dtype.

    >>> y = tf.constant([[[1.0, 2.0, 3.0, 6.0]]])
    >>> out = dropout_add_layer_norm(y, None, tf.zeros_like(y), tf.ones([4]), tf.zeros([4]), 0.0, 1e-12)
    >>> [round(float(v), 4) for v in out[0, 0]]
    [-1.069, -0.5345, 0.0, 1.6036]
    """
    @tf.custom_gradient
    def with_gradient(y, residual, gamma, beta):
        out, x_hat, inverse_std = _add_layer_norm_forward(y, keep, residual, gamma, beta, rate, epsilon)

        def gradient(upstream):
            d_y, d_residual = _add_layer_norm_gradient(upstream, x_hat, inverse_std, gamma, keep, rate)
            upstream32 = tf.cast(upstream, tf.float32)
            return (d_y, d_residual, tf.cast(_sum_over_leading_axes(upstream32 * x_hat), gamma.dtype),
                    tf.cast(_sum_over_leading_axes(upstream32), gamma.dtype))

        return out, gradient

    return with_gradient(y, residual, gamma, beta)


# --- GELU ---------------------------------------------------------------------------------------

@_compiled
def _gelu_forward(x):
    return tf.cast(gelu_float32(tf.cast(x, tf.float32)), x.dtype)


@_compiled
def _gelu_gradient(upstream, x):
    return tf.cast(tf.cast(upstream, tf.float32) * gelu_derivative_float32(tf.cast(x, tf.float32)), x.dtype)


def gelu(x):
    """GELU(x), exact, computed in float32 (the result in x's dtype).

    >>> [round(float(v), 4) for v in gelu(tf.constant([-1.0, 1.0, 3.0]))]
    [-0.1587, 0.8413, 2.996]
    """
    @tf.custom_gradient
    def with_gradient(x):
        return _gelu_forward(x), lambda upstream: _gelu_gradient(upstream, x)

    return with_gradient(x)
