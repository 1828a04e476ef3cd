"""Released checkpoints in and out: a HuggingFace folder or an official TF1 checkpoint becomes a
model_dir every command accepts; a model_dir becomes HuggingFace folders.

A converted model_dir holds `config.json`, `vocab.txt` with its `tokenizer_config.json` (the
source's casing), `checkpoints/ckpt-0` (the model's variables, as pre-training saves them),
`backbone/` (the discriminator on its own, as a finished run writes it) and
`imported_from.json` (where the weights came from, and whether the replaced-token head and
the generator were among them). It is written to a
temporary folder and renamed, so a failed conversion leaves nothing behind.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from electra_tf.data.tokenization import ElectraTokenizer
from electra_tf.data.vocabulary_files import (BASIC_TOKENIZATION, BERT_RULE, TokenizerSettings, VocabularyError,
                                              check_casing, write_vocabulary)
from electra_tf.interop.google import GoogleCheckpoint
from electra_tf.interop.huggingface import (ConversionError, HuggingFaceFolder, check_huggingface_tokenizer,
                                            config_from_huggingface, tensors_for, write_folder)
from electra_tf.interop.question_answering import export_question_answerer, has_qa_head, write_question_answerer
from electra_tf.models.backbone import Backbone, BackboneConfig
from electra_tf.models.weight_names import DISCRIMINATOR, GENERATOR, WeightName, embedding_names, weight_table
from electra_tf.pretraining.config import PretrainingConfig
from electra_tf.pretraining.pretrainer import ElectraPretrainer
from electra_tf.pretraining.restore import restore_pretrainer
from electra_tf.serving.exports import ExportFormat, ExportOptions, ExportSource, register_format
from electra_tf.utils.files import atomic_folder, atomic_write_text
from electra_tf.utils.run_dir import ModelDir, read_provenance


def import_huggingface(discriminator: str | Path, output: str | Path, generator: str | Path | None = None,
                       max_seq_length: int | None = None, overwrite: bool = False,
                       tokenizer_settings: dict | None = None) -> ModelDir:
    """Converts `save_pretrained` folders (ElectraForPreTraining or ElectraModel, and optionally
    the matching ElectraForMaskedLM) into a model_dir. The tokenizer's casing comes from the
    folder; `tokenizer_settings` (transformers' keys) overrides it key by key."""
    disc = HuggingFaceFolder(discriminator)
    if disc.kind == GENERATOR:
        raise ConversionError(f"{disc.path} is a generator (ElectraForMaskedLM) folder: give the discriminator as "
                              "--input and this folder as --generator.")
    gen = HuggingFaceFolder(generator) if generator is not None else None
    config = config_from_huggingface(disc, gen, max_seq_length)
    vocabulary = checked_vocabulary(disc.vocabulary(), config, disc.path)
    settings = _settings({**disc.tokenizer_settings().to_huggingface(), **(tokenizer_settings or {})},
                         vocabulary, disc.path / "tokenizer_config.json")
    names = weight_table(config.model, config.generator_model if gen is not None else None, disc.has_rtd_head)
    if gen is not None:
        _check_shared_embeddings(disc, gen)

    def read(name: WeightName):
        folder = disc if name.model == DISCRIMINATOR else gen
        return folder.tensor(name.huggingface), f"{folder.path}: tensor {name.huggingface!r}"

    provenance = {"format": "huggingface", "discriminator": str(disc.path),
                  "generator": str(gen.path) if gen is not None else None,
                  "rtd_head": disc.has_rtd_head, "generator_weights": gen is not None,
                  **({"question_answering_head": True} if has_qa_head(disc) else {})}
    weights = ConvertedWeights(names, read, "huggingface", provenance)
    model_dir = write_model_dir(config, (vocabulary, settings), weights, output, overwrite)
    if has_qa_head(disc):  # ElectraForQuestionAnswering: the whole model, head included, beside it
        write_question_answerer(model_dir, disc)
    return model_dir


def import_google(checkpoint: str | Path, output: str | Path, config: PretrainingConfig | None = None,
                  max_seq_length: int | None = None, overwrite: bool = False,
                  tokenizer_settings: dict | None = None) -> ModelDir:
    """Converts an official TF1 checkpoint (generator and discriminator together) into a model_dir.

    A release folder does not say how it tokenizes (the official code takes `do_lower_case` as a
    flag, True by default): uncased unless `tokenizer_settings` (transformers' keys) says
    otherwise, and a vocabulary that is plainly cased is refused until it does."""
    source = GoogleCheckpoint(checkpoint)
    resolved = source.config(config, max_seq_length)
    vocabulary = checked_vocabulary(source.vocabulary(), resolved, source.folder)
    settings = _settings(tokenizer_settings or {}, vocabulary, source.folder / "vocab.txt")
    names = weight_table(resolved.model, resolved.generator_model if source.has_generator else None)
    provenance = {"format": "google", "checkpoint": source.prefix, "rtd_head": True,
                  "generator_weights": source.has_generator}
    def read(name: WeightName):
        return source.tensor(name.google), f"{source.prefix}: variable {name.google!r}"

    weights = ConvertedWeights(names, read, "google", provenance)
    return write_model_dir(resolved, (vocabulary, settings), weights, output, overwrite)


def export_huggingface(model_dir: str | Path, output: str | Path, checkpoint: str | None = None) -> list[Path]:
    """Writes OUTPUT/discriminator (ElectraForPreTraining, or ElectraModel if the run never had
    the replaced-token head) and, when the run has a trained generator, OUTPUT/generator
    (ElectraForMaskedLM). Returns the folders written."""
    output = Path(output)
    if output.exists():
        raise ConversionError(f"{output} exists; choose another output folder (nothing was written).")
    pretrainer, tokenizer, config, _ = restore_pretrainer(model_dir, checkpoint)
    provenance = read_provenance(model_dir)
    return write_huggingface_folders(pretrainer, config, tokenizer, output,
                                     rtd_head=provenance.get("rtd_head", True),
                                     with_generator=provenance.get("generator_weights", True))


def write_huggingface_folders(pretrainer, config: PretrainingConfig, tokenizer, output: Path,
                              rtd_head: bool = True, with_generator: bool = True) -> list[Path]:
    """A pretrainer in memory as `save_pretrained` folders OUTPUT/discriminator [and
    OUTPUT/generator], written to a temporary folder and renamed. A SentencePiece vocabulary is
    refused before anything is written (`check_huggingface_tokenizer`)."""
    check_huggingface_tokenizer(tokenizer)
    names = weight_table(config.model, config.generator_model if with_generator else None, rtd_head)
    values = {variable.path: variable.numpy() for variable in pretrainer.variables}
    # The discriminator's own embeddings: under GDES the summed tables (the shared ones stay the generator's).
    own = {variable.path: variable.numpy() for variable in pretrainer.standalone_discriminator().embeddings.weights}
    by_model = {DISCRIMINATOR: {**values, **own}, GENERATOR: values}
    folders = [(DISCRIMINATOR, "ElectraForPreTraining" if rtd_head else "ElectraModel")]
    if with_generator:
        folders.append((GENERATOR, "ElectraForMaskedLM"))
    with atomic_folder(output, replace=False) as write:
        for model, model_class in folders:
            tensors = tensors_for(names + (embedding_names(GENERATOR) if model == GENERATOR else []), model,
                                  by_model[model])
            if model_class == "ElectraModel":
                tensors = {key[len("electra."):]: value for key, value in tensors.items()}
            write_folder(write.temporary / model, model_class,
                         config.generator_model if model == GENERATOR else config.model, tensors, tokenizer)
    return [output / model for model, _ in folders]


def checked_vocabulary(vocabulary: list[str], config: PretrainingConfig, where: Path) -> list[str]:
    """`vocabulary`, if it has a token for each row of the config's embedding table."""
    if len(vocabulary) != config.model.vocab_size:
        raise ConversionError(f"{where}: the vocabulary has {len(vocabulary)} tokens but the model's embedding table "
                              f"has {config.model.vocab_size} rows; they must come from the same model.")
    return vocabulary


def _settings(values: dict, vocabulary: list[str], where: Path):
    """`TokenizerSettings` from transformers' keys, checked against the vocabulary's casing."""
    # Both sources' models were trained with BERT's own tokenizer: BERT_RULE wherever its kernels run
    # the switches (`TokenizerSettings.for_new_vocabulary`), whatever rule a folder's file names.
    values = {key: value for key, value in values.items() if key != BASIC_TOKENIZATION}
    try:
        settings = TokenizerSettings.from_huggingface(values, str(where), rule=BERT_RULE)
        check_casing(vocabulary, settings, f"the vocabulary of {where.parent}",
                     advice="If the model is cased, pass --do_lower_case false.")
    except VocabularyError as error:
        raise ConversionError(str(error)) from None
    return settings


def _check_shared_embeddings(disc: HuggingFaceFolder, gen: HuggingFaceFolder) -> None:
    for name in embedding_names(GENERATOR):
        if not np.array_equal(disc.tensor(name.huggingface), gen.tensor(name.huggingface)):
            raise ConversionError(
                f"{gen.path}: {name.huggingface} differs from the discriminator's. ELECTRA's generator and "
                "discriminator share their embeddings; these two folders were not trained together.")


@dataclasses.dataclass(frozen=True)
class ConvertedWeights:
    """A source's weights: the tensors to read (`names`, each `read(name)` -> (value, where)),
    the layout they are in (`format`: huggingface or google) and the provenance to record."""

    names: list
    read: object
    format: str
    provenance: dict


def write_model_dir(config, vocabulary, weights: ConvertedWeights, output, overwrite) -> ModelDir:
    """A model_dir of `weights`, `vocabulary` (tokens, TokenizerSettings), written whole."""
    output = Path(output)
    if output.exists() and any(output.iterdir()) and not overwrite:
        raise ConversionError(f"{output} is not empty; choose a new --output or pass --overwrite.")
    keras.config.set_dtype_policy("float32")
    pretrainer = ElectraPretrainer.from_pretraining_config(config)
    variables = {variable.path: variable for variable in pretrainer.variables}
    for name in weights.names:
        variable = variables[name.ours]
        value, where = weights.read(name)
        try:
            converted = name.to_ours(value, tuple(variable.shape), weights.format)
        except ValueError:
            raise ConversionError(f"{where} has shape {tuple(np.shape(value))}, but the config makes {name.ours} "
                                  f"{tuple(variable.shape)}; the weights do not match the config.") from None
        variable.assign(converted)
    with atomic_folder(output) as write:
        temporary = ModelDir(write.temporary)
        config.save(temporary.config)
        write_vocabulary(temporary.vocab, *vocabulary)
        manager = tf.train.CheckpointManager(tf.train.Checkpoint(model_variables=list(pretrainer.variables)),
                                             str(temporary.checkpoints), max_to_keep=1)
        manager.save(checkpoint_number=0)
        _write_backbone(pretrainer, config, temporary, weights.provenance)
        atomic_write_text(temporary.provenance, json.dumps(weights.provenance, indent=2) + "\n")
    return ModelDir(output)


def _write_backbone(pretrainer, config: PretrainingConfig, model_dir: ModelDir, provenance: dict) -> None:
    """The discriminator as the model_dir's backbone folder, as a run that finished at step 0."""
    Backbone(pretrainer.standalone_discriminator(), ElectraTokenizer(model_dir.vocab),
             BackboneConfig(config.model, config.run.max_seq_length)).save(
        model_dir.backbone, {"step": 0, "source": provenance.get("discriminator") or provenance.get("checkpoint")})


QUESTION_ANSWERING = "question_answering"  # the kind whose plain-head models transformers has a class for


@register_format("huggingface")
class HuggingFaceFormat(ExportFormat):
    """`save_pretrained` folders (EXPORT_DIR/NAME-huggingface/...): a pre-training run's
    discriminator and generator (from its checkpoint), or a question answerer with the plain head
    (`interop/question_answering.py`)."""

    help = "save_pretrained folders that transformers loads (a pre-training run's discriminator and generator)"

    def refuses(self, source: ExportSource) -> str | None:
        if source.model_dir is not None or source.kind == QUESTION_ANSWERING:
            return None
        return ("transformers folders come from a pre-training model_dir (its checkpoint holds the generator too) "
                "or a question answerer fine-tuned with --qa_head plain")

    def write(self, source: ExportSource, options: ExportOptions) -> tuple[Path, list[str]]:
        output = options.target or options.export_dir / f"{options.name}-huggingface"
        if source.model_dir is None:
            served = source.served
            folders = export_question_answerer(served.model, served.config, served.tokenizer, output)
        else:
            folders = export_huggingface(source.model_dir, output, source.checkpoint)
        return output, ["Exported for HuggingFace transformers:", *(f"  {folder.resolve()}" for folder in folders)]
