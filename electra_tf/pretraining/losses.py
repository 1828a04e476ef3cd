"""The ELECTRA objective, equation by equation (Clark et al., 2020, Sec. 2).

Given masked positions m and the masked input x^masked (built by `masking.mask_tokens`):

  x^_i ~ p_G(x_i | x^masked)  for i in m           -> `sample_replacements`
  x^corrupt = REPLACE(x, m, x^)                      -> `corrupt_tokens`
  y_t = 1[x^corrupt_t != x_t]                        -> `replaced_token_labels`
  L_MLM  = E[ sum_{i in m} -log p_G(x_i | x^masked) ]  -> `masked_lm_loss`
  L_Disc = E[ sum_t -y_t log D(x^corrupt, t) - (1 - y_t) log(1 - D(x^corrupt, t)) ]
                                                     -> `replaced_token_detection_loss`
  min  L_MLM + lambda * L_Disc,  lambda = 50         -> `electra_loss`

Losses are returned as (sum, count) pairs so the caller can divide by the count over the
*global* batch: the pretrainer does that across replicas, which makes the update the same for
any number of replicas. As in the official code, L_MLM averages over masked slots and L_Disc
over all non-padding tokens ([CLS] and [SEP] included); `masked_slot_count` and `token_count`
are those denominators, computed from the batch alone, so the pretrainer sums them over
replicas before the forward pass.
"""

from __future__ import annotations

import tensorflow as tf

from electra_tf.pretraining.masking import scatter_at_positions

# Added to the logit of the original token when `disallow_correct` is on (official value).
DISALLOW_PENALTY = 1000.0
# How `sample_replacements` draws: TensorFlow's categorical sampler, or `inverse_cdf_samples`.
SAMPLING_METHODS = ("categorical", "inverse_cdf")


def sample_replacements(mlm_logits, seed, temperature=1.0, disallow_ids=None, method="categorical"):
    """x^_i ~ softmax(logits / temperature), without gradient.

    Sampling is in float32 whatever the compute dtype, and is a stop-gradient: no gradient of
    the discriminator's loss reaches the generator through its samples (paper, Sec. 2). The
    official code samples by the Gumbel-max trick (a uniform number per vocabulary entry).
    Both methods here draw the same distribution exactly, from one uniform number per sample:
    - "categorical": TensorFlow's categorical sampler, which XLA compiles as Gumbel-max (one
      fused kernel on a GPU): the method for a step XLA compiles;
    - "inverse_cdf": `inverse_cdf_samples` of the softmax, for a step run by TensorFlow's
      kernels: on a CPU it takes about half the time of the categorical kernel, which builds
      each row's vocabulary-wide cumulative sum in a sequential loop.
    The same seed gives other samples under each method.

    Args:
      mlm_logits: [B, N, V] generator logits at the masked slots.
      seed: shape-[2] int seed (stateless: the same seed, the same samples).
      temperature: sampling temperature (official default 1.0).
      disallow_ids: optional [B, N] ids that must not be sampled (`disallow_correct`).
      method: one of `SAMPLING_METHODS`.
    Returns:
      [B, N] int32 sampled ids.
    """
    if method not in SAMPLING_METHODS:
        raise ValueError(f"sampling method must be one of {SAMPLING_METHODS}, got {method!r}.")
    logits = tf.stop_gradient(tf.cast(mlm_logits, tf.float32)) / temperature
    if disallow_ids is not None:
        logits -= DISALLOW_PENALTY * tf.one_hot(disallow_ids, tf.shape(logits)[-1])
    if method == "inverse_cdf":
        return inverse_cdf_samples(tf.nn.softmax(logits), seed)
    shape = tf.shape(logits)
    samples = tf.random.stateless_categorical(tf.reshape(logits, [-1, shape[-1]]), 1, tf.cast(seed, tf.int32),
                                              dtype=tf.int32)
    # Non-finite logits (a diverging run) sample the id one past the vocabulary: kept in range,
    # so the step ends with its non-finite loss, which stops the run, instead of failing a lookup.
    return tf.minimum(tf.reshape(samples, shape[:-1]), shape[-1] - 1)


