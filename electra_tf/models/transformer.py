"""The post-LayerNorm transformer layer of BERT and ELECTRA.

`TransformerLayer` owns Keras' public layers for its weights: the query, key and value
projections and the attention output (`EinsumDense`, the heads as an axis), two
`LayerNormalization`s and the feed-forward `Dense` pair, created under the names keras-hub's
`TransformerEncoder` gives them, so the variable paths (`self_attention_layer/query/kernel`,
...) are the ones checkpoints and the HuggingFace / TF1 name table (`models/weight_names.py`) use.
Its arithmetic is one function, `post_ln_block`: with the same weights (and dropout masks) its
outputs equal keras-hub's `TransformerEncoder(normalize_first=False, activation="gelu")` and
transformers' BERT layer to float32 rounding (tests/models/test_transformer.py, tests/interop).

Three choices of this layer's own:
- the three dropouts of a call take their masks from one Philox draw (`dropout.keep_masks`):
  fewer GPU kernels and a smaller XLA program than a draw per dropout, and half the random
  numbers of a float32 draw. Each element is still an independent keep with probability
  1 - rate (to within 2^-17), as in the official code.
- `fuse_projections` (on by default): in training, query, key and value as one product over the
  three kernels side by side, the same dot products in fewer GPU kernels (the backward pass
  then has one product per gradient, and XLA fuses the three updates). Inference keeps three
  products, which spares copying the kernels side by side on every call.
- in training, the elementwise work between the products (dropout, residual and LayerNorm;
  GELU) runs as `fused.py`'s XLA-compiled functions, forward and gradient: a pass over each
  tensor where TensorFlow's kernels make a dozen. Inference runs the same equations as
  TensorFlow ops.

Example:
>>> import numpy as np
>>> layer = TransformerLayer(intermediate_dim=64, num_heads=2, dropout=0.1)
>>> layer.build((None, None, 32))
>>> outputs = layer(np.ones((2, 5, 32), "float32"), padding_mask=np.ones((2, 5), bool))
>>> tuple(outputs.shape)
(2, 5, 32)
"""

from __future__ import annotations

import contextlib
import math

import keras
import tensorflow as tf

from electra_tf.models import fused
from electra_tf.models.dropout import apply_keep_mask, draw_seed, keep_masks


