"""The post-LayerNorm transformer layer of BERT and ELECTRA, traced once per shape.

`TransformerLayer` is keras-hub's `TransformerEncoder` (post-LN, exact GELU) with its `call`
rewritten; everything else is inherited. Its sublayers, variables, names, initializers and
dropout seed generators are keras-hub's own, created in the same order, so checkpoints and the
HuggingFace / TF1 name table (`interop/names.py`) are unchanged. Its dropout masks are not
keras-hub's: the three dropouts of a call take their masks from one draw (`dropout.keep_masks`,
for fewer GPU kernels and a smaller XLA program; the deviation is named in dropout.py).

Why rewrite `call`: start-up. Through Keras' layer calls, each of the 24 layers of
ELECTRA-Small (12 discriminator, 12 generator) is traced separately, forward and backward,
about 550 graph ops each; that was most of the Python tracing and graph optimization before
the first step. Here the block's arithmetic is one function (`post_ln_block`) taking the
layer's weights as arguments, called through a `tf.function`: it is traced once per input
shape and configuration (twice for ELECTRA-Small: the discriminator's layers and the
generator's), its gradient is built once, and the step's graph holds one call per layer. In
training the calls are not inlined (`_BLOCK_NOT_INLINED`), so grappler also optimizes each
body once, not once per layer. In inference (evaluation, prediction, the exported serving
graph) the calls are inlined (`_BLOCK_INLINED`), so the graph is optimized whole as before the
rewrite: with the calls kept, ELECTRA-Small-sized serving was slower at batch 1 and 8 in two
runs out of two. Under XLA (`jit_compile`) the block is plain Python again, traced per layer
as keras-hub's, or, with `ELECTRA_TF_LOOP_LAYERS=1`, once per stack as the body of one XLA
loop (`looped_layers`: a smaller program, more kernel launches; docs/performance.md). With the
shared `tf.function` inside the compiled step, inlined or not, every ELECTRA-Small step took
20 s instead of 1.6 s: it compiled again each time. The gradient of a
function call takes the forward's transpose permutations (Keras' einsum lowers to transposes) as
inputs, XLA needs those as compile-time constants, and TensorFlow then marks everything the
forward call reads as one, the weights included, so each update meant a new program. With
TensorFlow's own `tf.einsum` in the shared function the step compiles once, but lowering its 48
calls to XLA's HLO costs what tracing them saves (2 CPU cores, the first step of a rerun: tracing
3.4 s against 6.1 s, lowering 4.1-4.6 s against 1.8 s, or 3.1-3.5 s with the calls inlined;
docs/results.md), so it was not taken.

The arithmetic is the Keras ops keras-hub's sublayers call, in the same order (the same
einsum equations, masked softmax, LayerNorm, dropout applied as TensorFlow's; in training the
query, key and value projections are one einsum over the three kernels side by side, the same
dot products in fewer GPU kernels):
with the same weights (and in training the same dropout masks) the outputs are bit-identical to
`keras_hub.layers.TransformerEncoder`'s.
Gradients agree to float32 rounding, not to the bit: grappler optimizes the separate forward
and backward bodies a little differently than one inlined graph (with the calls inlined a
single layer's gradients were bit-identical, a deep stack's still not, and start-up was about
1.7 s longer). tests/models/test_transformer.py pins both. One more difference: keras-hub
switches to a fused dot-product-attention op when the dropout rate is 0; this layer always
uses the explicit softmax(QK^T / sqrt(d)) V path, the same maths.

Example:
>>> import numpy as np
>>> layer = TransformerLayer(intermediate_dim=64, num_heads=2, dropout=0.1, activation="gelu",
...                          layer_norm_epsilon=1e-12, normalize_first=False)
>>> layer.build((None, None, 32))
>>> outputs = layer(np.ones((2, 5, 32), "float32"), padding_mask=np.ones((2, 5), bool))
>>> tuple(outputs.shape)
(2, 5, 32)
"""

from __future__ import annotations

import math

import keras
import keras_hub
import tensorflow as tf
from keras import ops

from electra_tf.models.dropout import apply_keep_mask, draw_seed, keep_masks


def attention_mask(padding_mask):
    """[B, S] padding mask (nonzero = a real token) -> bool [B, 1, 1, S], broadcast over heads
    and query positions. Made once per encoder, not once per layer."""
    padding_mask = tf.cast(padding_mask, tf.bool)
    return padding_mask[:, tf.newaxis, tf.newaxis, :]