def inverse_cdf_samples(probabilities, seed, block_size: int = 128):
    """[..., V] probabilities -> [...] int32 ids, id j drawn with probability p_j / sum(p).

    Inverse transform sampling: one uniform number per row, scaled by the row's sum, located in
    the cumulative sums. In two levels, so that no vocabulary-wide cumulative sum (a sequential
    scan of every row) is formed: one pass sums blocks of `block_size` ids, a search finds the
    block whose cumulative sum first exceeds the number, then the id inside that block. An id
    of probability 0 is never drawn: the number stays below each level's total, so the search
    ends where the cumulative sum grows. Rows with non-finite values (a diverging run) draw ids
    that are in range, so the step ends with its non-finite loss instead of failing a lookup.

    >>> draws = inverse_cdf_samples(tf.constant([[0.0, 0.75, 0.25, 0.0, 0.0]] * 20000), [1, 2], block_size=2)
    >>> [round(float(share), 2) for share in tf.math.bincount(draws, minlength=5) / 20000]
    [0.0, 0.75, 0.25, 0.0, 0.0]
    """
    vocabulary = probabilities.shape[-1]
    blocks = -(-vocabulary // block_size)
    rows = tf.reshape(tf.cast(probabilities, tf.float32), [-1, vocabulary])
    by_block = tf.reshape(tf.pad(rows, [[0, 0], [0, blocks * block_size - vocabulary]]), [-1, blocks, block_size])
    block_ends = tf.math.cumsum(tf.reduce_sum(by_block, axis=-1), axis=-1)  # [rows, blocks]
    total = block_ends[:, -1:]
    target = tf.minimum(tf.random.stateless_uniform(tf.shape(total), seed) * total, tf.math.nextafter(total, 0.0))
    # The searches' clamps only act on non-finite rows.
    block = tf.minimum(tf.searchsorted(block_ends, target, side="right"), blocks - 1)  # [rows, 1]
    before = tf.where(block > 0, tf.gather(block_ends, tf.maximum(block - 1, 0), batch_dims=1), 0.0)
    inside = tf.math.cumsum(tf.gather(by_block, block[:, 0], batch_dims=1), axis=-1)  # [rows, block_size]
    rest = tf.minimum(target - before, tf.math.nextafter(inside[:, -1:], 0.0))
    offset = tf.minimum(tf.searchsorted(inside, rest, side="right"), block_size - 1)
    ids = tf.minimum(block * block_size + offset, vocabulary - 1)
    return tf.reshape(ids, tf.shape(probabilities)[:-1])


def corrupt_tokens(masked_token_ids, mask_positions, sampled_ids, mask_weights):
    """x^corrupt: the sample is written into *every* selected position.

    The official code first restores the original ids, then scatters the samples into all
    selected positions, including the 15% the generator saw unmasked. Since every selected
    position is overwritten, scattering into the masked input gives the same tensor.
    """
    return scatter_at_positions(masked_token_ids, mask_positions, sampled_ids, mask_weights)


def replaced_token_labels(mask_ids, sampled_ids, mask_positions, mask_weights, sequence):
    """y_t = 1 where the corrupted token differs from the original, else 0.

    A sample that equals the original token counts as original (label 0). Only selected
    positions can be replaced, so labels are scattered from the [B, N] slots into a [B, L]
    tensor shaped like `sequence`.
    """
    replaced = tf.cast(tf.not_equal(sampled_ids, mask_ids), tf.int32) * tf.cast(mask_weights, tf.int32)
    zeros = tf.zeros_like(tf.cast(sequence, tf.int32))
    return scatter_at_positions(zeros, mask_positions, replaced, mask_weights)


def masked_slot_count(mask_weights):
    """L_MLM's denominator: the masked slots in use."""
    return tf.reduce_sum(tf.cast(mask_weights, tf.float32))


def token_count(padding_mask):
    """L_Disc's denominator: the non-padding tokens."""
    return tf.reduce_sum(tf.cast(padding_mask, tf.float32))


def masked_lm_loss(mlm_logits, mask_ids, mask_weights):
    """Cross-entropy of the generator at the masked slots: (sum over used slots, slot count)."""
    per_slot = softmax_cross_entropy(tf.cast(mlm_logits, tf.float32), mask_ids)
    return tf.reduce_sum(per_slot * tf.cast(mask_weights, tf.float32)), masked_slot_count(mask_weights)


def softmax_cross_entropy(logits, labels):
    """-log softmax(logits)[label] over the last axis, with its gradient softmax - one_hot(label):
    the values of `tf.nn.sparse_softmax_cross_entropy_with_logits` (to float32 rounding), built
    on `tf.nn.softmax`, which a CPU runs as one oneDNN kernel several times faster than the
    fused cross-entropy kernel over vocabulary-wide rows.

    The loss is logsumexp - label logit, taken as (max - label logit) - log(p_max): p_max =
    exp(max - logsumexp) is at least 1 / vocabulary, so no probability that could underflow
    enters a logarithm. Labels must be valid ids (the fused kernel's check is not repeated).

    >>> logits = tf.constant([[2.0, 1.0, -1.0], [0.0, 0.0, 300.0]])
    >>> labels = tf.constant([0, 1])
    >>> [round(float(v), 4) for v in softmax_cross_entropy(logits, labels)]
    [0.349, 300.0]
    >>> [round(float(v), 4) for v in tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)]
    [0.349, 300.0]
    """
    @tf.custom_gradient
    def cross_entropy(logits):
        probabilities = tf.nn.softmax(logits)
        label_logits = tf.gather(logits, labels, batch_dims=len(labels.shape))
        loss = (tf.reduce_max(logits, axis=-1) - label_logits) - tf.math.log(tf.reduce_max(probabilities, axis=-1))

        def gradient(upstream):
            # softmax x dy, then dy taken off at each label: the one-hot's part of the gradient
            # without a vocabulary-wide one-hot tensor.
            vocabulary = tf.shape(logits)[-1]
            rows = tf.reshape(probabilities * upstream[..., tf.newaxis], [-1, vocabulary])
            at_labels = tf.stack([tf.range(tf.shape(rows)[0]), tf.reshape(tf.cast(labels, tf.int32), [-1])], axis=1)
            return tf.reshape(tf.tensor_scatter_nd_sub(rows, at_labels, tf.reshape(upstream, [-1])), tf.shape(logits))

        return loss, gradient

    return cross_entropy(logits)


def replaced_token_detection_loss(disc_logits, labels, padding_mask):
    """Sigmoid cross-entropy of the discriminator over non-padding tokens: (sum, count)."""
    per_token = tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.cast(labels, tf.float32), logits=tf.cast(disc_logits, tf.float32))
    return tf.reduce_sum(per_token * tf.cast(padding_mask, tf.float32)), token_count(padding_mask)


def electra_loss(mlm_loss, disc_loss=None, gen_weight=1.0, disc_weight=50.0):
    """L = gen_weight * L_MLM + disc_weight * L_Disc (paper: 1 and lambda = 50).

    `disc_loss=None` is the BERT-style baseline: the MLM term alone.
    """
    if disc_loss is None:
        return gen_weight * mlm_loss
    return gen_weight * mlm_loss + disc_weight * disc_loss
