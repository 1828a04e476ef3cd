"""ELECTRA's two networks and the embedding layer they share.

    token_ids, segment_ids
            |
    ElectraEmbeddings  (word + position + token type -> LayerNorm -> dropout)   one instance,
            |                                                                owned once,
    +-------+---------------------------+                                    used by both
    |                                   |
    Discriminator                       Generator
      embeddings_project (if sizes differ)  embeddings_project (if sizes differ)
      L x TransformerLayer (post-LN)        L' x TransformerLayer (narrower)
      ReplacedTokenDetectionHead -> [B, L]  MaskedLMHead at mask_positions -> [B, N, V]
                                            (output layer = the shared word-embedding table)

The transformer blocks are `TransformerLayer` (models/transformer.py): BERT's post-LayerNorm
block with exact GELU, epsilon 1e-12 and truncated-normal(0.02) initialization, the block
ELECTRA uses. The attention mask is made once per encoder, not per layer. keras-hub's own `ElectraBackbone` is not used: it cannot take an
external embedding layer (needed for sharing) and uses tanh-approximate GELU.

Weight layout, one-to-one with the official TF1 / HuggingFace checkpoints (import is a
separate feature):

    embeddings/word_embeddings            electra/embeddings/word_embeddings
    embeddings/position_embeddings        electra/embeddings/position_embeddings
    embeddings/token_type_embeddings      electra/embeddings/token_type_embeddings
    embeddings/layer_norm                 electra/embeddings/LayerNorm
    discriminator/embeddings_project      electra/embeddings_project
    discriminator/transformer_layer_<i>   electra/encoder/layer_<i>  (q/k/v kernels reshaped
                                          [H, heads, H/heads] <-> [H, H])
    discriminator/discriminator_predictions/{dense,dense_prediction}
    generator/embeddings_project          generator/embeddings_project
    generator/transformer_layer_<i>       generator/encoder/layer_<i>
    generator/generator_predictions/{dense,layer_norm,output_bias}
                                          generator_predictions/{dense,LayerNorm,output_bias}
"""

from __future__ import annotations

import keras

from electra_tf.models.config import ModelConfig
from electra_tf.models.embeddings import ElectraEmbeddings
from electra_tf.models.heads import (OFFICIAL_DEFAULT_DENSE_INIT, MaskedLMHead, ReplacedTokenDetectionHead,
                                     truncated_normal)
from electra_tf.models.signatures import discriminator_endpoints, discriminator_litert_endpoint
from electra_tf.models.transformer import TransformerLayer, attention_mask


def deserialize_as(value, cls, owner: str, argument: str):
    """`value`, rebuilt from its Keras config if it is one, checked to be a `cls`."""
    if isinstance(value, dict):
        value = keras.saving.deserialize_keras_object(value)
    if not isinstance(value, cls):
        raise TypeError(f"{owner}: `{argument}` must be a {cls.__name__}, got {type(value).__name__}.")
    return value


class _EncoderModel(keras.Model):
    """Shared embeddings -> own projection -> transformer stack. Subclasses add a head.

    The embedding layer is passed in, not created, so two models can hold the same instance.
    All variables are created in the constructor: nothing waits for a first call.
    """

    def __init__(self, embeddings, hidden_size: int, num_layers: int, num_heads: int,
                 intermediate_size: int, dropout: float = 0.1, layer_norm_epsilon: float = 1e-12,
                 initializer_range: float = 0.02, **kwargs):
        super().__init__(**kwargs)
        embeddings = deserialize_as(embeddings, ElectraEmbeddings, self.name, "embeddings")
        if not embeddings.built:
            embeddings.build()
        self.embeddings = embeddings
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.intermediate_size = intermediate_size
        self.dropout_rate = dropout
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range

        init = truncated_normal(initializer_range)
        # Variables are created here, under the model's name, so their paths read
        # "discriminator/transformer_layer_0/..." and "generator/...".
        with keras.name_scope(self.name):
            self._create_layers(embeddings.embedding_size, init)

    def _create_layers(self, embedding_size, init):
        hidden_size = self.hidden_size
        self.embeddings_project = None
        if embedding_size != hidden_size:
            # Official: `tf.layers.dense(..., name="embeddings_project")`, no initializer given.
            self.embeddings_project = keras.layers.Dense(
                hidden_size, kernel_initializer=OFFICIAL_DEFAULT_DENSE_INIT, dtype=self.dtype_policy,
                name="embeddings_project")
            self.embeddings_project.build((None, None, embedding_size))
        self.transformer_layers = []
        for index in range(self.num_layers):
            layer = TransformerLayer(
                intermediate_dim=self.intermediate_size, num_heads=self.num_heads,
                dropout=self.dropout_rate, layer_norm_epsilon=self.layer_norm_epsilon,
                kernel_initializer=init, dtype=self.dtype_policy, name=f"transformer_layer_{index}")
            layer.build((None, None, hidden_size))
            self.transformer_layers.append(layer)

    def encode(self, inputs, training=None):
        """{"token_ids", "segment_ids", "padding_mask"} -> [B, L, hidden] sequence output."""
        x = self.embeddings(inputs["token_ids"], inputs["segment_ids"], training=training)
        if self.embeddings_project is not None:
            x = self.embeddings_project(x)
        mask = attention_mask(inputs["padding_mask"])
        for layer in self.transformer_layers:
            x = layer(x, padding_mask=mask, training=training)
        return x

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.saving.serialize_keras_object(self.dtype_policy),
            "embeddings": keras.saving.serialize_keras_object(self.embeddings),
            "hidden_size": self.hidden_size,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "intermediate_size": self.intermediate_size,
            "dropout": self.dropout_rate,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "initializer_range": self.initializer_range,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)


