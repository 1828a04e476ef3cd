"""The question-answering signature: raw question and context in, the answer out, all in graph.

`serving_default` takes `question` and `context` (string [batch]) and returns per question:

- `answer` (string): the best span's text, cut from the context;
- `answer_start`, `answer_end` (int32): its characters, counted as Python indexes a `str` and
  as SQuAD's `answer_start` counts, so `context[answer_start:answer_end] == answer`; widened
  to whole words as in `predictions.json` (`data/token_offsets.whole_word_spans`);
- `score` (float32): the span's start + end score, as the answers are ranked (log-probabilities
  for the official head, logits for the plain one); -inf when no span qualifies;
- `no_text` (bool): the context gave no word piece (empty, spaces, control or format
  characters only), as every text signature flags it (`models/signatures.no_text`);
- `no_answer_probability` (float32), for models trained with the answerability classifier
  (SQuAD 2.0): sigmoid of the smallest answerability logit over the windows, the official
  null odds. The client applies its own threshold.

The graph repeats what the fine-tuning run does in Python (`finetuning/question_answering/squad.py` windows,
`finetuning/question_answering/answers.py` choice), so the export answers exactly as `predictions.json` does:
the question cut to `max_query_length` pieces; the context tokenized with character offsets
(`data/token_offsets.py`); windows `[CLS] question [SEP] window [SEP]` starting every
`min(doc_stride, room)` pieces; each piece scored only in its max-context window (the first of
equals); the model's beam; candidates that start after [CLS], start and end in the context in
order, are at most `max_answer_length` pieces long and cut a non-empty text; the best by score,
the first of equals in window and beam order.

Defined behaviour on bad input: invalid UTF-8 is replaced (U+FFFD) and offsets count the
repaired text; an empty context gives "" with offsets 0 and score -inf; an empty question is
answered from the context alone; a context of any length is windowed (100,000 characters
run as a few hundred windows in one call); an empty batch gives empty outputs. Core
TensorFlow and tf-text ops only, so TF Serving runs it without Python.
"""

from __future__ import annotations

import tensorflow as tf

from electra_tf.data.token_offsets import repair_utf8, tokenize_with_offsets, whole_word_spans
from electra_tf.models.signatures import TEXT_SIGNATURE, batch_of_strings

QUESTION_INPUTS = [("question", [None], "string"), ("context", [None], "string")]


def question_answerer_endpoints(model, tokenizer, max_seq_length: int, doc_stride: int,
                                max_query_length: int, max_answer_length: int) -> dict:
    """{signature: (fn, inputs)} for a fine-tuned `ElectraQuestionAnswerer`."""
    if max_seq_length - max_query_length - 3 < 1:
        raise ValueError(f"max_seq_length {max_seq_length} leaves no room for a context after a "
                         f"{max_query_length}-piece question.")

    def endpoint(question, context):
        context = repair_utf8(batch_of_strings(context, "context"))
        query = tokenizer.tokenize(repair_utf8(batch_of_strings(question, "question")))[:, :max_query_length]
        pieces, piece_starts, piece_ends = tokenize_with_offsets(tokenizer, context)
        windows = _windows(query, pieces, max_seq_length, doc_stride)
        # Per window position: the piece's characters (-1 outside the context) and whether this
        # window is its max-context window.
        char_start = windows.place(tf.gather(piece_starts.flat_values, windows.pieces.flat_values), -1)
        char_end = windows.place(tf.gather(piece_ends.flat_values, windows.pieces.flat_values), -1)
        max_context = windows.place(windows.max_context.flat_values, False)
        token_ids = windows.pack(tokenizer.cls_id, None, tokenizer.sep_id, windows.pieces.with_flat_values(
            tf.gather(pieces.flat_values, windows.pieces.flat_values)), tokenizer.sep_id)
        outputs = model({"token_ids": token_ids, "segment_ids": windows.segment_ids,
                         "padding_mask": windows.padding_mask}, training=False)

        batch = tf.shape(context)[0]
        found, best, start_char, end_char = _best_spans(outputs, windows, (char_start, char_end, max_context), batch,
                                                        max_answer_length)
        start_char, end_char = whole_word_spans(context, start_char, end_char)  # as predictions.json
        result = {
            "answer": tf.strings.substr(context, start_char, end_char - start_char, unit="UTF8_CHAR"),
            "answer_start": start_char,
            "answer_end": end_char,
            "score": best,
            "no_text": pieces.row_lengths() == 0,
        }
        if "answerable_logit" in outputs:
            null_logit = tf.math.unsorted_segment_min(outputs["answerable_logit"], windows.example, batch)
            result["no_answer_probability"] = tf.sigmoid(null_logit)
        return result

    return {TEXT_SIGNATURE: (endpoint, QUESTION_INPUTS)}


