"""The inputs of a LiteRT file that takes text: the tokenizer as tensorflow-text ops that have
LiteRT kernels (`LiteRTTokenizer`), and `[CLS] ... [SEP]` packing in dense ops (`pack_text`,
`pack_pair`, `pack_whitespace_words`), which every servable model's `litert_endpoint` builds
on (`serving/litert.py` writes the file).

- WordPiece: `FastBertNormalizer` (control and format characters, lower-casing, NFD and accent
  stripping for an uncased vocabulary) and `FastWordpieceTokenizer` with its own BERT
  pre-tokenization (Unicode whitespace, punctuation and CJK ideographs split): the two ops of
  BERT_RULE (`data/tokenization.py`), so the file's ids are its SavedModel's. A vocabulary
  written before BERT_RULE (V1_RULE) gets the same ops, where its SavedModel splits on ASCII
  whitespace only and case-folds after splitting: texts with other Unicode spaces, "…" and
  similar compatibility characters, or control characters tokenize differently in the two
  forms (measured in docs/results.md, "The tokenizer inside"). A vocabulary that lower-cases
  without stripping accents (or the reverse), or keeps CJK ideographs in words, has no such
  kernel and is refused.
- SentencePiece: `FastSentencepieceTokenizer` over the same model.

Packing, truncation and padding are the SavedModel's (`[CLS] a [SEP]`, a pair cut by the official
rule, `preprocessing.pair_lengths`), computed with dense ops: LiteRT pads ragged numbers, not
strings, and has no kernel for several ragged ops.
"""

from __future__ import annotations

import tensorflow as tf
import tensorflow_text as tf_text

from electra_tf.data.tokenization import bert_wordpiece, whitespace_words
from electra_tf.data.vocabulary_files import SENTENCEPIECE
from electra_tf.models.preprocessing import pair_lengths
from electra_tf.utils.errors import ElectraError


class LiteRTError(ElectraError):
    """A model that cannot be written as a LiteRT file as asked; the message says why and what to try."""


class LiteRTTokenizer:
    """The model's tokenizer as tensorflow-text ops with LiteRT kernels: `tokenize(text)` ->
    ragged int32 ids [batch, (pieces)], the same ids as `ElectraTokenizer.tokenize` (but for the
    case folding the module docstring names)."""

    def __init__(self, tokenizer):


        self.tokenizer = tokenizer
        self.sentencepiece = self.normalizer = self.wordpiece = None
        if tokenizer.kind == SENTENCEPIECE:
            self.sentencepiece = tf_text.FastSentencepieceTokenizer(model=tokenizer.sentencepiece_model)
            return
        settings = tokenizer.settings
        if not settings.has_bert_kernels:
            raise LiteRTError(
                f"the vocabulary's tokenizer ({settings.describe()}) has no LiteRT kernel: tensorflow-text's "
                "FastBertNormalizer lower-cases and strips accents together or not at all, and FastWordpieceTokenizer "
                "always splits CJK ideographs. Nothing was written; serve this model with the SavedModel export.")
        # BERT_RULE runs on these kernels everywhere; a V1_RULE vocabulary gets the same kernels,
        # which split words as BERT does where its SavedModel does not (module docstring).
        self.normalizer, self.wordpiece = (
            (tokenizer.normalizer, tokenizer.wordpiece) if tokenizer.normalizer is not None
            else bert_wordpiece(tokenizer.vocabulary, settings))

    def accepts(self, text):
        """A scalar bool, true, computed from the tokenizer's first op on `text`: that op refuses
        a text input of another rank than 1 ("Input values shape must be rank 1"), which ops such
        as ByteSplitter read silently; a function whose outputs use this refuses it too."""
        first = (self.normalizer.normalize(text) if self.normalizer is not None
                 else self.sentencepiece.tokenize(text).row_lengths())
        return tf.shape(first)[0] >= 0

    def tokenize(self, text):

        if self.sentencepiece is not None:
            pieces = self.sentencepiece.tokenize(text)
            return pieces.with_flat_values(tf.cast(pieces.flat_values, tf.int32))
        return self.wordpiece.tokenize(self.normalizer.normalize(text))


def _edges(batch, length: int, lengths, tokenizer, body):
    """[CLS] body[:lengths] [SEP] padded to `length`: (token_ids, padding_mask), int32 [batch, length]."""
    positions = tf.range(length)[tf.newaxis, :]
    lengths = lengths[:, tf.newaxis]
    token_ids = tf.concat([tf.fill([batch, 1], tokenizer.cls_id), body,
                           tf.fill([batch, length - 1 - body.shape[1]], tokenizer.pad_id)], axis=1)
    token_ids = tf.where(positions == lengths + 1, tokenizer.sep_id,
                         tf.where(positions > lengths + 1, tokenizer.pad_id, token_ids))
    return token_ids, tf.cast(positions <= lengths + 1, tf.int32)


def pack_text(pieces, tokenizer, length: int) -> dict:
    """`[CLS] text [SEP]`, the text's first length - 2 pieces, as `preprocessing.pack_texts`."""
    body = pieces.to_tensor(default_value=tokenizer.pad_id, shape=[None, length - 2])
    batch = tf.shape(body)[0]
    lengths = tf.minimum(tf.cast(pieces.row_lengths(), tf.int32), length - 2)
    token_ids, padding_mask = _edges(batch, length, lengths, tokenizer, body)
    return {"token_ids": token_ids, "segment_ids": tf.zeros_like(token_ids), "padding_mask": padding_mask}


