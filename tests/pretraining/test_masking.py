import numpy as np
import pytest
import tensorflow as tf

from electra_tf.pretraining.masking import mask_tokens, scatter_at_positions
from electra_tf.pretraining.synthetic import MASK, SPECIAL_TOKEN_IDS, markov_sequences

N = 20


def _mask(sequences, seed=(0, 0), **kwargs):
    options = dict(mask_prob=0.15, max_predictions=N, mask_token_id=MASK,
                   special_token_ids=SPECIAL_TOKEN_IDS)
    options.update(kwargs)
    out = mask_tokens(sequences["token_ids"], sequences["padding_mask"], seed, **options)
    return {key: value.numpy() for key, value in out.items()}


@pytest.fixture(scope="module")
def sequences():
    return markov_sequences(64, 128, vocab_size=300, seed=1)


def test_fixed_shapes_and_int32(sequences):
    out = _mask(sequences)
    assert out["token_ids"].shape == (64, 128)
    for key in ("mask_positions", "mask_ids", "mask_weights"):
        assert out[key].shape == (64, N) and out[key].dtype == np.int32
    assert out["token_ids"].dtype == np.int32


def test_count_follows_the_official_rule(sequences):
    out = _mask(sequences)
    length = sequences["padding_mask"].sum(-1)
    expected = np.maximum(1, np.minimum(N, np.round(length * 0.15))).astype(int)
    np.testing.assert_array_equal(out["mask_weights"].sum(-1), expected)
    # Used slots come first; positions are distinct.
    for row in range(64):
        used = out["mask_positions"][row, : expected[row]]
        assert len(set(used)) == len(used)
        assert (out["mask_positions"][row, expected[row]:] == 0).all()


def test_never_selects_special_tokens_or_padding(sequences):
    for seed in range(20):
        out = _mask(sequences, seed=(seed, 7), mask_prob=0.5, max_predictions=128)
        rows, slots = np.nonzero(out["mask_weights"])
        positions = out["mask_positions"][rows, slots]
        original = sequences["token_ids"][rows, positions]
        assert not np.isin(original, SPECIAL_TOKEN_IDS).any()
        assert (sequences["padding_mask"][rows, positions] == 1).all()
        np.testing.assert_array_equal(out["mask_ids"][rows, slots], original)


def test_replacement_rates_are_85_15_0_over_many_draws(sequences):
    masked = unchanged = other = 0
    for seed in range(40):
        out = _mask(sequences, seed=(seed, 1))
        rows, slots = np.nonzero(out["mask_weights"])
        new = out["token_ids"][rows, out["mask_positions"][rows, slots]]
        old = out["mask_ids"][rows, slots]
        masked += (new == MASK).sum()
        unchanged += (new == old).sum()
        other += ((new != MASK) & (new != old)).sum()
    total = masked + unchanged + other
    assert total > 30_000
    assert abs(masked / total - 0.85) < 0.01
    assert abs(unchanged / total - 0.15) < 0.01
    assert other == 0


def test_only_selected_positions_change(sequences):
    out = _mask(sequences)
    changed = out["token_ids"] != sequences["token_ids"]
    selected = np.zeros_like(changed)
    rows, slots = np.nonzero(out["mask_weights"])
    selected[rows, out["mask_positions"][rows, slots]] = True
    assert not (changed & ~selected).any()


def test_deterministic_for_a_seed_and_different_across_seeds(sequences):
    a, b, c = _mask(sequences, (5, 5)), _mask(sequences, (5, 5)), _mask(sequences, (5, 6))
    np.testing.assert_array_equal(a["mask_positions"], b["mask_positions"])
    assert (a["mask_positions"] != c["mask_positions"]).any()


def test_random_token_rate_when_asked(sequences):
    out = _mask(sequences, mask_token_rate=0.5, random_token_rate=0.5, vocab_size=300)
    rows, slots = np.nonzero(out["mask_weights"])
    new = out["token_ids"][rows, out["mask_positions"][rows, slots]]
    assert 0.3 < (new == MASK).mean() < 0.7
    with pytest.raises(ValueError, match="vocab_size"):
        _mask(sequences, random_token_rate=0.1)


def test_sequence_without_selectable_tokens_gets_no_slots():
    out = _mask({"token_ids": np.array([[2, 3, 0, 0]]), "padding_mask": np.array([[1, 1, 0, 0]])},
                max_predictions=2)
    assert out["mask_weights"].sum() == 0
    np.testing.assert_array_equal(out["token_ids"], [[2, 3, 0, 0]])


def test_works_inside_tf_data_per_example_and_per_batch(sequences):
    def per_batch(features, seed):
        return mask_tokens(features["token_ids"], features["padding_mask"], seed,
                           mask_prob=0.15, max_predictions=N, mask_token_id=MASK,
                           special_token_ids=SPECIAL_TOKEN_IDS)

    dataset = tf.data.Dataset.from_tensor_slices(sequences).batch(16, drop_remainder=True)
    seeds = tf.data.Dataset.random(seed=3).batch(2)
    batches = list(tf.data.Dataset.zip(dataset, seeds).map(per_batch))
    assert len(batches) == 4
    assert batches[0]["mask_positions"].shape == (16, N)

    per_example = tf.data.Dataset.from_tensor_slices(sequences).map(
        lambda f: per_batch(f, tf.constant([1, 2], tf.int64)))
    first = next(iter(per_example))
    assert first["mask_positions"].shape == (N,)
    assert first["mask_positions"].dtype == tf.int32


def test_scatter_ignores_unused_slots():
    sequence = np.array([[10, 11, 12, 13]], np.int32)
    out = scatter_at_positions(sequence, np.array([[2, 0, 0]]), np.array([[99, 98, 97]]),
                               np.array([[1, 0, 0]]))
    np.testing.assert_array_equal(out.numpy(), [[10, 11, 99, 13]])
