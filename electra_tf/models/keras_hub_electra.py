"""keras-hub's own ELECTRA presets (`keras_hub.models.ElectraBackbone.save_to_preset`, as Kaggle
ships them) read as this package's discriminator: what `--pretrained PRESET` and
`convert --from keras_hub` start from.

A preset holds the discriminator's encoder and its tokenizer::

    config.json                  registered_name "keras_hub>ElectraBackbone" and its arguments
    model.weights.h5             the backbone's weights
    tokenizer.json               registered_name "keras_hub>ElectraTokenizer" (or SentencePieceTokenizer)
    assets/tokenizer/vocabulary.txt (vocabulary.spm)
    metadata.json
    replaced_token_head.keras    (a preset this package wrote) the discriminator's replaced-token head

Its weights go into a `Discriminator` by the name table (`weight_names.py`). keras-hub's backbone
has no place for the replaced-token head: a preset this package exports keeps it beside the
backbone as a plain Keras model (`RTD_HEAD_FILE`, `replaced_token_head_model`: dense, exact GELU,
dense), which a keras-hub user applies to `sequence_output` (docs/interop.md) and which reading
the preset back restores; in keras-hub's own presets it is absent and starts fresh. keras-hub's
pooler, which ELECTRA never trains, is left out. keras-hub computes GELU in its tanh form and this package in the exact
form: the same weights give slightly different hidden states (docs/results.md).
"""

from __future__ import annotations

from pathlib import Path

import keras
import keras_hub
import numpy as np
import sentencepiece

from electra_tf.data.tokenization import ElectraTokenizer
from electra_tf.data.vocabulary_files import (BASIC_TOKENIZATION, SPECIAL_TOKENS, V1_RULE, TokenizerSettings,
                                              model_pieces)
from electra_tf.models.config import ModelConfig, read_json_object
from electra_tf.models.encoders import build_discriminator
from electra_tf.models.weight_names import weight_table
from electra_tf.utils.errors import ElectraError, PretrainedError
from electra_tf.utils.sections import ConfigError

BACKBONE_CLASS = "keras_hub>ElectraBackbone"
WORDPIECE_TOKENIZER_CLASS = "keras_hub>ElectraTokenizer"
SENTENCEPIECE_TOKENIZER_CLASS = "keras_hub>SentencePieceTokenizer"
CONFIG_FILE, TOKENIZER_FILE, WEIGHTS_FILE, SHARDED_WEIGHTS_FILE = (
    "config.json", "tokenizer.json", "model.weights.h5", "model.weights.json")
VOCABULARY_FILE = Path("assets") / "tokenizer" / "vocabulary.txt"
PRESET_PROVENANCE_FILE = "electra_tf.json"  # what this package writes beside a preset it exports
SENTENCEPIECE_FILE = Path("assets") / "tokenizer" / "vocabulary.spm"
RTD_HEAD_FILE = "replaced_token_head.keras"
# A preset does not say the length its model was trained at: the official 128 (as transformers'
# folders are read), or the position table's size when it is shorter.
KERAS_HUB_MAX_SEQ_LENGTH = 128


def model_values(arguments: dict) -> dict:
    """`ModelConfig` values for keras-hub `ElectraBackbone` arguments."""
    return {"vocab_size": arguments["vocab_size"], "num_layers": arguments["num_layers"],
            "num_heads": arguments["num_heads"], "hidden_size": arguments["hidden_dim"],
            "embedding_size": arguments["embedding_dim"], "intermediate_size": arguments["intermediate_dim"],
            "dropout": float(arguments.get("dropout", 0.1)),
            "max_position_embeddings": arguments.get("max_sequence_length", 512),
            "type_vocab_size": arguments.get("num_segments", 2)}


def sentencepiece_tokenizer_file(preset: str | Path) -> Path:
    """Where a preset keeps a SentencePiece tokenizer's model (keras-hub's asset name)."""
    return Path(preset) / SENTENCEPIECE_FILE


def replaced_token_head_model(head) -> keras.Model:
    """The discriminator's replaced-token head (`heads.ReplacedTokenDetectionHead`) as a plain
    Keras model a keras-hub user can load on any backend: sequence_output [B, L, hidden] ->
    Dense(hidden, exact GELU) -> Dense(1) -> logits [B, L, 1], with the head's weights."""
    model = keras.Sequential([keras.Input((None, head.hidden_size)),
                              keras.layers.Dense(head.hidden_size, activation="gelu", name="dense"),
                              keras.layers.Dense(1, name="dense_prediction")], name="replaced_token_head")
    for layer, ours in zip(model.layers, (head.dense, head.dense_prediction)):
        layer.set_weights([np.asarray(keras.ops.convert_to_numpy(w), "float32") for w in ours.weights])
    return model


