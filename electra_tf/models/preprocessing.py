"""Text -> model inputs, in the graph: one code path for `fit`, `predict` and the export.

    single text:  [CLS] a a a [SEP]              segment_ids 0 0 0 0 0
    text pair:    [CLS] a a a [SEP] b b [SEP]    segment_ids 0 0 0 0 0 1 1 1
    tagging:      [CLS] play ##ing cards [SEP]   labels      -1  7  -1  3  -1

Truncation follows the official fine-tuning code: a single text keeps its first
max_seq_length - 2 word pieces; a pair is cut to max_seq_length - 3 pieces by repeatedly
dropping the last piece of the longer text (of the second one on a tie). That loop has a
closed form, `pair_lengths`, so it runs as graph ops without tf-text's RoundRobinTrim
(which older TF Serving builds lack).

Tagging labels sit on the first word piece of each word; every other position carries
IGNORE_LABEL, which the tagging loss and metrics skip.
"""

from __future__ import annotations

import base64

import keras
import tensorflow as tf

from electra_tf.data.tokenization import ElectraTokenizer, rows_to_values
from electra_tf.data.vocabulary_files import TokenizerSettings

IGNORE_LABEL = -1


def pair_lengths(length_a, length_b, budget: int):
    """Lengths the official `_truncate_seq_pair` loop leaves, computed without the loop.

    Popping from the longer text (the second on a tie) until the sum fits ends with the
    shorter text whole if it fits in its half, otherwise with the halves ceil/floor(budget/2).

    Example:
    >>> [tuple(int(n) for n in pair_lengths(a, b, 8)) for a, b in ((10, 3), (3, 10), (10, 10), (2, 3))]
    [(5, 3), (3, 5), (4, 4), (2, 3)]
    """
    length_a = tf.convert_to_tensor(length_a)
    length_b = tf.cast(length_b, length_a.dtype)
    half_up, half_down, budget = (tf.cast(n, length_a.dtype) for n in ((budget + 1) // 2, budget // 2, budget))
    fits = length_a + length_b <= budget
    kept_a = tf.minimum(length_a, tf.maximum(half_up, budget - length_b))
    kept_b = tf.minimum(length_b, tf.maximum(half_down, budget - length_a))
    return tf.where(fits, length_a, kept_a), tf.where(fits, length_b, kept_b)


def _keep_first(pieces: tf.RaggedTensor, lengths) -> tf.RaggedTensor:
    """Row i keeps its first lengths[i] values (the mask on flat values: `rows_to_values`)."""
    positions = tf.ragged.range(pieces.row_lengths())
    keep = positions.flat_values < rows_to_values(tf.cast(lengths, positions.dtype), pieces)
    return tf.ragged.boolean_mask(pieces, pieces.with_flat_values(keep))


# A text is cut to this many characters per position before tokenizing, so a served model's
# time and memory stay bounded whatever it is sent (a megabyte of text, ten thousand texts). Its
# ids change only where a text's first max_seq_length - 2 pieces span more than that: 256
# characters a piece on average, long runs of spaces or words over 100 bytes (each one [UNK]).
MAX_CHARACTERS_PER_POSITION = 256


def cut_text(text, max_seq_length: int):
    """The first MAX_CHARACTERS_PER_POSITION * max_seq_length characters of each (valid UTF-8) text."""
    return tf.strings.substr(text, 0, MAX_CHARACTERS_PER_POSITION * max_seq_length, unit="UTF8_CHAR")


def _valid_utf8(text):
    # Invalid UTF-8 would stop the tokenizer's normalisation ops: replace it first.
    return tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="replace",
                                        replacement_char=0xFFFD)


def _pad(packed: tf.RaggedTensor, length: int, value) -> tf.Tensor:
    return packed.to_tensor(default_value=value, shape=[None, length])


def text_pieces(tokenizer: ElectraTokenizer, text, max_seq_length: int) -> tf.RaggedTensor:
    """string [batch] -> its word pieces, int32 ragged [batch, (pieces)]: invalid UTF-8 replaced,
    the text cut (`cut_text`), tokenized."""
    text = cut_text(_valid_utf8(tf.convert_to_tensor(text, tf.string)), max_seq_length)
    return tf.cast(tokenizer.tokenize(text), tf.int32)


def pack_texts(tokenizer: ElectraTokenizer, max_seq_length: int, text, text_pair=None) -> dict:
    """text (and text_pair) string [batch] -> token_ids, segment_ids, padding_mask int32
    [batch, max_seq_length]."""
    text = tf.convert_to_tensor(text, tf.string)
    pieces_a = text_pieces(tokenizer, text, max_seq_length)
    edge = tf.RaggedTensor.from_tensor(tf.ones([tf.shape(text)[0], 1], tf.int32))
    if text_pair is None:
        pieces_a = pieces_a[:, : max_seq_length - 2]
        token_ids = tf.concat([edge * tokenizer.cls_id, pieces_a, edge * tokenizer.sep_id], axis=1)
        segment_ids = tf.zeros_like(token_ids)
    else:
        pieces_b = text_pieces(tokenizer, text_pair, max_seq_length)
        kept_a, kept_b = pair_lengths(pieces_a.row_lengths(), pieces_b.row_lengths(),
                                      max_seq_length - 3)
        first = tf.concat([edge * tokenizer.cls_id, _keep_first(pieces_a, kept_a),
                           edge * tokenizer.sep_id], axis=1)
        second = tf.concat([_keep_first(pieces_b, kept_b), edge * tokenizer.sep_id], axis=1)
        token_ids = tf.concat([first, second], axis=1)
        segment_ids = tf.concat([tf.zeros_like(first), tf.ones_like(second)], axis=1)
    return {
        "token_ids": _pad(token_ids, max_seq_length, tokenizer.pad_id),
        "segment_ids": _pad(segment_ids, max_seq_length, 0),
        "padding_mask": tf.sequence_mask(token_ids.row_lengths(), max_seq_length, dtype=tf.int32),
    }


def pack_words(tokenizer: ElectraTokenizer, max_seq_length: int, words, word_labels=None):
    """words (ragged string [batch, (words)]) and optional word labels (ragged int) ->
    (inputs as in `pack_texts`, labels int32 [batch, max_seq_length] or None).

    Each word is tokenized on its own; a word with no word pieces (e.g. only control
    characters) becomes [UNK] so that its label still has a position.
    """
    inputs, pieces_per_word = _pack_words(tokenizer, max_seq_length, words)
    if word_labels is None:
        return inputs, None
    word_labels = tf.cast(_ragged(word_labels, tf.int32), tf.int32)
    first_piece = tf.equal(tf.ragged.range(pieces_per_word.flat_values).flat_values, 0)
    piece_labels = tf.where(first_piece, tf.repeat(word_labels.flat_values, pieces_per_word.flat_values),
                            IGNORE_LABEL)
    piece_labels = tf.RaggedTensor.from_row_lengths(piece_labels, tf.reduce_sum(pieces_per_word, axis=1))
    edge = tf.RaggedTensor.from_tensor(tf.fill([tf.shape(inputs["token_ids"])[0], 1], IGNORE_LABEL))
    labels = tf.concat([edge, piece_labels[:, : max_seq_length - 2], edge], axis=1)
    return inputs, _pad(labels, max_seq_length, IGNORE_LABEL)


def pack_words_with_starts(tokenizer: ElectraTokenizer, max_seq_length: int, words):
    """(inputs as `pack_words`, word_starts int32 ragged [batch, (words)]): the position of
    each word's first word piece, or -1 for a word cut off by max_seq_length. What a tagger's
    serving signature reads its per-word predictions from.

    Example:
    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "##s", "sat"]
    >>> _, starts = pack_words_with_starts(ElectraTokenizer(vocabulary), 5,
    ...                                    tf.ragged.constant([["the", "cats", "sat"]]))
    >>> starts.to_list()
    [[1, 2, -1]]
    """
    inputs, pieces_per_word = _pack_words(tokenizer, max_seq_length, words)
    starts = tf.cast(1 + tf.cumsum(pieces_per_word, axis=1, exclusive=True), tf.int32)
    return inputs, starts.with_flat_values(tf.where(starts.flat_values < max_seq_length - 1, starts.flat_values, -1))


def _pack_words(tokenizer: ElectraTokenizer, max_seq_length: int, words):
    """(inputs, pieces per word int64 ragged [batch, (words)])."""
    words = _ragged(words, tf.string)
    pieces = tokenizer.tokenize_words(_valid_utf8(words.flat_values))
    # Append [UNK] to every word, then keep max(pieces, 1): only empty words keep the [UNK].
    unknown = tf.RaggedTensor.from_tensor(tf.fill([tf.shape(pieces.row_lengths())[0], 1], tokenizer.unk_id))
    pieces = _keep_first(tf.concat([pieces, unknown], axis=1), tf.maximum(pieces.row_lengths(), 1))
    sentence_pieces = tf.RaggedTensor.from_row_lengths(pieces, words.row_lengths()).merge_dims(1, 2)
    body = sentence_pieces[:, : max_seq_length - 2]
    batch = tf.shape(words.row_lengths())[0]
    edge = tf.RaggedTensor.from_tensor(tf.ones([batch, 1], tf.int32))
    token_ids = tf.concat([edge * tokenizer.cls_id, body, edge * tokenizer.sep_id], axis=1)
    inputs = {
        "token_ids": _pad(token_ids, max_seq_length, tokenizer.pad_id),
        "segment_ids": tf.zeros([batch, max_seq_length], tf.int32),
        "padding_mask": tf.sequence_mask(token_ids.row_lengths(), max_seq_length, dtype=tf.int32),
    }
    pieces_per_word = tf.RaggedTensor.from_row_lengths(pieces.row_lengths(), words.row_lengths())
    return inputs, pieces_per_word


def _ragged(values, dtype) -> tf.RaggedTensor:
    if isinstance(values, tf.RaggedTensor):
        return values
    if isinstance(values, (list, tuple)):
        return tf.ragged.constant(values, dtype=dtype)
    return tf.RaggedTensor.from_tensor(tf.convert_to_tensor(values, dtype))


def texts_of(x) -> tuple:
    """(text, text_pair or None) of a preprocessor's input: strings, a `(text, text_pair)` tuple, or
    a dict with those keys."""
    if isinstance(x, dict):
        return x["text"], x.get("text_pair")
    if isinstance(x, (tuple, list)) and len(x) == 2 and not isinstance(x[0], str):
        return tuple(x)
    return x, None


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraTextPreprocessor(keras.layers.Layer):
    """Strings -> (model inputs, labels): the `preprocessor` of `ElectraClassifier`.

    Call with `text` (string [batch]), a `(text, text_pair)` tuple, or a dict with those
    keys, plus optional labels and sample weights passed through, so it maps straight over a
    `tf.data.Dataset` of `(text, label)` or `((text, text_pair), label)` batches.

    Example:
    >>> preprocessor = ElectraTextPreprocessor(
    ...     ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat"], max_seq_length=6)
    >>> inputs = preprocessor(["the cat sat"])
    >>> inputs["token_ids"].numpy().tolist(), inputs["segment_ids"].numpy().tolist()
    ([[2, 5, 6, 7, 3, 0]], [[0, 0, 0, 0, 0, 0]])
    >>> pair = preprocessor((["the cat"], ["sat sat sat"]))
    >>> pair["token_ids"].numpy().tolist(), pair["segment_ids"].numpy().tolist()
    ([[2, 5, 6, 3, 7, 3]], [[0, 0, 0, 0, 1, 1]])
    """

    def __init__(self, vocabulary, max_seq_length: int = 128, tokenizer_settings: dict | None = None,
                 sentencepiece_model: str | None = None, **kwargs):
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        # tokenizer_settings: `TokenizerSettings.to_huggingface()`; absent in files saved before
        # cased vocabularies, which were all uncased. sentencepiece_model: a SentencePiece
        # vocabulary's model, base64 (the config is JSON).
        self.tokenizer = vocabulary if isinstance(vocabulary, ElectraTokenizer) else ElectraTokenizer(
            vocabulary, TokenizerSettings.from_huggingface(tokenizer_settings or {}),
            base64.b64decode(sentencepiece_model) if sentencepiece_model else None)
        if max_seq_length < 3:
            raise ValueError(f"max_seq_length must be at least 3 ([CLS] x [SEP]), got {max_seq_length}.")
        self.max_seq_length = max_seq_length

    # Mapped over datasets as written: its code branches on Python values only, so AutoGraph's
    # source conversion (which `Dataset.map` applies, again for each new dataset) buys nothing.
    @tf.autograph.experimental.do_not_convert
    def __call__(self, x, y=None, sample_weight=None):
        # Strings and ragged inputs go straight to `call`: Keras' symbolic machinery (dtype
        # policies, masking, input conversion) is for float tensors, not text.
        if not self.built:
            self.built = True
        return self.call(x, y, sample_weight)

    def call(self, x, y=None, sample_weight=None):
        inputs = pack_texts(self.tokenizer, self.max_seq_length, *texts_of(x))
        return keras.utils.pack_x_y_sample_weight(inputs, y, sample_weight)

    def get_config(self):
        return {**super().get_config(), "vocabulary": list(self.tokenizer.vocabulary),
                "max_seq_length": self.max_seq_length,
                "tokenizer_settings": self.tokenizer.settings.to_huggingface(),
                **({"sentencepiece_model": base64.b64encode(self.tokenizer.sentencepiece_model).decode("ascii")}
                   if self.tokenizer.sentencepiece_model is not None else {})}


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraWordPreprocessor(ElectraTextPreprocessor):
    """Pre-split words (ragged string [batch, (words)]) and word labels -> (model inputs,
    word-piece labels): the `preprocessor` of `ElectraTokenClassifier`.

    Example:
    >>> preprocessor = ElectraWordPreprocessor(
    ...     ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "##s", "sat"], max_seq_length=7)
    >>> inputs, labels = preprocessor(tf.ragged.constant([["the", "cats", "sat"]]),
    ...                               tf.ragged.constant([[0, 1, 2]]))
    >>> inputs["token_ids"].numpy().tolist(), labels.numpy().tolist()
    ([[2, 5, 6, 7, 8, 3, 0]], [[-1, 0, 1, -1, 2, -1, -1]])
    """

    def call(self, x, y=None, sample_weight=None):
        inputs, labels = pack_words(self.tokenizer, self.max_seq_length, x, y)
        return keras.utils.pack_x_y_sample_weight(inputs, labels, sample_weight)
