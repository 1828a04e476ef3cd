"""Word pieces with the characters they came from: `tokenize_with_offsets`, in graph.

Question answering cuts its answer out of the original context, so every context piece needs
its (start, end) in the context, counted as Python indexes a `str` (code points; SQuAD's
`answer_start` counts the same way). The tokenizer's normalisation (accent stripping, case
folding) changes lengths, so this module replays its steps keeping track of where each byte
came from:

1. the text is split into characters; each character is normalised on its own as the tokenizer
   normalises the whole text before splitting (CJK ideographs padded with spaces, NFD,
   accent marks (Unicode Mn) removed), so each normalised byte knows its original character;
2. the normalised text is split into words on whitespace and punctuation with the tokenizer's
   patterns (`regex_split_with_offsets`);
3. each word is case-folded (`case_fold_utf8`, as the tokenizer does after splitting) and cut into
   pieces by the same `FastWordpieceTokenizer` with offsets. A word whose case folding changed
   its byte length (rare: e.g. "ß" -> "ss" does not, "İ" does) gives every piece the whole word.

Each step follows the tokenizer's `TokenizerSettings`: a cased tokenizer skips the case
folding, one that keeps accents skips NFD and the removal, and without CJK splitting the
ideographs are neither padded nor split on.

The ids equal `ElectraTokenizer.tokenize`'s (tested on SQuAD and on hand-picked hard text).
Everything is core TensorFlow and tf-text ops, so the question-answering export runs it in
TF Serving. Used by `finetuning/question_answering/squad.py` (training windows and
predictions) and by the question-answering signature, so both cut answers the same way.

Example:
>>> from electra_tf.data.tokenization import ElectraTokenizer
>>> tokenizer = ElectraTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cafe", "north",
...                               "##ern", "."])
>>> ids, starts, ends = tokenize_with_offsets(tokenizer, ["The Café, northern."])
>>> ids.to_list(), starts.to_list(), ends.to_list()
([[5, 6, 1, 7, 8, 9]], [[0, 4, 8, 10, 15, 18]], [[3, 8, 9, 15, 18, 19]])
"""

from __future__ import annotations

import unicodedata
import weakref

import tensorflow as tf
import tensorflow_text as tf_text

from electra_tf.data.tokenization import CJK_PATTERN, NUL_PATTERN, rows_to_values, split_patterns


def repair_utf8(texts):
    """Invalid UTF-8 bytes become U+FFFD (as the serving signatures treat text)."""
    return tf.strings.unicode_transcode(texts, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD)


# Each tokenizer's traced `tokenize_with_offsets`, held no longer than the tokenizer.
_TRACED = weakref.WeakKeyDictionary()


