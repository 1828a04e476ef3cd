import keras
import numpy as np
import pytest
import tensorflow as tf

from electra_tf.pretraining.config import PretrainingConfig
from electra_tf.models.embeddings import ElectraEmbeddings
from electra_tf.models.encoders import Discriminator, Generator
from electra_tf.pretraining.pretrainer import ElectraPretrainer
from electra_tf.pretraining.synthetic import masked_batch


@pytest.fixture
def config():
    return PretrainingConfig.load("electra_tiny", {"vocab_size": 120, "num_layers": 2, "dropout": 0.0})


@pytest.fixture
def pretrainer(config):
    return ElectraPretrainer.from_pretraining_config(config)


def _batch(config, size=3):
    return masked_batch(config, size, seq_length=24, seed=2)


def test_embeddings_are_the_same_variables_in_both_models(pretrainer):
    generator, discriminator = pretrainer.generator, pretrainer.discriminator
    assert generator.embeddings is discriminator.embeddings
    assert generator.head.word_embeddings is discriminator.embeddings.word_embeddings
    shared = {id(v) for v in discriminator.embeddings.weights}
    assert shared <= {id(v) for v in generator.weights}
    ids = [id(v) for v in pretrainer.trainable_variables]
    assert len(ids) == len(set(ids))  # counted (and updated) once


def test_each_model_has_its_own_projection_and_paths(pretrainer, config):
    generator, discriminator = pretrainer.generator, pretrainer.discriminator
    assert generator.embeddings_project.kernel.shape == (config.model.embedding_size, config.generator_model.hidden_size)
    assert discriminator.embeddings_project is None  # tiny: embedding size == hidden size
    paths = [v.path for v in generator.weights if v.path.startswith("generator/")]
    assert "generator/transformer_layer_0/self_attention_layer/query/kernel" in paths
    assert any(v.path.startswith("discriminator/discriminator_predictions/dense_prediction")
               for v in discriminator.weights)


def test_untied_generator_embeddings(config):
    untied = ElectraPretrainer.from_pretraining_config(config.replace(untied_generator_embeddings=True))
    assert untied.generator.embeddings is not untied.discriminator.embeddings
    assert untied.generator.embeddings.embedding_size == config.generator_model.hidden_size


def test_architecture_details(config):
    discriminator = ElectraPretrainer.from_pretraining_config(config).discriminator
    block = discriminator.transformer_layers[0]
    # Post-LayerNorm and exact GELU are the block's only form (transformer.post_ln_block), checked
    # against keras-hub's TransformerEncoder(normalize_first=False, activation="gelu") in
    # test_transformer.py and against transformers' ELECTRA in tests/interop.
    assert block.layer_norm_epsilon == 1e-12
    assert block.attention_layer_norm.epsilon == block.output_layer_norm.epsilon == 1e-12
    assert discriminator.embeddings.layer_norm.epsilon == 1e-12


def test_generator_head_runs_at_masked_positions_only(pretrainer, config):
    batch = _batch(config)
    out = pretrainer.generator(batch)
    assert out["logits"].shape == (3, config.num_masked_predictions, config.model.vocab_size)
    # The logits of slot n are the head applied to the hidden state at mask_positions[n].
    hidden = out["sequence_output"]
    gathered = np.take_along_axis(np.asarray(hidden), batch["mask_positions"][..., None], axis=1)
    head = pretrainer.generator.head
    full = head(hidden, mask_positions=np.tile(np.arange(24, dtype="int32"), (3, 1)))
    expected = np.take_along_axis(np.asarray(full), batch["mask_positions"][..., None], axis=1)
    np.testing.assert_allclose(np.asarray(out["logits"]), expected, rtol=1e-5, atol=1e-5)
    assert gathered.shape[1] == config.num_masked_predictions


def test_discriminator_outputs(pretrainer, config):
    out = pretrainer.discriminator(_batch(config))
    assert out["logits"].shape == (3, 24) and out["logits"].dtype == "float32"
    assert out["sequence_output"].shape == (3, 24, config.model.hidden_size)


