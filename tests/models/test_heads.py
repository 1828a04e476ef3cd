import keras
import numpy as np
import pytest
import tensorflow as tf

from electra_tf.models.embeddings import ElectraEmbeddings
from electra_tf.models.heads import MaskedLMHead, ReplacedTokenDetectionHead


def test_rtd_head_is_dense_gelu_dense_one_logit_per_token():
    head = ReplacedTokenDetectionHead(hidden_size=8)
    x = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")
    logits = head(x)
    assert tuple(logits.shape) == (2, 5)
    hidden = keras.activations.gelu(x @ head.dense.kernel.numpy() + head.dense.bias.numpy(), approximate=False)
    expected = hidden.numpy() @ head.dense_prediction.kernel.numpy() + head.dense_prediction.bias.numpy()
    np.testing.assert_allclose(logits.numpy(), expected[..., 0], atol=1e-5)


def test_masked_lm_head_gathers_masked_positions_and_uses_the_embedding_table():
    embeddings = ElectraEmbeddings(vocab_size=30, embedding_size=6)
    embeddings.build()
    head = MaskedLMHead(embeddings.word_embeddings)
    sequence = np.random.default_rng(1).normal(size=(2, 7, 4)).astype("float32")
    positions = np.array([[1, 5], [0, 6]], "int32")
    logits = head(sequence, positions)
    assert tuple(logits.shape) == (2, 2, 30) and logits.dtype == "float32"
    # Only the rows at the positions matter: changing any other row changes nothing.
    changed = sequence.copy()
    changed[0, 3] += 10.0
    np.testing.assert_allclose(head(changed, positions).numpy(), logits.numpy(), atol=1e-6)
    # The output layer is the word-embedding table itself (tied), plus a bias of its own.
    x = head.layer_norm(tf.nn.gelu(head.dense(tf.gather(sequence, positions, batch_dims=1)), approximate=False))
    table = embeddings.word_embeddings.embeddings.numpy()
    np.testing.assert_allclose(logits.numpy(), x.numpy() @ table.T + head.output_bias.numpy(), atol=1e-4)
    assert not any(v is head.output_bias for v in embeddings.weights)


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_masked_lm_logits_are_float32_under_mixed_precision(policy):
    keras.config.set_dtype_policy(policy)
    embeddings = ElectraEmbeddings(vocab_size=20, embedding_size=4)
    embeddings.build()
    head = MaskedLMHead(embeddings.word_embeddings)
    logits = head(np.ones((1, 3, 4), "float32"), np.array([[0, 2]], "int32"))
    assert logits.dtype == "float32" and np.isfinite(logits.numpy()).all()
