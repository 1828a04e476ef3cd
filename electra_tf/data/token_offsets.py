"""Word pieces with the characters they came from: `tokenize_with_offsets`, in graph.

Question answering cuts its answer out of the original context, so every context piece needs
its (start, end) in the context, counted as Python indexes a `str` (code points; SQuAD's
`answer_start` counts the same way). keras-hub's `WordPieceTokenizer` has no offsets, and its
normalisation (accent stripping, case folding) changes lengths, so this module replays the
same steps keeping track of where each byte came from:

1. the text is split into characters; each character is normalised on its own as keras-hub
   normalises the whole text before splitting (CJK ideographs padded with spaces, NFD,
   accent marks (Unicode Mn) removed), so each normalised byte knows its original character;
2. the normalised text is split into words on whitespace and punctuation with keras-hub's own
   patterns (`regex_split_with_offsets`);
3. each word is case-folded (`case_fold_utf8`, as keras-hub does after splitting) and cut into
   pieces by the same `FastWordpieceTokenizer` with offsets. A word whose case folding changed
   its byte length (rare: e.g. "ß" -> "ss" does not, "İ" does) gives every piece the whole word.

Each step follows the tokenizer's `TokenizerSettings`: a cased tokenizer skips the case
folding, one that keeps accents skips NFD and the removal, and without CJK splitting the
ideographs are neither padded nor split on.

The ids equal `ElectraTokenizer.tokenize`'s (tested on SQuAD and on hand-picked hard text).
Everything is core TensorFlow and tf-text ops, so the question-answering export runs it in
TF Serving. Used by `finetuning/squad.py` (training windows and predictions) and by the
question-answering signature, so both cut answers the same way.

Example:
>>> from electra_tf.data.tokenization import ElectraTokenizer
>>> tokenizer = ElectraTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cafe", "north",
...                               "##ern", "."])
>>> ids, starts, ends = tokenize_with_offsets(tokenizer, ["The Café, northern."])
>>> ids.to_list(), starts.to_list(), ends.to_list()
([[5, 6, 1, 7, 8, 9]], [[0, 4, 8, 10, 15, 18]], [[3, 8, 9, 15, 18, 19]])
"""

from __future__ import annotations


def _patterns(split_cjk: bool):
    from keras_hub.src.tokenizers import word_piece_tokenizer as keras_hub_wordpiece

    if split_cjk:
        return (keras_hub_wordpiece.WHITESPACE_PUNCTUATION_AND_CJK_REGEX,
                keras_hub_wordpiece.PUNCTUATION_AND_CJK_REGEX)
    return keras_hub_wordpiece.WHITESPACE_AND_PUNCTUATION_REGEX, keras_hub_wordpiece.PUNCTUATION_REGEX


def repair_utf8(texts):
    """Invalid UTF-8 bytes become U+FFFD (as the serving signatures treat text)."""
    import tensorflow as tf

    return tf.strings.unicode_transcode(texts, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD)


def tokenize_with_offsets(tokenizer, texts):
    """(ids, starts, ends): ragged int32 [batch, pieces] for a batch of strings; a piece covers
    `text[start:end]` (code points). Invalid UTF-8 is repaired first (`repair_utf8`), and the
    offsets count characters of the repaired text."""
    import tensorflow as tf
    import tensorflow_text as tf_text

    from keras_hub.src.tokenizers.word_piece_tokenizer import CJK_REGEX

    settings = tokenizer.settings
    split_pattern, keep_pattern = _patterns(settings.split_cjk)
    texts = repair_utf8(tf.convert_to_tensor(texts, tf.string))
    characters = tf.strings.unicode_split(texts, "UTF-8")  # [B, C]
    normal = characters.flat_values
    if settings.split_cjk:
        normal = tf.strings.regex_replace(normal, CJK_REGEX, r" \0 ")
    if settings.strip_accents:
        normal = tf.strings.regex_replace(tf_text.normalize_utf8(normal, "NFD"), r"\p{Mn}", "")
    normal_bytes = tf.strings.length(normal)  # each character's normalised length
    normal = characters.with_flat_values(normal)
    char_ends = characters.with_flat_values(tf.cumsum(normal_bytes))  # per row below
    row_starts = tf.gather(tf.concat([[0], tf.cumsum(normal_bytes)], 0), characters.row_starts())
    char_ends = char_ends - row_starts[:, tf.newaxis]  # each character's end in its row's normal text
    char_starts = char_ends - characters.with_flat_values(normal_bytes)

    words, word_begin, word_end = tf_text.regex_split_with_offsets(
        tf.strings.reduce_join(normal, axis=-1), split_pattern, keep_pattern)  # [B, W], bytes
    folded = tf_text.case_fold_utf8(words) if settings.lowercase else words
    wordpiece = tokenizer._wordpiece._fast_word_piece
    ids, piece_begin, piece_end = wordpiece.tokenize_with_offsets(folded)  # [B, W, P], bytes in folded word
    same_length = tf.equal(tf.strings.length(folded), tf.strings.length(words))  # [B, W]
    word_begin_p = tf.ones_like(piece_begin) * tf.expand_dims(word_begin, -1)
    word_end_p = tf.ones_like(piece_end) * tf.expand_dims(word_end, -1)
    same_p = tf.cast(tf.ones_like(piece_begin), tf.bool) & tf.expand_dims(same_length, -1)
    begin = tf.where(same_p.flat_values, (word_begin_p + piece_begin).flat_values, word_begin_p.flat_values)
    end = tf.where(same_p.flat_values, (word_begin_p + piece_end).flat_values, word_end_p.flat_values)
    begin, end = ids.with_flat_values(begin).merge_dims(1, 2), ids.with_flat_values(end).merge_dims(1, 2)
    ids = ids.merge_dims(1, 2)

    # normalised byte offsets -> characters: a piece starts at the first character whose
    # normalised bytes end after its first byte, and ends after the last character that
    # starts before its end.
    beyond = tf.int32.max  # pads the sorted rows without being counted
    starts = tf.searchsorted(char_ends.to_tensor(beyond), tf.cast(begin.to_tensor(0), tf.int32), side="right")
    ends = tf.searchsorted(char_starts.to_tensor(beyond), tf.cast(end.to_tensor(0), tf.int32), side="left")
    lengths = ids.row_lengths()
    return (tf.cast(ids, tf.int32),
            tf.RaggedTensor.from_tensor(tf.cast(starts, tf.int32), lengths=lengths),
            tf.RaggedTensor.from_tensor(tf.cast(ends, tf.int32), lengths=lengths))