@pytest.mark.parametrize("which", ["discriminator", "generator"])
def test_keras_round_trip_of_each_model(pretrainer, config, tmp_path, which):
    model = getattr(pretrainer, which)
    batch = _batch(config)
    path = tmp_path / f"{which}.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert type(loaded) is type(model)
    np.testing.assert_allclose(np.asarray(loaded(batch)["logits"]), np.asarray(model(batch)["logits"]),
                               rtol=1e-5, atol=1e-5)


def test_keras_round_trip_of_the_pretrainer_keeps_sharing(pretrainer, config, tmp_path):
    batch = _batch(config)
    path = tmp_path / "pretrainer.keras"
    pretrainer.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.generator.embeddings is loaded.discriminator.embeddings
    for which in ("generator", "discriminator"):
        np.testing.assert_allclose(np.asarray(getattr(loaded, which)(batch)["logits"]),
                                   np.asarray(getattr(pretrainer, which)(batch)["logits"]),
                                   rtol=1e-5, atol=1e-5)


def test_bad_embeddings_argument_is_explained(config):
    with pytest.raises(TypeError, match="ElectraEmbeddings"):
        Discriminator(keras.layers.Embedding(10, 4), hidden_size=8, num_layers=1, num_heads=1,
                      intermediate_size=8)


def test_docstring_sizes(config):
    small = PretrainingConfig.load("electra_small")
    discriminator = Discriminator.from_model_config(small.model, ElectraEmbeddings.from_model_config(small.model))
    assert 13_000_000 < discriminator.count_params() < 14_500_000  # paper: 14M
    assert isinstance(Generator.from_model_config(config.model, ElectraEmbeddings.from_model_config(config.model)),
                      Generator)


def _std(variable):
    return float(np.std(keras.ops.convert_to_numpy(variable)))


def test_initializers_follow_the_official_code(config):
    # create_initializer(0.02) where the official code passes it; TF1's Glorot-uniform default
    # where it does not (the RTD output layer and embeddings_project).
    wide = config.replace(hidden_size=256, intermediate_size=1024, num_heads=4)  # 128 -> 256 projection
    discriminator = ElectraPretrainer.from_pretraining_config(wide).discriminator
    truncated_std = 0.02 * 0.88  # a normal cut at 2 standard deviations keeps 88% of its spread
    assert _std(discriminator.transformer_layers[0].query_dense.kernel) == \
        pytest.approx(truncated_std, rel=0.1)
    assert _std(discriminator.head.dense.kernel) == pytest.approx(truncated_std, rel=0.1)
    assert _std(discriminator.embeddings.word_embeddings.embeddings) == pytest.approx(truncated_std, rel=0.1)
    assert _std(discriminator.head.dense_prediction.kernel) == pytest.approx(np.sqrt(2 / (256 + 1)), rel=0.25)
    assert _std(discriminator.embeddings_project.kernel) == pytest.approx(np.sqrt(2 / (128 + 256)), rel=0.1)


def test_discriminator_learns_a_task_that_needs_attention_by_position(config):
    """Label t = 1 when token t-1 is among ids 5..19: only attention to the previous position
    can tell. With the RTD output layer at truncated-normal(0.02) instead of the official Glorot
    init, the loss stays at the base rate (about 0.43) for hundreds of steps."""
    keras.utils.set_random_seed(0)
    length = 16
    discriminator = ElectraPretrainer.from_pretraining_config(
        config.replace(max_position_embeddings=length, max_seq_length=length)).discriminator
    optimizer = keras.optimizers.Adam(1e-3)
    rng = np.random.default_rng(0)

    @tf.function
    def train_step(token_ids, labels):
        with tf.GradientTape() as tape:
            logits = discriminator({"token_ids": token_ids, "segment_ids": tf.zeros_like(token_ids),
                                    "padding_mask": tf.ones_like(token_ids)}, training=True)["logits"]
            loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels, logits))
        variables = discriminator.trainable_variables
        optimizer.apply(tape.gradient(loss, variables), variables)
        return loss

    losses = []
    for _ in range(250):
        token_ids = rng.integers(5, config.model.vocab_size, size=(32, length)).astype("int32")
        labels = np.zeros((32, length), "float32")
        labels[:, 1:] = token_ids[:, :-1] < 20
        losses.append(float(train_step(token_ids, labels)))
    assert np.mean(losses[-20:]) < 0.1, losses[::25]
