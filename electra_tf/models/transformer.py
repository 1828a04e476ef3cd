"""The post-LayerNorm transformer layer of BERT and ELECTRA.

`TransformerLayer` owns Keras' public layers for its weights: the query, key and value
projections and the attention output (`EinsumDense`, the heads as an axis), two
`LayerNormalization`s and the feed-forward `Dense` pair, created under the names keras-hub's
`TransformerEncoder` gives them, so the variable paths (`self_attention_layer/query/kernel`,
...) are the ones checkpoints and the HuggingFace / TF1 name table (`interop/names.py`) use.
Its arithmetic is one function, `post_ln_block`: with the same weights (and dropout masks) its
outputs equal keras-hub's `TransformerEncoder(normalize_first=False, activation="gelu")` to the
bit, and transformers' BERT layer to float32 rounding (tests/models/test_transformer.py,
tests/interop).

Two choices of this layer's own:
- the three dropouts of a call take their masks from one Philox draw (`dropout.keep_masks`):
  fewer GPU kernels and a smaller XLA program than a draw per dropout. Each element is still an
  independent keep with probability 1 - rate, as in the official code.
- `fuse_projections` (on by default): in training, query, key and value as one product over the
  three kernels side by side, the same dot products in fewer GPU kernels (the backward pass
  then has one product per gradient, and XLA fuses the three updates). Inference keeps three
  products, which spares copying the kernels side by side on every call.

Example:
>>> import numpy as np
>>> layer = TransformerLayer(intermediate_dim=64, num_heads=2, dropout=0.1)
>>> layer.build((None, None, 32))
>>> outputs = layer(np.ones((2, 5, 32), "float32"), padding_mask=np.ones((2, 5), bool))
>>> tuple(outputs.shape)
(2, 5, 32)
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf

from electra_tf.models.dropout import apply_keep_mask, draw_seed, keep_masks


def attention_mask(padding_mask):
    """[B, S] padding mask (nonzero = a real token) -> bool [B, 1, 1, S], broadcast over heads
    and query positions. Made once per encoder, not once per layer."""
    padding_mask = tf.cast(padding_mask, tf.bool)
    return padding_mask[:, tf.newaxis, tf.newaxis, :]


@keras.saving.register_keras_serializable(package="electra_tf")
class TransformerLayer(keras.layers.Layer):
    """BERT's post-LN block: x + Dropout(Attention(x)) -> LN -> + Dropout(FFN(x)) -> LN, exact GELU.

    `call(inputs, padding_mask=..., training=...)`; `padding_mask` is [B, S] or the bool
    [B, 1, 1, S] mask of `attention_mask`, so an encoder makes it once for all its layers.
    """

    def __init__(self, intermediate_dim: int, num_heads: int, dropout: float = 0.0,
                 layer_norm_epsilon: float = 1e-12, kernel_initializer="glorot_uniform",
                 fuse_projections: bool = True, **kwargs):
        super().__init__(**kwargs)
        self.intermediate_dim = intermediate_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.fuse_projections = fuse_projections

    def build(self, input_shape):
        hidden = input_shape[-1]
        if hidden % self.num_heads:
            raise ValueError(f"TransformerLayer: hidden size {hidden} is not a multiple of num_heads {self.num_heads}.")
        head_size = hidden // self.num_heads

        def initializer():  # a fresh instance per weight, as keras-hub clones them
            return self.kernel_initializer.__class__.from_config(self.kernel_initializer.get_config())

        def projection(name):
            layer = keras.layers.EinsumDense("abc,cde->abde", output_shape=(None, self.num_heads, head_size),
                                             bias_axes="de", kernel_initializer=initializer(),
                                             dtype=self.dtype_policy, name=name)
            layer.build(input_shape)
            return layer

        with keras.name_scope("self_attention_layer"):  # the paths keras-hub's attention layer gave them
            self.query_dense, self.key_dense, self.value_dense = (projection(n) for n in ("query", "key", "value"))
            self.attention_output_dense = keras.layers.EinsumDense(
                "abcd,cde->abe", output_shape=(None, hidden), bias_axes="e", kernel_initializer=initializer(),
                dtype=self.dtype_policy, name="attention_output")
            self.attention_output_dense.build((None, None, self.num_heads, head_size))
        self.attention_layer_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name="self_attention_layer_norm")
        self.attention_layer_norm.build(input_shape)
        self.output_layer_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name="feedforward_layer_norm")
        self.output_layer_norm.build(input_shape)
        self.intermediate_dense = keras.layers.Dense(
            self.intermediate_dim, kernel_initializer=initializer(), dtype=self.dtype_policy,
            name="feedforward_intermediate_dense")
        self.intermediate_dense.build(input_shape)
        self.output_dense = keras.layers.Dense(hidden, kernel_initializer=initializer(), dtype=self.dtype_policy,
                                               name="feedforward_output_dense")
        self.output_dense.build((*input_shape[:-1], self.intermediate_dim))
        self.seed_generator = keras.random.SeedGenerator(name="dropout_seed")  # one draw per call
        self.built = True

    def call(self, inputs, padding_mask=None, training=None):
        if padding_mask is None:
            raise ValueError("TransformerLayer: `padding_mask` is required.")
        mask = padding_mask if padding_mask.shape.rank == 4 else attention_mask(padding_mask)
        dropping = bool(training) and self.dropout > 0
        seed = draw_seed(self.seed_generator) if dropping else None
        # Read inside the layer's call: under a mixed policy Keras casts them to the compute dtype.
        weights = [tf.convert_to_tensor(variable) for variable in self.block_variables()]
        return post_ln_block(tf.cast(inputs, self.compute_dtype), mask, seed, weights, num_heads=self.num_heads,
                             dropout=float(self.dropout), epsilon=float(self.layer_norm_epsilon), training=dropping,
                             fuse_projections=bool(training) and self.fuse_projections)

    def block_variables(self) -> list:
        """The 16 variables `post_ln_block` takes, in its order."""
        return [self.query_dense.kernel, self.query_dense.bias, self.key_dense.kernel, self.key_dense.bias,
                self.value_dense.kernel, self.value_dense.bias,
                self.attention_output_dense.kernel, self.attention_output_dense.bias,
                self.attention_layer_norm.gamma, self.attention_layer_norm.beta,
                self.intermediate_dense.kernel, self.intermediate_dense.bias,
                self.output_dense.kernel, self.output_dense.bias,
                self.output_layer_norm.gamma, self.output_layer_norm.beta]

    def get_config(self):
        return {**super().get_config(), "intermediate_dim": self.intermediate_dim, "num_heads": self.num_heads,
                "dropout": self.dropout, "layer_norm_epsilon": self.layer_norm_epsilon,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "fuse_projections": self.fuse_projections}


def post_ln_block(x, mask, seed, weights, num_heads, dropout, epsilon, training, fuse_projections=False):
    """BERT's post-LN block: x + Dropout(Attention(x)) -> LN -> + Dropout(FFN) -> LN.

    x: [B, L, H] in the compute dtype; mask: bool [B, 1, 1, L]; seed: int32 [2], the one draw of
    the three dropouts' masks (attention probabilities, attention output, FFN output);
    `training`: apply them; `fuse_projections`: query, key and value as one product. The
    arithmetic of Keras' EinsumDense, Dense, Softmax and LayerNormalization, each dense layer as
    one 2-D MatMul and BiasAdd over the batch's tokens (on a CPU oneDNN then fuses the bias into
    the product).
    """
    (query_kernel, query_bias, key_kernel, key_bias, value_kernel, value_bias, output_kernel, output_bias,
     attention_gamma, attention_beta, intermediate_kernel, intermediate_bias, ffn_kernel, ffn_bias,
     ffn_gamma, ffn_beta) = weights
    hidden = x.shape[-1]
    head_size = hidden // num_heads
    batch, length = tf.shape(x)[0], tf.shape(x)[1]
    if training:
        probabilities_keep, attended_keep, output_keep = keep_masks(
            [[batch, num_heads, length, length], [batch, length, hidden], [batch, length, hidden]],
            dropout, seed, x.dtype)

    def heads(t):  # [B, L, H] -> [B, heads, L, head_size]
        return tf.transpose(tf.reshape(t, [batch, length, num_heads, head_size]), [0, 2, 1, 3])

    def as_matrix(kernel, bias):  # [H, heads, head_size] and [heads, head_size] -> [H, H] and [H]
        return tf.reshape(kernel, [hidden, hidden]), tf.reshape(bias, [hidden])

    if fuse_projections:  # the three kernels side by side: one product, one bias-gradient reduction
        kernels, biases = zip(*(as_matrix(k, b) for k, b in ((query_kernel, query_bias), (key_kernel, key_bias),
                                                             (value_kernel, value_bias))))
        query, key, value = tf.split(dense(x, tf.concat(kernels, 1), tf.concat(biases, 0)), 3, axis=-1)
    else:
        query, key, value = (dense(x, *as_matrix(k, b)) for k, b in
                             ((query_kernel, query_bias), (key_kernel, key_bias), (value_kernel, value_bias)))
    query = heads(query) * tf.cast(1.0 / math.sqrt(head_size), x.dtype)
    scores = tf.matmul(query, heads(key), transpose_b=True)  # [B, heads, L_query, L_key]
    # keras.layers.Softmax with a mask: padded keys get a large negative score, added (as BERT's
    # and ELECTRA's own code add it), whose gradient is the identity. (Keras also zeroes the rows
    # of a query with no real key at all, which only an all-padding sequence has.)
    scores += (1.0 - tf.cast(mask, x.dtype)) * (-3e4 if x.dtype == tf.float16 else -1e9)
    probabilities = tf.nn.softmax(scores, axis=-1)
    if training:
        probabilities = apply_keep_mask(probabilities, probabilities_keep, dropout)
    context = tf.reshape(tf.transpose(tf.matmul(probabilities, heads(value)), [0, 2, 1, 3]), [batch, length, hidden])
    attended = dense(context, tf.reshape(output_kernel, [hidden, hidden]), output_bias)
    if training:
        attended = apply_keep_mask(attended, attended_keep, dropout)
    x = layer_norm(attended + x, attention_gamma, attention_beta, epsilon)

    intermediate = gelu(dense(x, intermediate_kernel, intermediate_bias))
    output = dense(intermediate, ffn_kernel, ffn_bias)
    if training:
        output = apply_keep_mask(output, output_keep, dropout)
    return layer_norm(output + x, ffn_gamma, ffn_beta, epsilon)


def dense(x, kernel, bias):
    """x [..., I] @ kernel [I, O] + bias [O], as one 2-D MatMul and BiasAdd over the leading axes.

    In float16 as Keras' Dense computes it instead (a batched MatMul, then the bias added):
    TensorFlow's CPU rewrite of a 2-D MatMul and its bias into one oneDNN op runs float16 some
    fifty times slower than the separate ops."""
    if x.dtype == tf.float16:
        return tf.matmul(x, kernel) + bias
    y = tf.nn.bias_add(tf.matmul(tf.reshape(x, [-1, x.shape[-1]]), kernel), bias)
    return tf.reshape(y, tf.concat([tf.shape(x)[:-1], [kernel.shape[-1]]], 0))


def gelu(x):
    """Exact GELU computed in float32 (a bfloat16 or float16 input is cast, and the result cast
    back: TensorFlow's CPU kernels compute elementwise ops in those types slowly)."""
    if x.dtype == tf.float32:
        return _gelu(x)
    return tf.cast(_gelu(tf.cast(x, tf.float32)), x.dtype)


@tf.custom_gradient
def _gelu(x):
    """Exact GELU, x * Phi(x) (`tf.nn.gelu(approximate=False)`), with its gradient written out,
    dy * (Phi(x) + x * phi(x)): fewer passes over the [tokens, intermediate] tensor than
    TensorFlow derives for the composite op (a CPU step is largely such passes).

    >>> x = tf.constant([-2.0, -0.5, 0.0, 1.0, 3.0])
    >>> bool(tf.reduce_all(tf.abs(_gelu(x) - tf.nn.gelu(x, approximate=False)) < 1e-6))
    True
    """
    cdf = 0.5 * tf.math.erfc(x * tf.cast(-1.0 / math.sqrt(2.0), x.dtype))

    def gradient(dy):
        pdf = tf.exp(tf.square(x) * tf.cast(-0.5, x.dtype)) * tf.cast(1.0 / math.sqrt(2.0 * math.pi), x.dtype)
        return dy * (cdf + x * pdf)

    return x * cdf, gradient


def layer_norm(x, gamma, beta, epsilon: float):
    """LayerNormalization over the last axis (`keras.ops.layer_normalization`: in float32 at
    least, the result in x's dtype), with its gradient written out: the mean and variance are
    kept from the forward pass and the input's gradient is the usual closed form,
    inv * (g - mean(g) - x_hat * mean(g * x_hat)) for g = dy * gamma."""
    dtype = x.dtype

    @tf.custom_gradient
    def normalized(x, gamma, beta):
        x32, gamma32, beta32 = (tf.cast(v, tf.float32) for v in (x, gamma, beta))
        centered = x32 - tf.reduce_mean(x32, axis=-1, keepdims=True)
        inv = tf.math.rsqrt(tf.reduce_mean(tf.square(centered), axis=-1, keepdims=True) + epsilon)
        x_hat = centered * inv

        def gradient(dy):
            dy = tf.cast(dy, tf.float32)
            g = dy * gamma32
            dx = inv * (g - tf.reduce_mean(g, axis=-1, keepdims=True)
                        - x_hat * tf.reduce_mean(g * x_hat, axis=-1, keepdims=True))
            axes = list(range(len(x.shape) - 1))
            return (tf.cast(dx, x.dtype), tf.cast(tf.reduce_sum(dy * x_hat, axis=axes), gamma.dtype),
                    tf.cast(tf.reduce_sum(dy, axis=axes), beta.dtype))

        return tf.cast(x_hat * gamma32 + beta32, dtype), gradient

    return normalized(x, gamma, beta)
