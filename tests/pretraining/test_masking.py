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


def words_of(continues_row):
    """Word index of each position: a continuation joins the word before it."""
    words, current = [], -1
    for continues in continues_row:
        current += 0 if continues and current >= 0 else 1
        words.append(current)
    return words


def test_whole_word_masking_masks_every_piece_of_a_chosen_word_and_keeps_the_rate():
    """Random words of 1-4 pieces (ids >= 100 continue a word): a masked word is never partly
    masked, and the masked share stays near 15% over many sequences."""
    rng = np.random.default_rng(0)
    vocab_size, length, batch = 200, 128, 64
    continuation = np.arange(vocab_size) >= 100
    token_ids = np.zeros((batch, length), np.int32)
    for row in token_ids:
        position = 1
        while position < length - 1:
            pieces = rng.integers(1, 5)
            for piece in range(min(pieces, length - 1 - position)):
                row[position] = rng.integers(100, 200) if piece else rng.integers(10, 100)
                position += 1
        row[0], row[-1] = 2, 3  # [CLS], [SEP]
    padding = np.ones_like(token_ids)
    padding[:8, 100:] = 0  # some shorter sequences
    token_ids[:8, 100:] = 0
    out = mask_tokens(token_ids, padding, seed=[3, 4], mask_prob=0.15, max_predictions=20, mask_token_id=MASK,
                      special_token_ids=SPECIAL_TOKEN_IDS, mask_token_rate=1.0,
                      word_continuations=continuation)
    positions, weights = out["mask_positions"].numpy(), out["mask_weights"].numpy()
    masked_pieces = 0
    for row in range(batch):
        chosen = set(positions[row][weights[row] > 0].tolist())
        words = words_of(continuation[token_ids[row]] & (padding[row] > 0))
        for word in set(words[p] for p in chosen):
            pieces = {p for p, w in enumerate(words) if w == word and padding[row][p] and token_ids[row][p] > 3}
            assert pieces <= chosen, f"row {row}: word {word} partly masked"
        assert len(chosen) <= round(padding[row].sum() * 0.15)
        masked_pieces += len(chosen)
    share = masked_pieces / padding.sum()
    assert 0.13 < share <= 0.15, share
    # Each piece on its own (the default) masks exactly the budget.
    plain = mask_tokens(token_ids, padding, seed=[3, 4], mask_prob=0.15, max_predictions=20, mask_token_id=MASK,
                        special_token_ids=SPECIAL_TOKEN_IDS)
    assert plain["mask_weights"].numpy().sum() >= masked_pieces


def test_whole_word_masking_runs_in_the_input_pipeline(small_vocab):
    from electra_tf.data.tokenization import ElectraTokenizer
    from electra_tf.pretraining.config import PretrainingConfig
    from electra_tf.pretraining.input_pipeline import masking_function

    tokenizer = ElectraTokenizer(small_vocab)
    config = PretrainingConfig.load("electra_tiny", {"max_seq_length": 32, "whole_word_masking": True})
    ids = tokenizer.tokenize(["the unbelievably fast river flows south to the sea"]).to_list()[0]
    row = ([tokenizer.cls_id] + ids + [tokenizer.sep_id] + [0] * 32)[:32]
    batch = {"token_ids": tf.constant([row] * 4), "padding_mask": tf.constant([[int(i > 0) for i in row]] * 4)}
    dataset = tf.data.Dataset.from_tensors((batch, tf.constant([1, 2], tf.int64))).map(masking_function(config, tokenizer))
    out = next(iter(dataset))
    pieces = [tokenizer.vocabulary[i] for i in row]
    for r in range(4):
        chosen = {int(p) for p, w in zip(out["mask_positions"][r], out["mask_weights"][r]) if w}
        for p in chosen:  # the pieces after a masked word start that continue it are masked too
            q = p + 1
            while q < len(pieces) and pieces[q].startswith("##"):
                assert q in chosen
                q += 1