def traced_tokenize_with_offsets(tokenizer, texts):
    """`tokenize_with_offsets` through a tf.function traced once per tokenizer: what an eager
    caller with many batches (question answering's contexts) calls."""
    if tokenizer not in _TRACED:
        held = weakref.ref(tokenizer)  # the function must not keep its tokenizer (its key) alive
        # Without AutoGraph (no tensor-dependent Python control flow): converting this module's
        # and tf-text's functions was most of the first call.
        _TRACED[tokenizer] = tf.function(lambda batch: tokenize_with_offsets(held(), batch),
                                         input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    return _TRACED[tokenizer](tf.convert_to_tensor(texts, tf.string))


def tokenize_with_offsets(tokenizer, texts):
    """(ids, starts, ends): ragged int32 [batch, pieces] for a batch of strings; a piece covers
    `text[start:end]` (code points). Invalid UTF-8 is repaired first (`repair_utf8`), and the
    offsets count characters of the repaired text. A SentencePiece tokenizer's offsets come from
    its op (`sentencepiece_offsets`); the rest of this function is WordPiece's."""
    if tokenizer.sentencepiece_model is not None:
        return sentencepiece_offsets(tokenizer, texts)
    if tokenizer.normalizer is not None:
        return bert_rule_offsets(tokenizer, texts)

    settings = tokenizer.settings
    split_pattern, keep_pattern = split_patterns(settings.split_cjk)
    texts = repair_utf8(tf.convert_to_tensor(texts, tf.string))
    characters = tf.strings.unicode_split(texts, "UTF-8")  # [B, C]
    normal = tf.strings.regex_replace(characters.flat_values, NUL_PATTERN, " ")  # as `tokenization.normalize`
    if settings.split_cjk:
        normal = tf.strings.regex_replace(normal, CJK_PATTERN, r" \0 ")
    if settings.strip_accents:
        normal = tf.strings.regex_replace(tf_text.normalize_utf8(normal, "NFD"), r"\p{Mn}", "")
    normal_bytes = tf.strings.length(normal)  # each character's normalised length
    normal = characters.with_flat_values(normal)
    # Each character's end and start in its row's normalised text, on flat values
    # (`tokenization.rows_to_values`).
    ends_in_batch = tf.cumsum(normal_bytes)
    row_offsets = tf.gather(tf.concat([[0], ends_in_batch], 0), characters.row_starts())  # each row's first byte
    char_ends = ends_in_batch - rows_to_values(row_offsets, characters)
    char_starts = characters.with_flat_values(char_ends - normal_bytes)
    char_ends = characters.with_flat_values(char_ends)

    words, word_begin, word_end = tf_text.regex_split_with_offsets(
        tf.strings.reduce_join(normal, axis=-1), split_pattern, keep_pattern)  # [B, W], bytes
    folded = tf_text.case_fold_utf8(words) if settings.lowercase else words
    ids, piece_begin, piece_end = tokenizer.wordpiece.tokenize_with_offsets(folded)  # [B, W, P], bytes in folded word
    # Each piece's word: the rows of the pieces' [B * W, P] values are the words' flat values.
    word_begin_p, word_end_p, same_length = (rows_to_values(v, piece_begin.values) for v in (
        word_begin.flat_values, word_end.flat_values,
        tf.equal(tf.strings.length(folded.flat_values), tf.strings.length(words.flat_values))))
    begin = tf.where(same_length, word_begin_p + piece_begin.flat_values, word_begin_p)
    end = tf.where(same_length, word_begin_p + piece_end.flat_values, word_end_p)
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


def bert_rule_offsets(tokenizer, texts):
    """(ids, starts, ends) as `tokenize_with_offsets`, for BERT_RULE: its normaliser maps each
    byte of the text it returns to one of the input (`normalize_with_offsets`), and its WordPiece
    op reports pieces as bytes of that text. Of the pieces made from one character ("…" read as
    "...", "ﬁ" as "fi" when uncased), the last covers the character and the others nothing
    (start == end)."""
    texts = repair_utf8(tf.convert_to_tensor(texts, tf.string))
    normal, to_input = tokenizer.normalizer.normalize_with_offsets(texts)  # to_input: [B, normal bytes + 1]
    ids, begin, end = tokenizer.wordpiece.tokenize_with_offsets(normal)  # bytes of `normal`
    lengths = ids.row_lengths()
    to_input = tf.cast(to_input.to_tensor(0), tf.int64)
    begin, end = (tf.gather(to_input, tf.cast(b.to_tensor(0), tf.int64), batch_dims=1) for b in (begin, end))
    _, char_bytes = tf.strings.unicode_decode_with_offsets(texts, "UTF-8")  # each character's first byte
    char_bytes = tf.cast(char_bytes, tf.int64).to_tensor(tf.int64.max)  # the padding is never counted
    starts, ends = (tf.searchsorted(char_bytes, b, side="left", out_type=tf.int64) for b in (begin, end))
    return (tf.cast(ids, tf.int32), tf.RaggedTensor.from_tensor(tf.cast(starts, tf.int32), lengths=lengths),
            tf.RaggedTensor.from_tensor(tf.cast(ends, tf.int32), lengths=lengths))


def sentencepiece_offsets(tokenizer, texts):
    """(ids, starts, ends) as `tokenize_with_offsets`, for a SentencePiece tokenizer:
    the op reports each piece's bytes in the (repaired) input, here counted as characters. A
    piece starting a word covers the spaces before it, as "▁" stands for them; the span starts
    at its first other character, so an answer cut from a context never starts with a space. Of
    the pieces the normaliser made from one character (a ligature "ﬁ" as "f" and "i"), one covers
    the character and the others nothing (start == end), as does the lone "▁" before a piece that
    the text did not separate by a space."""
    if tf.executing_eagerly():  # the op is made in a graph (`ElectraTokenizer.sentencepiece_op`)
        return tf.function(lambda batch: sentencepiece_offsets(tokenizer, batch), autograph=False)(
            tf.convert_to_tensor(texts, tf.string))
    texts = repair_utf8(tf.convert_to_tensor(texts, tf.string))
    ids, begin, end = tokenizer.sentencepiece_op().tokenize_with_offsets(texts)  # bytes
    characters = tf.strings.unicode_split(texts, "UTF-8")  # [B, C]
    _, char_bytes = tf.strings.unicode_decode_with_offsets(texts, "UTF-8")  # each character's first byte
    beyond = tf.int64.max  # pads the sorted rows (and fills an empty text's) without being counted
    rows = tf.shape(texts)[0]

    def table(ragged):  # ragged sorted [B, (n)] -> dense [B, n + 1], padded with `beyond`
        return tf.concat([tf.cast(ragged, tf.int64).to_tensor(beyond), tf.fill([rows, 1], beyond)], 1)

    byte_table = table(char_bytes)
    lengths = ids.row_lengths()
    starts = tf.searchsorted(byte_table, tf.cast(begin.to_tensor(0), tf.int64), side="right", out_type=tf.int64) - 1
    ends = tf.searchsorted(byte_table, tf.cast(end.to_tensor(0), tf.int64), side="left", out_type=tf.int64)
    visible = ~tf.strings.regex_full_match(characters.flat_values, r"[\s\p{Z}]")
    visible_positions = table(tf.ragged.boolean_mask(tf.ragged.range(characters.row_lengths()),
                                                     characters.with_flat_values(visible)))
    first_visible = tf.gather(visible_positions, tf.searchsorted(visible_positions, tf.maximum(starts, 0)),
                              batch_dims=1)
    starts = tf.minimum(first_visible, ends)
    return (tf.cast(ids, tf.int32),
            tf.RaggedTensor.from_tensor(tf.cast(starts, tf.int32), lengths=lengths),
            tf.RaggedTensor.from_tensor(tf.cast(ends, tf.int32), lengths=lengths))


# --- whole words: answers are never cut inside a word ---------------------------------------
# A word character is a letter, digit or combining mark (Unicode L, N, M), except CJK ideographs,
# which are words of one character each (BERT's _is_chinese_char ranges). A span whose first or
# last character lies inside a run of word characters is widened to the run's boundary: a piece
# span "rocket" of "rockets" answers "rockets", "luß" of "Fluß" answers "Fluß"; punctuation and
# spaces are boundaries, so "Smith" of "Smith's" stays "Smith".
WORD_CHARACTER_PATTERN = r"[\p{L}\p{N}\p{M}]"
CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
              (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def is_word_character(character: str) -> bool:
    code = ord(character)
    return unicodedata.category(character)[0] in "LNM" and not any(low <= code <= high for low, high in CJK_RANGES)


def whole_word_span(text: str, start: int, end: int) -> tuple[int, int]:
    """[start, end) of `text` widened to whole words (the rule above); an empty span stays.

    >>> text = "Jane Doe in Zürich makes rockets; Fluß, Smith's."
    >>> [text[slice(*whole_word_span(text, s, e))] for s, e in ((12, 16), (25, 31), (35, 38), (40, 45))]
    ['Zürich', 'rockets', 'Fluß', 'Smith']
    """
    if start >= end:
        return start, end
    while start > 0 and is_word_character(text[start]) and is_word_character(text[start - 1]):
        start -= 1
    while end < len(text) and is_word_character(text[end - 1]) and is_word_character(text[end]):
        end += 1
    return start, end


def whole_word_spans(texts, starts, ends):
    """`whole_word_span` in graph for a batch: `texts` [B] (valid UTF-8), `starts`, `ends` [B]
    character offsets; returns the widened (starts, ends). Core TensorFlow ops only."""
    characters = tf.strings.unicode_split(texts, "UTF-8")  # [B, C]
    codes = tf.strings.unicode_decode(texts, "UTF-8").flat_values
    cjk = tf.zeros_like(codes, tf.bool)
    for low, high in CJK_RANGES:
        cjk |= (codes >= low) & (codes <= high)
    word = tf.strings.regex_full_match(characters.flat_values, WORD_CHARACTER_PATTERN) & ~cjk  # flat [N]
    count = tf.shape(word)[0]
    index = tf.range(count)
    row_starts = tf.cast(characters.row_starts(), tf.int32)
    row_of = tf.cast(characters.value_rowids(), tf.int32)  # each character's text
    first_in_row = index == tf.gather(row_starts, row_of)
    last_in_row = index == tf.gather(tf.cast(characters.row_limits(), tf.int32), row_of) - 1
    previous_word = tf.concat([[False], word[:-1]], 0) & ~first_in_row
    next_word = tf.concat([word[1:], [False]], 0) & ~last_in_row
    run_starts = tf.cast(tf.where(word & ~previous_word)[:, 0], tf.int32)  # each run's first character
    run_ends = tf.cast(tf.where(word & ~next_word)[:, 0], tf.int32)  # and its last, in the same order
    run_id = tf.cumsum(tf.cast(word & ~previous_word, tf.int32)) - 1  # a word character's run
    # One spare slot at the end keeps every gather in range (empty texts, empty spans).
    word = tf.concat([word, [False]], 0)
    run_id = tf.concat([run_id, [0]], 0)
    run_starts, run_ends = tf.concat([run_starts, [0]], 0), tf.concat([run_ends, [0]], 0)
    valid = ends > starts
    first = tf.where(valid, row_starts + starts, count)
    last = tf.where(valid, row_starts + ends - 1, count)
    widened_start = tf.where(tf.gather(word, first), tf.gather(run_starts, tf.gather(run_id, first)) - row_starts,
                             starts)
    widened_end = tf.where(tf.gather(word, last), tf.gather(run_ends, tf.gather(run_id, last)) + 1 - row_starts,
                           ends)
    return widened_start, widened_end