def pack_pair(pieces_a, pieces_b, tokenizer, length: int) -> dict:
    """`[CLS] a [SEP] b [SEP]`, cut to length - 3 pieces by the official rule, as `pack_texts`."""


    budget = length - 3
    a, b = (p.to_tensor(default_value=tokenizer.pad_id, shape=[None, budget]) for p in (pieces_a, pieces_b))
    kept_a, kept_b = pair_lengths(tf.cast(pieces_a.row_lengths(), tf.int32), tf.cast(pieces_b.row_lengths(), tf.int32),
                                  budget)
    positions = tf.tile(tf.range(length)[tf.newaxis, :], [tf.shape(a)[0], 1])  # [b, length]
    kept_a, kept_b = kept_a[:, tf.newaxis], kept_b[:, tf.newaxis]
    from_a = tf.gather(a, tf.clip_by_value(positions - 1, 0, budget - 1), batch_dims=1)
    from_b = tf.gather(b, tf.clip_by_value(positions - kept_a - 2, 0, budget - 1), batch_dims=1)
    first_sep, last_sep = kept_a + 1, kept_a + kept_b + 2
    token_ids = tf.where(positions == 0, tokenizer.cls_id, tf.where(
        positions < first_sep, from_a, tf.where(positions == first_sep, tokenizer.sep_id, tf.where(
            positions < last_sep, from_b, tf.where(positions == last_sep, tokenizer.sep_id, tokenizer.pad_id)))))
    # 1 on b and its [SEP], as integer arithmetic: the converter turns a cast bool there into a
    # bool zeros_like, which LiteRT has no kernel for.
    segment_ids = tf.clip_by_value(positions - first_sep, 0, 1) * tf.clip_by_value(last_sep + 1 - positions, 0, 1)
    return {"token_ids": token_ids, "segment_ids": segment_ids,
            "padding_mask": tf.cast(positions <= last_sep, tf.int32)}


def pack_whitespace_words(text, lite_tokenizer, length: int):
    """A tagger's input: the text's words (`ElectraTokenizer.word_white_space` between them), each
    tokenized on its own (an empty one as [UNK], a SentencePiece word's bare word start dropped,
    as `preprocessing.pack_words`). Returns (inputs, word_positions [b, words]: each word's first
    piece, or -1 when cut off, word_start, word_end [b, words]: its bytes in the text, -1 past
    the last word)."""
    tokenizer, slots = lite_tokenizer.tokenizer, length - 2
    words, starts, ends = whitespace_words(text, tokenizer.word_white_space)
    word_count = tf.minimum(tf.cast(words.row_lengths(), tf.int32), slots)
    batch = tf.shape(word_count)[0]
    # Every word's pieces, then [batch, words, pieces]: LiteRT pads ragged numbers, not strings.
    word_pieces = lite_tokenizer.tokenize(words.flat_values)  # [all words, (pieces)]
    table = words.with_flat_values(word_pieces).to_tensor(default_value=tokenizer.pad_id, shape=[None, slots, slots])
    counts = words.with_flat_values(tf.cast(word_pieces.row_lengths(), tf.int32)).to_tensor(0, shape=[None, slots])
    counts = tf.minimum(counts, slots)
    if tokenizer.bare_word_start_id is not None:  # as ElectraTokenizer.tokenize_words
        bare = (table[:, :, 0] == tokenizer.bare_word_start_id) & (counts > 1)
        shifted = tf.concat([table[:, :, 1:], tf.fill([batch, slots, 1], tokenizer.pad_id)], axis=2)
        table, counts = tf.where(bare[..., tf.newaxis], shifted, table), counts - tf.cast(bare, tf.int32)
    table = tf.where(((counts == 0)[..., tf.newaxis]) & (tf.range(slots) == 0), tokenizer.unk_id, table)
    is_word = tf.range(slots)[tf.newaxis, :] < word_count[:, tf.newaxis]
    counts = tf.where(is_word, tf.maximum(counts, 1), 0)
    word_positions = 1 + tf.cumsum(counts, axis=1, exclusive=True)  # [b, words]
    positions = tf.range(1, slots + 1)[tf.newaxis, :, tf.newaxis]  # body positions 1 .. slots, [1, slots, 1]
    inside = (positions >= word_positions[:, tf.newaxis, :]) & (positions < (word_positions + counts)[:, tf.newaxis, :])
    word_of = tf.argmax(tf.cast(inside, tf.int32), axis=2, output_type=tf.int32)  # [b, slots]
    within = tf.range(1, slots + 1)[tf.newaxis, :] - tf.gather(word_positions, word_of, batch_dims=1)
    body = tf.gather(tf.gather(table, word_of, batch_dims=1), tf.maximum(within, 0)[..., tf.newaxis],
                     batch_dims=2)[..., 0]
    total = tf.minimum(tf.reduce_sum(counts, axis=1), slots)
    token_ids, padding_mask = _edges(batch, length, total, tokenizer, body)
    kept = is_word & (word_positions <= slots)
    offsets = [tf.where(kept, tf.cast(o.to_tensor(-1, shape=[None, slots]), tf.int32), -1) for o in (starts, ends)]
    inputs = {"token_ids": token_ids, "segment_ids": tf.zeros_like(token_ids), "padding_mask": padding_mask}
    return inputs, tf.where(kept, word_positions, -1), offsets[0], offsets[1]
