"""The discriminator as an artifact of its own, a keras-hub preset folder: what fine-tuning and
every export start from.

A backbone folder (`MODEL_DIR/backbone/`, written when pre-training finishes and by `convert`)
has keras-hub's layout::

    config.json           the model's Keras config, registered_name "electra_tf>DiscriminatorBackbone"
    model.weights.h5      its weights (Keras' `save_weights`)
    tokenizer.json        keras-hub's tokenizer of the vocabulary (ElectraTokenizer for WordPiece,
                          SentencePieceTokenizer), where keras-hub can express it
    assets/tokenizer/     vocabulary.txt (vocabulary.spm for SentencePiece) and tokenizer_config.json,
                          the settings this package tokenizes with
    metadata.json         keras-hub's (versions, parameter count, date) and this package's:
                          max_seq_length, the step and source, the dropout random-number states

`Backbone.load` reads such a folder, keras-hub's own ElectraBackbone presets (their encoder in a
Discriminator whose replaced-token head starts fresh: `models/keras_hub_electra.py`), and the
backbone folders of earlier versions (config.json, model.safetensors keyed by variable path,
vocab.txt). config.json names a keras-hub `Backbone` (`DiscriminatorBackbone`), so once this
module is imported (`from electra_tf import Backbone` does it) `keras_hub.models.Backbone.from_preset(folder)`
loads it too. The dropout layers' random-number
states ride along by position among the model's seed generators (their paths are numbered in
creation order): a model fine-tuned from a backbone draws the same dropout masks as one restored
from the run's checkpoint.

>>> import tempfile
>>> from electra_tf.models.config import ModelConfig
>>> from electra_tf.data.tokenization import ElectraTokenizer, SPECIAL_TOKENS
>>> folder = Path(tempfile.mkdtemp())
>>> _ = (folder / "vocab.txt").write_text("\\n".join([*SPECIAL_TOKENS, "river", "hill"]) + "\\n")
>>> config = BackboneConfig(ModelConfig(vocab_size=7, hidden_size=8, num_layers=1, num_heads=2,
...                                     intermediate_size=16, embedding_size=8), max_seq_length=16)
>>> backbone = Backbone.build(config, ElectraTokenizer(folder / "vocab.txt"))
>>> path = backbone.save(folder / "backbone")
>>> again = Backbone.load(path)
>>> again.config == config and again.discriminator.count_params() == backbone.discriminator.count_params()
True
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any, Mapping

import keras
import keras_hub
import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load_file

import electra_tf
from electra_tf.data.tokenization import ElectraTokenizer
from electra_tf.data.vocabulary_files import SENTENCEPIECE, VocabularyError, read_tokenizer_settings, write_vocabulary
from electra_tf.models.config import ModelConfig, read_json_object
from electra_tf.models.encoders import Discriminator, build_discriminator, deserialize_as, model_weights
from electra_tf.models.keras_hub_electra import KERAS_HUB_MAX_SEQ_LENGTH, ElectraBackbonePreset
from electra_tf.utils.errors import PretrainedError
from electra_tf.utils.files import atomic_folder, atomic_write_text
from electra_tf.utils.sections import ConfigError

CONFIG_FILE, METADATA_FILE, TOKENIZER_FILE = "config.json", "metadata.json", "tokenizer.json"
WEIGHTS_FILE = "model.weights.h5"
TOKENIZER_ASSETS = Path("assets") / "tokenizer"
VOCABULARY_FILE, SENTENCEPIECE_FILE = TOKENIZER_ASSETS / "vocabulary.txt", TOKENIZER_ASSETS / "vocabulary.spm"
REGISTERED_NAME = "electra_tf>DiscriminatorBackbone"
INPUT_NAMES = ("token_ids", "segment_ids", "padding_mask")
PACKAGE_KEY = "electra_tf"  # this package's part of metadata.json
# The backbone folders of earlier versions: weights by variable path, the vocabulary beside them.
LEGACY_WEIGHTS_FILE, LEGACY_VOCAB_FILE = "model.safetensors", "vocab.txt"
SEED_STATE_PREFIX = "seed_generator_states/"


@keras.saving.register_keras_serializable(package="electra_tf")
class DiscriminatorBackbone(keras_hub.models.Backbone):
    """The discriminator as a keras-hub `Backbone`: a functional model (as keras-hub's backbones
    are) over the `Discriminator`, which a backbone folder's config.json names, so that
    `keras_hub.models.Backbone.from_preset(folder)` loads it once this module is imported. Its
    inputs are token_ids, segment_ids and padding_mask; its outputs the discriminator's (logits,
    sequence_output); `discriminator` is the model itself.

    (Not the Discriminator itself as a subclass: keras-hub's Backbone becomes a functional class
    once any keras-hub backbone is built in the process, which a model built by subclassing
    cannot be.)"""

    def __init__(self, discriminator, dtype=None, **kwargs):
        discriminator = deserialize_as(discriminator, Discriminator, "DiscriminatorBackbone", "discriminator")
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in INPUT_NAMES}
        super().__init__(inputs=inputs, outputs=discriminator(inputs), dtype=dtype, **kwargs)
        self.discriminator = discriminator

    def get_config(self):
        return {**super().get_config(), "discriminator": keras.saving.serialize_keras_object(self.discriminator)}


@dataclasses.dataclass(frozen=True)
class BackboneConfig:
    """What rebuilding and feeding the backbone needs: its architecture and the sequence length
    it was trained at (fine-tuning's and the export's default)."""

    model: ModelConfig
    max_seq_length: int

    def __post_init__(self):
        if not 0 < self.max_seq_length <= self.model.max_position_embeddings:
            raise ConfigError(f"'max_seq_length' = {self.max_seq_length}: must be in [1, max_position_embeddings "
                              f"({self.model.max_position_embeddings})].")

    def to_dict(self) -> dict:
        return {"model": self.model.to_dict(), "max_seq_length": self.max_seq_length}

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], source: str = "config") -> "BackboneConfig":
        """Any config.json this package writes: a pre-training or fine-tuning run's (their `model`
        and `run` sections), a backbone's of an earlier version, or the flat files of earlier
        versions."""
        run = values.get("run")
        length = run.get("max_seq_length") if isinstance(run, Mapping) else values.get("max_seq_length", 128)
        try:
            return cls(ModelConfig.from_any(values, source), int(length))
        except ConfigError as error:
            raise ConfigError(str(error) if str(error).startswith(source) else f"{source}: {error}") from None

    @classmethod
    def load(cls, path: str | Path) -> "BackboneConfig":
        """A PretrainedError naming the file when it cannot be read."""
        try:
            return cls.from_dict(read_json_object(path), str(path))
        except OSError as error:
            raise PretrainedError(f"{path}: cannot read the model config ({error}).") from None
        except ConfigError as error:
            raise PretrainedError(str(error)) from None

    def replace(self, **changes) -> "BackboneConfig":
        return dataclasses.replace(self, **changes)

    def save(self, path: str | os.PathLike) -> None:
        atomic_write_text(path, json.dumps(self.to_dict(), indent=2) + "\n")


def read_tokenizer(path: Path, sentencepiece_model: bytes | None = None) -> ElectraTokenizer:
    """The vocabulary at `path` (a PretrainedError naming it when missing or unreadable)."""
    if not Path(path).is_file():
        raise PretrainedError(f"{path} is missing: the vocabulary the model was trained with is needed.")
    try:
        return ElectraTokenizer(path, sentencepiece_model=sentencepiece_model)
    except VocabularyError as error:
        raise PretrainedError(str(error)) from None


@dataclasses.dataclass
class Backbone:
    """A discriminator with the tokenizer and config it was trained with; `source` says where
    it was read from (a folder, a checkpoint, a file)."""

    discriminator: Any  # models.encoders.Discriminator
    tokenizer: ElectraTokenizer
    config: BackboneConfig
    source: str = ""

    @classmethod
    def build(cls, config: BackboneConfig, tokenizer: ElectraTokenizer, source: str = "") -> "Backbone":
        """Freshly initialised weights."""
        return cls(build_discriminator(config.model), tokenizer, config, source)

    def save(self, folder: str | Path, metadata: Mapping[str, Any] | None = None) -> Path:
        """Writes the preset folder whole (module docstring): built beside it and renamed over
        any earlier one, so a reader never sees half of it."""
        with atomic_folder(folder) as write:
            _write_model(self.discriminator, write.temporary)
            _write_tokenizer(self.tokenizer, write.temporary)
            atomic_write_text(write.temporary / METADATA_FILE, json.dumps(_metadata(self, metadata), indent=2) + "\n")
        return write.path

    @classmethod
    def load(cls, folder: str | Path) -> "Backbone":
        """Reads a backbone folder, a keras-hub ElectraBackbone preset, or an earlier version's
        backbone folder; a PretrainedError names what is missing or wrong."""
        folder = Path(folder)
        if (folder / LEGACY_WEIGHTS_FILE).is_file():
            return _load_legacy(folder)
        registered = read_json_object(folder / CONFIG_FILE).get("registered_name") \
            if (folder / CONFIG_FILE).is_file() else None
        if registered != REGISTERED_NAME:
            preset = ElectraBackbonePreset(folder)
            discriminator, tokenizer, model = preset.as_discriminator()
            length = min(KERAS_HUB_MAX_SEQ_LENGTH, model.max_position_embeddings)
            return cls(discriminator, tokenizer, BackboneConfig(model, length), str(folder))
        for name in (WEIGHTS_FILE, METADATA_FILE, VOCABULARY_FILE):
            if not (folder / name).is_file():
                raise PretrainedError(f"{folder} is not a whole backbone folder: {name} is missing. Pre-training "
                                      "writes it when a run finishes (and convert when it imports a checkpoint); "
                                      "give the run's model_dir instead, whose checkpoints hold the model too.")
        ours = json.loads((folder / METADATA_FILE).read_text(encoding="utf-8")).get(PACKAGE_KEY, {})
        try:
            discriminator = DiscriminatorBackbone.from_preset(str(folder)).discriminator
        except Exception as error:  # h5py and Keras raise many types for a damaged or mismatched file
            raise PretrainedError(f"{folder / WEIGHTS_FILE}: cannot be loaded into the model config.json describes "
                                  f"({type(error).__name__}: {str(error)[:300]}); it may be truncated. Export the "
                                  "backbone again from its run.") from None
        _set_seed_states(discriminator, [np.asarray(state) for state in ours.get("seed_generator_states", [])])
        config = BackboneConfig(model_config_of(discriminator), int(ours["max_seq_length"]))
        return cls(discriminator, _read_preset_tokenizer(folder), config, str(folder))

    def metadata(self) -> dict:
        """This package's part of the backbone folder's metadata.json ({} when this backbone was
        not read from one)."""
        path = Path(self.source) / METADATA_FILE
        if not path.is_file():
            return {}
        return _ours(json.loads(path.read_text(encoding="utf-8")))


def is_backbone_folder(path: Path) -> bool:
    """A backbone folder of this package, of an earlier version, or a keras-hub preset."""
    return path.is_dir() and (path / CONFIG_FILE).is_file() and (
        (path / WEIGHTS_FILE).is_file() or (path / LEGACY_WEIGHTS_FILE).is_file()
        or (path / "model.weights.json").is_file())


def model_config_of(discriminator) -> ModelConfig:
    """The `ModelConfig` a built discriminator has."""
    embeddings = discriminator.embeddings
    return ModelConfig(vocab_size=embeddings.vocab_size, embedding_size=embeddings.embedding_size,
                       hidden_size=discriminator.hidden_size, num_layers=discriminator.num_layers,
                       num_heads=discriminator.num_heads, intermediate_size=discriminator.intermediate_size,
                       dropout=discriminator.dropout_rate, max_position_embeddings=embeddings.max_position_embeddings,
                       type_vocab_size=embeddings.type_vocab_size, initializer_range=discriminator.initializer_range,
                       layer_norm_epsilon=discriminator.layer_norm_epsilon,
                       position_embedding_init=embeddings.position_embedding_init)


def _write_model(discriminator, folder: Path) -> None:
    """config.json of a `DiscriminatorBackbone` (every dtype policy left out: a model read back
    computes in the reading run's precision, as one built from its config does) and
    model.weights.h5."""
    backbone = DiscriminatorBackbone(discriminator)
    config = _without_dtypes(keras.saving.serialize_keras_object(backbone))
    config.pop("build_config", None)
    config.pop("compile_config", None)
    atomic_write_text(folder / CONFIG_FILE, json.dumps(config, indent=2) + "\n")
    backbone.save_weights(str(folder / WEIGHTS_FILE))


def _without_dtypes(config):
    if isinstance(config, dict):
        return {key: _without_dtypes(value) for key, value in config.items() if key != "dtype"}
    if isinstance(config, list):
        return [_without_dtypes(value) for value in config]
    return config


def _write_tokenizer(tokenizer: ElectraTokenizer, folder: Path) -> None:
    """keras-hub's tokenizer.json and asset where keras-hub can express the tokenizer, and the
    settings this package reads beside the vocabulary (module docstring)."""
    theirs = keras_hub_tokenizer(tokenizer)
    if theirs is not None:
        theirs.save_to_preset(str(folder))
    sentencepiece = tokenizer.settings.kind == SENTENCEPIECE
    if sentencepiece and theirs is None:
        (folder / SENTENCEPIECE_FILE).write_bytes(tokenizer.sentencepiece_model)
    write_vocabulary(folder / VOCABULARY_FILE, tokenizer.vocabulary, tokenizer.settings)


def keras_hub_tokenizer(tokenizer: ElectraTokenizer):
    """keras-hub's tokenizer that gives the same ids: its `ElectraTokenizer` normalising as ours
    does for WordPiece, its `SentencePieceTokenizer` over the same model; None for a WordPiece
    vocabulary that keeps CJK ideographs in words (keras-hub does not save `split_on_cjk` and
    reloads it as True)."""
    if tokenizer.settings.kind == SENTENCEPIECE:
        return keras_hub.tokenizers.SentencePieceTokenizer(proto=tokenizer.sentencepiece_model)
    settings = tokenizer.settings
    if not settings.split_cjk:
        return None
    return keras_hub.models.ElectraTokenizer(vocabulary=list(tokenizer.vocabulary), lowercase=settings.lowercase,
                                             strip_accents=settings.strip_accents, split_on_cjk=True)


def _read_preset_tokenizer(folder: Path) -> ElectraTokenizer:
    settings = read_tokenizer_settings(folder / VOCABULARY_FILE)
    model = (folder / SENTENCEPIECE_FILE).read_bytes() if settings.kind == SENTENCEPIECE else None
    return read_tokenizer(folder / VOCABULARY_FILE, model)


def _metadata(backbone: Backbone, extra: Mapping[str, Any] | None) -> dict:
    """keras-hub's metadata fields, and this package's."""
    discriminator = backbone.discriminator
    return {"keras_version": keras.version(), "keras_hub_version": keras_hub.__version__,
            "parameter_count": discriminator.count_params(), "date_saved": time.strftime("%Y-%m-%d@%H:%M:%S"),
            "tasks": [],
            PACKAGE_KEY: {"version": electra_tf.__version__, "max_seq_length": backbone.config.max_seq_length,
                          "seed_generator_states": [keras.ops.convert_to_numpy(v).tolist()
                                                    for v in _seed_states(discriminator)],
                          **(extra or {})}}


def _seed_states(model) -> list:
    return [v for v in model.variables if "seed_generator" in v.path]


def _set_seed_states(model, states: list) -> None:
    for variable, state in zip(_seed_states(model), states):
        if tuple(state.shape) == tuple(variable.shape):
            variable.assign(state.astype(variable.dtype))


def _load_legacy(folder: Path) -> Backbone:
    """A backbone folder of an earlier version: config.json (BackboneConfig), model.safetensors
    (the variables by path), vocab.txt."""
    for name in (CONFIG_FILE, LEGACY_WEIGHTS_FILE, LEGACY_VOCAB_FILE):
        if not (folder / name).is_file():
            raise PretrainedError(f"{folder} is not a whole backbone folder: {name} is missing. Give the run's "
                                  "model_dir instead, whose checkpoints hold the model too.")
    backbone = Backbone.build(BackboneConfig.load(folder / CONFIG_FILE), read_tokenizer(folder / LEGACY_VOCAB_FILE),
                              str(folder))
    path = folder / LEGACY_WEIGHTS_FILE
    try:
        saved = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as error:
        raise PretrainedError(f"{path}: not a readable safetensors file ({error}); it may be truncated. Export "
                              "the backbone again from its run.") from None
    weights = model_weights(backbone.discriminator)
    missing = [v.path for v in weights if v.path not in saved]
    if missing:
        raise PretrainedError(f"{path} lacks {len(missing)} of the discriminator's weights (first: {missing[0]}): "
                              "it does not hold the model its config.json describes.")
    for variable in weights:
        value = saved[variable.path]
        if tuple(value.shape) != tuple(variable.shape):
            raise PretrainedError(f"{path}: {variable.path} has shape {tuple(value.shape)}, the config.json beside it "
                                  f"makes {tuple(variable.shape)}.")
        variable.assign(value)
    _set_seed_states(backbone.discriminator, [saved[k] for k in sorted(saved, key=_position)
                                              if k.startswith(SEED_STATE_PREFIX)])
    return backbone


def _position(key: str) -> int:
    return int(key[len(SEED_STATE_PREFIX):]) if key.startswith(SEED_STATE_PREFIX) else -1


def backbone_step(folder: Path) -> int | None:
    """The training step a backbone folder was written at (its metadata), or None."""
    try:
        values = json.loads((Path(folder) / METADATA_FILE).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return _ours(values).get("step")


def _ours(metadata: dict) -> dict:
    """This package's part of a metadata.json (all of an earlier version's, which was ours only)."""
    return metadata[PACKAGE_KEY] if isinstance(metadata.get(PACKAGE_KEY), dict) else metadata


def backbone_hidden_size(folder: Path) -> int | None:
    """A backbone folder's (or keras-hub preset's) encoder width, read from its config.json
    without building anything; None when it cannot be read."""
    try:
        values = read_json_object(Path(folder) / CONFIG_FILE)
    except (OSError, ConfigError):
        return None
    arguments = values.get("config") if isinstance(values.get("config"), dict) else {}
    if values.get("registered_name") == REGISTERED_NAME:
        return arguments.get("discriminator", {}).get("config", {}).get("hidden_size")
    if "registered_name" in values:  # keras-hub's ElectraBackbone
        return arguments.get("hidden_dim")
    try:
        return BackboneConfig.from_dict(values).model.hidden_size  # an earlier version's folder
    except ConfigError:
        return None