@keras.saving.register_keras_serializable(package="electra_tf")
class Discriminator(_EncoderModel):
    """The model ELECTRA keeps: per-token "was this token replaced?" logits.

    Call with {"token_ids", "segment_ids", "padding_mask"} (int32 [B, L]); returns
    {"logits": float32 [B, L], "sequence_output": [B, L, hidden]}.

    Example:
    >>> import numpy as np
    >>> from electra_tf.models.config import ModelConfig
    >>> config = ModelConfig(vocab_size=8192, hidden_size=128, num_layers=2, num_heads=2, intermediate_size=512)
    >>> embeddings = ElectraEmbeddings.from_model_config(config)
    >>> discriminator = Discriminator.from_model_config(config, embeddings)
    >>> batch = {"token_ids": np.ones((2, 8), "int32"), "segment_ids": np.zeros((2, 8), "int32"),
    ...          "padding_mask": np.ones((2, 8), "int32")}
    >>> tuple(discriminator(batch)["logits"].shape)
    (2, 8)
    """

    def __init__(self, embeddings, hidden_size, **kwargs):
        kwargs.setdefault("name", "discriminator")
        super().__init__(embeddings, hidden_size, **kwargs)
        with keras.name_scope(self.name):
            self.head = ReplacedTokenDetectionHead(
                hidden_size, self.initializer_range, dtype=self.dtype_policy,
                name="discriminator_predictions")
            self.head.build((None, None, hidden_size))
        self.built = True

    def call(self, inputs, training=None):
        sequence_output = self.encode(inputs, training=training)
        logits = keras.ops.cast(self.head(sequence_output), "float32")
        return {"logits": logits, "sequence_output": sequence_output}

    # --- what it serves (every servable model answers these; serving/ asks them) ----------------
    def serving_endpoints(self, tokenizer, max_seq_length: int) -> dict:
        """The SavedModel's signatures (`signatures.py`)."""
        return discriminator_endpoints(self, tokenizer, max_seq_length)

    def serving_task(self, max_seq_length: int) -> None:
        """task.json of an export: the discriminator has no task."""
        return None

    def litert_endpoint(self, lite_tokenizer, max_seq_length: int):
        """(function of the text -> outputs, input names) of a LiteRT file (`serving/litert.py`)."""
        return discriminator_litert_endpoint(self, lite_tokenizer, max_seq_length), ["text"]

    @classmethod
    def from_model_config(cls, config: ModelConfig, embeddings: ElectraEmbeddings):
        return cls(
            embeddings, hidden_size=config.hidden_size, num_layers=config.num_layers,
            num_heads=config.num_heads, intermediate_size=config.intermediate_size,
            dropout=config.dropout, layer_norm_epsilon=config.layer_norm_epsilon,
            initializer_range=config.initializer_range)


@keras.saving.register_keras_serializable(package="electra_tf")
class Generator(_EncoderModel):
    """The small masked language model that proposes replacements.

    Call with {"token_ids", "segment_ids", "padding_mask", "mask_positions"}; the head runs on
    the N masked positions only and returns {"logits": float32 [B, N, vocab],
    "sequence_output": [B, L, hidden]}. The output layer is the word-embedding table.

    Example:
    >>> import numpy as np
    >>> from electra_tf.models.config import ModelConfig
    >>> config = ModelConfig(vocab_size=8192, hidden_size=128, num_layers=2, num_heads=2, intermediate_size=512)
    >>> embeddings = ElectraEmbeddings.from_model_config(config)
    >>> generator = Generator.from_model_config(config.resized(32, num_heads=1, intermediate_size=128), embeddings)
    >>> batch = {"token_ids": np.ones((2, 8), "int32"), "segment_ids": np.zeros((2, 8), "int32"),
    ...          "padding_mask": np.ones((2, 8), "int32"),
    ...          "mask_positions": np.array([[1, 2, 0], [3, 0, 0]], "int32")}
    >>> tuple(generator(batch)["logits"].shape)
    (2, 3, 8192)
    """

    def __init__(self, embeddings, hidden_size, **kwargs):
        kwargs.setdefault("name", "generator")
        super().__init__(embeddings, hidden_size, **kwargs)
        with keras.name_scope(self.name):
            self.head = MaskedLMHead(
                self.embeddings.word_embeddings, self.layer_norm_epsilon,
                self.initializer_range, dtype=self.dtype_policy, name="generator_predictions")
            self.head.build((None, None, hidden_size))
        self.built = True

    def call(self, inputs, training=None):
        sequence_output = self.encode(inputs, training=training)
        logits = self.head(sequence_output, mask_positions=inputs["mask_positions"])
        return {"logits": logits, "sequence_output": sequence_output}

    @classmethod
    def from_model_config(cls, config: ModelConfig, embeddings: ElectraEmbeddings):
        """A generator of `config`'s sizes (`pretraining.config.ObjectiveConfig.generator_model`:
        the configured fraction of the discriminator, or its full size for the MLM baseline)."""
        return cls(embeddings, hidden_size=config.hidden_size, num_layers=config.num_layers,
                   num_heads=config.num_heads, intermediate_size=config.intermediate_size, dropout=config.dropout,
                   layer_norm_epsilon=config.layer_norm_epsilon, initializer_range=config.initializer_range)


def build_discriminator(config: ModelConfig):
    """A freshly initialised discriminator (shared-embedding layout, as in pre-training)."""
    return Discriminator.from_model_config(config, ElectraEmbeddings.from_model_config(config))


def model_weights(model) -> list:
    """The model's weights, without dropout seed-generator states: those are random-number
    state, and their names are numbered in creation order, so they do not match by name."""
    return [v for v in model.variables if "seed_generator" not in v.path]
