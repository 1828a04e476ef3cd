"""ELECTRA's dynamic masking: x^masked = REPLACE(x, m, [MASK]) (paper, Sec. 2).

Runs in the input graph (tf.data `map`, or any tf.function), on batched or single
sequences, and returns fixed-shape int32 tensors, so batches have static shapes for XLA and
`tf.distribute`.

Rules (official `pretrain_helpers.mask`):
- never selected: special tokens ([CLS], [SEP], [MASK], ...) and padding;
- per sequence, k = max(1, min(N, round(non_padding_length * mask_prob))) positions;
- of those, `mask_token_rate` (0.85) become [MASK], `random_token_rate` (0.0) a random
  token, the rest stay unchanged.

Deliberate deviations from the official code, both so that exactly k distinct positions are
predicted:
- positions are drawn *without* replacement (Gumbel top-k over the candidates); the
  official `tf.random.categorical` draw can pick one position twice;
- k is also capped at the number of selectable tokens (a sequence of only special tokens
  gets no prediction slots instead of slots pointing at [CLS]).

Whole-word masking (`word_continuations`, the config's `whole_word_masking`; off by default,
as in the official code) spends the same budget of k pieces on whole words: a piece marked as
a continuation (WordPiece's `##`) belongs to the word before it, every piece of a chosen word is
masked, words are taken in a random order and one that no longer fits the budget is passed
over for the next, as TF Model Garden's BERT data does (`create_pretraining_data.py`,
`do_whole_word_mask`). A word longer than k pieces is never masked.

Randomness is stateless (seeded per call, Philox), so a pipeline is reproducible from its
seed and cheap under XLA.
"""

from __future__ import annotations

from typing import Sequence

import tensorflow as tf

from electra_tf.models.dropout import RNG_ALGORITHM


def mask_tokens(
    token_ids,
    padding_mask,
    seed,
    *,
    mask_prob: float,
    max_predictions: int,
    mask_token_id: int,
    special_token_ids: Sequence[int],
    mask_token_rate: float = 0.85,
    random_token_rate: float = 0.0,
    vocab_size: int | None = None,
    word_continuations=None,
) -> dict[str, tf.Tensor]:
    """Selects and masks positions of `token_ids` ([B, L] or [L] int ids of the original
    text; `padding_mask` 1 for real tokens, 0 for padding). `seed`: a shape-[2] integer tensor,
    the same seed gives the same masking. `mask_prob` of the non-padding tokens are predicted
    in `max_predictions` (N) fixed slots per sequence; `special_token_ids` ([PAD], [CLS],
    [SEP], [MASK], [UNK] ...) are never selected; selected tokens become `mask_token_id` at
    `mask_token_rate`, a random token at `random_token_rate` (which needs `vocab_size`), else
    stay. `word_continuations`: None (each piece on its own, the official rule), or a boolean
    vector over the vocabulary, True for the pieces that continue a word: whole-word masking.

    Returns a dict of int32 tensors: `token_ids` (the masked input, the input's shape),
    `mask_positions`, `mask_ids` (original ids there) and `mask_weights` (1 for a real slot, 0
    for an unused one), each [B, N] (or [N]).

    Example:
    >>> out = mask_tokens([[2, 7, 8, 9, 3, 0]], [[1, 1, 1, 1, 1, 0]], seed=[1, 2],
    ...                   mask_prob=0.5, max_predictions=3, mask_token_id=4,
    ...                   special_token_ids=[0, 2, 3, 4])
    >>> int(out["mask_weights"].numpy().sum())  # round(5 * 0.5) = 2 slots used
    2
    """
    if random_token_rate > 0 and vocab_size is None:
        raise ValueError("mask_tokens: random_token_rate > 0 needs vocab_size.")
    token_ids = tf.cast(tf.convert_to_tensor(token_ids), tf.int32)
    padding_mask = tf.cast(tf.convert_to_tensor(padding_mask), tf.int32)
    unbatched = token_ids.shape.rank == 1
    if unbatched:
        token_ids, padding_mask = token_ids[tf.newaxis], padding_mask[tf.newaxis]
    seed = tf.cast(tf.convert_to_tensor(seed), tf.int64)
    select_seed, replace_seed, random_seed = tf.unstack(
        tf.random.experimental.stateless_split(seed, 3, alg=RNG_ALGORITHM))
    specials = sorted(set(int(i) for i in special_token_ids))
    mask_positions, mask_weights = prediction_slots(token_ids, padding_mask, select_seed, mask_prob, max_predictions,
                                                    specials, word_continuations)
    mask_ids = tf.gather(token_ids, mask_positions, batch_dims=1) * mask_weights
    replacement = _replacements(mask_ids, mask_token_id, (replace_seed, random_seed), mask_token_rate,
                                random_token_rate, vocab_size)
    outputs = {
        "token_ids": scatter_at_positions(token_ids, mask_positions, replacement, mask_weights),
        "mask_positions": mask_positions,
        "mask_ids": mask_ids,
        "mask_weights": mask_weights,
    }
    if unbatched:
        outputs = {key: value[0] for key, value in outputs.items()}
    return outputs


