"""A synthetic token language for tests and quick demos of the training step.

Sequences come from a random first-order Markov chain in which each token has a few likely
successors, so a masked token is predictable from its neighbours and both the generator and
the discriminator have something real to learn. Real text goes through the data pipeline.

Token ids follow a small fixed layout: 0 [PAD], 1 [UNK], 2 [CLS], 3 [SEP], 4 [MASK], 5.. words.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from electra_tf.pretraining.config import PretrainingConfig
from electra_tf.pretraining.masking import mask_tokens

PAD, UNK, CLS, SEP, MASK = 0, 1, 2, 3, 4
SPECIAL_TOKEN_IDS = (PAD, UNK, CLS, SEP, MASK)
FIRST_WORD_ID = 5


def markov_sequences(num_sequences: int, seq_length: int, vocab_size: int, seed: int = 0,
                     successors: int = 3) -> dict[str, np.ndarray]:
    """`[CLS] w ... w [SEP] [PAD]...` rows with random lengths; int32 arrays [num, seq_length]."""
    if vocab_size <= FIRST_WORD_ID + successors:
        raise ValueError(f"vocab_size must exceed {FIRST_WORD_ID + successors}.")
    rng = np.random.default_rng(seed)
    num_words = vocab_size - FIRST_WORD_ID
    next_words = rng.integers(0, num_words, size=(num_words, successors))
    token_ids = np.zeros((num_sequences, seq_length), np.int32)
    padding_mask = np.zeros((num_sequences, seq_length), np.int32)
    for row in range(num_sequences):
        length = int(rng.integers(seq_length // 2, seq_length + 1))
        word = int(rng.integers(num_words))
        words = []
        for _ in range(length - 2):
            words.append(word)
            word = int(next_words[word, rng.integers(successors)])
        token_ids[row, :length] = [CLS, *(w + FIRST_WORD_ID for w in words), SEP]
        padding_mask[row, :length] = 1
    return {"token_ids": token_ids, "padding_mask": padding_mask,
            "segment_ids": np.zeros_like(token_ids)}


def mask_with(config: PretrainingConfig, features, seed) -> dict:
    """`features` plus the masking fields, masked as `config` says (usable in tf.data)."""
    return {**features, **mask_tokens(
        features["token_ids"], features["padding_mask"], seed,
        mask_prob=config.objective.mask_prob, max_predictions=config.num_masked_predictions,
        mask_token_id=MASK, special_token_ids=SPECIAL_TOKEN_IDS,
        mask_token_rate=config.objective.mask_token_rate, random_token_rate=config.objective.random_token_rate,
        vocab_size=config.model.vocab_size)}


def remasked_each_step(config: PretrainingConfig, batches: tf.data.Dataset, seed: int) -> tf.data.Dataset:
    """Masks every batch of `batches` afresh, as the pre-training input pipeline does."""
    seeds = tf.data.Dataset.random(seed=seed).batch(2)
    return tf.data.Dataset.zip(batches, seeds).map(
        tf.autograph.experimental.do_not_convert(lambda f, s: mask_with(config, f, s)))


def masked_batch(config: PretrainingConfig, batch_size: int, seq_length: int | None = None,
                 seed: int = 0) -> dict[str, np.ndarray]:
    """One pre-training batch (masking applied) from the synthetic language."""
    seq_length = seq_length or config.run.max_seq_length
    sequences = markov_sequences(batch_size, seq_length, config.model.vocab_size, seed)
    masked = mask_with(config, sequences, tf.constant([seed, 1], tf.int64))
    return {key: np.asarray(value) for key, value in masked.items()}
