import numpy as np
import pytest
import tensorflow as tf

from electra_tf.pretraining import losses

# Two sequences of length 6; slots: row 0 uses positions 1 and 3, row 1 uses position 2 only.
MASKED_IDS = np.array([[2, 4, 11, 12, 3, 0], [2, 20, 4, 3, 0, 0]], np.int32)  # 4 = [MASK]
POSITIONS = np.array([[1, 3], [2, 0]], np.int32)
ORIGINAL = np.array([[10, 12], [21, 0]], np.int32)   # position 3 was left unchanged (15% case)
WEIGHTS = np.array([[1, 1], [1, 0]], np.int32)


def test_corrupted_input_has_samples_in_every_selected_position():
    sampled = np.array([[30, 31], [32, 33]], np.int32)
    corrupted = losses.corrupt_tokens(MASKED_IDS, POSITIONS, sampled, WEIGHTS).numpy()
    # Position 3 was unmasked for the generator but still gets the sample; slot 2 of row 1 is
    # unused, so [CLS] at position 0 stays.
    np.testing.assert_array_equal(corrupted, [[2, 30, 11, 31, 3, 0], [2, 20, 32, 3, 0, 0]])


def test_labels_are_zero_where_the_generator_sampled_the_original():
    sampled = np.array([[10, 99], [21, 5]], np.int32)  # row0 slot0 and row1 slot0 are correct
    labels = losses.replaced_token_labels(ORIGINAL, sampled, POSITIONS, WEIGHTS, MASKED_IDS).numpy()
    np.testing.assert_array_equal(labels, [[0, 0, 0, 1, 0, 0], [0, 0, 0, 0, 0, 0]])


@pytest.mark.parametrize("method", losses.SAMPLING_METHODS)
def test_sampling_follows_temperature_and_disallow_correct(method):
    logits = np.log(np.array([[[0.7, 0.2, 0.1]] * 4], np.float32))  # [1, 4, 3]
    draws = np.concatenate([losses.sample_replacements(logits, [s, 0], method=method).numpy().ravel()
                            for s in range(500)])
    np.testing.assert_allclose(np.bincount(draws, minlength=3) / draws.size, [0.7, 0.2, 0.1], atol=0.03)
    cold = losses.sample_replacements(logits, [1, 0], temperature=1e-4, method=method).numpy()
    assert (cold == 0).all()
    forbidden = np.zeros((1, 4), np.int32)  # the "original" is token 0
    for seed in range(50):
        assert (losses.sample_replacements(logits, [seed, 1], disallow_ids=forbidden, method=method).numpy() != 0).all()


@pytest.mark.parametrize("method", losses.SAMPLING_METHODS)
def test_sampling_is_float32_and_passes_no_gradient(method):
    logits = tf.Variable(tf.random.normal([2, 3, 7], dtype=tf.float32))
    with tf.GradientTape() as tape:
        half = tf.cast(logits, tf.bfloat16)
        sampled = losses.sample_replacements(half, [0, 0], method=method)
        fake_loss = tf.reduce_sum(tf.cast(sampled, tf.float32))
    assert sampled.dtype == tf.int32
    assert tape.gradient(fake_loss, logits) is None


def test_inverse_cdf_draws_every_id_at_its_probability_across_blocks():
    """A vocabulary of 1,000 (not a multiple of the 128-id blocks) with a distribution spread
    over several blocks and the padded last one: each id's share of 400,000 draws within four
    standard errors of its probability, and ids of probability 0 (in and between blocks, at the
    ends) never drawn."""
    rng = np.random.default_rng(0)
    weights = rng.gamma(0.3, size=1000).astype(np.float32)
    zero = np.array([0, 127, 128, 500, 998, 999])
    weights[zero] = 0.0
    probabilities = weights / weights.sum()
    rows = tf.constant(np.tile(probabilities, (4000, 1)))
    draws = np.concatenate([losses.inverse_cdf_samples(rows, [seed, 7]).numpy() for seed in range(100)])
    counts = np.bincount(draws, minlength=1000)
    assert counts[zero].sum() == 0
    standard_error = np.sqrt(probabilities * (1 - probabilities) / draws.size)
    assert np.all(np.abs(counts / draws.size - probabilities) <= 4 * standard_error + 1e-6)


def test_inverse_cdf_keeps_non_finite_rows_in_range():
    rows = tf.constant([[np.nan] * 300, [np.inf] + [0.0] * 299, [1.0] * 300], tf.float32)
    ids = losses.inverse_cdf_samples(rows, [0, 0]).numpy()
    assert ((ids >= 0) & (ids < 300)).all()


def test_masked_lm_loss_ignores_unused_slots():
    logits = np.zeros((2, 2, 40), np.float32)
    logits[1, 1, 0] = 100.0  # unused slot with a wild value: must not matter
    total, count = losses.masked_lm_loss(logits, ORIGINAL, WEIGHTS)
    assert float(count) == 3.0
    np.testing.assert_allclose(float(total) / float(count), np.log(40), rtol=1e-6)


def test_cross_entropy_equals_tensorflows_in_value_and_gradient():
    """The written-out cross-entropy against TensorFlow's fused kernel: [batch, slots, vocabulary]
    logits at a trained model's scale and with rows far from uniform (a label 110 below the max,
    where its probability underflows float32), values and gradients to float32 rounding."""
    rng = np.random.default_rng(0)
    logits = rng.normal(0.0, 4.0, (3, 5, 1000)).astype(np.float32)
    labels = rng.integers(0, 1000, (3, 5)).astype(np.int32)
    logits[0, 0, 7] = 120.0
    labels[0, 0] = 8
    logits[0, 0, 8] = 10.0
    upstream = rng.normal(size=(3, 5)).astype(np.float32)

    def value_and_gradient(function):
        x = tf.constant(logits)
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = function(x)
        return loss.numpy(), tape.gradient(loss, x, output_gradients=tf.constant(upstream)).numpy()

    ours = value_and_gradient(lambda x: losses.softmax_cross_entropy(x, tf.constant(labels)))
    expected = value_and_gradient(lambda x: tf.nn.sparse_softmax_cross_entropy_with_logits(labels, x))
    assert ours[0][0, 0] == np.float32(110.0)
    np.testing.assert_allclose(ours[0], expected[0], rtol=1e-6, atol=1e-5)
    np.testing.assert_allclose(ours[1], expected[1], rtol=1e-5, atol=1e-7)


def test_rtd_loss_is_over_non_padding_tokens_only():
    padding = (MASKED_IDS != 0).astype(np.int32)
    labels = np.zeros_like(MASKED_IDS)
    logits = np.where(padding == 1, 0.0, 50.0).astype(np.float32)
    total, count = losses.replaced_token_detection_loss(logits, labels, padding)
    assert float(count) == padding.sum() == 9
    np.testing.assert_allclose(float(total) / float(count), np.log(2), rtol=1e-6)


def test_total_loss_weights():
    assert float(losses.electra_loss(2.0, 0.5)) == 2.0 + 50.0 * 0.5
    assert float(losses.electra_loss(2.0, 0.5, gen_weight=0.0, disc_weight=1.0)) == 0.5
