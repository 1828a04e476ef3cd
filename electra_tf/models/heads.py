"""Output heads on top of an ELECTRA encoder.

- `ReplacedTokenDetectionHead`: the discriminator's per-token "replaced?" logit,
  dense(hidden) -> GELU -> dense(1) (official `discriminator_predictions`; the first dense
  truncated-normal, the second Glorot, as the official initializers).
- `MaskedLMHead`: the generator's head, evaluated at the masked positions only,
  dense(embedding_size) -> GELU -> LayerNorm -> matmul with the shared word-embedding table
  + bias (official `generator_predictions`).
"""

from __future__ import annotations

import keras
import tensorflow as tf

from electra_tf.models.transformer import gelu


def truncated_normal(stddev: float) -> keras.initializers.Initializer:
    return keras.initializers.TruncatedNormal(stddev=stddev)


# The official code passes `create_initializer(initializer_range)` to most layers but not to
# every one: a `tf.layers.dense` call without `kernel_initializer` gets TF1's default,
# Glorot uniform. That matters: with the RTD output layer at truncated-normal(0.02) the
# gradient reaching the encoder is about seven times smaller, and a 2-layer discriminator
# cannot learn "is the previous token in this set" (it needs attention by position) in 600
# steps of length 16; with Glorot it does in about 100 (tests/models/test_encoders.py).
OFFICIAL_DEFAULT_DENSE_INIT = "glorot_uniform"


@keras.saving.register_keras_serializable(package="electra_tf")
class ReplacedTokenDetectionHead(keras.layers.Layer):
    """Per-token logits that the token was replaced by the generator.

    Example:
    >>> import numpy as np
    >>> head = ReplacedTokenDetectionHead(hidden_size=8)
    >>> tuple(head(np.zeros((2, 5, 8), "float32")).shape)
    (2, 5)
    """

    def __init__(self, hidden_size: int, initializer_range: float = 0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range
        # GELU is the encoder's (`transformer.gelu`): computed in float32, and traced in the form
        # an export asks for (a runtime without erfc).
        self.dense = keras.layers.Dense(
            hidden_size, kernel_initializer=truncated_normal(initializer_range), dtype=self.dtype_policy,
            name="dense")
        # Official: `tf.layers.dense(hidden, units=1)`, no initializer given.
        self.dense_prediction = keras.layers.Dense(
            1, kernel_initializer=OFFICIAL_DEFAULT_DENSE_INIT,
            dtype=self.dtype_policy, name="dense_prediction")

    def build(self, input_shape):
        self.dense.build(input_shape)
        self.dense_prediction.build(tuple(input_shape[:-1]) + (self.hidden_size,))
        self.built = True

    def call(self, sequence_output):
        logits = self.dense_prediction(gelu(self.dense(sequence_output)))
        return keras.ops.squeeze(logits, axis=-1)

    def get_config(self):
        return {**super().get_config(), "hidden_size": self.hidden_size,
                "initializer_range": self.initializer_range}


class MaskedLMHead(keras.layers.Layer):
    """The generator's head at the masked positions only, tied to the word embeddings.

    gather(sequence_output, mask_positions) -> dense(embedding_size) -> GELU (exact) ->
    LayerNorm -> matmul with the word-embedding table (transposed) + output bias, in float32.

    keras-hub's `MaskedLMHead` computes the same thing, but 0.32 builds it with
    `autocast=False` and adds its float32 bias to a bfloat16/float16 tensor, which fails under
    mixed precision; so this one is ours. Built by `Generator`, which owns its config.
    """

    def __init__(self, word_embeddings, layer_norm_epsilon: float = 1e-12,
                 initializer_range: float = 0.02, **kwargs):
        super().__init__(**kwargs)
        self.word_embeddings = word_embeddings
        self.dense = keras.layers.Dense(  # then the encoder's GELU, as the discriminator's head
            word_embeddings.output_dim, kernel_initializer=truncated_normal(initializer_range),
            dtype=self.dtype_policy, name="dense")
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="layer_norm")

    def build(self, input_shape):
        self.dense.build(input_shape)
        self.layer_norm.build(tuple(input_shape[:-1]) + (self.word_embeddings.output_dim,))
        self.output_bias = self.add_weight(
            shape=(self.word_embeddings.input_dim,), initializer="zeros", name="output_bias")
        self.built = True

    def call(self, sequence_output, mask_positions):
        # [B, L, H] at [B, N] -> [B, N, H]. A batched gather on int32 positions (keras.ops'
        # take_along_axis computes its indices in int64, which oneDNN warns about on every run).
        x = tf.gather(sequence_output, tf.cast(mask_positions, tf.int32), batch_dims=1)
        x = self.layer_norm(gelu(self.dense(x)))
        logits = self.word_embeddings(x, reverse=True)
        return keras.ops.cast(logits, "float32") + keras.ops.cast(self.output_bias, "float32")
