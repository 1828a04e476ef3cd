"""keras-hub presets in and out: a backbone becomes a folder that
`keras_hub.models.ElectraBackbone.from_preset` and `ElectraTokenizer.from_preset` load (on every
Keras backend), and such a folder becomes a model_dir.

A preset, as keras-hub's `save_to_preset` writes it (and as Kaggle ships ELECTRA)::

    config.json                  registered_name "keras_hub>ElectraBackbone" and its arguments
    model.weights.h5             the backbone's weights
    tokenizer.json               registered_name "keras_hub>ElectraTokenizer" and its settings
    assets/tokenizer/vocabulary.txt
    metadata.json                keras and keras-hub versions, parameter count, date
    electra_tf.json              (written here) where the weights came from, what differs

Both directions go through keras-hub's own classes (`save_to_preset`, `from_preset`), so the
folder is exactly what keras-hub writes and reads. Reading is `models/keras_hub_electra.py`, which
`--pretrained PRESET` uses directly; `import_keras_hub` writes a model_dir from it. What a preset cannot say, stated rather than
hidden (docs/interop.md, "keras-hub presets"):

- keras-hub's transformer layers compute GELU with the tanh approximation; ELECTRA (and this
  package) uses the exact erf form. The same weights therefore give slightly different hidden
  states in keras-hub (measured in docs/results.md); fine-tuning in keras-hub adapts to it.
- keras-hub's backbone has a tanh pooler (`pooled_dense`) that ELECTRA never trains. An exported
  preset holds keras-hub's own initialisation there (truncated normal, stddev 0.02, drawn with a
  fixed seed, zero bias), as keras-hub's released ELECTRA presets do; ELECTRA's classifiers read
  the [CLS] vector, `sequence_output[:, 0]`. On import the pooler is dropped.
- keras-hub's backbone has no place for the replaced-token head: the preset keeps it beside the
  backbone as `replaced_token_head.keras`, a plain Keras model (dense, exact GELU, dense) a
  keras-hub user applies to `sequence_output` (zero-shot prompting needs it); importing the preset
  restores it, and a keras-hub preset without it starts it fresh. A preset holds no generator, so
  continued pre-training from an imported model_dir starts a generator of the config's size from
  scratch.
- keras-hub's `ElectraTokenizer` is WordPiece only, and its saved settings omit `split_on_cjk`
  (it reloads as True): a vocabulary with `tokenize_chinese_chars` false cannot be exported.
  A SentencePiece vocabulary is written as keras-hub's `SentencePieceTokenizer` over the same
  model. keras-hub 0.32's `from_preset` only builds a tokenizer class tied to the preset's
  backbone (`ElectraTokenizer`, WordPiece), so that one is constructed from its file:
  `keras_hub.tokenizers.SentencePieceTokenizer(proto=PRESET/assets/tokenizer/vocabulary.spm)`
  (`sentencepiece_tokenizer_file`).
- keras-hub fixes the LayerNorm epsilon at 1e-12 (ELECTRA's): another epsilon is refused.
"""

from __future__ import annotations

import json
from pathlib import Path

import keras
import keras_hub
import numpy as np

from electra_tf.data.vocabulary_files import (BASIC_TOKENIZATION, BERT_RULE, SENTENCEPIECE, SPECIAL_TOKENS,
                                              VocabularyError, check_casing)
from electra_tf.interop.convert import ConvertedWeights, checked_vocabulary, write_model_dir
from electra_tf.interop.huggingface import DEFAULT_MAX_SEQ_LENGTH, ConversionError
from electra_tf.models.backbone import keras_hub_tokenizer
from electra_tf.models.config import ModelConfig
from electra_tf.models.keras_hub_electra import (CONFIG_FILE, PRESET_PROVENANCE_FILE, RTD_HEAD_FILE, VOCABULARY_FILE,
                                                 WEIGHTS_FILE, ElectraBackbonePreset, model_values,
                                                 replaced_token_head_model, sentencepiece_tokenizer_file)
from electra_tf.models.weight_names import weight_table
from electra_tf.pretraining.config import PretrainingConfig
from electra_tf.serving.exports import ExportFormat, ExportOptions, ExportSource, register_format
from electra_tf.utils.files import atomic_folder
from electra_tf.utils.sections import ConfigError

PROVENANCE_FILE = PRESET_PROVENANCE_FILE
KERAS_HUB_LAYER_NORM_EPSILON = 1e-12  # fixed inside keras-hub's ElectraBackbone
POOLER_SEED = 0  # the pooler's initial values are drawn with this seed: an export is reproducible


