"""The name mapping between our variables and the formats ELECTRA is shared in, in one table:
`weight_table(model_config)`; keras-hub's `ElectraBackbone` (the discriminator's encoder only)
is `WeightName.keras_hub`.

Each row names one tensor three ways and says how its values convert:

    ours (Keras variable path)                  HuggingFace (safetensors key)              Google TF1
    embeddings/word_embeddings/embeddings       electra.embeddings.word_embeddings.weight  electra/embeddings/word_embeddings
    embeddings/position_embeddings/embeddings   electra.embeddings.position_embeddings.weight  .../position_embeddings
    embeddings/token_type_embeddings/embeddings electra.embeddings.token_type_embeddings.weight .../token_type_embeddings
    embeddings/layer_norm/{gamma,beta}          electra.embeddings.LayerNorm.{weight,bias} electra/embeddings/LayerNorm/{gamma,beta}
    discriminator/embeddings_project/*          electra.embeddings_project.*               electra/embeddings_project/*
    discriminator/transformer_layer_<i>/
      self_attention_layer/{query,key,value}/*  electra.encoder.layer.<i>.attention.self.{query,key,value}.*
                                                                                           electra/encoder/layer_<i>/attention/self/*
      self_attention_layer/attention_output/*   ...attention.output.dense.*                .../attention/output/dense/*
      self_attention_layer_norm/*               ...attention.output.LayerNorm.*            .../attention/output/LayerNorm/*
      feedforward_intermediate_dense/*          ...intermediate.dense.*                    .../intermediate/dense/*
      feedforward_output_dense/*                ...output.dense.*                          .../output/dense/*
      feedforward_layer_norm/*                  ...output.LayerNorm.*                      .../output/LayerNorm/*
    discriminator/discriminator_predictions/
      dense/*                                   discriminator_predictions.dense.*          discriminator_predictions/dense/*
      dense_prediction/*                        discriminator_predictions.dense_prediction.*  discriminator_predictions/dense_1/*
    generator/embeddings_project/*              (generator) electra.embeddings_project.*   generator/embeddings_project/*
    generator/transformer_layer_<i>/...         (generator) electra.encoder.layer.<i>...   generator/encoder/layer_<i>/...
    generator/generator_predictions/
      dense/*, layer_norm/*                     generator_predictions.{dense,LayerNorm}.*  generator_predictions/{dense,LayerNorm}/*
      output_bias                               generator_lm_head.bias                     generator_predictions/output_bias

keras-hub's `ElectraBackbone` holds the discriminator's encoder under its own layer names:
`embeddings/word_embeddings` is `token_embedding`, `position_embeddings` `position_embedding`,
`token_type_embeddings` `segment_embedding`, `embeddings/layer_norm` `embeddings_layer_norm`,
`discriminator/embeddings_project` `embeddings_projection`, and `discriminator/transformer_layer_<i>/...`
is `transformer_layer_<i>/...` (the same sublayer names and the same array layouts: this
package's transformer layer is named after keras-hub's). It has no place for either head.

HuggingFace keeps the discriminator (`ElectraForPreTraining`) and the generator
(`ElectraForMaskedLM`) in two folders, each with its own copy of the embeddings (equal in the
released models, which were trained with them shared); `generator_lm_head.weight` is the word
embedding table (tied). The official TF1 checkpoint holds both networks, sharing
`electra/embeddings/*`.

Values: TF1 and Keras dense kernels are [in, out]; PyTorch's are [out, in] (transposed). Keras'
multi-head attention keeps the heads as an axis: query/key/value kernels are [H, heads, H/heads]
(biases [heads, H/heads]) and the output kernel [heads, H/heads, H]; both formats store them as
[H, H] matrices (and [H] biases), so they are reshaped.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DISCRIMINATOR, GENERATOR = "discriminator", "generator"
# Our embedding layer's tables and LayerNorm under keras-hub's ElectraBackbone layer names.
_KERAS_HUB_EMBEDDINGS = {"embeddings/word_embeddings": "token_embedding",
                         "embeddings/position_embeddings": "position_embedding",
                         "embeddings/token_type_embeddings": "segment_embedding",
                         "embeddings/layer_norm": "embeddings_layer_norm",
                         "discriminator/embeddings_project": "embeddings_projection"}

# (ours, HuggingFace, TF1, kind) inside one transformer layer. kind: "copy" (same array),
# "bias" (reshaped), "kernel<N>" (a matrix whose first N of our axes are its input side).
_LAYER = (
    ("self_attention_layer/query/kernel", "attention.self.query.weight", "attention/self/query/kernel", "kernel1"),
    ("self_attention_layer/query/bias", "attention.self.query.bias", "attention/self/query/bias", "bias"),
    ("self_attention_layer/key/kernel", "attention.self.key.weight", "attention/self/key/kernel", "kernel1"),
    ("self_attention_layer/key/bias", "attention.self.key.bias", "attention/self/key/bias", "bias"),
    ("self_attention_layer/value/kernel", "attention.self.value.weight", "attention/self/value/kernel", "kernel1"),
    ("self_attention_layer/value/bias", "attention.self.value.bias", "attention/self/value/bias", "bias"),
    ("self_attention_layer/attention_output/kernel", "attention.output.dense.weight",
     "attention/output/dense/kernel", "kernel2"),
    ("self_attention_layer/attention_output/bias", "attention.output.dense.bias", "attention/output/dense/bias",
     "copy"),
    ("self_attention_layer_norm/gamma", "attention.output.LayerNorm.weight", "attention/output/LayerNorm/gamma",
     "copy"),
    ("self_attention_layer_norm/beta", "attention.output.LayerNorm.bias", "attention/output/LayerNorm/beta", "copy"),
    ("feedforward_intermediate_dense/kernel", "intermediate.dense.weight", "intermediate/dense/kernel", "kernel1"),
    ("feedforward_intermediate_dense/bias", "intermediate.dense.bias", "intermediate/dense/bias", "copy"),
    ("feedforward_output_dense/kernel", "output.dense.weight", "output/dense/kernel", "kernel1"),
    ("feedforward_output_dense/bias", "output.dense.bias", "output/dense/bias", "copy"),
    ("feedforward_layer_norm/gamma", "output.LayerNorm.weight", "output/LayerNorm/gamma", "copy"),
    ("feedforward_layer_norm/beta", "output.LayerNorm.bias", "output/LayerNorm/beta", "copy"),
)

_DENSE = (("kernel", "weight", "kernel", "kernel1"), ("bias", "bias", "bias", "copy"))
_LAYER_NORM = (("gamma", "weight", "gamma", "copy"), ("beta", "bias", "beta", "copy"))


@dataclass(frozen=True)
class WeightName:
    ours: str
    model: str  # which HuggingFace folder holds it: DISCRIMINATOR or GENERATOR
    huggingface: str
    google: str
    kind: str

    @property
    def keras_hub(self) -> str | None:
        """The variable path in keras-hub's `ElectraBackbone`; None for what it has no place for
        (the replaced-token head, the generator)."""
        layer, _, weight = self.ours.rpartition("/")
        if layer in _KERAS_HUB_EMBEDDINGS:
            return f"{_KERAS_HUB_EMBEDDINGS[layer]}/{weight}"
        if layer.startswith("discriminator/transformer_layer_"):
            return self.ours.removeprefix("discriminator/")
        return None

    def to_ours(self, value: np.ndarray, shape: tuple, source: str) -> np.ndarray:
        """A tensor of `source` ("huggingface", "google" or "keras_hub") as our variable of
        `shape`; a ValueError if its shape is not the one `shape` stands for."""
        value = np.asarray(value)
        if source == "keras_hub":  # the same layouts as ours
            expected = tuple(shape)
        elif self.kind.startswith("kernel"):
            if source == "huggingface":
                value = value.T
            expected = self._matrix_shape(shape)
        elif self.kind == "bias":
            expected = (int(np.prod(shape)),)
        else:
            expected = tuple(shape)
        if value.shape != expected:
            raise ValueError(f"{self.ours}: expected {expected}, got {value.shape}")
        return value.reshape(shape)

    def _matrix_shape(self, shape: tuple) -> tuple:
        split = int(self.kind[len("kernel"):])
        return int(np.prod(shape[:split])), int(np.prod(shape[split:]))

    def from_ours(self, value: np.ndarray, target: str) -> np.ndarray:
        """Our variable's value as `target` ("huggingface" or "google") stores it."""
        value = np.asarray(value)
        if self.kind == "bias":
            return value.reshape(-1)
        if self.kind.startswith("kernel"):
            value = value.reshape(self._matrix_shape(value.shape))
            return np.ascontiguousarray(value.T) if target == "huggingface" else value
        return value