def _best_spans(outputs, windows, positions, batch, max_answer_length: int):
    """(found, score, start char, end char) per question: the best valid span of its windows'
    beams (the first of equals), as the official post-processing chooses it. `positions`: per
    window position, the piece's first and end character (-1 outside the context) and whether
    the window is the piece's max-context one."""
    char_start, char_end, max_context = positions
    starts = outputs["start_top_index"]  # [W, beam]
    ends = outputs["end_top_index"]  # [W, beam, beam]
    scores = outputs["start_top_log_probs"][:, :, tf.newaxis] + outputs["end_top_log_probs"]
    starts = tf.broadcast_to(starts[:, :, tf.newaxis], tf.shape(ends))
    span_start = tf.gather(char_start, starts, batch_dims=1)
    span_end = tf.gather(char_end, ends, batch_dims=1)
    valid = ((starts > 0) & (span_start >= 0) & tf.gather(max_context, starts, batch_dims=1)
             & (span_end >= 0) & (ends >= starts) & (ends - starts + 1 <= max_answer_length)
             & (span_end > span_start))
    scores = tf.where(valid, scores, -float("inf"))
    flat = tf.reshape(scores, [tf.shape(scores)[0], -1])
    best_in_window = tf.argmax(flat, axis=-1, output_type=tf.int32)  # the first of equals
    window_score = tf.reduce_max(flat, axis=-1)
    # unsorted_segment_max starts from the lowest float, not -inf: track "any span" apart.
    found = tf.math.unsorted_segment_max(
        tf.cast(tf.math.is_finite(window_score), tf.int32), windows.example, batch) > 0
    best = tf.where(found, tf.math.unsorted_segment_max(window_score, windows.example, batch), -float("inf"))
    window_ids = tf.range(tf.shape(window_score)[0])
    first_best = tf.math.unsorted_segment_min(
        tf.where(window_score >= tf.gather(best, windows.example), window_ids, tf.int32.max),
        windows.example, batch)  # the first window holding the best score
    chosen = tf.where(found, first_best, 0)
    position = tf.gather(best_in_window, chosen)
    start_char = tf.gather_nd(tf.reshape(span_start, tf.shape(flat)), tf.stack([chosen, position], -1))
    end_char = tf.gather_nd(tf.reshape(span_end, tf.shape(flat)), tf.stack([chosen, position], -1))
    return found, best, tf.where(found, start_char, 0), tf.where(found, end_char, 0)


class _Windows:
    """The windows of a batch of questions, flat: `example` [W] (whose window), `pieces` ragged
    [W, length] (each context piece's index into the batch's flat pieces) and `max_context`
    (like `pieces`); `pack` lays values out as `[CLS] question [SEP] window [SEP]`."""

    def __init__(self, query, example, pieces, max_context, max_seq_length):
        self.query, self.example, self.pieces, self.max_context = query, example, pieces, max_context
        self.length = max_seq_length

        ones = self.pieces.with_flat_values(tf.ones_like(self.pieces.flat_values))
        self.segment_ids = self.pack(0, 0, 0, ones, 1)
        self.padding_mask = self.pack(1, 1, 1, ones, 1)

    def pack(self, cls_value, query_value, sep_value, context_values, last_value):
        """[W, max_seq_length]: `cls_value`, the question's positions (`query_value`, or the
        question's own ids when None), `sep_value`, the ragged `context_values`, `last_value`,
        then padding (`last_value`'s type's zero)."""
        dtype = context_values.dtype
        rows = tf.shape(self.example)[0]
        column = lambda value: tf.RaggedTensor.from_tensor(tf.fill([rows, 1], tf.cast(value, dtype)))  # noqa: E731
        query = tf.cast(tf.gather(self.query, self.example), dtype)
        if query_value is not None:
            query = tf.ragged.map_flat_values(lambda q: tf.fill(tf.shape(q), tf.cast(query_value, dtype)), query)
        parts = [column(cls_value), query, column(sep_value), context_values, column(last_value)]
        return tf.concat(parts, axis=1).to_tensor(tf.zeros([], dtype), shape=[None, self.length])

    def place(self, context_values, outside):
        """[W, max_seq_length]: per-piece values at the context's positions, `outside` elsewhere
        (padding included)."""
        dtype = context_values.dtype
        packed = self.pack(outside, outside, outside, self.pieces.with_flat_values(context_values), outside)
        return tf.where(self.padding_mask > 0, packed, tf.cast(outside, dtype))


def _windows(query, pieces, max_seq_length: int, doc_stride: int) -> _Windows:
    """The official sliding windows over each context's pieces (see `squad.make_windows`)."""
    query_lengths = tf.cast(query.row_lengths(), tf.int32)
    counts = tf.cast(pieces.row_lengths(), tf.int32)
    room = max_seq_length - query_lengths - 3
    step = tf.minimum(doc_stride, room)
    windows_per_example = 1 + tf.maximum(0, (counts - room + step - 1) // step)
    example = tf.repeat(tf.range(tf.shape(counts)[0]), windows_per_example)
    number = tf.ragged.range(windows_per_example).flat_values  # the window's number in its example
    start = number * tf.gather(step, example)
    length = tf.minimum(tf.gather(counts, example) - start, tf.gather(room, example))
    offset = tf.gather(tf.cast(pieces.row_starts(), tf.int32), example)
    window_pieces = tf.ragged.range(offset + start, offset + start + length)  # flat piece indexes

    # The max-context rule: a piece counts in the window where min(left, right) + 0.01 * length
    # is largest, the first such window among equals.
    within = tf.ragged.range(length)
    lengths = tf.cast(length, tf.float32)
    score = tf.minimum(tf.cast(within, tf.float32),
                       lengths[:, tf.newaxis] - 1.0 - tf.cast(within, tf.float32)) + 0.01 * lengths[:, tf.newaxis]
    total = tf.shape(pieces.flat_values)[0]
    flat_pieces, flat_score = window_pieces.flat_values, score.flat_values
    best = tf.math.unsorted_segment_max(flat_score, flat_pieces, total)
    window_of = tf.repeat(tf.range(tf.shape(example)[0]), length)
    first = tf.math.unsorted_segment_min(
        tf.where(flat_score >= tf.gather(best, flat_pieces), window_of, tf.int32.max), flat_pieces, total)
    max_context = window_pieces.with_flat_values(tf.equal(tf.gather(first, flat_pieces), window_of))
    return _Windows(query, example, window_pieces, max_context, max_seq_length)
