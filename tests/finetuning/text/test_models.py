"""Fine-tuning models: they learn, they round-trip through .keras, their optimizer sees the
right layers, and they train under two replicas."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from electra_tf.models.config import ModelConfig
from electra_tf.finetuning.text.models import ElectraClassifier, ElectraTokenClassifier
from electra_tf.models.encoders import build_discriminator
from electra_tf.models.preprocessing import ElectraTextPreprocessor, ElectraWordPreprocessor
from electra_tf.runtime.optimizer import LayerwiseDecay, create_finetuning_optimizer, layerwise_lr_multiplier

WORDS = ["red", "blue", "green", "cat", "dog", "fish", "runs", "sits", "jumps", "the", "a", "big"]
VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
COLOURS = {"red", "blue", "green"}


def small_config(**overrides):
    values = dict(vocab_size=len(VOCABULARY), num_layers=2, hidden_size=32, num_heads=2,
                  intermediate_size=64, embedding_size=32, max_position_embeddings=16)
    return ModelConfig(**{**values, **overrides})


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
    classifier.compile(optimizer=create_finetuning_optimizer(3e-3, steps, LayerwiseDecay(0.8, config.num_layers)))
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
    tagger.compile(optimizer=create_finetuning_optimizer(3e-3, 12 * 6, LayerwiseDecay(0.8, config.num_layers)))
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
    model.compile(optimizer=create_finetuning_optimizer(1e-3, 10, LayerwiseDecay(0.8, config.num_layers)))
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
        optimizer = create_finetuning_optimizer(1e-3, 10, LayerwiseDecay(0.8, config.num_layers))
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
        classifier.compile(optimizer=create_finetuning_optimizer(1e-3, 4, LayerwiseDecay(0.8, config.num_layers)))
    texts, labels = keyword_task(64)
    history = classifier.fit(tf.data.Dataset.from_tensor_slices((texts, labels)).batch(16), epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0]) and int(classifier.optimizer.iterations.numpy()) == 4


def _as_list(values):
    return list(values)


TEXT_FORMS = {
    "list": _as_list,
    "numpy": lambda values: np.array(values),
    "tensor": lambda values: tf.constant(values),
    "pair tuple": lambda values: (list(values), list(reversed(values))),
    "dict": lambda values: {"text": np.array(values), "text_pair": np.array(values)},
}
LABEL_FORMS = {
    "int list": lambda labels, names: labels,
    "int numpy": lambda labels, names: np.array(labels),
    "string list": lambda labels, names: [names[i] for i in labels],
    "string numpy": lambda labels, names: np.array([names[i] for i in labels]),
    "string tensor": lambda labels, names: tf.constant([names[i] for i in labels]),
}


def test_text_in_every_form_fits_evaluates_and_predicts():
    """Each text form once, each label form once (paired off), on one model: the model only
    ever sees token ids, so its train and predict functions are traced once for all forms."""
    names = ["plain", "colour"]
    config = small_config(num_layers=1)
    classifier = ElectraClassifier(build_discriminator(config), num_classes=2, label_names=names,
                                   preprocessor=ElectraTextPreprocessor(VOCABULARY, 16))
    classifier.compile(optimizer="adam")
    texts, labels = keyword_task(12)
    history = classifier.fit(texts, labels, batch_size=4, validation_data=(texts[:4], labels[:4]), verbose=0)
    assert "val_accuracy" in history.history
    for text_form, label_form in zip(sorted(TEXT_FORMS), sorted(LABEL_FORMS)):
        make, given = TEXT_FORMS[text_form], LABEL_FORMS[label_form](labels, names)
        assert np.isfinite(classifier.fit(make(texts), given, batch_size=6, verbose=0).history["loss"][0]), text_form
        loss, accuracy = classifier.evaluate(make(texts), given, verbose=0)
        assert np.isfinite(loss) and 0 <= accuracy <= 1, text_form
        predicted = classifier.predict_labels(make(texts))  # predict underneath
        assert predicted["label"].shape == (12,) and set(predicted["label"]) <= set(names), text_form
        np.testing.assert_allclose(predicted["probabilities"].sum(-1), 1, rtol=1e-5)
        assert predicted["label_names"] == names


def test_datasets_of_strings_with_string_labels_and_unknown_labels():
    names = ["plain", "colour"]
    classifier = ElectraClassifier(build_discriminator(small_config(num_layers=1)), num_classes=2, label_names=names,
                                   preprocessor=ElectraTextPreprocessor(VOCABULARY, 16))
    classifier.compile(optimizer="adam")
    texts, labels = keyword_task(8)
    words = [names[i] for i in labels]
    dataset = tf.data.Dataset.from_tensor_slices((texts, words)).batch(4)
    assert np.isfinite(classifier.fit(dataset, verbose=0).history["loss"][0])
    assert np.isfinite(classifier.evaluate(dataset, verbose=0)[0])
    assert classifier.predict(tf.data.Dataset.from_tensor_slices(texts).batch(4), verbose=0).shape == (8, 2)
    with pytest.raises(ValueError, match="label 'purple' is not one of the model's label_names"):
        classifier.fit(texts, words[:-1] + ["purple"], verbose=0)
    with pytest.raises(tf.errors.InvalidArgumentError, match="not among the model.*label_names"):
        classifier.fit(tf.data.Dataset.from_tensor_slices((texts, words[:-1] + ["purple"])).batch(8), verbose=0)
    unnamed = ElectraClassifier(build_discriminator(small_config(num_layers=1)), num_classes=2,
                                preprocessor=ElectraTextPreprocessor(VOCABULARY, 16))
    unnamed.compile(optimizer="adam")
    with pytest.raises(ValueError, match="no label_names"):
        unnamed.fit(texts, words, verbose=0)
    assert unnamed.predict_labels(texts[:2])["label_names"] == ["0", "1"]
    with pytest.raises(ValueError, match="3 label_names for 2 classes"):
        ElectraClassifier(build_discriminator(small_config(num_layers=1)), num_classes=2, label_names=["a", "b", "c"])
    bare = ElectraClassifier(build_discriminator(small_config(num_layers=1)), num_classes=2)
    with pytest.raises(ValueError, match="no preprocessor"):
        bare.predict(texts)


def test_task_attributes_survive_saving_and_scores_come_back_on_their_scale(tmp_path):
    config = small_config(num_layers=1)
    regressor = ElectraClassifier(build_discriminator(config), num_classes=1, score_range=(0, 5), text_pair=True,
                                  preprocessor=ElectraTextPreprocessor(VOCABULARY, 16))
    regressor.compile(optimizer="adam")
    regressor.fit((["red cat", "a dog"], ["a cat", "big dog"]), [0.2, 0.9], verbose=0)
    regressor.save(tmp_path / "r.keras")
    restored = keras.saving.load_model(tmp_path / "r.keras")
    assert restored.score_range == (0.0, 5.0) and restored.text_pair is True
    pairs = (["red cat"], ["a cat"])
    raw = restored.predict(pairs, verbose=0)[0, 0]
    assert restored.predict_labels(pairs)["score"][0] == pytest.approx(raw * 5)
    classifier = ElectraClassifier(build_discriminator(config), num_classes=2, label_names=["no", "yes"],
                                   preprocessor=ElectraTextPreprocessor(VOCABULARY, 16))
    classifier.save(tmp_path / "c.keras")
    assert keras.saving.load_model(tmp_path / "c.keras").label_names == ["no", "yes"]


def test_tagger_takes_word_lists_and_tag_names_in_every_form():
    names = ["COLOUR", "ANIMAL", "OTHER"]
    tag = {w: (0 if w in COLOURS else 1 if w in ("cat", "dog", "fish") else 2) for w in WORDS}
    tagger = ElectraTokenClassifier(build_discriminator(small_config(num_layers=1)), num_classes=3, label_names=names,
                                    preprocessor=ElectraWordPreprocessor(VOCABULARY, 8))
    tagger.compile(optimizer="adam")
    words = [t.split() for t in sentences(8)]
    tags = [[names[tag[w]] for w in sentence] for sentence in words]
    ids = [[tag[w] for w in sentence] for sentence in words]
    for x, y in ((words, tags), (tf.ragged.constant(words), tf.ragged.constant(ids))):
        assert np.isfinite(tagger.fit(x, y, batch_size=4, verbose=0).history["loss"][0])
        assert np.isfinite(tagger.evaluate(x, y, verbose=0)[0])
    dataset = tf.data.Dataset.from_tensor_slices((tf.ragged.constant(words), tf.ragged.constant(tags))).ragged_batch(4)
    assert np.isfinite(tagger.fit(dataset, verbose=0).history["loss"][0])
    assert tagger.predict(words, verbose=0).shape == (8, 8, 3)
    long_sentence = ["the", "big", "red", "cat", "sits", "the", "dog", "runs", "a", "fish"]
    predicted = tagger.predict_labels([long_sentence, ["cat"]])
    assert [len(t) for t in predicted["tags"]] == [10, 1]
    assert predicted["tags"][0][:6] != [""] * 6 and predicted["tags"][0][6:] == [""] * 4  # 6 words fit in 8 pieces
    assert predicted["tag_probabilities"][0].shape == (10, 3) and predicted["tag_names"] == names
    np.testing.assert_allclose(predicted["tag_probabilities"][1].sum(-1), 1, rtol=1e-5)