def _rows(ours_prefix, model, hf_prefix, google_prefix, rows, hf_sep="."):
    return [WeightName(f"{ours_prefix}/{ours}", model, f"{hf_prefix}{hf_sep}{hf}", f"{google_prefix}/{google}", kind)
            for ours, hf, google, kind in rows]


def embedding_names(model: str = DISCRIMINATOR) -> list[WeightName]:
    """The shared embeddings, as one HuggingFace folder (discriminator or generator) stores them."""
    tables = [WeightName(f"embeddings/{table}/embeddings", model, f"electra.embeddings.{table}.weight",
                         f"electra/embeddings/{table}", "copy")
              for table in ("word_embeddings", "position_embeddings", "token_type_embeddings")]
    return tables + _rows("embeddings/layer_norm", model, "electra.embeddings.LayerNorm",
                          "electra/embeddings/LayerNorm", _LAYER_NORM)


def weight_table(model, generator=None, rtd_head: bool = True) -> list[WeightName]:
    """Every tensor of the discriminator `model` (a `ModelConfig`) and, given its sizes
    (`PretrainingConfig.generator_model`), of the generator (shared embeddings once)."""
    names = embedding_names(DISCRIMINATOR)
    if model.embedding_size != model.hidden_size:
        names += _rows("discriminator/embeddings_project", DISCRIMINATOR, "electra.embeddings_project",
                       "electra/embeddings_project", _DENSE)
    for i in range(model.num_layers):
        names += _rows(f"discriminator/transformer_layer_{i}", DISCRIMINATOR, f"electra.encoder.layer.{i}",
                       f"electra/encoder/layer_{i}", _LAYER)
    if rtd_head:
        names += _rows("discriminator/discriminator_predictions/dense", DISCRIMINATOR,
                       "discriminator_predictions.dense", "discriminator_predictions/dense", _DENSE)
        names += _rows("discriminator/discriminator_predictions/dense_prediction", DISCRIMINATOR,
                       "discriminator_predictions.dense_prediction", "discriminator_predictions/dense_1", _DENSE)
    if generator is None:
        return names
    if model.embedding_size != generator.hidden_size:
        names += _rows("generator/embeddings_project", GENERATOR, "electra.embeddings_project",
                       "generator/embeddings_project", _DENSE)
    for i in range(generator.num_layers):
        names += _rows(f"generator/transformer_layer_{i}", GENERATOR, f"electra.encoder.layer.{i}",
                       f"generator/encoder/layer_{i}", _LAYER)
    names += _rows("generator/generator_predictions/dense", GENERATOR, "generator_predictions.dense",
                   "generator_predictions/dense", _DENSE)
    names += _rows("generator/generator_predictions/layer_norm", GENERATOR, "generator_predictions.LayerNorm",
                   "generator_predictions/LayerNorm", _LAYER_NORM)
    names.append(WeightName("generator/generator_predictions/output_bias", GENERATOR, "generator_lm_head.bias",
                            "generator_predictions/output_bias", "copy"))
    return names
