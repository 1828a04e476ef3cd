"""The one tokenizer: uncased WordPiece, in-graph (tf-text FastWordpiece via keras-hub).

Data building, pre-training, fine-tuning and the exported serving graph all tokenize with
`ElectraTokenizer`, so ids can never drift between stages. It wraps keras-hub's
`WordPieceTokenizer` (lower-casing and accent stripping on, as the official uncased models)
and knows the ids of the special tokens ELECTRA needs.

Any BERT-style `vocab.txt` works (one token per line, e.g. the standard 30522-entry uncased
vocabulary), as long as it holds [PAD] [UNK] [CLS] [SEP] [MASK]; `learn_vocabulary` makes one
from text with keras-hub's WordPiece trainer.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from electra_tf.errors import ElectraError

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


class VocabularyError(ElectraError):
    """A vocabulary file is missing, unreadable, or lacks a required token."""


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


def write_vocabulary(path: str | Path, tokens) -> None:
    """Writes a `vocab.txt` (one token per line) atomically."""
    from electra_tf.files import atomic_write_text

    atomic_write_text(path, "\n".join(tokens) + "\n")


def vocabulary_fingerprint(tokens: list[str]) -> str:
    """sha256 of the token list: data built with one vocabulary must be read with it."""
    return hashlib.sha256("\n".join(tokens).encode("utf-8")).hexdigest()


class ElectraTokenizer:
    """Text -> WordPiece ids, in graph (tf.data, tf.function, SavedModel) or eagerly.

    Example:
    >>> tokenizer = ElectraTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    ...                               "the", "qu", "##ick", "fox"])
    >>> tokenizer.tokenize(["The QUICK fox!"]).to_list()
    [[5, 6, 7, 8, 1]]
    >>> tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id
    (2, 3, 4)
    """

    def __init__(self, vocabulary: list[str] | str | Path):
        import keras_hub  # deferred: importing keras-hub loads TensorFlow

        if isinstance(vocabulary, (str, Path)):
            self.vocabulary_path = str(vocabulary)
            vocabulary = read_vocabulary(vocabulary)
        else:
            self.vocabulary_path = None
            missing = [token for token in SPECIAL_TOKENS if token not in vocabulary]
            if missing:
                raise VocabularyError(f"vocabulary lacks {', '.join(missing)}.")
        self.vocabulary = list(vocabulary)
        self.fingerprint = vocabulary_fingerprint(self.vocabulary)
        index = {token: i for i, token in enumerate(self.vocabulary)}
        self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (
            index[token] for token in SPECIAL_TOKENS)
        self.special_token_ids = tuple(sorted(
            i for token, i in index.items() if token.startswith("[") and token.endswith("]")))
        self._wordpiece = keras_hub.tokenizers.WordPieceTokenizer(
            vocabulary=self.vocabulary, lowercase=True, strip_accents=True, oov_token="[UNK]",
            dtype="int32")
        import tensorflow as tf

        # Called eagerly, keras-hub returns Python lists; inside a tf.function it returns a
        # RaggedTensor, which is what every caller here wants.
        self._tokenize = tf.function(
            self._wordpiece, input_signature=[tf.TensorSpec([None], tf.string)])

    @property
    def vocabulary_size(self) -> int:
        return len(self.vocabulary)

    def tokenize(self, texts):
        """A batch of strings -> a ragged int32 [batch, None] tensor of ids (no [CLS]/[SEP])."""
        import tensorflow as tf

        return self._tokenize(tf.convert_to_tensor(texts, tf.string))

    def id_to_token(self, token_id: int) -> str:
        return self.vocabulary[token_id]


def learn_vocabulary(texts, vocabulary_size: int) -> list[str]:
    """Learns an uncased WordPiece vocabulary (keras-hub's trainer) with the special tokens first.

    `texts` is a `tf.data.Dataset` of strings (one sentence or paragraph each).
    """
    import keras_hub

    vocabulary = keras_hub.tokenizers.compute_word_piece_vocabulary(
        texts, vocabulary_size, lowercase=True, strip_accents=True,
        reserved_tokens=list(SPECIAL_TOKENS))
    # The trainer can emit whitespace as a token; the tokenizer splits on whitespace, so such
    # a token is never produced, and it would be a blank line in vocab.txt. It also emits the
    # bare suffix marker "##", which no word piece tokenizes to and TensorFlow's WordPiece warns
    # about when a model is exported.
    return [token for token in vocabulary if token.strip() and token != "##"]
