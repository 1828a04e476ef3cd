"""Where a pre-trained discriminator comes from: `load_pretrained(path) -> Backbone`, the one
loader fine-tuning (`--pretrained`) and `python -m electra_tf.export` read every source with.

`path` may be
- a pre-training model_dir (`config.json`, `vocab.txt`, `checkpoints/`): its backbone folder
  (`backbone/`, written when the run finished) when that holds its latest checkpoint's step,
  else the latest checkpoint, or `checkpoint="ckpt-2000"`;
- a backbone folder (`models/backbone.py`: a keras-hub-layout preset, or an earlier version's
  folder), or a keras-hub ElectraBackbone preset (its encoder; the replaced-token head fresh);
- a fine-tuning run's folder or a `.keras` file of a fine-tuned task model (its encoder; a task
  model's preprocessor carries the vocabulary), or of a bare `Discriminator` with `vocab.txt`
  and `config.json` beside it;
- a SavedModel written by `electra_tf.export` (a version folder, or the model folder, whose
  highest version is used): variables are matched to a freshly built discriminator by name,
  using the `config.json` and `vocab.txt` the export keeps in `assets.extra/`.

Each returns a `models.backbone.Backbone(discriminator, tokenizer, config, source)`; anything
else is a `PretrainedError` that names the path and says what was expected. `load_task_model`
reads a fine-tuned model whole, head and labels included.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import keras
import tensorflow as tf
import tensorflow_text  # noqa: F401  (an export's tokenizer ops)

from electra_tf.models.backbone import (Backbone, BackboneConfig, backbone_hidden_size, backbone_step,
                                        is_backbone_folder, read_tokenizer)
from electra_tf.models.encoders import Discriminator, build_discriminator, model_weights
from electra_tf.pretraining.restore import restore_pretrainer
from electra_tf.training.checkpointing import latest_checkpoint_step
from electra_tf.training.task import KINDS
from electra_tf.utils.errors import PretrainedError
from electra_tf.utils.run_dir import CONFIG_FILE, VOCAB_FILE, ExportMetadata, FinetuneDir, ModelDir


def load_pretrained(path, checkpoint: str | None = None, encoder_only: bool = False) -> Backbone:
    """The discriminator of any source (module docstring). `encoder_only` (fine-tuning) also
    accepts a run of the BERT-style baseline (`objective: mlm`): its encoder comes in a
    discriminator whose replaced-token head is freshly initialised, since only the encoder is
    fine-tuned."""
    path = Path(path)
    if not path.exists():
        raise PretrainedError(f"{path} does not exist.")
    if path.is_file() and path.suffix == ".keras":
        return _from_keras_file(path)
    if is_backbone_folder(path):
        return Backbone.load(path)
    if path.is_dir() and ModelDir(path).has_checkpoints():
        backbone = current_backbone(path) if checkpoint is None else None
        return Backbone.load(backbone) if backbone else _from_model_dir(path, checkpoint, encoder_only)
    if path.is_dir() and FinetuneDir(path).best_model.is_file():
        return _from_keras_file(FinetuneDir(path).best_model)
    if path.is_dir() and FinetuneDir(path).metrics.is_file():
        raise PretrainedError(f"{path} is a fine-tuning run's folder without its model: {FinetuneDir(path).best_model} "
                              "is missing (the run stopped before its first epoch ended, or the file was moved).")
    if path.is_dir():
        version_dir = _export_version(path)
        if version_dir is not None:
            return _from_export(version_dir)
        if (path / CONFIG_FILE).is_file():
            raise PretrainedError(
                f"{path} has a config.json but no checkpoints/ folder: pre-training did not save a "
                "checkpoint there yet (or it was moved). Give a model_dir with checkpoints, a .keras file "
                "or an export instead.")
    raise PretrainedError(
        f"{path} holds no discriminator: expected a pre-training model_dir (config.json + checkpoints/), a "
        "backbone or keras-hub preset folder, a fine-tuning run's folder or .keras file, or a SavedModel from "
        "`python -m electra_tf.export`.")


def current_backbone(model_dir) -> Path | None:
    """The model_dir's backbone folder when it holds the run's latest checkpoint (the run
    finished there); None when it is missing or older (a later phase stopped part-way)."""
    model_dir = ModelDir(model_dir)
    if not is_backbone_folder(model_dir.backbone):
        return None
    step = backbone_step(model_dir.backbone)
    return model_dir.backbone if step is not None and step == latest_checkpoint_step(model_dir.checkpoints) else None


def pretrained_hidden_size(path) -> int | None:
    """The discriminator's width from the config a source keeps beside its weights, read
    without building anything (the runtime's precision is chosen before the model exists).
    None when there is no readable config; `load_pretrained` then explains what is wrong."""
    path = Path(path)
    if is_backbone_folder(path):
        return backbone_hidden_size(path)
    if path.suffix == ".keras":
        config_file = path.parent / CONFIG_FILE
    elif (path / CONFIG_FILE).is_file():
        config_file = path / CONFIG_FILE
    elif path.is_dir() and (version_dir := _export_version(path)) is not None:
        config_file = ExportMetadata.of(version_dir).config
    else:
        return None
    try:
        return BackboneConfig.load(config_file).model.hidden_size
    except PretrainedError:
        return None


def _export_version(path: Path) -> Path | None:
    """An export's version folder: `path` itself, or the highest numbered one inside it."""
    if (path / "saved_model.pb").is_file():
        return path
    versions = sorted(int(p.name) for p in path.iterdir() if p.name.isdigit() and p.is_dir())
    if versions and (path / str(versions[-1]) / "saved_model.pb").is_file():
        return path / str(versions[-1])
    return None


def _from_model_dir(model_dir: Path, checkpoint: str | None, encoder_only: bool) -> Backbone:
    pretrainer, tokenizer, config, found = restore_pretrainer(model_dir, checkpoint, allow_mlm=encoder_only)
    backbone_config = BackboneConfig(config.model, config.run.max_seq_length)
    if config.objective.objective == "mlm":
        return Backbone(mlm_encoder_as_discriminator(pretrainer.generator, config.model), tokenizer, backbone_config,
                        found)
    return Backbone(pretrainer.standalone_discriminator(), tokenizer, backbone_config, found)


def mlm_encoder_as_discriminator(generator, config):
    """A discriminator holding the encoder of an `objective: mlm` run (its full-size generator:
    embeddings, projection, transformer layers); the replaced-token head stays fresh. This is
    how the BERT-style baseline is fine-tuned: the encoder, not the pre-training head."""
    discriminator = build_discriminator(config)
    sources = [generator.embeddings] + [generator.embeddings_project] * (generator.embeddings_project is not None) \
        + list(generator.transformer_layers)
    targets = [discriminator.embeddings] + [discriminator.embeddings_project] * (
        discriminator.embeddings_project is not None) + list(discriminator.transformer_layers)
    for source, target in zip(sources, targets, strict=True):
        for theirs, ours in zip(model_weights(source), model_weights(target), strict=True):
            ours.assign(theirs)
    return discriminator


def _load_keras_file(path: Path):
    KINDS.load()  # the kinds' modules register their task models' classes, which loading a saved one needs
    try:
        return keras.saving.load_model(str(path), compile=False)
    except Exception as error:  # Keras raises many types for a bad archive
        raise PretrainedError(f"{path}: not a loadable .keras model ({type(error).__name__}: {error}). A task model "
                              "of a kind defined outside the package loads once its module is imported "
                              "(--import MODULE).") from None


def load_task_model(path) -> tuple:
    """(model, tokenizer, config) of a fine-tuned `.keras` file (a fine-tuning run's best.keras, or
    its output folder): a task model on the discriminator (`model.backbone`), of any kind.
    Files saved before models carried their label names get them from the metrics.json beside
    them."""
    path = finetuned_model_file(Path(path))
    model = _load_keras_file(path)
    if isinstance(model, Discriminator) or not isinstance(getattr(model, "backbone", None), Discriminator):
        raise PretrainedError(f"{path} holds a {type(model).__name__}, not a fine-tuned task model on an ELECTRA "
                              "discriminator.")
    pretrained = _from_keras_file(path, model)
    metrics = FinetuneDir(path.parent).metrics
    if getattr(model, "label_names", False) is None and metrics.is_file():
        summary = json.loads(metrics.read_text(encoding="utf-8"))
        model.label_names = summary.get("labels")
        if summary.get("score_range"):
            model.score_range = tuple(summary["score_range"])
    if getattr(model, "label_names", False) is None and not getattr(model, "is_regression", False):
        raise PretrainedError(f"{path}: the model does not name its labels (and no metrics.json beside it does); "
                              "it cannot be exported with label names.")
    return model, pretrained.tokenizer, pretrained.config


def finetuned_model_file(path: Path) -> Path:
    """A fine-tuning run's model: `path` itself (a .keras file), or the best.keras of a run folder."""
    if path.is_dir() and FinetuneDir(path).best_model.is_file():
        return FinetuneDir(path).best_model
    if path.suffix != ".keras" or not path.is_file():
        raise PretrainedError(f"{path} is neither a .keras file nor a fine-tuning run's folder (one holding best.keras).")
    return path


def saved_model_class(path) -> str | None:
    """The registered Keras name of the model a .keras file (or a fine-tuning run's folder)
    holds, read from its config without building it; None when it cannot be read."""
    try:
        with zipfile.ZipFile(finetuned_model_file(Path(path))) as archive:
            config = json.loads(archive.read("config.json"))
    except (PretrainedError, OSError, KeyError, zipfile.BadZipFile, json.JSONDecodeError):
        return None
    return config.get("registered_name") or f"{config.get('module', '')}>{config.get('class_name', '')}"


def _from_keras_file(path: Path, model=None) -> Backbone:
    model = model if model is not None else _load_keras_file(path)
    if isinstance(model, Discriminator):
        if not (path.parent / CONFIG_FILE).is_file():
            raise PretrainedError(f"{path} is a bare Discriminator: put the config.json and vocab.txt of "
                                  f"its pre-training run beside it, in {path.parent}.")
        config = BackboneConfig.load(path.parent / CONFIG_FILE)
        return Backbone(model, read_tokenizer(path.parent / VOCAB_FILE), config, str(path))
    backbone = getattr(model, "backbone", None)
    preprocessor = getattr(model, "preprocessor", None)
    if not isinstance(backbone, Discriminator):
        raise PretrainedError(f"{path} holds a {type(model).__name__}, which has no ELECTRA discriminator.")
    if preprocessor is None:  # a question answerer: config.json and vocab.txt beside it, as the run writes
        if not (path.parent / CONFIG_FILE).is_file() or not (path.parent / VOCAB_FILE).is_file():
            raise PretrainedError(f"{path}: the model has no preprocessor, so its vocabulary is unknown; put the "
                                  f"config.json and vocab.txt of its run beside it, in {path.parent}.")
        return Backbone(backbone, read_tokenizer(path.parent / VOCAB_FILE),
                        BackboneConfig.load(path.parent / CONFIG_FILE), str(path))
    config = BackboneConfig.load(path.parent / CONFIG_FILE) if (path.parent / CONFIG_FILE).is_file() \
        else _config_of(backbone, preprocessor)
    return Backbone(backbone, preprocessor.tokenizer, config, str(path))


def _config_of(backbone, preprocessor) -> BackboneConfig:
    """The config a discriminator and its preprocessor determine."""
    embeddings = backbone.embeddings
    return BackboneConfig.from_dict({
        "vocab_size": embeddings.vocab_size, "embedding_size": embeddings.embedding_size,
        "hidden_size": backbone.hidden_size, "num_layers": backbone.num_layers,
        "num_heads": backbone.num_heads, "intermediate_size": backbone.intermediate_size,
        "max_position_embeddings": embeddings.max_position_embeddings,
        "max_seq_length": min(preprocessor.max_seq_length, embeddings.max_position_embeddings),
        "type_vocab_size": embeddings.type_vocab_size, "dropout": backbone.dropout_rate,
        "layer_norm_epsilon": backbone.layer_norm_epsilon,
        "initializer_range": backbone.initializer_range,
        "position_embedding_init": embeddings.position_embedding_init,
    }, source="the .keras model")


def _from_export(version_dir: Path) -> Backbone:
    metadata = ExportMetadata.of(version_dir)
    if not metadata.config.is_file():
        raise PretrainedError(f"{version_dir} is a SavedModel without {metadata.config}: "
                              "only exports written by electra_tf can be fine-tuned from.")
    config = BackboneConfig.load(metadata.config)
    tokenizer = read_tokenizer(metadata.vocab)
    discriminator = build_discriminator(config.model)
    saved = {v.name.rsplit(":", 1)[0]: v for v in tf.saved_model.load(str(version_dir)).variables}
    weights = model_weights(discriminator)
    missing = [v.path for v in weights if v.path not in saved]
    if missing:
        raise PretrainedError(f"{version_dir}: the SavedModel lacks {len(missing)} discriminator "
                              f"variables (first: {missing[0]}); it does not hold this model.")
    for variable in weights:
        value = saved[variable.path]
        if tuple(value.shape) != tuple(variable.shape):
            raise PretrainedError(f"{version_dir}: {variable.path} has shape {tuple(value.shape)}, "
                                  f"the config says {tuple(variable.shape)}.")
        variable.assign(value.numpy())
    return Backbone(discriminator, tokenizer, config, str(version_dir))
