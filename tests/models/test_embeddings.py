"""The embedding layer both networks share: shapes, the tied word table, LayerNorm's epsilon, and
the sinusoidal start of the position table."""

import numpy as np

from electra_tf.models.config import ModelConfig
from electra_tf.models.embeddings import ElectraEmbeddings, SinusoidalInitializer


def test_word_position_and_type_tables_sum_and_normalise():
    embeddings = ElectraEmbeddings.from_model_config(ModelConfig(vocab_size=20, embedding_size=8,
                                                                 max_position_embeddings=16))
    out = np.asarray(embeddings(np.array([[2, 5, 7]]), np.array([[0, 0, 1]]), training=False))
    assert out.shape == (1, 3, 8)
    np.testing.assert_allclose(out.mean(-1), 0, atol=1e-5)  # LayerNorm (gamma 1, beta 0 at the start)
    assert {w.path.split("/")[1] for w in embeddings.weights} >= {"word_embeddings", "position_embeddings",
                                                                   "token_type_embeddings"}


def test_the_sinusoidal_position_table_starts_nearby_rows_alike_at_the_same_scale():
    embeddings = ElectraEmbeddings.from_model_config(ModelConfig(vocab_size=20, embedding_size=8,
                                                                 max_position_embeddings=64,
                                                                 position_embedding_init="sinusoidal"))
    embeddings.build()  # variables made (the encoders build it when they take it)
    table = next(np.asarray(w) for w in embeddings.weights if "position" in w.path)
    np.testing.assert_allclose(table, np.asarray(SinusoidalInitializer(0.02)((64, 8))))
    assert abs(table.std() - 0.02) < 1e-6
