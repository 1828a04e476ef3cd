"""The one table of tensor names: every variable of both networks has its row, names are unique in
every format, and values convert both ways."""

import numpy as np
import pytest

from electra_tf.models.config import ModelConfig
from electra_tf.models.encoders import build_discriminator, model_weights
from electra_tf.models.weight_names import weight_table
from electra_tf.pretraining.config import PretrainingConfig
from electra_tf.pretraining.pretrainer import ElectraPretrainer

CONFIG = ModelConfig(vocab_size=12, embedding_size=8, hidden_size=16, num_layers=2, num_heads=2, intermediate_size=32)


def test_every_variable_of_both_networks_has_one_row_in_every_format():
    config = PretrainingConfig().replace(**CONFIG.to_dict(), max_seq_length=16)
    pretrainer = ElectraPretrainer.from_pretraining_config(config)
    rows = weight_table(config.model, config.generator_model)
    assert {row.ours for row in rows} == {v.path for v in model_weights(pretrainer)}
    for key in (lambda row: row.ours, lambda row: (row.model, row.huggingface), lambda row: row.google):
        values = [key(row) for row in rows]  # HuggingFace's names are per folder (discriminator, generator)
        assert len(values) == len(set(values))
    encoder = weight_table(CONFIG, rtd_head=False)
    discriminator = {v.path for v in model_weights(build_discriminator(CONFIG))}
    assert {row.ours for row in encoder} == {p for p in discriminator if "discriminator_predictions" not in p}
    assert all(row.keras_hub for row in encoder)  # keras-hub's backbone holds the whole encoder


def test_values_convert_to_each_format_and_back():
    discriminator = build_discriminator(CONFIG)
    variables = {v.path: v for v in discriminator.variables}
    for row in weight_table(CONFIG):
        value = np.asarray(variables[row.ours].numpy())
        for target in ("huggingface", "google"):
            np.testing.assert_array_equal(row.to_ours(row.from_ours(value, target), value.shape, target), value)
    query = next(row for row in weight_table(CONFIG) if row.ours.endswith("query/kernel"))
    assert query.from_ours(np.zeros((16, 2, 8)), "huggingface").shape == (16, 16)  # heads as a matrix, transposed
    with pytest.raises(ValueError):
        query.to_ours(np.zeros((15, 16)), (16, 2, 8), "huggingface")
