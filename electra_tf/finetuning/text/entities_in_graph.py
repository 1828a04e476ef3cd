"""Entities from a served tagger, in graph: the chunks of `finetuning/text/entities.py`'s default
(conlleval) rules over the predicted word tags, with their text and character offsets.

`words_with_offsets(text, white_space)` splits text into words exactly as the tagger's text
signature and LiteRT file do (`data/tokenization.whitespace_words`) and keeps each word's
characters (Python string indexing of the UTF-8-repaired text).
`entity_outputs(text, tags, starts, ends)` turns per-word tag strings into `entity_text`,
`entity_type`, `entity_start`, `entity_end` per text, padded to the batch's largest count
with "" and -1, so `text[entity_start:entity_end] == entity_text`.

The lenient rules make every chunk a run of non-O words where each word either starts a chunk
(B-/S-, I-/E- after O, E- or S-, or a change of type) or continues the open one, so chunks are
found with a cumulative sum of the start flags (`entities.entities` is the Python twin; the
tests compare them).
"""

from __future__ import annotations

import tensorflow as tf

from electra_tf.data.tokenization import whitespace_words


def words_with_offsets(text, white_space: str):
    """(words [B, W] ragged strings, starts, ends [B, W] ragged int32 characters): the runs
    between `white_space` characters (`ElectraTokenizer.word_white_space`)."""
    words, begin, end = whitespace_words(text, white_space)  # byte offsets
    characters = tf.strings.unicode_decode_with_offsets(text, "UTF-8", errors="replace")[1]  # each char's byte
    beyond = tf.int64.max
    starts = tf.searchsorted(characters.to_tensor(beyond), tf.cast(begin.to_tensor(0), tf.int64), side="left")
    ends = tf.searchsorted(characters.to_tensor(beyond), tf.cast(end.to_tensor(0), tf.int64), side="left")
    lengths = words.row_lengths()
    return (words, tf.RaggedTensor.from_tensor(tf.cast(starts, tf.int32), lengths=lengths),
            tf.RaggedTensor.from_tensor(tf.cast(ends, tf.int32), lengths=lengths))


def entity_outputs(text, tags, starts, ends) -> dict:
    """Entities of each text from its words' tags ("" or "O" outside entities); see the module."""
    flat = tags.flat_values
    has_prefix = (tf.strings.length(flat) > 2) & tf.strings.regex_full_match(flat, r"[BIESU][-_].*")
    prefix = tf.where(has_prefix, tf.strings.regex_replace(flat, r"^(.).*$", r"\1"),
                      tf.where((flat == "O") | (flat == ""), "O", "I"))
    prefix = tf.where(prefix == "U", "S", prefix)  # BILOU's U- is S-
    kind = tf.where(has_prefix, tf.strings.regex_replace(flat, r"^[BIESU][-_]", ""), tf.where(prefix == "O", "", flat))
    # Each word's predecessor in its own text ("O" at a text's first word).
    first = _is_first(tags)
    previous = tf.where(first, "O", tf.concat([["O"], prefix[:-1]], 0))
    previous_kind = tf.where(first, "", tf.concat([[""], kind[:-1]], 0))
    inside = prefix != "O"
    starts_chunk = inside & ((prefix == "B") | (prefix == "S")
                             | (((prefix == "I") | (prefix == "E")) & ((previous == "O") | (previous == "E")
                                                                         | (previous == "S")))
                             | (previous_kind != kind))
    chunk = tf.cumsum(tf.cast(starts_chunk, tf.int32)) - 1  # the chunk a word belongs to, when inside
    count = tf.reduce_sum(tf.cast(starts_chunk, tf.int32))
    word = tf.range(tf.shape(flat)[0])
    chunk_first = tf.boolean_mask(word, starts_chunk)
    chunk_last = tf.math.unsorted_segment_max(tf.where(inside, word, -1), tf.where(inside, chunk, count), count + 1)[:count]
    row_of_word = tags.value_rowids()
    chunk_row = tf.gather(row_of_word, chunk_first)
    start_char = tf.gather(starts.flat_values, chunk_first)
    end_char = tf.gather(ends.flat_values, chunk_last)
    text_of_chunk = tf.gather(text, chunk_row)
    batch = tf.shape(text, out_type=tf.int64)[0]
    per_text = lambda values: tf.RaggedTensor.from_value_rowids(values, chunk_row, nrows=batch)  # noqa: E731
    return {
        "entity_text": per_text(tf.strings.substr(text_of_chunk, start_char, end_char - start_char,
                                                  unit="UTF8_CHAR")).to_tensor(""),
        "entity_type": per_text(tf.gather(kind, chunk_first)).to_tensor(""),
        "entity_start": per_text(start_char).to_tensor(-1),
        "entity_end": per_text(end_char).to_tensor(-1),
    }


def _is_first(ragged):
    """True at each row's first value of a ragged tensor's flat values."""
    positions = tf.range(tf.shape(ragged.flat_values, out_type=tf.int64)[0])
    return tf.equal(positions, tf.gather(ragged.row_starts(), ragged.value_rowids()))