class ElectraBackbonePreset:
    """A keras-hub ELECTRA preset folder, checked before anything is built: its backbone
    arguments (`arguments`), its tokenizer's class and settings. Problems are PretrainedErrors
    naming the file."""

    def __init__(self, path):
        self.path = Path(path)
        if not self.path.is_dir():
            raise PretrainedError(f"{self.path} is not a folder: give the preset folder (config.json, "
                                  "model.weights.h5, tokenizer.json) that keras-hub's save_to_preset writes.")
        config = _read_json(self.path / CONFIG_FILE, "the backbone's config, which a keras-hub preset has,")
        registered = config.get("registered_name")
        if registered != BACKBONE_CLASS:
            raise PretrainedError(f"{self.path / CONFIG_FILE}: registered_name is {registered!r}, not "
                                  f"{BACKBONE_CLASS!r}: this is not a keras-hub ELECTRA preset"
                                  + (" (another model's backbone)" if str(registered).startswith("keras_hub>") else "")
                                  + ".")
        self.arguments = config.get("config") if isinstance(config.get("config"), dict) else {}
        missing = [key for key in ("vocab_size", "num_layers", "num_heads", "hidden_dim", "embedding_dim",
                                   "intermediate_dim") if key not in self.arguments]
        if missing:
            raise PretrainedError(f"{self.path / CONFIG_FILE}: the backbone's config lacks {', '.join(missing)}.")
        if not (self.path / WEIGHTS_FILE).is_file() and not (self.path / SHARDED_WEIGHTS_FILE).is_file():
            raise PretrainedError(f"{self.path} has no {WEIGHTS_FILE}: the preset's weights are missing (a preset "
                                  "saved with load_weights=False, or a download cut short). Copy the whole folder.")
        tokenizer = _read_json(self.path / TOKENIZER_FILE, "the tokenizer's config, which a preset has,")
        self.tokenizer_class = tokenizer.get("registered_name")
        if self.tokenizer_class not in (WORDPIECE_TOKENIZER_CLASS, SENTENCEPIECE_TOKENIZER_CLASS):
            raise PretrainedError(f"{self.path / TOKENIZER_FILE}: registered_name is {self.tokenizer_class!r}; "
                                  f"expected {WORDPIECE_TOKENIZER_CLASS!r} (or {SENTENCEPIECE_TOKENIZER_CLASS!r}).")

    def model_config(self) -> ModelConfig:
        try:
            return ModelConfig.from_dict(model_values(self.arguments), str(self.path / CONFIG_FILE))
        except ElectraError as error:
            raise PretrainedError(str(error)) from None

    def load_backbone(self):
        """keras-hub's ElectraBackbone with the preset's weights; a PretrainedError naming the
        weights file when they cannot be read or do not fit the config."""
        try:
            return keras_hub.models.ElectraBackbone.from_preset(str(self.path), dtype="float32")
        except Exception as error:  # h5py and Keras raise many types for a damaged or mismatched file
            raise PretrainedError(f"{self.path / WEIGHTS_FILE}: cannot be loaded into the backbone config.json "
                                  f"describes ({type(error).__name__}: {str(error)[:400]}). The file is truncated or "
                                  "damaged, or holds another model's weights: copy the preset again.") from None

    def weights(self) -> dict:
        """{keras-hub variable path: numpy value} of the preset's backbone."""
        return {v.path: np.asarray(v.numpy()) for v in self.load_backbone().weights}

    @property
    def has_rtd_head(self) -> bool:
        return (self.path / RTD_HEAD_FILE).is_file()

    def rtd_head_weights(self, model: ModelConfig) -> dict:
        """{our variable path: numpy value} of the replaced-token head the preset keeps beside its
        backbone (`RTD_HEAD_FILE`); empty when it has none."""
        if not self.has_rtd_head:
            return {}
        where = self.path / RTD_HEAD_FILE
        try:
            head = keras.saving.load_model(str(where), compile=False)
            values = [np.asarray(keras.ops.convert_to_numpy(w)) for w in head.weights]
        except Exception as error:  # Keras raises many types for a damaged archive
            raise PretrainedError(f"{where}: not a loadable Keras model ({type(error).__name__}: {error}).") from None
        names = [name.ours for name in weight_table(model) if "/discriminator_predictions/" in name.ours]
        shapes = [(model.hidden_size, model.hidden_size), (model.hidden_size,), (model.hidden_size, 1), (1,)]
        if [v.shape for v in values] != shapes:
            raise PretrainedError(f"{where}: weights of shapes {[v.shape for v in values]}, not the replaced-token "
                                  f"head of this backbone ({shapes}).")
        return dict(zip(names, values))

    def tokenizer(self):
        """(vocabulary, TokenizerSettings, SentencePiece model bytes or None) of the preset."""
        where = self.path / TOKENIZER_FILE
        if self.tokenizer_class == SENTENCEPIECE_TOKENIZER_CLASS:
            model_file = sentencepiece_tokenizer_file(self.path)
            if not model_file.is_file():
                raise PretrainedError(f"{model_file} is missing: the SentencePiece model the tokenizer needs.")
            model = model_file.read_bytes()
            try:
                return model_pieces(model), TokenizerSettings.sentencepiece(_folds_case(model)), model
            except (RuntimeError, OSError) as error:
                raise PretrainedError(f"{model_file}: not a readable SentencePiece model ({error}).") from None
        if not (self.path / VOCABULARY_FILE).is_file():
            raise PretrainedError(f"{self.path / VOCABULARY_FILE} is missing: the vocabulary the model was trained "
                                  "with is needed.")
        theirs = keras_hub.models.ElectraTokenizer.from_preset(str(self.path))
        for setting, value, ours in (("split", theirs.split, True), ("suffix_indicator", theirs.suffix_indicator, "##"),
                                     ("oov_token", theirs.oov_token, "[UNK]"),
                                     ("special_tokens_in_strings", theirs.special_tokens_in_strings, False)):
            if value != ours:
                raise PretrainedError(f"{where}: {setting} is {value!r}; ELECTRA's tokenizer has {ours!r}, so the "
                                      "ids would differ.")
        # keras-hub's WordPieceTokenizer splits words as V1_RULE does (its patterns, case folding after
        # splitting); a preset this package wrote says which rule its model was trained with.
        provenance = self.path / PRESET_PROVENANCE_FILE
        rule = read_json_object(provenance, "the preset's provenance").get(BASIC_TOKENIZATION, V1_RULE) if (
            provenance.is_file()) else V1_RULE
        settings = TokenizerSettings(lowercase=bool(theirs.lowercase), strip_accents=bool(theirs.strip_accents),
                                     split_cjk=bool(theirs.split_on_cjk), rule=rule)
        return theirs.get_vocabulary(), settings, None

    def as_discriminator(self):
        """(a Discriminator holding the preset's encoder, its ElectraTokenizer, its ModelConfig)."""
        model = self.model_config()
        vocabulary, settings, sentencepiece_model = self.tokenizer()
        missing = [token for token in SPECIAL_TOKENS if token not in vocabulary]
        if missing:
            raise PretrainedError(f"{self.path / VOCABULARY_FILE}: the vocabulary lacks {', '.join(missing)}, which "
                                  "ELECTRA's inputs and masking need.")
        try:
            tokenizer = ElectraTokenizer(vocabulary, settings, sentencepiece_model)
        except ElectraError as error:
            raise PretrainedError(f"{self.path}: {error}") from None
        theirs = self.weights()
        discriminator = build_discriminator(model)
        variables = {v.path: v for v in discriminator.variables}
        for name in weight_table(model, rtd_head=False):
            variable = variables[name.ours]
            variable.assign(name.to_ours(theirs[name.keras_hub], tuple(variable.shape), "keras_hub"))
        for path, value in self.rtd_head_weights(model).items():
            variables[path].assign(value)
        return discriminator, tokenizer, model


def _folds_case(model: bytes) -> bool:
    """Whether a SentencePiece model's normaliser folds case (nmt_nfkc_cf), seen in what it does."""
    processor = sentencepiece.SentencePieceProcessor(model_proto=model)
    return processor.encode("Aa Bb Cc", out_type=str) == processor.encode("aa bb cc", out_type=str)


def _read_json(path: Path, what: str) -> dict:
    if not path.is_file():
        raise PretrainedError(f"{path} is missing: {what} is needed.")
    try:
        return read_json_object(path)
    except (ConfigError, UnicodeDecodeError) as error:
        raise PretrainedError(str(error)) from None
