"""HuggingFace ELECTRA folders in and out, without torch: safetensors read and written as numpy.

A folder as `save_pretrained` writes it: `config.json`, `model.safetensors` (or sharded, with
`model.safetensors.index.json`), and the tokenizer: `vocab.txt` or `tokenizer.json`, with
`tokenizer_config.json` saying how it normalises text (`do_lower_case`, `strip_accents`,
`tokenize_chinese_chars`; transformers lets these override the fast tokenizer's normalizer, and
so does `tokenizer_settings` here). Cased and uncased folders both convert; the settings are
written beside the model_dir's vocab.txt, and back into an exported folder. The discriminator is an
`ElectraForPreTraining` folder (an `ElectraModel` folder, without the replaced-token head, loads
for fine-tuning too); the generator an `ElectraForMaskedLM` folder.

`config_from_huggingface` maps every setting of their `config.json` to a `PretrainingConfig` and
refuses, naming the key, what electra_tf cannot represent (another activation or position
embedding type, a generator whose sizes do not follow ELECTRA's rule).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file

from electra_tf.data.vocabulary_files import (BERT_RULE, SENTENCEPIECE, TokenizerSettings, VocabularyError,
                                              read_vocabulary, write_vocabulary)
from electra_tf.models.weight_names import DISCRIMINATOR, GENERATOR
from electra_tf.pretraining.config import PretrainingConfig
from electra_tf.utils.errors import ElectraError
from electra_tf.utils.files import atomic_write_text
from electra_tf.utils.sections import ConfigError

WEIGHTS_FILE = "model.safetensors"
WEIGHTS_INDEX = "model.safetensors.index.json"
CONFIG_FILE = "config.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
# The fine-tuning length when a folder does not say: the official GLUE setting.
DEFAULT_MAX_SEQ_LENGTH = 128
# Settings that change nothing we compute (or only HuggingFace's own task heads).
_IGNORED = {"architectures", "model_type", "transformers_version", "dtype", "torch_dtype", "bos_token_id",
            "eos_token_id", "pad_token_id", "use_cache", "tie_word_embeddings", "classifier_dropout",
            "summary_type", "summary_use_proj", "summary_activation", "summary_last_dropout",
            "summary_first_dropout", "id2label", "label2id", "problem_type", "output_past", "chunk_size_feed_forward",
            "is_encoder_decoder", "return_dict", "output_hidden_states", "output_attentions", "_name_or_path"}
_MAPPED = {"vocab_size": "vocab_size", "embedding_size": "embedding_size", "hidden_size": "hidden_size",
           "num_hidden_layers": "num_layers", "num_attention_heads": "num_heads",
           "intermediate_size": "intermediate_size", "max_position_embeddings": "max_position_embeddings",
           "type_vocab_size": "type_vocab_size", "initializer_range": "initializer_range",
           "layer_norm_eps": "layer_norm_epsilon"}


class ConversionError(ElectraError):
    """A checkpoint that cannot be converted as asked; the message names the file and tensor."""


class HuggingFaceFolder:
    """One `save_pretrained` folder: its config, tensors (numpy) and tokenizer."""

    def __init__(self, path):
        self.path = Path(path)
        if not self.path.is_dir():
            raise ConversionError(f"{self.path} is not a folder: give the folder `save_pretrained` wrote.")
        self.config = read_json_file(self.path / CONFIG_FILE, "the model's config.json")
        model_type = self.config.get("model_type")
        if model_type != "electra":
            raise ConversionError(f"{self.path / CONFIG_FILE}: model_type is {model_type!r}, not 'electra': this is "
                                  "not an ELECTRA checkpoint (a BERT model has another architecture and no "
                                  "generator/discriminator pair).")
        self.tensors = _read_tensors(self.path)
        if not any(key.startswith("electra.") for key in self.tensors):
            # An `ElectraModel` folder keeps the bare model's names, without the task prefix.
            self.tensors = {f"electra.{key}": value for key, value in self.tensors.items()}

    @property
    def kind(self) -> str:
        if any(key.startswith("generator_predictions.") for key in self.tensors):
            return GENERATOR
        return DISCRIMINATOR

    @property
    def has_rtd_head(self) -> bool:
        return any(key.startswith("discriminator_predictions.") for key in self.tensors)

    def tensor(self, key: str) -> np.ndarray:
        if key not in self.tensors:
            raise ConversionError(f"{self.path}: tensor {key!r} is missing from the weights; the folder does not "
                                  "hold the model its config.json describes.")
        return self.tensors[key]

    def vocabulary(self) -> list[str]:
        vocab_file = self.path / "vocab.txt"
        if vocab_file.is_file():
            return read_vocabulary(vocab_file)
        tokenizer_file = self.path / "tokenizer.json"
        if not tokenizer_file.is_file():
            raise ConversionError(f"{self.path} has neither vocab.txt nor tokenizer.json: the vocabulary the model "
                                  "was trained with is needed (save the tokenizer with `save_pretrained` too).")
        model = read_json_file(tokenizer_file, "the tokenizer").get("model", {})
        if model.get("type") != "WordPiece":
            raise ConversionError(f"{tokenizer_file}: model.type is {model.get('type')!r}; ELECTRA uses WordPiece.")
        by_id = sorted((index, token) for token, index in model["vocab"].items())
        if [index for index, _ in by_id] != list(range(len(by_id))):
            raise ConversionError(f"{tokenizer_file}: the WordPiece ids are not 0..{len(by_id) - 1}.")
        return [token for _, token in by_id]

    def tokenizer_settings(self):
        """How the folder's tokenizer normalises text: tokenizer_config.json's keys where it has
        them, else the fast tokenizer's BertNormalizer in tokenizer.json, else transformers'
        defaults (uncased)."""
        keys = {"do_lower_case", "strip_accents", "tokenize_chinese_chars"}
        path, values = self.path / TOKENIZER_CONFIG, {}
        if (self.path / "tokenizer.json").is_file():
            normalizer = read_json_file(self.path / "tokenizer.json", "the tokenizer").get("normalizer") or {}
            if normalizer.get("type") == "BertNormalizer":
                values = {"do_lower_case": normalizer.get("lowercase", True),
                          "strip_accents": normalizer.get("strip_accents"),
                          "tokenize_chinese_chars": normalizer.get("handle_chinese_chars", True)}
        if path.is_file():
            values.update({k: v for k, v in read_json_file(path, "the tokenizer config").items() if k in keys})
        try:
            return TokenizerSettings.from_huggingface(values, str(path), rule=BERT_RULE)
        except VocabularyError as error:
            raise ConversionError(str(error)) from None


def config_from_huggingface(discriminator: HuggingFaceFolder, generator: HuggingFaceFolder | None = None,
                            max_seq_length: int | None = None) -> PretrainingConfig:
    """The PretrainingConfig of a discriminator folder (and its generator's sizes, if given)."""
    source = discriminator.path / CONFIG_FILE
    settings = discriminator.config
    _check_representable(settings, source)
    values = {ours: settings[theirs] for theirs, ours in _MAPPED.items() if theirs in settings}
    values["dropout"] = float(settings.get("hidden_dropout_prob", 0.1))
    values["max_seq_length"] = min(max_seq_length or DEFAULT_MAX_SEQ_LENGTH,
                                   int(settings.get("max_position_embeddings", 512)))
    if generator is not None:
        values.update(_generator_fractions(settings, generator, values))
    try:
        return PretrainingConfig.from_dict(values, source=str(source))
    except ConfigError as error:
        raise ConversionError(str(error)) from None


def _check_representable(settings: dict, source: Path) -> None:
    refusals = {
        "hidden_act": (settings.get("hidden_act", "gelu") == "gelu",
                       "only exact (erf) GELU, 'gelu', is implemented"),
        "position_embedding_type": (settings.get("position_embedding_type", "absolute") == "absolute",
                                    "only learned absolute position embeddings are implemented"),
        "attention_probs_dropout_prob": (
            settings.get("attention_probs_dropout_prob", 0.1) == settings.get("hidden_dropout_prob", 0.1),
            "electra_tf has one dropout rate; it must equal hidden_dropout_prob"),
        "is_decoder": (not settings.get("is_decoder", False), "ELECTRA is an encoder"),
        "add_cross_attention": (not settings.get("add_cross_attention", False), "ELECTRA is an encoder"),
    }
    for key, (ok, why) in refusals.items():
        if not ok:
            raise ConversionError(f"{source}: {key} = {settings[key]!r} cannot be represented: {why}.")
    unknown = sorted(set(settings) - set(_MAPPED) - set(refusals) - _IGNORED - {"hidden_dropout_prob"})
    if unknown:
        raise ConversionError(f"{source}: unknown setting(s) {', '.join(map(repr, unknown))}; electra_tf cannot "
                              "tell whether they change the model, so it does not guess.")


def _generator_fractions(settings: dict, generator: HuggingFaceFolder, values: dict) -> dict:
    source = generator.path / CONFIG_FILE
    theirs = generator.config
    _check_representable(theirs, source)
    if generator.kind != GENERATOR:
        raise ConversionError(f"{generator.path} is not an ElectraForMaskedLM folder (no generator_predictions "
                              "tensors): --generator takes the generator that was trained with the discriminator.")
    for key in ("vocab_size", "embedding_size", "max_position_embeddings", "type_vocab_size", "layer_norm_eps"):
        if theirs.get(key) != settings.get(key):
            raise ConversionError(f"{source}: {key} = {theirs.get(key)!r}, the discriminator's is "
                                  f"{settings.get(key)!r}; ELECTRA's generator shares the discriminator's embeddings.")
    hidden = int(theirs["hidden_size"])
    fractions = {"generator_hidden_fraction": hidden / int(settings["hidden_size"]),
                 "generator_layers_fraction": int(theirs["num_hidden_layers"]) / int(settings["num_hidden_layers"]),
                 "allow_wide_generator": hidden > int(settings["hidden_size"])}
    # ELECTRA derives the generator's heads and feed-forward width from its hidden size.
    for key, expected in (("num_attention_heads", max(1, hidden // 64)), ("intermediate_size", 4 * hidden)):
        if int(theirs[key]) != expected:
            raise ConversionError(f"{source}: {key} = {theirs[key]}, but an ELECTRA generator of hidden size {hidden} "
                                  f"has {expected} (official get_generator_config); it cannot be represented.")
    return fractions


def write_folder(path: Path, model_class: str, model, tensors: dict, tokenizer) -> None:
    """A folder `transformers.<model_class>.from_pretrained` loads, of a network of `model`'s
    sizes (a `ModelConfig`: the discriminator's, or the generator's); written in place (the
    caller writes into a temporary folder and renames it)."""
    settings = {
        "architectures": [model_class], "model_type": "electra", "vocab_size": model.vocab_size,
        "embedding_size": model.embedding_size, "hidden_size": model.hidden_size,
        "num_hidden_layers": model.num_layers, "num_attention_heads": model.num_heads,
        "intermediate_size": model.intermediate_size,
        "hidden_act": "gelu", "hidden_dropout_prob": model.dropout, "attention_probs_dropout_prob": model.dropout,
        "max_position_embeddings": model.max_position_embeddings, "type_vocab_size": model.type_vocab_size,
        "initializer_range": model.initializer_range, "layer_norm_eps": model.layer_norm_epsilon,
        "pad_token_id": 0, "tie_word_embeddings": True,
    }
    path.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path / CONFIG_FILE, json.dumps(settings, indent=2) + "\n")
    save_file({key: np.ascontiguousarray(value, np.float32) for key, value in tensors.items()},
              str(path / WEIGHTS_FILE), metadata={"format": "pt"})
    write_tokenizer_files(path, tokenizer, model.max_position_embeddings)


def check_huggingface_tokenizer(tokenizer) -> None:
    """transformers' `ElectraTokenizer` is WordPiece only, and no tokenizer class that
    `AutoTokenizer` loads reproduces a SentencePiece model's ids exactly: its tokenizers-backed
    classes break ties between equally likely segmentations differently (for a unigram model
    learned from Chinese reviews, about 1% of texts got other ids, e.g. "！！！！！" as "!"+"!!!!"
    instead of "!!!!"+"!"), and DeBERTa-v2's does not apply the model's normalisation (full-width
    "，" became [UNK]). A folder that loads but tokenizes differently would silently change the
    model's inputs, so such a vocabulary is refused (docs/interop.md)."""
    if tokenizer.kind == SENTENCEPIECE:
        raise ConversionError(
            "the run's vocabulary is SentencePiece, and transformers has no tokenizer that AutoTokenizer loads and "
            "that gives the same ids for it (its tokenizers-backed SentencePiece classes segment some text "
            "differently), so no HuggingFace folder was written. Serve the model with the TensorFlow export "
            "(python -m electra_tf.export), which tokenizes in the graph with the model's own spm.model.")


def write_tokenizer_files(path: Path, tokenizer, max_positions: int) -> None:
    """`vocab.txt` and `tokenizer_config.json` for transformers' `ElectraTokenizer`, normalising
    as `tokenizer` (an `ElectraTokenizer`) does."""
    write_vocabulary(path / "vocab.txt", tokenizer.vocabulary)
    atomic_write_text(path / TOKENIZER_CONFIG, json.dumps({
        "tokenizer_class": "ElectraTokenizer", **tokenizer.settings.to_huggingface(),
        "unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
        "mask_token": "[MASK]", "model_max_length": max_positions}, indent=2) + "\n")


def read_json_file(path: Path, what: str) -> dict:
    """A JSON object from `path`; a ConversionError naming the file (and `what` it holds) otherwise."""
    if not path.is_file():
        raise ConversionError(f"{path} is missing: {what} is needed.")
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ConversionError(f"{path}: not valid JSON ({error}).") from None
    if not isinstance(value, dict):
        raise ConversionError(f"{path}: expected a JSON object.")
    return value


def _read_tensors(folder: Path) -> dict:
    index = folder / WEIGHTS_INDEX
    if index.is_file():
        files = sorted(set(read_json_file(index, "the shard index")["weight_map"].values()))
    elif (folder / WEIGHTS_FILE).is_file():
        files = [WEIGHTS_FILE]
    elif (folder / "pytorch_model.bin").is_file():
        raise ConversionError(
            f"{folder} has only pytorch_model.bin (a pickled PyTorch checkpoint), which cannot be read without torch. "
            "Convert it once where torch is installed: `python -c \"import transformers; m = transformers."
            f"AutoModelForPreTraining.from_pretrained('{folder}'); m.save_pretrained('{folder}', "
            "safe_serialization=True)\"` (ElectraForMaskedLM for a generator), then convert again.")
    else:
        raise ConversionError(f"{folder} has no {WEIGHTS_FILE}: give the folder `save_pretrained` wrote.")
    tensors = {}
    for name in files:
        path = folder / name
        try:
            loaded = load_file(str(path))
        except FileNotFoundError:
            raise ConversionError(f"{path} is listed in {WEIGHTS_INDEX} but missing.") from None
        except Exception as error:  # safetensors raises its own error type for damaged files
            raise ConversionError(f"{path} cannot be read ({type(error).__name__}: {error}); the file is damaged "
                                  "or truncated. Download or save it again.") from None
        for key, value in loaded.items():
            if not np.issubdtype(value.dtype, np.floating) or not np.isfinite(value).all():
                raise ConversionError(f"{path}: tensor {key!r} is not finite floating point ({value.dtype}).")
            tensors[key] = value.astype(np.float32)
    return tensors


def tensors_for(names, model: str, values_by_ours: dict) -> dict:
    """{HuggingFace key: array} of one folder (DISCRIMINATOR or GENERATOR) from our values."""
    return {name.huggingface: name.from_ours(values_by_ours[name.ours], "huggingface")
            for name in names if name.model == model}

