"""The synthetic token language of the tests and docstring examples: well-formed rows, a few
successors per word (so a model can learn it), masking as the input pipeline masks."""

import numpy as np
import pytest

from electra_tf.pretraining.config import PretrainingConfig
from electra_tf.pretraining.synthetic import CLS, FIRST_WORD_ID, SEP, markov_sequences, masked_batch


def test_rows_are_cls_words_sep_then_padding_and_each_word_has_few_successors():
    rows = markov_sequences(50, 16, vocab_size=40, seed=3, successors=2)
    assert rows["token_ids"].shape == (50, 16) and (rows["segment_ids"] == 0).all()
    followers = {}
    for ids, mask in zip(rows["token_ids"], rows["padding_mask"]):
        length = int(mask.sum())
        assert ids[0] == CLS and ids[length - 1] == SEP and (ids[length:] == 0).all() and length >= 8
        for word, after in zip(ids[1:length - 2], ids[2:length - 1]):
            followers.setdefault(int(word), set()).add(int(after))
    assert all(len(after) <= 2 for after in followers.values()) and min(followers) >= FIRST_WORD_ID
    np.testing.assert_array_equal(markov_sequences(50, 16, 40, seed=3, successors=2)["token_ids"], rows["token_ids"])
    with pytest.raises(ValueError, match="vocab_size must exceed"):
        markov_sequences(1, 8, vocab_size=6)


def test_a_masked_batch_has_the_pipelines_fields():
    config = PretrainingConfig.load("electra_tiny").replace(vocab_size=64, max_seq_length=32)
    batch = masked_batch(config, batch_size=4)
    assert set(batch) == {"token_ids", "segment_ids", "padding_mask", "mask_positions", "mask_ids", "mask_weights"}
    assert batch["mask_positions"].shape == (4, config.num_masked_predictions) and batch["mask_weights"].sum() > 0
