"""The discriminator as an artifact of its own: what fine-tuning and every export start from.

A backbone folder (`MODEL_DIR/backbone/`, written when pre-training finishes and by `convert`)::

    config.json        BackboneConfig: the ModelConfig and the sequence length it was trained at
    model.safetensors  the discriminator's variables by path (embeddings/..., discriminator/...)
    vocab.txt          the vocabulary (tokenizer_config.json, spm.model beside it as it has them)
    metadata.json      where it came from: the step, the source, the package version

Weights are keyed by variable path (the names `interop/names.py` maps to HuggingFace's), not by
position, so the file reads back into any build of the same architecture. The dropout layers'
random-number states ride along by position among the model's seed generators (their paths
are numbered in creation order): a model fine-tuned from a backbone draws the same dropout
masks as one restored from the run's checkpoint.

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
import shutil
import time
from pathlib import Path
from typing import Any, Mapping

from electra_tf.data.tokenization import ElectraTokenizer, VocabularyError
from electra_tf.models.config import ModelConfig, read_json_object
from electra_tf.utils.errors import PretrainedError
from electra_tf.utils.files import atomic_write_text
from electra_tf.utils.sections import ConfigError

CONFIG_FILE, WEIGHTS_FILE, VOCAB_FILE, METADATA_FILE = "config.json", "model.safetensors", "vocab.txt", "metadata.json"
SEED_STATE_PREFIX = "seed_generator_states/"  # the weights file's keys for random-number states, by position


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
        """Any config.json this package writes: a backbone's, a pre-training run's (its `model`
        and `run` sections), or the flat files of earlier versions."""
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


def read_tokenizer(path: Path) -> ElectraTokenizer:
    """The vocabulary at `path` (a PretrainedError naming it when missing or unreadable)."""
    if not Path(path).is_file():
        raise PretrainedError(f"{path} is missing: the vocabulary the model was trained with is needed.")
    try:
        return ElectraTokenizer(path)
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
        from electra_tf.models.encoders import build_discriminator

        return cls(build_discriminator(config.model), tokenizer, config, source)

    def save(self, folder: str | Path, metadata: Mapping[str, Any] | None = None) -> Path:
        """Writes the folder whole: into a temporary folder beside it, then renamed over any
        earlier one (a reader never sees half of it)."""
        folder = Path(folder)
        temporary = folder.with_name(f".{folder.name}.tmp")
        shutil.rmtree(temporary, ignore_errors=True)
        temporary.mkdir(parents=True)
        self.config.save(temporary / CONFIG_FILE)
        _write_weights(self.discriminator, temporary / WEIGHTS_FILE)
        self.tokenizer.save(temporary / VOCAB_FILE)
        import electra_tf

        atomic_write_text(temporary / METADATA_FILE, json.dumps(
            {"written": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "electra_tf": electra_tf.__version__, **(metadata or {})},
            indent=2) + "\n")
        if folder.exists():
            old = folder.with_name(f".{folder.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(folder, old)
            os.replace(temporary, folder)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(temporary, folder)
        return folder

    @classmethod
    def load(cls, folder: str | Path) -> "Backbone":
        """Reads a backbone folder; a PretrainedError names what is missing or wrong."""
        folder = Path(folder)
        for name in (CONFIG_FILE, WEIGHTS_FILE, VOCAB_FILE):
            if not (folder / name).is_file():
                raise PretrainedError(f"{folder} is not a whole backbone folder: {name} is missing. Pre-training "
                                      "writes it when a run finishes (and convert when it imports a checkpoint); "
                                      "give the run's model_dir instead, whose checkpoints hold the model too.")
        backbone = cls.build(BackboneConfig.load(folder / CONFIG_FILE), read_tokenizer(folder / VOCAB_FILE),
                             str(folder))
        _read_weights(backbone.discriminator, folder / WEIGHTS_FILE)
        return backbone

    def metadata(self) -> dict:
        """The backbone folder's metadata.json ({} when this backbone was not read from one)."""
        path = Path(self.source) / METADATA_FILE
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _seed_states(model) -> list:
    return [v for v in model.variables if "seed_generator" in v.path]


def _write_weights(model, path: Path) -> None:
    import keras
    from safetensors.numpy import save_file

    from electra_tf.models.encoders import model_weights

    tensors = {v.path: keras.ops.convert_to_numpy(v) for v in model_weights(model)}
    tensors.update({f"{SEED_STATE_PREFIX}{i}": keras.ops.convert_to_numpy(v) for i, v in enumerate(_seed_states(model))})
    temporary = path.with_name(path.name + ".tmp")
    save_file(tensors, str(temporary))
    os.replace(temporary, path)


def _read_weights(model, path: Path) -> None:
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    from electra_tf.models.encoders import model_weights

    try:
        saved = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as error:
        raise PretrainedError(f"{path}: not a readable safetensors file ({error}); it may be truncated. Export "
                              "the backbone again from its run.") from None
    weights = model_weights(model)
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
    for index, variable in enumerate(_seed_states(model)):
        state = saved.get(f"{SEED_STATE_PREFIX}{index}")
        if state is not None and tuple(state.shape) == tuple(variable.shape):
            variable.assign(state)
