"""`ElectraEmbeddings`: the embedding layer ELECTRA's generator and discriminator share.

Word + position + token-type embeddings, LayerNorm (epsilon 1e-12) and dropout, all
`embedding_size` wide. One instance is passed to both networks (`encoders.py`), so they hold
the same variables, as in the official code; the word table is also the generator's output
layer (tied), which is why it is keras-hub's `ReversibleEmbedding`.

`GradientDisentangledEmbeddings` is the discriminator's side of DeBERTaV3's gradient-disentangled
embedding sharing (GDES; He, Gao, Chen, ICLR 2023): it reads the shared word and position tables
through a stop-gradient plus residual tables of its own (zero at the start), so the replaced-token
loss trains only the residuals and the generator's masked-LM loss alone trains the shared tables.
`merged()` gives the ordinary embeddings it computes (summed tables): what is saved and exported.
"""

from __future__ import annotations

import keras
import keras_hub
import numpy as np
import tensorflow as tf

from electra_tf.models.config import ModelConfig
from electra_tf.models.dropout import Dropout
from electra_tf.models.heads import truncated_normal


@keras.saving.register_keras_serializable(package="electra_tf")
class SinusoidalInitializer(keras.initializers.Initializer):
    """The Transformer's sin/cos position code (Vaswani et al., 2017), scaled so its standard
    deviation is `stddev` like the truncated-normal tables beside it: row p, column 2i is
    sin(p / 10000^(2i/d)), column 2i+1 the matching cos. Nearby rows start out similar, so a
    small model can attend by relative position from the first step.

    >>> import numpy as np
    >>> table = np.asarray(SinusoidalInitializer(0.02)((128, 16)))
    >>> round(float(table.std()), 3), bool(np.dot(table[5], table[6]) > np.dot(table[5], table[60]))
    (0.02, True)
    """

    def __init__(self, stddev: float = 0.02):
        self.stddev = stddev

    def __call__(self, shape, dtype=None):
        positions, width = shape
        angles = np.arange(positions)[:, None] / np.power(10000.0, np.arange(0, width, 2) / width)[None, :]
        table = np.zeros((positions, width))
        table[:, 0::2] = np.sin(angles)
        table[:, 1::2] = np.cos(angles[:, : width // 2])
        table *= self.stddev / table.std()
        return keras.ops.convert_to_tensor(table, dtype=dtype or "float32")

    def get_config(self):
        return {"stddev": self.stddev}


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraEmbeddings(keras.layers.Layer):
    """Word + position + token-type embeddings, LayerNorm and dropout.

    Example:
    >>> import numpy as np
    >>> embeddings = ElectraEmbeddings(vocab_size=100, embedding_size=16)
    >>> tuple(embeddings(np.ones((2, 7), "int32"), np.zeros((2, 7), "int32")).shape)
    (2, 7, 16)
    """

    residual_tables = False  # the word and position tables start at zero (GradientDisentangledEmbeddings)

    def __init__(self, vocab_size: int, embedding_size: int, max_position_embeddings: int = 512,
                 type_vocab_size: int = 2, dropout: float = 0.1, layer_norm_epsilon: float = 1e-12,
                 initializer_range: float = 0.02, position_embedding_init: str = "truncated_normal", **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.dropout_rate = dropout
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range
        self.position_embedding_init = position_embedding_init
        init = truncated_normal(initializer_range)
        table_init = "zeros" if self.residual_tables else init
        # Reversible, so the generator's output layer can be this very table.
        self.word_embeddings = keras_hub.layers.ReversibleEmbedding(
            vocab_size, embedding_size, tie_weights=True, embeddings_initializer=table_init,
            dtype=self.dtype_policy, name="word_embeddings")
        position_init = SinusoidalInitializer(initializer_range) if position_embedding_init == "sinusoidal" else init
        position_init = "zeros" if self.residual_tables else position_init
        self.position_embeddings = keras_hub.layers.PositionEmbedding(
            max_position_embeddings, initializer=position_init, dtype=self.dtype_policy,
            name="position_embeddings")
        self.token_type_embeddings = keras.layers.Embedding(
            type_vocab_size, embedding_size, embeddings_initializer=init,
            dtype=self.dtype_policy, name="token_type_embeddings")
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="layer_norm")
        self.dropout = Dropout(dropout, dtype=self.dtype_policy, name="dropout")

    def build(self, input_shape=None):
        self.word_embeddings.build((None, None))
        self.position_embeddings.build((None, None, self.embedding_size))
        self.token_type_embeddings.build((None, None))
        self.layer_norm.build((None, None, self.embedding_size))
        self.built = True

    def call(self, token_ids, segment_ids, training=None):
        words = self.word_embeddings(token_ids)
        x = words + self.position_embeddings(words) + self.token_type_embeddings(segment_ids)
        return self.dropout(self.layer_norm(x), training=training)

    def get_config(self):
        return {
            **super().get_config(),
            "vocab_size": self.vocab_size,
            "embedding_size": self.embedding_size,
            "max_position_embeddings": self.max_position_embeddings,
            "type_vocab_size": self.type_vocab_size,
            "dropout": self.dropout_rate,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "initializer_range": self.initializer_range,
            "position_embedding_init": self.position_embedding_init,
        }

    @classmethod
    def from_model_config(cls, config: ModelConfig, embedding_size: int | None = None,
                          name: str = "embeddings") -> "ElectraEmbeddings":
        return cls(
            vocab_size=config.vocab_size,
            embedding_size=embedding_size or config.embedding_size,
            max_position_embeddings=config.max_position_embeddings,
            type_vocab_size=config.type_vocab_size,
            dropout=config.dropout,
            layer_norm_epsilon=config.layer_norm_epsilon,
            initializer_range=config.initializer_range,
            position_embedding_init=config.position_embedding_init,
            name=name,
        )


@keras.saving.register_keras_serializable(package="electra_tf")
class GradientDisentangledEmbeddings(ElectraEmbeddings):
    """The discriminator's embeddings under GDES (module docstring): word and position vectors are
    stop_gradient(shared table) + this layer's residual table (zero-initialised, as DeBERTaV3's
    `_weight`), token types and LayerNorm its own, as in microsoft/DeBERTa's replaced-token
    detection model (`apps/models/replaced_token_detection_model.py`, `share_embedding == 'gdes'`).

    Example:
    >>> shared = ElectraEmbeddings(vocab_size=100, embedding_size=16)
    >>> gdes = GradientDisentangledEmbeddings(shared)
    >>> ids, segments = np.ones((2, 7), "int32"), np.zeros((2, 7), "int32")
    >>> tuple(gdes(ids, segments).shape), float(np.abs(gdes.word_embeddings.embeddings).max())
    ((2, 7, 16), 0.0)
    >>> merged = gdes.merged()
    >>> bool(np.allclose(merged(ids, segments), gdes(ids, segments), atol=1e-6))
    True
    """

    residual_tables = True

    def __init__(self, shared, name: str = "discriminator_embeddings", **kwargs):
        shared = shared if isinstance(shared, ElectraEmbeddings) else keras.saving.deserialize_keras_object(shared)
        values = {key: value for key, value in shared.get_config().items() if key not in ("name", "trainable", "dtype")}
        super().__init__(**{**values, **kwargs, "name": name})
        self.shared = shared

    def call(self, token_ids, segment_ids, training=None):
        words = tf.stop_gradient(self.shared.word_embeddings(token_ids)) + self.word_embeddings(token_ids)
        positions = tf.stop_gradient(self.shared.position_embeddings(words)) + self.position_embeddings(words)
        x = words + positions + self.token_type_embeddings(segment_ids)
        return self.dropout(self.layer_norm(x), training=training)

    def merged(self) -> ElectraEmbeddings:
        """Ordinary embeddings computing the same: the summed word and position tables, this
        layer's token types and LayerNorm (named as the discriminator's own embeddings)."""
        values = {key: value for key, value in self.get_config().items() if key not in ("name", "shared")}
        merged = ElectraEmbeddings(**{**values, "name": "embeddings"})
        merged.build()
        tables = ((merged.word_embeddings, self.shared.word_embeddings, self.word_embeddings),
                  (merged.position_embeddings, self.shared.position_embeddings, self.position_embeddings),
                  (merged.token_type_embeddings, None, self.token_type_embeddings),
                  (merged.layer_norm, None, self.layer_norm))
        for target, shared, own in tables:
            weights = [keras.ops.convert_to_numpy(w) for w in own.weights]
            if shared is not None:
                weights = [w + keras.ops.convert_to_numpy(v) for w, v in zip(weights, shared.weights)]
            target.set_weights(weights)
        return merged

    def get_config(self):
        return {**super().get_config(), "shared": keras.saving.serialize_keras_object(self.shared)}
