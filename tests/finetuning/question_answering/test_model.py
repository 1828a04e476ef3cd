"""ElectraQuestionAnswerer: both heads learn a span task, answers stay in the context, and the
model round-trips through .keras."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from electra_tf.pretraining.config import PretrainingConfig
from electra_tf.finetuning.question_answering.model import ElectraQuestionAnswerer
from electra_tf.models.encoders import build_discriminator

LENGTH, QUESTION, MARKER = 16, 3, 5  # [CLS] q q [SEP] context... ; the answer follows the marker token


def toy_windows(count, seed=0):
    """The answer is the two tokens after the marker: learnable only by reading the context."""
    rng = np.random.default_rng(seed)
    token_ids = rng.integers(6, 20, size=(count, LENGTH)).astype("int32")
    token_ids[:, 0], token_ids[:, QUESTION] = 2, 3
    token_ids[:, -1] = 3
    starts = rng.integers(QUESTION + 2, LENGTH - 3, size=count)
    token_ids[np.arange(count), starts - 1] = MARKER
    segment_ids = np.zeros((count, LENGTH), "int32")
    segment_ids[:, QUESTION + 1:] = 1
    inputs = {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": np.ones((count, LENGTH), "int32")}
    labels = {"start_positions": starts.astype("int32"), "end_positions": (starts + 1).astype("int32"),
              "is_impossible": np.zeros(count, "int32")}
    return inputs, labels


def small_model(head):
    config = PretrainingConfig.load("electra_tiny").replace(
        vocab_size=20, num_layers=2, hidden_size=32, num_heads=2, intermediate_size=64, embedding_size=32,
        max_position_embeddings=LENGTH, max_seq_length=LENGTH)
    return ElectraQuestionAnswerer(build_discriminator(config.model), head=head, beam_size=4)


@pytest.mark.parametrize("head", ["electra", "plain"])
def test_both_heads_learn_to_find_the_span(head):
    keras.utils.set_random_seed(0)
    model = small_model(head)
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    inputs, labels = toy_windows(512)
    data = tf.data.Dataset.from_tensor_slices(({**inputs, "start_positions": labels["start_positions"]}, labels))
    model.fit(data.shuffle(512, seed=0).batch(32), epochs=16, verbose=0)  # the plain head leaves its plateau after ~12
    test_inputs, test_labels = toy_windows(100, seed=1)
    outputs = model.predict(test_inputs, verbose=0)
    best_start = outputs["start_top_index"][:, 0]
    best_end = outputs["end_top_index"][:, 0, 0]
    assert np.mean(best_start == test_labels["start_positions"]) > 0.9
    assert np.mean(best_end == test_labels["end_positions"]) > 0.8
    # Every candidate is in the context, its [SEP] or [CLS]: never in the question.
    for index in (outputs["start_top_index"], outputs["end_top_index"]):
        assert not np.isin(index, np.arange(1, QUESTION + 1)).any()
    assert outputs["answerable_logit"].shape == (100,)


def test_keras_file_round_trip(tmp_path):
    model = small_model("electra")
    inputs, _ = toy_windows(4)
    expected = model.predict(inputs, verbose=0)
    model.save(tmp_path / "qa.keras")
    restored = keras.saving.load_model(tmp_path / "qa.keras")
    assert restored.get_config()["head"] == "electra" and restored.beam_size == 4
    got = restored.predict(inputs, verbose=0)
    for key in expected:
        np.testing.assert_allclose(got[key], expected[key], atol=1e-5)