def backbone_arguments(model) -> dict:
    """keras-hub `ElectraBackbone` arguments for a `ModelConfig`; a ConversionError for what
    keras-hub's backbone cannot hold."""
    if model.layer_norm_epsilon != KERAS_HUB_LAYER_NORM_EPSILON:
        raise ConversionError(f"the model's layer_norm_epsilon is {model.layer_norm_epsilon}; keras-hub's "
                              f"ElectraBackbone fixes it at {KERAS_HUB_LAYER_NORM_EPSILON} (ELECTRA's), so the "
                              "preset would compute another model. Nothing was written.")
    return {"vocab_size": model.vocab_size, "num_layers": model.num_layers, "num_heads": model.num_heads,
            "hidden_dim": model.hidden_size, "embedding_dim": model.embedding_size,
            "intermediate_dim": model.intermediate_size, "dropout": model.dropout,
            "max_sequence_length": model.max_position_embeddings, "num_segments": model.type_vocab_size}


def write_preset(backbone, output: str | Path, overwrite: bool = False, provenance: dict | None = None) -> Path:
    """Writes `backbone` (a `models.backbone.Backbone`) as a keras-hub preset folder at `output`:
    built in a temporary folder beside it and renamed, so a failure leaves nothing; an existing
    non-empty `output` only with `overwrite`. Returns the folder."""
    output = Path(output)
    _check_output(output, overwrite, "--export_dir")
    arguments = backbone_arguments(backbone.config.model)  # refusals before anything is written
    _check_tokenizer(backbone.tokenizer)
    with atomic_folder(output) as write:
        temporary = write.temporary
        theirs = _keras_hub_backbone(backbone.discriminator, arguments)
        theirs.save_to_preset(str(temporary))
        keras_hub_tokenizer(backbone.tokenizer).save_to_preset(str(temporary))
        replaced_token_head_model(backbone.discriminator.head).save(str(temporary / RTD_HEAD_FILE))
        (temporary / PROVENANCE_FILE).write_text(json.dumps({
            "source": backbone.source, "max_seq_length": backbone.config.max_seq_length,
            "tokenizer": backbone.tokenizer.settings.describe(), **(provenance or {}),
            BASIC_TOKENIZATION: backbone.tokenizer.settings.rule,  # what importing it back reads the vocabulary with
            "differences": ["GELU: keras-hub computes the tanh approximation, ELECTRA the exact (erf) form",
                            *(["tokenizer: keras-hub's WordPieceTokenizer splits words on ASCII whitespace only "
                               "(electra_tf_v1); this model's vocabulary splits as BERT (basic_tokenization bert): "
                               "texts with other Unicode spaces, format characters or '…' get other ids there"]
                              if backbone.tokenizer.settings.rule == BERT_RULE
                              and backbone.tokenizer.kind != SENTENCEPIECE else []),
                            "pooled_dense: keras-hub's initialisation (seed 0), not trained by ELECTRA; "
                            "classifiers read sequence_output[:, 0]",
                            f"the replaced-token head is {RTD_HEAD_FILE}, beside the backbone; no generator"]},
                                                  indent=2) + "\n", encoding="utf-8")
    return output


def _keras_hub_backbone(discriminator, arguments: dict):
    """keras-hub's ElectraBackbone holding the discriminator's encoder weights (float32)."""
    theirs = keras_hub.models.ElectraBackbone(**arguments, dtype="float32")
    ours = {name.keras_hub: name.ours for name in weight_table(ModelConfig(**model_values(arguments)),
                                                                  rtd_head=False)}
    values = {v.path: v for v in discriminator.variables}
    for variable in theirs.weights:
        if variable.path.startswith("pooled_dense/"):
            initial = (keras.initializers.TruncatedNormal(stddev=0.02, seed=POOLER_SEED)(variable.shape)
                       if variable.path.endswith("kernel") else np.zeros(variable.shape))
            variable.assign(keras.ops.convert_to_numpy(initial).astype("float32"))
            continue
        value = keras.ops.convert_to_numpy(values[ours[variable.path]]).astype("float32")
        variable.assign(value.reshape(tuple(variable.shape)))
    return theirs


