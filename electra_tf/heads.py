"""Output heads on top of an ELECTRA encoder.

- `ReplacedTokenDetectionHead`: the discriminator's per-token "replaced?" logit,
  dense(hidden) -> GELU -> dense(1) (official `discriminator_predictions`).
- `masked_lm_head`: the generator's head, evaluated at the masked positions only,
  dense(embedding_size) -> GELU -> LayerNorm -> matmul with the shared word-embedding table
  + bias (official `generator_predictions`). This is exactly keras-hub's `MaskedLMHead` with
  a tied `ReversibleEmbedding`, so we configure that rather than write it again.
"""

from __future__ import annotations

import keras
import keras_hub


def truncated_normal(stddev: float) -> keras.initializers.Initializer:
    return keras.initializers.TruncatedNormal(stddev=stddev)


@keras.saving.register_keras_serializable(package="electra_tf")
class ReplacedTokenDetectionHead(keras.layers.Layer):
    """Per-token logits that the token was replaced by the generator.

    Example:
    >>> import numpy as np
    >>> head = ReplacedTokenDetectionHead(hidden_size=8)
    >>> head(np.zeros((2, 5, 8), "float32")).shape
    (2, 5)
    """

    def __init__(self, hidden_size: int, initializer_range: float = 0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range
        self.dense = keras.layers.Dense(
            hidden_size, activation="gelu", kernel_initializer=truncated_normal(initializer_range),
            dtype=self.dtype_policy, name="dense")
        self.dense_prediction = keras.layers.Dense(
            1, kernel_initializer=truncated_normal(initializer_range),
            dtype=self.dtype_policy, name="dense_prediction")

    def build(self, input_shape):
        self.dense.build(input_shape)
        self.dense_prediction.build(tuple(input_shape[:-1]) + (self.hidden_size,))
        self.built = True

    def call(self, sequence_output):
        logits = self.dense_prediction(self.dense(sequence_output))
        return keras.ops.squeeze(logits, axis=-1)

    def get_config(self):
        return {**super().get_config(), "hidden_size": self.hidden_size,
                "initializer_range": self.initializer_range}


def masked_lm_head(word_embeddings, layer_norm_epsilon: float = 1e-12,
                   initializer_range: float = 0.02, dtype=None) -> keras_hub.layers.MaskedLMHead:
    """The generator head, tied to `word_embeddings` (a keras-hub `ReversibleEmbedding`).

    `intermediate_activation="gelu"` is Keras' exact (erf) GELU, as in the official code.
    """
    return keras_hub.layers.MaskedLMHead(
        token_embedding=word_embeddings,
        intermediate_activation="gelu",
        layer_norm_epsilon=layer_norm_epsilon,
        kernel_initializer=truncated_normal(initializer_range),
        dtype=dtype,
        name="generator_predictions",
    )