def prediction_slots(token_ids, padding_mask, seed, mask_prob: float, max_predictions: int,
                     special_token_ids: Sequence[int], word_continuations=None):
    """(mask_positions, mask_weights) [B, N]: k = max(1, min(N, round(length * p))) distinct
    selectable positions per sequence, capped by what can be selected, in ascending order;
    unused slots point at 0 with weight 0."""
    batch_size, seq_length = tf.shape(token_ids)[0], tf.shape(token_ids)[1]
    specials = tf.constant(special_token_ids, tf.int32)
    is_special = tf.reduce_any(token_ids[..., tf.newaxis] == specials, axis=-1)
    selectable = (padding_mask > 0) & ~is_special
    length = tf.cast(tf.reduce_sum(padding_mask, axis=-1), tf.float32)
    num_to_predict = tf.maximum(1, tf.minimum(max_predictions, tf.cast(tf.round(length * mask_prob), tf.int32)))
    num_to_predict = tf.minimum(num_to_predict, tf.reduce_sum(tf.cast(selectable, tf.int32), axis=-1))

    priority = tf.random.stateless_uniform([batch_size, seq_length], seed, alg=RNG_ALGORITHM)
    if word_continuations is not None:
        chosen = whole_words_within_budget(token_ids, selectable, priority, num_to_predict, word_continuations)
        num_to_predict = tf.reduce_sum(tf.cast(chosen, tf.int32), axis=-1)
        # The chosen positions first (top_k puts the lower index first among equal values).
        priority = tf.where(chosen, 1.0, -1.0)
    else:
        # Uniform random priorities; the top-k selectable ones form a uniform draw of k distinct
        # positions. Non-selectable positions rank below every selectable one.
        priority = tf.where(selectable, priority, -1.0)
    top_positions = tf.math.top_k(priority, k=max_predictions, sorted=True).indices
    mask_weights = tf.sequence_mask(num_to_predict, max_predictions, dtype=tf.int32)
    mask_positions = tf.sort(tf.where(mask_weights > 0, top_positions, seq_length), axis=-1)
    return tf.where(mask_weights > 0, mask_positions, 0), mask_weights


def _replacements(mask_ids, mask_token_id: int, seeds, mask_token_rate: float, random_token_rate: float,
                  vocab_size: int | None):
    """What each slot's token becomes: [MASK] at `mask_token_rate`, a random token at
    `random_token_rate`, else the original."""
    replace_seed, random_seed = seeds
    shape = tf.shape(mask_ids)
    draw = tf.random.stateless_uniform(shape, replace_seed, alg=RNG_ALGORITHM)
    replacement = tf.where(draw < mask_token_rate, mask_token_id, mask_ids)
    if random_token_rate > 0:
        random_ids = tf.random.stateless_uniform(shape, random_seed, minval=0, maxval=vocab_size, dtype=tf.int32,
                                                 alg=RNG_ALGORITHM)
        use_random = (draw >= mask_token_rate) & (draw < mask_token_rate + random_token_rate)
        replacement = tf.where(use_random, random_ids, replacement)
    return replacement


def whole_words_within_budget(token_ids, selectable, priority, budget, word_continuations):
    """[B, L] bool: the pieces of whole words chosen in `priority` order (a word's priority is its
    first piece's) while their pieces fit in `budget` ([B]); a word that does not fit is passed over."""
    batch_size, seq_length = tf.shape(token_ids)[0], tf.shape(token_ids)[1]
    continues = tf.gather(tf.cast(word_continuations, tf.bool), token_ids)
    previous_selectable = tf.pad(selectable[:, :-1], [[0, 0], [1, 0]])
    starts = selectable & (~continues | ~previous_selectable)  # a "##" piece after [CLS] starts a word
    word = tf.cumsum(tf.cast(starts, tf.int32), axis=-1) - 1  # each piece's word, per sequence
    # Words numbered across the batch, for segment sums; pieces outside words go to a spare segment.
    segments = batch_size * seq_length
    word_of_piece = tf.where(selectable & (word >= 0), word + tf.range(batch_size)[:, tf.newaxis] * seq_length,
                             segments)
    lengths = tf.math.unsorted_segment_sum(tf.ones_like(word_of_piece), word_of_piece, segments + 1)
    # Words in priority order: their first pieces, highest priority first; then the greedy pass.
    order = tf.math.top_k(tf.where(starts, priority, -1.0), k=seq_length).indices
    is_word = tf.gather(starts, order, batch_dims=1)
    word_lengths = tf.where(is_word, tf.gather(lengths, tf.gather(word_of_piece, order, batch_dims=1)), 0)

    def take(used, length):
        fits = used + length <= budget
        return used + tf.where(fits, length, 0)

    used_after = tf.scan(take, tf.transpose(word_lengths), initializer=tf.zeros_like(budget))  # [L, B]
    used_before = tf.concat([tf.zeros_like(budget)[tf.newaxis], used_after[:-1]], axis=0)
    taken = tf.transpose((used_after > used_before)) & is_word  # [B, L], in priority order
    taken_words = tf.math.unsorted_segment_max(
        tf.cast(taken, tf.int32), tf.gather(word_of_piece, order, batch_dims=1), segments + 1)
    return selectable & (tf.gather(taken_words, word_of_piece) > 0)


def scatter_at_positions(sequence, positions, updates, weights):
    """Writes `updates[b, n]` into `sequence[b, positions[b, n]]` where `weights[b, n]` is 1.

    Used positions are distinct, so adding into zeros is the same as assigning; unused slots
    (weight 0) add nothing, even though they all point at position 0. XLA-friendly.
    """
    sequence = tf.convert_to_tensor(sequence)
    weights = tf.cast(weights, sequence.dtype)
    positions = tf.cast(positions, tf.int32)
    batch_size, num_slots = tf.shape(positions)[0], tf.shape(positions)[1]
    batch_index = tf.repeat(tf.range(batch_size), num_slots)
    indices = tf.stack([batch_index, tf.reshape(positions, [-1])], axis=-1)
    zeros = tf.zeros_like(sequence)
    selected = tf.tensor_scatter_nd_add(zeros, indices, tf.reshape(weights, [-1]))
    values = tf.tensor_scatter_nd_add(
        zeros, indices, tf.reshape(tf.cast(updates, sequence.dtype) * weights, [-1]))
    return tf.where(selected > 0, values, sequence)
