"""Fine-tuning models: they learn, they round-trip through .keras, their optimizer sees the
right layers, and they train under two replicas."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from electra_tf.config import ElectraConfig
from electra_tf.finetuning.classifiers import ElectraClassifier, ElectraTokenClassifier
from electra_tf.loading import build_discriminator
from electra_tf.models.preprocessing import ElectraTextPreprocessor, ElectraWordPreprocessor
from electra_tf.optimization import create_finetuning_optimizer, layerwise_lr_multiplier

WORDS = ["red", "blue", "green", "cat", "dog", "fish", "runs", "sits", "jumps", "the", "a", "big"]
VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
COLOURS = {"red", "blue", "green"}


def small_config(**overrides):
    values = dict(vocab_size=len(VOCABULARY), num_layers=2, hidden_size=32, num_heads=2,
                  intermediate_size=64, embedding_size=32, max_position_embeddings=16, max_seq_length=16)
    return ElectraConfig.load("electra_tiny").replace(**{**values, **overrides})


def sentences(count, seed=0):
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=rng.integers(3, 8))) for _ in range(count)]


def keyword_task(count, seed=0):
    """Label 1 when the sentence names a colour: learnable only by reading the words."""
    texts = sentences(count, seed)
    return texts, [int(any(w in COLOURS for w in t.split())) for t in texts]


def test_classifier_learns_a_keyword_task():
    keras.utils.set_random_seed(0)
    config = small_config()
    classifier = ElectraClassifier(build_discriminator(config), num_classes=2,
                                   preprocessor=ElectraTextPreprocessor(VOCABULARY, 16))
    texts, labels = keyword_task(512)
    steps = 16 * 8
    classifier.compile(optimizer=create_finetuning_optimizer(3e-3, steps, config.num_layers))
    train = tf.data.Dataset.from_tensor_slices((texts, labels)).shuffle(512, seed=0).batch(32)
    classifier.fit(train, epochs=8, verbose=0)
    test_texts, test_labels = keyword_task(200, seed=1)
    predictions = classifier.predict(test_texts, verbose=0).argmax(-1)
    assert np.mean(predictions == np.array(test_labels)) > 0.9


def test_token_classifier_learns_word_tags_on_first_pieces():
    keras.utils.set_random_seed(0)
    config = small_config()
    tagger = ElectraTokenClassifier(build_discriminator(config), num_classes=3,
                                    preprocessor=ElectraWordPreprocessor(VOCABULARY, 16))
    words = [t.split() for t in sentences(384)]
    tag = {w: (0 if w in COLOURS else 1 if w in ("cat", "dog", "fish") else 2) for w in WORDS}
    tags = [[tag[w] for w in sentence] for sentence in words]
    data = tf.data.Dataset.from_tensor_slices((tf.ragged.constant(words), tf.ragged.constant(tags)))
    tagger.compile(optimizer=create_finetuning_optimizer(3e-3, 12 * 6, config.num_layers))
    history = tagger.fit(data.batch(32), epochs=6, verbose=0)
    assert history.history["accuracy"][-1] > 0.9


def test_regression_head_outputs_one_score():
    config = small_config(num_layers=1)
    regressor = ElectraClassifier(build_discriminator(config), num_classes=1,
                                  preprocessor=ElectraTextPreprocessor(VOCABULARY, 16))
    regressor.compile(optimizer="adam")
    assert isinstance(regressor.loss, keras.losses.MeanSquaredError)
    data = tf.data.Dataset.from_tensor_slices((["red cat", "a dog"], [0.2, 0.9])).batch(2)
    history = regressor.fit(data, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert regressor.predict(["red cat", "a dog", "big fish"], verbose=0).shape == (3, 1)


@pytest.mark.parametrize("model_class,preprocessor_class", [(ElectraClassifier, ElectraTextPreprocessor),
                                                           (ElectraTokenClassifier, ElectraWordPreprocessor)])
def test_keras_file_round_trip(tmp_path, model_class, preprocessor_class):
    config = small_config(num_layers=1)
    model = model_class(build_discriminator(config), num_classes=3,
                        preprocessor=preprocessor_class(VOCABULARY, 16))
    model.compile(optimizer=create_finetuning_optimizer(1e-3, 10, config.num_layers))
    inputs = ElectraTextPreprocessor(VOCABULARY, 16)(["red cat sits", "the big dog"])
    labels = np.zeros((2,) if model_class is ElectraClassifier else (2, 16), "int32")
    model.fit(inputs, labels, epochs=1, verbose=0)
    expected = model(inputs)
    path = tmp_path / "model.keras"
    model.save(path)
    restored = keras.saving.load_model(path)
    assert type(restored) is model_class and type(restored.preprocessor) is preprocessor_class
    assert restored.get_config() == model.get_config()
    np.testing.assert_allclose(restored(inputs), expected, atol=1e-6)
    # The optimizer (with its layer-wise multipliers) comes back too.
    assert restored.optimizer.get_config() == model.optimizer.get_config()
    assert int(restored.optimizer.iterations.numpy()) == 1


def test_layerwise_multipliers_cover_every_trainable_variable(tmp_path):
    config = small_config(num_layers=2)
    classifier = ElectraClassifier(build_discriminator(config), num_classes=2)
    trainable = {v.path for v in classifier.trainable_variables}
    # The replaced-token-detection head is kept but frozen: no fine-tuning loss reaches it.
    assert not any("discriminator_predictions" in p for p in trainable)
    assert any("discriminator_predictions" in v.path for v in classifier.variables)
    classifier.save(tmp_path / "c.keras")
    for model in (classifier, keras.saving.load_model(tmp_path / "c.keras")):
        optimizer = create_finetuning_optimizer(1e-3, 10, config.num_layers, layerwise_lr_decay=0.8)
        optimizer.build(model.trainable_variables)
        by_path = dict(zip((v.path for v in model.trainable_variables), optimizer.lr_multipliers))
        assert by_path["embeddings/word_embeddings/embeddings"] == pytest.approx(0.8 ** 4)
        assert by_path["discriminator/transformer_layer_0/self_attention_layer/query/kernel"] == pytest.approx(0.8 ** 3)
        assert by_path["discriminator/transformer_layer_1/feedforward_output_dense/bias"] == pytest.approx(0.8 ** 2)
        head = [p for p in by_path if "task_specific" in p]
        assert len(head) == 2 and all(by_path[p] == 1.0 for p in head)
        # Every variable is one of: embeddings, a transformer layer, or the head.
        assert set(by_path.values()) == {0.8 ** 4, 0.8 ** 3, 0.8 ** 2, 1.0}
        assert all(by_path[p] == layerwise_lr_multiplier(p, 2, 0.8) for p in by_path)


def test_fine_tuning_under_two_replicas(two_replicas):
    keras.utils.set_random_seed(0)
    config = small_config(num_layers=1)
    with two_replicas.scope():
        classifier = ElectraClassifier(build_discriminator(config), num_classes=2,
                                       preprocessor=ElectraTextPreprocessor(VOCABULARY, 16))
        classifier.compile(optimizer=create_finetuning_optimizer(1e-3, 4, config.num_layers))
    texts, labels = keyword_task(64)
    history = classifier.fit(tf.data.Dataset.from_tensor_slices((texts, labels)).batch(16), epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0]) and int(classifier.optimizer.iterations.numpy()) == 4
