"""Text packing: the official truncation rules, segment ids, tagging labels, odd input."""

import random

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.data.tokenization import ElectraTokenizer
from electra_tf.models.preprocessing import (
    IGNORE_LABEL,
    ElectraTextPreprocessor,
    ElectraWordPreprocessor,
    pack_texts,
    pack_words,
    pair_lengths,
)

VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c", "the", "cat", "##s", "sat"]


def official_truncate_seq_pair(tokens_a, tokens_b, max_length):
    """The loop of google-research/electra's classification_tasks._truncate_seq_pair."""
    tokens_a, tokens_b = list(tokens_a), list(tokens_b)
    while len(tokens_a) + len(tokens_b) > max_length:
        (tokens_a if len(tokens_a) > len(tokens_b) else tokens_b).pop()
    return len(tokens_a), len(tokens_b)


def test_pair_lengths_equal_the_official_loop():
    rng = random.Random(0)
    cases = [(rng.randrange(0, 40), rng.randrange(0, 40), rng.randrange(1, 30)) for _ in range(500)]
    a, b, budgets = (np.array(x) for x in zip(*cases))
    for budget in sorted(set(budgets.tolist())):
        rows = budgets == budget
        kept_a, kept_b = pair_lengths(tf.constant(a[rows]), tf.constant(b[rows]), int(budget))
        expected = [official_truncate_seq_pair(range(x), range(y), budget) for x, y in zip(a[rows], b[rows])]
        assert list(zip(kept_a.numpy().tolist(), kept_b.numpy().tolist())) == expected


def test_pack_pairs_keeps_the_heads_of_both_texts():
    tokenizer = ElectraTokenizer(VOCABULARY)
    packed = pack_texts(tokenizer, 9, ["a b c a b c", "a"], ["c c c c", "b"])
    # budget 6: (6, 4) -> (3, 3); the second row fits.
    assert packed["token_ids"].numpy().tolist() == [[2, 5, 6, 7, 3, 7, 7, 7, 3], [2, 5, 3, 6, 3, 0, 0, 0, 0]]
    assert packed["segment_ids"].numpy().tolist() == [[0, 0, 0, 0, 0, 1, 1, 1, 1], [0, 0, 0, 1, 1, 0, 0, 0, 0]]
    assert packed["padding_mask"].numpy().sum(axis=1).tolist() == [9, 5]


def test_single_texts_truncate_and_survive_odd_input():
    tokenizer = ElectraTokenizer(VOCABULARY)
    packed = pack_texts(tokenizer, 5, tf.constant(["a b c a b", "", b"\xff\xfe cat"]))
    ids = packed["token_ids"].numpy().tolist()
    assert ids[0] == [2, 5, 6, 7, 3]           # first max_seq_length - 2 pieces
    assert ids[1] == [2, 3, 0, 0, 0]           # empty text: [CLS] [SEP]
    assert ids[2][:2] == [2, 1] and 3 in ids[2]  # invalid UTF-8 becomes U+FFFD -> [UNK]


def test_word_labels_sit_on_first_pieces_and_survive_truncation():
    tokenizer = ElectraTokenizer(VOCABULARY)
    inputs, labels = pack_words(tokenizer, 6, tf.ragged.constant([["cats", "sat", "the", "cat"], ["\x00"]]),
                                tf.ragged.constant([[1, 2, 3, 4], [5]]))
    assert inputs["token_ids"].numpy().tolist() == [[2, 9, 10, 11, 8, 3], [2, 1, 3, 0, 0, 0]]
    assert labels.numpy().tolist() == [[IGNORE_LABEL, 1, IGNORE_LABEL, 2, 3, IGNORE_LABEL],
                                       [IGNORE_LABEL, 5, IGNORE_LABEL] + [IGNORE_LABEL] * 3]


def test_preprocessor_maps_over_datasets_and_serializes():
    import keras

    preprocessor = ElectraTextPreprocessor(VOCABULARY, max_seq_length=8)
    pairs = tf.data.Dataset.from_tensor_slices(((["the cat"], ["sat"]), [1])).batch(1)
    inputs, label = next(iter(pairs.map(preprocessor)))
    assert inputs["segment_ids"].numpy().tolist() == [[0, 0, 0, 0, 1, 1, 0, 0]] and label.numpy().tolist() == [1]
    clone = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(preprocessor))
    assert clone.max_seq_length == 8 and clone.tokenizer.vocabulary == VOCABULARY
    words = ElectraWordPreprocessor(VOCABULARY, max_seq_length=8)
    assert type(keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(words))) \
        is ElectraWordPreprocessor
    with pytest.raises(ValueError, match="max_seq_length must be at least 3"):
        ElectraTextPreprocessor(VOCABULARY, max_seq_length=2)