def _check_tokenizer(tokenizer) -> None:
    if tokenizer.kind != SENTENCEPIECE and not tokenizer.settings.split_cjk:
        raise ConversionError(
            "the vocabulary's tokenizer keeps CJK ideographs inside words (tokenize_chinese_chars false); keras-hub's "
            "tokenizers do not save that setting (`split_on_cjk` is missing from their get_config) and reload "
            "splitting them, which would change the ids. Nothing was written.")



def import_keras_hub(preset: str | Path, output: str | Path, max_seq_length: int | None = None,
                     overwrite: bool = False):
    """Converts a keras-hub ELECTRA preset folder into a model_dir (returns its `ModelDir`).

    The preset holds the discriminator's encoder (and, when this package wrote it, the
    replaced-token head): a missing head and a generator of the config's size (ELECTRA's default
    fraction of the discriminator) start fresh, which the model_dir's imported_from.json records
    and continued pre-training accepts."""
    folder = ElectraBackbonePreset(preset)
    _check_output(Path(output), overwrite, "--output")
    values = model_values(folder.arguments)
    values["max_seq_length"] = min(max_seq_length or DEFAULT_MAX_SEQ_LENGTH, int(values["max_position_embeddings"]))
    try:
        config = PretrainingConfig.from_dict(values, source=str(folder.path / CONFIG_FILE))
    except ConfigError as error:
        raise ConversionError(str(error)) from None
    vocabulary, settings, sentencepiece_model = folder.tokenizer()
    _check_vocabulary(vocabulary, settings, config, folder.path)
    theirs = folder.weights()

    def read(name):
        if name.ours in head:
            return head[name.ours], f"{folder.path / RTD_HEAD_FILE}: {name.ours}"
        return theirs[name.keras_hub], f"{folder.path / WEIGHTS_FILE}: {name.keras_hub}"

    head = folder.rtd_head_weights(config.model)
    provenance = {"format": "keras_hub", "preset": str(folder.path), "rtd_head": bool(head),
                  "generator_weights": False, "generator_initialised": True}
    names = weight_table(config.model, rtd_head=bool(head))
    return write_model_dir(config, (vocabulary, settings, sentencepiece_model),
                            ConvertedWeights(names, read, "keras_hub", provenance), output, overwrite)


def _check_vocabulary(vocabulary, settings, config, where: Path) -> None:
    checked_vocabulary(vocabulary, config, where)
    missing = [token for token in SPECIAL_TOKENS if token not in vocabulary]
    if missing:
        raise ConversionError(f"{where / VOCABULARY_FILE}: the vocabulary lacks {', '.join(missing)}, which "
                              "ELECTRA's inputs and masking need.")
    try:
        check_casing(vocabulary, settings, f"the vocabulary of {where}")
    except VocabularyError as error:
        raise ConversionError(str(error)) from None


def _check_output(output: Path, overwrite: bool, flag: str) -> None:
    if output.exists() and (not output.is_dir() or any(output.iterdir())) and not overwrite:
        raise ConversionError(f"{output} exists and is not empty; choose another {flag} or pass --overwrite "
                              "(nothing was written).")


@register_format("keras_hub")
class KerasHubFormat(ExportFormat):
    """A keras-hub preset of the source's encoder (module docstring): EXPORT_DIR/NAME-keras_hub, or
    the folder --export_dir names."""

    help = "a keras-hub preset of the encoder (ElectraBackbone and its tokenizer), for any Keras backend"
    takes_target = True

    def write(self, source: ExportSource, options: ExportOptions) -> tuple[Path, list[str]]:
        backbone = source.backbone
        step = backbone.metadata().get("step")
        output = Path(options.target or options.export_dir / f"{options.name}-keras_hub").resolve()
        folder = write_preset(backbone, output, options.overwrite, {"step": step} if step is not None else None)
        tokenizer = (f"keras_hub.tokenizers.SentencePieceTokenizer(proto={str(sentencepiece_tokenizer_file(folder))!r})"
                     if backbone.tokenizer.kind == SENTENCEPIECE
                     else f"keras_hub.models.ElectraTokenizer.from_preset({str(folder)!r})")
        return folder, [f"Exported {source.describe()}'s encoder as a keras-hub preset: {folder}",
                        f"  keras_hub.models.ElectraBackbone.from_preset({str(folder)!r})", f"  {tokenizer}",
                        f"  keras.saving.load_model({str(folder / RTD_HEAD_FILE)!r})  # the replaced-token head, "
                        "on sequence_output",
                        "  (keras-hub computes GELU in its tanh form, and its pooled_output is untrained: use "
                        "sequence_output[:, 0]; docs/interop.md)"]