def attention_mask(padding_mask):
    """[B, S] padding mask (nonzero = a real token) -> bool [B, 1, 1, S], broadcast over heads
    and query positions. Made once per encoder, not once per layer."""
    # A reshape, not `[:, tf.newaxis, tf.newaxis, :]`: LiteRT has no kernel for that slice of a bool tensor.
    padding_mask = tf.convert_to_tensor(padding_mask)
    return tf.cast(tf.reshape(padding_mask, [tf.shape(padding_mask)[0], 1, 1, -1]), tf.bool)


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
        seed = draw_seed(self.seed_generator) if training and self.dropout > 0 else None
        # Read inside the layer's call: under a mixed policy Keras casts them to the compute dtype.
        weights = [tf.convert_to_tensor(variable) for variable in self.block_variables()]
        return post_ln_block(tf.cast(inputs, self.compute_dtype), mask, seed, weights, num_heads=self.num_heads,
                             dropout=float(self.dropout), epsilon=float(self.layer_norm_epsilon),
                             training=bool(training), fuse_projections=bool(training) and self.fuse_projections)

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
    the three dropouts' masks (attention probabilities, attention output, FFN output), or None
    for no dropout; `training`: the elementwise stretches run as `fused.py`'s XLA-compiled
    functions with their gradients (inference runs them as TensorFlow ops);
    `fuse_projections`: query, key and value as one product. The arithmetic of Keras'
    EinsumDense, Dense, Softmax and LayerNormalization, each dense layer as one 2-D MatMul and
    BiasAdd over the batch's tokens (on a CPU oneDNN then fuses the bias into the product).
    """
    (query_kernel, query_bias, key_kernel, key_bias, value_kernel, value_bias, output_kernel, output_bias,
     attention_gamma, attention_beta, intermediate_kernel, intermediate_bias, ffn_kernel, ffn_bias,
     ffn_gamma, ffn_beta) = weights
    hidden = x.shape[-1]
    head_size = hidden // num_heads
    batch, length = tf.shape(x)[0], tf.shape(x)[1]
    probabilities_keep = attended_keep = output_keep = None
    if seed is not None:
        probabilities_keep, attended_keep, output_keep = keep_masks(
            [[batch, num_heads, length, length], [batch, length, hidden], [batch, length, hidden]], dropout, seed)

    def heads(t):  # [B, L, H] -> [B, heads, L, head_size]
        return tf.transpose(tf.reshape(t, [batch, length, num_heads, head_size]), [0, 2, 1, 3])

    def as_matrix(kernel, bias):  # [H, heads, head_size] and [heads, head_size] -> [H, H] and [H]
        return tf.reshape(kernel, [hidden, hidden]), tf.reshape(bias, [hidden])

    query_scale = tf.cast(1.0 / math.sqrt(head_size), x.dtype)
    if fuse_projections:
        # The three kernels side by side: one product, one bias-gradient reduction. The query's
        # 1 / sqrt(head_size) is folded into its kernel and bias ([H, H] multiplies instead of
        # a pass over the [B, L, H] queries, forward and backward): the same values for a power
        # of two (head sizes 64 and 16), float rounding apart otherwise.
        kernels, biases = zip(*(as_matrix(k, b) for k, b in ((query_kernel, query_bias), (key_kernel, key_bias),
                                                             (value_kernel, value_bias))))
        kernels, biases = (kernels[0] * query_scale, *kernels[1:]), (biases[0] * query_scale, *biases[1:])
        projected = dense(x, tf.concat(kernels, 1), tf.concat(biases, 0))
        query, key, value = (heads(t) for t in tf.split(projected, 3, axis=-1))
    else:
        query, key, value = (heads(dense(x, *as_matrix(k, b))) for k, b in
                             ((query_kernel, query_bias), (key_kernel, key_bias), (value_kernel, value_bias)))
        query *= query_scale
    scores = tf.matmul(query, key, transpose_b=True)  # [B, heads, L_query, L_key]
    # keras.layers.Softmax with a mask: padded keys get a large negative score, added (as BERT's
    # and ELECTRA's own code add it), whose gradient is the identity. (Keras also zeroes the rows
    # of a query with no real key at all, which only an all-padding sequence has.)
    mask_bias = (1.0 - tf.cast(mask, x.dtype)) * (-3e4 if x.dtype == tf.float16 else -1e9)
    probabilities = apply_keep_mask(tf.nn.softmax(scores + mask_bias, axis=-1), probabilities_keep, dropout)
    context = tf.reshape(tf.transpose(tf.matmul(probabilities, value), [0, 2, 1, 3]), [batch, length, hidden])
    output_kernel = tf.reshape(output_kernel, [hidden, hidden])
    if training:
        x = fused.dropout_add_layer_norm(dense(context, output_kernel, output_bias), attended_keep, x,
                                         attention_gamma, attention_beta, dropout, epsilon)
        intermediate = fused.gelu(dense(x, intermediate_kernel, intermediate_bias))
        return fused.dropout_add_layer_norm(dense(intermediate, ffn_kernel, ffn_bias), output_keep, x,
                                            ffn_gamma, ffn_beta, dropout, epsilon)
    x = layer_norm(dense(context, output_kernel, output_bias) + x, attention_gamma, attention_beta, epsilon)
    intermediate = gelu(dense(x, intermediate_kernel, intermediate_bias))
    return layer_norm(dense(intermediate, ffn_kernel, ffn_bias) + x, ffn_gamma, ffn_beta, epsilon)


def dense(x, kernel, bias):
    """x [..., I] @ kernel [I, O] + bias [O], as one 2-D MatMul and BiasAdd over the leading axes.

    In float16 as Keras' Dense computes it instead (a batched MatMul, then the bias added):
    TensorFlow's CPU rewrite of a 2-D MatMul and its bias into one oneDNN op runs float16 some
    fifty times slower than the separate ops."""
    if x.dtype == tf.float16:
        return tf.matmul(x, kernel) + bias
    y = tf.nn.bias_add(tf.matmul(tf.reshape(x, [-1, x.shape[-1]]), kernel), bias)
    return tf.reshape(y, tf.concat([tf.shape(x)[:-1], [kernel.shape[-1]]], 0))


# How inference traces GELU: "exact" (erfc, below), "one_op" (the exact GELU as the single op
# LiteRT's converter has a kernel for), "erf" (the exact GELU through erf, which ONNX has),
# "tanh" (keras-hub's approximation). Set by `gelu_form`.
_GELU_FORM = "exact"
GELU_FORMS = ("exact", "one_op", "erf", "tanh")


def gelu(x):
    """Exact GELU (`fused.gelu_float32`) computed in float32: a bfloat16 or float16 input is
    cast, and the result cast back (TensorFlow's CPU kernels compute elementwise ops in those
    types slowly). Another form only inside `gelu_form`.

    >>> x = tf.constant([-2.0, -0.5, 0.0, 1.0, 3.0])
    >>> bool(tf.reduce_all(tf.abs(gelu(x) - tf.nn.gelu(x, approximate=False)) < 1e-6))
    True
    """
    x32 = tf.cast(x, tf.float32)
    if _GELU_FORM == "exact":
        return tf.cast(fused.gelu_float32(x32), x.dtype)
    if _GELU_FORM == "erf":
        return tf.cast(0.5 * x32 * (1.0 + tf.math.erf(x32 * 0.7071067811865476)), x.dtype)
    return tf.cast(tf.nn.gelu(x32, approximate=_GELU_FORM == "tanh"), x.dtype)


@contextlib.contextmanager
def gelu_form(form: str):
    """Inside it, inference traces GELU in `form` (training always uses the exact one):
    "one_op", the exact GELU as `tf.nn.gelu(approximate=False)`, which LiteRT's converter fuses
    into its GELU kernel (`erfc` has no LiteRT kernel; the two are 2.4e-7 apart on [-4, 4]);
    "erf", the exact GELU as 0.5 x (1 + erf(x / sqrt 2)), for converters to ONNX, which has Erf
    but not Erfc; "tanh", the approximation keras-hub's transformer layers compute, to compare
    with keras-hub.

    >>> with gelu_form("tanh"):
    ...     round(float(gelu(tf.constant(1.0))), 6)
    0.841192
    """
    global _GELU_FORM
    if form not in GELU_FORMS:
        raise ValueError(f"gelu form {form!r}: one of {GELU_FORMS}.")
    before, _GELU_FORM = _GELU_FORM, form
    try:
        yield
    finally:
        _GELU_FORM = before


def layer_norm(x, gamma, beta, epsilon: float):
    """LayerNormalization over the last axis (`keras.ops.layer_normalization`: in float32 at
    least, the result in x's dtype)."""
    x_hat, _ = fused.normalized_float32(tf.cast(x, tf.float32), epsilon)
    return tf.cast(x_hat * tf.cast(gamma, tf.float32) + tf.cast(beta, tf.float32), x.dtype)