@keras.saving.register_keras_serializable(package="electra_tf")
class TransformerLayer(keras_hub.layers.TransformerEncoder):
    """keras-hub's post-LN `TransformerEncoder` computed by one shared traced function.

    `call(inputs, padding_mask=..., training=...)` as keras-hub's; `padding_mask` may also be
    the bool [B, 1, 1, S] mask of `attention_mask`, so an encoder makes it once for all layers.
    Only the post-LN form (`normalize_first=False`) and exact GELU are supported: BERT's block.

    The weights are read through keras-hub's and Keras' private sublayer attributes
    (`_self_attention_layer`, `_query_dense`, `_dropout_layer`, ...). Should a release rename
    them, tests/models/test_transformer.py, which compares this layer with keras-hub's own,
    fails first.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.normalize_first:
            raise ValueError("TransformerLayer: only the post-LayerNorm block (normalize_first=False) is supported.")
        if keras.activations.serialize(self.activation) != "gelu":
            raise ValueError("TransformerLayer: only exact GELU is supported (BERT and ELECTRA's activation).")

    def call(self, inputs, padding_mask=None, training=None):
        if padding_mask is None:
            raise ValueError("TransformerLayer: `padding_mask` is required.")
        mask = padding_mask if padding_mask.shape.rank == 4 else attention_mask(padding_mask)
        fuse_projections = bool(training)
        training = fuse_projections and self.dropout > 0
        # One draw per call for the layer's three dropouts (dropout.keep_masks), seeded by the
        # attention dropout's generator; the other two dropouts' generators stay in the layer
        # (keras-hub's variables, so checkpoints keep their layout) but are not advanced.
        seed = self._dropout_seed(training)
        weights = [tf.convert_to_tensor(variable) for variable in self.block_variables()]
        inputs = tf.cast(inputs, self.compute_dtype)
        if tracing_for_xla():
            block = post_ln_block
        else:
            block = _BLOCK_NOT_INLINED if training else _BLOCK_INLINED
        return block(inputs, mask, seed, weights, num_heads=self.num_heads, dropout=float(self.dropout),
                     epsilon=float(self.layer_norm_epsilon), training=training, fuse_projections=fuse_projections)

    def block_variables(self) -> list:
        """The 16 variables `post_ln_block` takes, in its order."""
        attention = self._self_attention_layer
        return [attention._query_dense.kernel, attention._query_dense.bias,
                attention._key_dense.kernel, attention._key_dense.bias,
                attention._value_dense.kernel, attention._value_dense.bias,
                attention._output_dense.kernel, attention._output_dense.bias,
                self._self_attention_layer_norm.gamma, self._self_attention_layer_norm.beta,
                self._feedforward_intermediate_dense.kernel, self._feedforward_intermediate_dense.bias,
                self._feedforward_output_dense.kernel, self._feedforward_output_dense.bias,
                self._feedforward_layer_norm.gamma, self._feedforward_layer_norm.beta]

    def _dropout_seed(self, training: bool):
        return (draw_seed(self._self_attention_layer._dropout_layer.seed_generator) if training
                else tf.zeros([2], tf.int32))


def looped_layers(layers, x, mask, training=None):
    """`x` through `layers` (TransformerLayers of one configuration) as one XLA loop: the block
    is traced once and XLA compiles its body once, instead of once per layer.

    The same arithmetic as calling the layers in turn (`post_ln_block` with each layer's
    weights, cast to the compute dtype as Keras' autocasting reads them, and each layer's own
    dropout seed, drawn in layer order); the weights are stacked along a new first axis and
    the loop (`tf.foldl`, a while loop of `len(layers)` iterations) takes layer i's slice in
    iteration i. For the backward pass TensorFlow keeps each iteration's activations in lists
    that XLA compiles as stacked buffers. Encoders use it when the step is traced for XLA and
    `ELECTRA_TF_LOOP_LAYERS=1` (`runtime.loop_layers_under_xla`): the unrolled stack makes a
    program of thousands of kernels that takes minutes to compile for a GPU and seconds to load
    from the cache; the loop's step launches more kernels (docs/performance.md).
    """
    first = layers[0]
    settings = [(layer.num_heads, layer.dropout, layer.layer_norm_epsilon, layer.compute_dtype) for layer in layers]
    if len(set(settings)) != 1:
        raise ValueError("looped_layers: the layers differ in (heads, dropout, epsilon, dtype): "
                         f"{sorted(set(settings))}")
    dtype = first.compute_dtype
    fuse_projections = bool(training)
    training = fuse_projections and first.dropout > 0
    seeds = tf.stack([layer._dropout_seed(training) for layer in layers])
    per_layer = [[tf.cast(tf.convert_to_tensor(variable), dtype) for variable in layer.block_variables()]
                 for layer in layers]
    stacked = [tf.stack(weights) for weights in zip(*per_layer)]

    def block(x, slices):
        seed, *weights = slices
        return post_ln_block(x, mask, seed, weights, num_heads=first.num_heads, dropout=float(first.dropout),
                             epsilon=float(first.layer_norm_epsilon), training=training,
                             fuse_projections=fuse_projections)

    return tf.foldl(block, [seeds, *stacked], initializer=tf.cast(x, dtype))


def post_ln_block(x, mask, seed, weights, num_heads, dropout, epsilon, training, fuse_projections=False):
    """BERT's post-LN block: x + Dropout(Attention(x)) -> LN -> + Dropout(FFN) -> LN.

    x: [B, L, H] in the compute dtype; mask: bool [B, 1, 1, L]; seed: int32 [2], the one draw of
    the three dropouts' masks (attention probabilities, attention output, FFN output);
    `training`: apply them; `fuse_projections`: query, key and value as one product (below;
    in training, with or without dropout). Each step is the Keras op the corresponding
    keras-hub sublayer calls, with the same einsum equations.
    """
    (query_kernel, query_bias, key_kernel, key_bias, value_kernel, value_bias, output_kernel, output_bias,
     attention_gamma, attention_beta, intermediate_kernel, intermediate_bias, ffn_kernel, ffn_bias,
     ffn_gamma, ffn_beta) = weights
    head_size = x.shape[-1] // num_heads
    if training:
        batch, length = tf.shape(x)[0], tf.shape(x)[1]
        probabilities_keep, attended_keep, output_keep = keep_masks(
            [[batch, num_heads, length, length], [batch, length, x.shape[-1]], [batch, length, x.shape[-1]]],
            dropout, seed, x.dtype)

    # MultiHeadAttention's query, key and value EinsumDense: "abc,cde->abde", [B, L, heads,
    # head_size] each. In training as one product with the three kernels side by side on the
    # heads axis: the same dot products; the backward pass then has one product per gradient
    # and one bias-gradient reduction, and XLA fuses the three AdamW updates (they read one
    # gradient buffer). Compiled for an H100, ELECTRA-Small's step launches 2,135 kernels
    # instead of 2,567 (benchmarks/gpu_kernels.py; docs/results.md, with XLA on CPU's cost).
    # Inference keeps three products: one product would copy the kernels on every call.
    if fuse_projections:
        projected = ops.add(
            ops.einsum("abc,cde->abde", x, ops.concatenate([query_kernel, key_kernel, value_kernel], axis=1)),
            ops.concatenate([query_bias, key_bias, value_bias], axis=0))
        query, key, value = ops.split(projected, 3, axis=2)
    else:
        query, key, value = (ops.add(ops.einsum("abc,cde->abde", x, kernel), bias) for kernel, bias in
                             ((query_kernel, query_bias), (key_kernel, key_bias), (value_kernel, value_bias)))
    query = ops.multiply(query, ops.cast(1.0 / math.sqrt(head_size), x.dtype))
    scores = ops.einsum("aecd,abcd->acbe", key, query)  # [B, heads, L_query, L_key]
    # keras.layers.Softmax with a mask: padded keys get a large negative score, and rows with
    # no real key are zeroed after the softmax.
    scores = ops.where(mask, scores, -3e4 if x.dtype == tf.float16 else -1e9)
    probabilities = ops.where(mask, ops.softmax(scores, axis=-1), 0.0)
    if training:
        probabilities = apply_keep_mask(probabilities, probabilities_keep, dropout)
    context = ops.einsum("acbe,aecd->abcd", probabilities, value)  # [B, L, heads, head_size]
    attended = ops.add(ops.einsum("abcd,cde->abe", context, output_kernel), output_bias)
    if training:
        attended = apply_keep_mask(attended, attended_keep, dropout)
    x = ops.layer_normalization(attended + x, attention_gamma, attention_beta, axis=-1, epsilon=epsilon)

    intermediate = ops.gelu(ops.add(ops.matmul(x, intermediate_kernel), intermediate_bias), approximate=False)
    output = ops.add(ops.matmul(intermediate, ffn_kernel), ffn_bias)
    if training:
        output = apply_keep_mask(output, output_keep, dropout)
    return ops.layer_normalization(output + x, ffn_gamma, ffn_beta, axis=-1, epsilon=epsilon)


# Training: not inlined, so grappler optimizes each body once (start-up; module docstring).
_BLOCK_NOT_INLINED = tf.function(post_ln_block, autograph=False, experimental_attributes={"_noinline": True})
# Inference: inlined, so the served graph is optimized whole (module docstring).
_BLOCK_INLINED = tf.function(post_ln_block, autograph=False)


def tracing_for_xla() -> bool:
    """Whether the graph being traced will be compiled by XLA (`jit_compile=True`, as Keras'
    `compile(jit_compile=True)` traces its step). TensorFlow has no public query for this; if
    its private one moves, the answer is "yes", which only costs start-up: the block is then
    traced per layer, as keras-hub's is."""
    try:
        from tensorflow.python.ops import control_flow_util
        return control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())
    except (ImportError, AttributeError):
        return True
