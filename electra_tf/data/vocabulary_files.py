"""Vocabulary files and the settings they are tokenized with, read and written without
TensorFlow (data building's worker processes and the commands read them before it starts).

A vocabulary is `vocab.txt` (one token per line, in id order, holding [PAD] [UNK] [CLS] [SEP]
[MASK]), with beside it `tokenizer_config.json` (`TokenizerSettings`, with transformers' keys:
`do_lower_case`, `strip_accents`, `tokenize_chinese_chars`, and `tokenizer_kind`) and, for a
SentencePiece vocabulary, its model `spm.model`. A `vocab.txt` without settings is uncased
WordPiece, as every official ELECTRA model. The tokenizer that runs them is
`tokenization.ElectraTokenizer`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import sentencepiece

from electra_tf.utils.errors import ElectraError
from electra_tf.utils.files import atomic_write_bytes, atomic_write_text

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


TOKENIZER_CONFIG_FILE = "tokenizer_config.json"  # beside vocab.txt; transformers' name and keys


SENTENCEPIECE_MODEL_FILE = "spm.model"  # beside vocab.txt for a SentencePiece vocabulary (DeBERTa-v3's name)


WORDPIECE, SENTENCEPIECE = "wordpiece", "sentencepiece"  # the tokenizer kinds


# How a WordPiece vocabulary's text is split into words before WordPiece (tokenizer_config.json's
# `basic_tokenization`; `tokenization.py` says what each does). BERT_RULE is BERT's basic
# tokenization as tensorflow-text's FastBertNormalizer and FastWordpieceTokenizer run it, what
# every vocabulary made now is read with; V1_RULE, regular expressions that split on ASCII
# whitespace only, is what a vocabulary written without the key was trained with, and keeps.
BERT_RULE, V1_RULE = "bert", "electra_tf_v1"
BASIC_TOKENIZATION = "basic_tokenization"


WORD_START = "\u2581"  # "▁": a SentencePiece piece that starts a word


# An uncased tokenizer never produces a token with an upper-case letter. A vocabulary where more
# than this share of tokens has one was made cased (bert-base-cased: about a fifth).
CASED_TOKEN_SHARE = 0.01


SUFFIX_INDICATOR = "##"  # a WordPiece that continues a word


class VocabularyError(ElectraError):
    """A vocabulary file is missing, unreadable, or lacks a required token."""


@dataclass(frozen=True)
class TokenizerSettings:
    """The tokenizer's kind and how it normalises text; for WordPiece, transformers'
    `BertTokenizer` switches.

    lowercase: case folding (`do_lower_case`). strip_accents: NFD, then accent marks removed
    (transformers' `strip_accents`; its None means "as do_lower_case", resolved here).
    split_cjk: every CJK ideograph is a word of its own (`tokenize_chinese_chars`).
    kind: "wordpiece" or "sentencepiece"; a SentencePiece model normalises text itself (its
    `lowercase` says whether that folds case; the other two switches are off).
    rule: how WordPiece text is split into words, BERT_RULE or V1_RULE (`basic_tokenization`);
    settings read from a file or a saved model without the key are V1_RULE, the rule they were
    trained with. BERT_RULE runs on tensorflow-text's BERT kernels, which lower-case and strip
    accents together or not at all and always split CJK ideographs; other switches keep V1_RULE
    (`for_new_vocabulary` picks).

    >>> TokenizerSettings.from_huggingface({"do_lower_case": False}, rule=BERT_RULE).describe()
    'cased'
    >>> TokenizerSettings().to_huggingface()
    {'do_lower_case': True, 'strip_accents': None, 'tokenize_chinese_chars': True, 'basic_tokenization': 'bert'}
    >>> TokenizerSettings.from_huggingface({}).describe()
    'uncased, electra_tf_v1 word splitting'
    >>> TokenizerSettings.sentencepiece(lowercase=False).describe()
    'SentencePiece, cased'
    """

    lowercase: bool = True
    strip_accents: bool = True
    split_cjk: bool = True
    kind: str = WORDPIECE
    rule: str = BERT_RULE

    def __post_init__(self):
        if self.rule not in (BERT_RULE, V1_RULE):
            raise VocabularyError(f"{BASIC_TOKENIZATION} is {self.rule!r}; expected {BERT_RULE!r} or {V1_RULE!r}.")
        if self.kind == WORDPIECE and self.rule == BERT_RULE and not self.has_bert_kernels:
            raise VocabularyError(
                f"{BASIC_TOKENIZATION} {BERT_RULE!r} needs do_lower_case and strip_accents equal and "
                f"tokenize_chinese_chars true (tensorflow-text's BERT kernels); got {self.describe()}. Use "
                f"{BASIC_TOKENIZATION} {V1_RULE!r} for these switches.")

    @property
    def has_bert_kernels(self) -> bool:
        """Whether tensorflow-text's FastBertNormalizer and FastWordpieceTokenizer can run these
        switches (what BERT_RULE and a LiteRT file use)."""
        return self.lowercase == self.strip_accents and self.split_cjk

    @classmethod
    def for_new_vocabulary(cls, lowercase: bool = True, strip_accents: bool | None = None,
                           split_cjk: bool = True) -> "TokenizerSettings":
        """A WordPiece vocabulary made now: BERT_RULE where its kernels run the switches, else V1_RULE."""
        strip_accents = lowercase if strip_accents is None else strip_accents
        kernels = lowercase == strip_accents and split_cjk
        return cls(lowercase, strip_accents, split_cjk, rule=BERT_RULE if kernels else V1_RULE)

    @classmethod
    def sentencepiece(cls, lowercase: bool = True) -> "TokenizerSettings":
        """A SentencePiece model's settings (uncased: its normaliser folds case)."""
        return cls(lowercase=lowercase, strip_accents=False, split_cjk=False, kind=SENTENCEPIECE)

    @classmethod
    def cased(cls) -> "TokenizerSettings":
        """Case and accents kept (transformers' `do_lower_case=False`)."""
        return cls(lowercase=False, strip_accents=False)

    @classmethod
    def from_huggingface(cls, values: dict, where: str = "tokenizer settings",
                         rule: str | None = None) -> "TokenizerSettings":
        """From a `tokenizer_config.json`'s keys (absent keys: transformers' defaults). Without
        `basic_tokenization`, `rule` if given (a HuggingFace folder's tokenizer is BERT's:
        `for_new_vocabulary`'s choice), else V1_RULE, what a file written before the key was read with."""
        kind = values.get("tokenizer_kind", WORDPIECE)
        if kind not in (WORDPIECE, SENTENCEPIECE):
            raise VocabularyError(f"{where}: tokenizer_kind is {kind!r}; expected {WORDPIECE!r} or {SENTENCEPIECE!r}.")
        if kind == SENTENCEPIECE:
            lowercase = values.get("do_lower_case", True)
            if not isinstance(lowercase, bool):
                raise VocabularyError(f"{where}: do_lower_case is {lowercase!r}; expected true or false.")
            return cls.sentencepiece(lowercase)
        lowercase = values.get("do_lower_case", True)
        strip_accents = values.get("strip_accents")
        split_cjk = values.get("tokenize_chinese_chars", True)
        for key, value, allowed in (("do_lower_case", lowercase, (bool,)),
                                    ("strip_accents", strip_accents, (bool, type(None))),
                                    ("tokenize_chinese_chars", split_cjk, (bool,))):
            if not isinstance(value, allowed):
                raise VocabularyError(f"{where}: {key} is {value!r}; expected true or false"
                                      f"{' or null' if key == 'strip_accents' else ''}.")
        if BASIC_TOKENIZATION not in values and rule == BERT_RULE:
            return cls.for_new_vocabulary(lowercase, strip_accents, split_cjk)
        try:
            return cls(lowercase, lowercase if strip_accents is None else strip_accents, split_cjk,
                       rule=values.get(BASIC_TOKENIZATION, rule or V1_RULE))
        except VocabularyError as error:
            raise VocabularyError(f"{where}: {error}") from None

    def to_huggingface(self) -> dict:
        """transformers' keys, in its own spelling (strip_accents null when it follows do_lower_case);
        a SentencePiece vocabulary adds its kind and model file."""
        if self.kind == SENTENCEPIECE:
            return {"tokenizer_kind": SENTENCEPIECE, "sentencepiece_model_file": SENTENCEPIECE_MODEL_FILE,
                    "do_lower_case": self.lowercase}
        return {"do_lower_case": self.lowercase,
                "strip_accents": None if self.strip_accents == self.lowercase else self.strip_accents,
                "tokenize_chinese_chars": self.split_cjk, BASIC_TOKENIZATION: self.rule}

    def describe(self) -> str:
        """'uncased', 'cased', or all three switches (prefixed with 'SentencePiece, ' for that
        kind), and the word splitting where it is not BERT's."""
        if self.kind == SENTENCEPIECE:
            return f"SentencePiece, {'uncased' if self.lowercase else 'cased'}"
        switches = (self.lowercase, self.strip_accents, self.split_cjk)
        casing = {(True, True, True): "uncased", (False, False, True): "cased"}.get(switches) or (
            f"do_lower_case={self.lowercase}, strip_accents={self.strip_accents}, "
            f"tokenize_chinese_chars={self.split_cjk}")
        return casing if self.rule == BERT_RULE else f"{casing}, {self.rule} word splitting"


def tokenizer_settings_path(vocab_path: str | Path) -> Path:
    """Where the settings of a vocabulary file live: `tokenizer_config.json` in its folder."""
    return Path(vocab_path).with_name(TOKENIZER_CONFIG_FILE)


def read_tokenizer_settings(vocab_path: str | Path) -> TokenizerSettings:
    """The settings beside `vocab_path`; uncased with V1_RULE (what this package read such a
    file with before `basic_tokenization`) when there are none."""
    path = tokenizer_settings_path(vocab_path)
    if not path.is_file():
        return TokenizerSettings(rule=V1_RULE)
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise VocabularyError(f"{path}: not valid JSON ({error}); it says how {Path(vocab_path).name} "
                              "tokenizes (do_lower_case, strip_accents, tokenize_chinese_chars).") from None
    if not isinstance(values, dict):
        raise VocabularyError(f"{path}: expected a JSON object with do_lower_case, strip_accents and "
                              "tokenize_chinese_chars.")
    return TokenizerSettings.from_huggingface(values, str(path))


def write_tokenizer_settings(vocab_path: str | Path, settings: TokenizerSettings) -> None:
    """Writes the settings beside `vocab_path` (atomically)."""
    atomic_write_text(tokenizer_settings_path(vocab_path), json.dumps(settings.to_huggingface(), indent=2) + "\n")


def cased_tokens(tokens: list[str]) -> list[str]:
    """The tokens holding an upper-case letter (special tokens such as [CLS] aside)."""
    return [t for t in tokens if t != t.lower() and not (t.startswith("[") and t.endswith("]"))]


def check_casing(tokens: list[str], settings: TokenizerSettings, where: str, advice: str | None = None) -> None:
    """An uncased tokenizer over a cased vocabulary would never produce its capitalised tokens:
    the classic mix-up of a cased vocab.txt read without its settings."""
    if not settings.lowercase:
        return
    capitalised = cased_tokens(tokens)
    if len(capitalised) > CASED_TOKEN_SHARE * len(tokens):
        raise VocabularyError(
            f"{where} holds {len(capitalised):,} tokens with upper-case letters (e.g. {capitalised[:3]}), so it "
            "was made cased, but it is read uncased (lower-cased text never reaches them). " + (advice or (
                f'Put a {TOKENIZER_CONFIG_FILE} with {{"do_lower_case": false}} beside it (build_vocab --cased '
                "writes one), or use an uncased vocabulary.")))


def read_vocabulary(path: str | Path) -> list[str]:
    """The tokens of a `vocab.txt`, checked for ELECTRA's special tokens."""
    path = Path(path)
    if not path.is_file():
        raise VocabularyError(f"vocabulary {path} does not exist. Build one with "
                              "`python -m electra_tf.build_vocab` or pass a BERT-style vocab.txt.")
    try:
        tokens = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as error:
        raise VocabularyError(f"vocabulary {path} is not UTF-8 text ({error}).") from None
    if "" in tokens:
        raise VocabularyError(f"vocabulary {path} has an empty line at line {tokens.index('') + 1}; "
                              "every line must hold one token.")
    missing = [token for token in SPECIAL_TOKENS if token not in tokens]
    if missing:
        raise VocabularyError(f"vocabulary {path} lacks {', '.join(missing)}; ELECTRA needs "
                              f"{', '.join(SPECIAL_TOKENS)}. Add them or rebuild the vocabulary.")
    duplicates = sorted({t for t in tokens if tokens.count(t) > 1}) if len(set(tokens)) < len(tokens) else []
    if duplicates:
        raise VocabularyError(f"vocabulary {path} lists {duplicates[:5]} more than once.")
    return tokens


def write_vocabulary(path: str | Path, tokens, settings: TokenizerSettings | None = None,
                     sentencepiece_model: bytes | None = None) -> None:
    """Writes a `vocab.txt` (one token per line) atomically, its settings beside it if given, and
    a SentencePiece vocabulary's model beside it (`vocabulary_files`)."""
    if sentencepiece_model is not None:
        atomic_write_bytes(sentencepiece_model_path(path), sentencepiece_model)
    atomic_write_text(path, "\n".join(tokens) + "\n")
    if settings is not None:
        write_tokenizer_settings(path, settings)


def vocabulary_files(vocab_path: str | Path) -> list[Path]:
    """The files a vocabulary is made of: `vocab.txt`, the `tokenizer_config.json` beside it, and
    for SentencePiece the `spm.model` beside it (what is copied, moved or refused as a whole)."""
    return [Path(vocab_path), tokenizer_settings_path(vocab_path), sentencepiece_model_path(vocab_path)]


def vocabulary_fingerprint(tokens: list[str]) -> str:
    """sha256 of the token list: data built with one vocabulary must be read with it."""
    return hashlib.sha256("\n".join(tokens).encode("utf-8")).hexdigest()


def sentencepiece_model_path(vocab_path: str | Path) -> Path:
    """Where a SentencePiece vocabulary's model lives: `spm.model` beside its `vocab.txt`."""
    return Path(vocab_path).with_name(SENTENCEPIECE_MODEL_FILE)


def read_sentencepiece_model(vocab_path: str | Path) -> bytes:
    """The serialized SentencePiece model beside `vocab_path`."""
    path = sentencepiece_model_path(vocab_path)
    if not path.is_file():
        raise VocabularyError(f"{tokenizer_settings_path(vocab_path)} says {Path(vocab_path).name} is a SentencePiece "
                              f"vocabulary, but its model {path} is missing. Copy the vocabulary's whole folder "
                              f"({Path(vocab_path).name}, {SENTENCEPIECE_MODEL_FILE}, {TOKENIZER_CONFIG_FILE}).")
    return path.read_bytes()


def model_pieces(model: bytes) -> list[str]:
    """The pieces of a serialized model, in id order (what its vocab.txt lists)."""
    processor = sentencepiece.SentencePieceProcessor(model_proto=model)
    return [processor.id_to_piece(i) for i in range(processor.get_piece_size())]


def check_model_pieces(model: bytes, vocabulary: list[str], where: str) -> None:
    """A SentencePiece vocabulary's model and its token list must agree, and the model must hold
    ELECTRA's special tokens as pieces."""
    try:
        pieces = model_pieces(model)
    except (RuntimeError, OSError) as error:
        raise VocabularyError(f"{where}: its SentencePiece model cannot be read ({error}).") from None
    if pieces != list(vocabulary):
        raise VocabularyError(f"{where}: the SentencePiece model's {len(pieces):,} pieces are not the vocabulary's "
                              f"{len(vocabulary):,} tokens: keep vocab.txt and spm.model from the same build.")
