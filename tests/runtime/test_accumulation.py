"""Gradient accumulation: K micro-batches make the update of one batch of K times their size."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from electra_tf.pretraining.config import PretrainingConfig
from electra_tf.pretraining.pretrainer import ElectraPretrainer
from electra_tf.pretraining.synthetic import masked_batch
from electra_tf.runtime.accumulation import accumulate_gradients, pad_batch
from electra_tf.pretraining.pretrainer import pretraining_optimizer
from electra_tf.runtime.optimizer import LayerwiseDecay, create_finetuning_optimizer


def exact_config(objective="electra"):
    # No dropout, and a temperature so low that sampling is the generator's argmax: the update
    # then depends on the batch alone, not on how it is split into micro-batches.
    return PretrainingConfig.load("electra_tiny", {
        "vocab_size": 60, "num_layers": 1, "hidden_size": 32, "embedding_size": 32, "num_heads": 2,
        "intermediate_size": 64, "max_seq_length": 24, "max_position_embeddings": 24, "dropout": 0.0,
        "temperature": 1e-7, "objective": objective, "num_train_steps": 10, "num_warmup_steps": 1})


def train(config, batches, steps, xla=False):
    keras.utils.set_random_seed(0)
    pretrainer = ElectraPretrainer.from_pretraining_config(config)
    pretrainer.compile(optimizer=pretraining_optimizer(config), jit_compile=xla,
                       gradient_accumulation_steps=config.run.gradient_accumulation_steps)
    logs = [pretrainer.train_on_batch(batch, return_dict=True) for batch in batches[:steps]]
    return [v.numpy() for v in pretrainer.trainable_variables], logs


# The masked-LM baseline under -m slow: its loss is the generator's, which the electra case sums too.
@pytest.mark.parametrize("objective", ["electra", pytest.param("mlm", marks=pytest.mark.slow)])
def test_four_micro_batches_of_8_update_as_one_batch_of_32(objective):
    config = exact_config(objective)
    batches = [masked_batch(config, 32, seed=seed) for seed in range(3)]
    # The micro-batches' masked slots and tokens differ in number, so averaging four
    # micro-batch means would not give the batch's mean: the counts must be the whole batch's.
    slots = batches[0]["mask_weights"].reshape(4, 8, -1).sum(axis=(1, 2))
    tokens = batches[0]["padding_mask"].reshape(4, 8, -1).sum(axis=(1, 2))
    assert len(set(slots)) > 1 and len(set(tokens)) > 1
    one_batch, one_logs = train(config, batches, 3)
    accumulated, accumulated_logs = train(config.replace(gradient_accumulation_steps=4), batches, 3)
    for a, b in zip(one_batch, accumulated):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)
    # Metrics are the whole batch's too (the same AUC, accuracy, losses).
    for key, value in one_logs[-1].items():
        assert accumulated_logs[-1][key] == pytest.approx(value, rel=1e-4, abs=1e-5), key
    assert one_logs[0]["loss"] != one_logs[-1]["loss"]  # it trained


def test_accumulation_under_xla_equals_without():
    config = exact_config().replace(gradient_accumulation_steps=2)
    batches = [masked_batch(config, 8, seed=seed) for seed in range(2)]
    eager, _ = train(config, batches, 2)
    compiled, _ = train(config, batches, 2, xla=True)
    for a, b in zip(eager, compiled):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_two_replicas_with_accumulation_update_as_one_device(two_replicas):
    config = exact_config()
    batches = [masked_batch(config, 16, seed=seed) for seed in range(2)]
    single, _ = train(config, batches, 2)
    with two_replicas.scope():
        keras.utils.set_random_seed(0)
        pretrainer = ElectraPretrainer.from_pretraining_config(config)
        pretrainer.compile(optimizer=pretraining_optimizer(config), gradient_accumulation_steps=2)
    pretrainer.fit(tf.data.Dataset.from_tensor_slices({k: np.stack([b[k] for b in batches]) for k in batches[0]}),
                   verbose=0)
    for a, b in zip(single, pretrainer.trainable_variables):
        np.testing.assert_allclose(a, b.numpy(), rtol=2e-5, atol=2e-6)


def test_finetuning_accumulates_a_last_short_batch_exactly():
    from electra_tf.finetuning.text.models import ElectraClassifier
    from electra_tf.models.embeddings import ElectraEmbeddings
    from electra_tf.models.encoders import Discriminator

    config = exact_config()
    batch = masked_batch(config, 11, seed=4)  # 11 examples: micro-batches of 3, the last padded
    inputs = {key: batch[key] for key in ("token_ids", "segment_ids", "padding_mask")}
    labels = np.arange(11) % 3

    def fit(steps):
        keras.utils.set_random_seed(0)
        backbone = Discriminator.from_model_config(config.model, ElectraEmbeddings.from_model_config(config.model))
        classifier = ElectraClassifier(backbone, num_classes=3, dropout=0.0)
        classifier.compile(optimizer=create_finetuning_optimizer(1e-3, 10, LayerwiseDecay(0.8, config.model.num_layers)),
                           gradient_accumulation_steps=steps)
        logs = classifier.fit(inputs, labels, batch_size=11, epochs=2, verbose=0).history
        return [v.numpy() for v in classifier.trainable_variables], logs

    one, one_logs = fit(1)
    accumulated, accumulated_logs = fit(4)
    for a, b in zip(one, accumulated):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)
    assert accumulated_logs["loss"] == pytest.approx(one_logs["loss"], rel=1e-5)
    assert accumulated_logs["accuracy"] == one_logs["accuracy"]


def test_pad_batch_pads_to_equal_micro_batches_with_zero_weight():
    batch = {"x": tf.reshape(tf.range(10), [5, 2]), "w": None}
    padded, real = pad_batch(batch, 4)
    assert padded["x"].shape == (8, 2) and padded["w"] is None
    assert real.numpy().tolist() == [1, 1, 1, 1, 1, 0, 0, 0]
    same, real = pad_batch({"x": tf.zeros([8, 2])}, 4)
    assert same["x"].shape == (8, 2) and float(tf.reduce_sum(real)) == 8


def test_accumulate_gradients_sums_gradients_and_concatenates_outputs():
    weight = tf.Variable([2.0])
    unused = tf.Variable([1.0])
    batch = tf.constant([[1.0], [2.0], [3.0], [4.0]])

    @tf.function
    def step():
        def micro(x, index):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(weight * x)
            return tape.gradient(loss, [weight, unused]), 2.0 * x, {"n": tf.cast(tf.shape(x)[0], tf.float32)}
        return accumulate_gradients(micro, batch, 2, [weight, unused])

    gradients, per_example, totals = step()
    assert gradients[0].numpy().tolist() == [10.0] and gradients[1] is None
    assert per_example.numpy().ravel().tolist() == [2.0, 4.0, 6.0, 8.0]
    assert float(totals["n"]) == 4
