import keras
import numpy as np
import pytest
import tensorflow as tf

from electra_tf.config import ElectraConfig
from electra_tf.optimization import ElectraAdamW, WarmupLinearDecay, create_optimizer, decayed_variable_paths
from electra_tf.pretrainer import ElectraPretrainer


def test_schedule_is_linear_decay_times_warmup():
    schedule = WarmupLinearDecay(2e-4, total_steps=1000, warmup_steps=100)
    for step in (0, 1, 50, 100, 101, 500, 999, 1000, 1500):
        official = 2e-4 * (1 - min(step, 1000) / 1000) * min(1.0, step / 100)
        np.testing.assert_allclose(float(schedule(step)), official, rtol=1e-5, atol=1e-12)


def test_schedule_serializes():
    schedule = WarmupLinearDecay(1e-3, total_steps=10, warmup_steps=2)
    restored = keras.optimizers.schedules.deserialize(keras.optimizers.schedules.serialize(schedule))
    assert isinstance(restored, WarmupLinearDecay)
    assert restored.get_config() == schedule.get_config()
    optimizer = create_optimizer(ElectraConfig.load("electra_tiny"))
    clone = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert isinstance(clone, ElectraAdamW) and clone.clip_global_norm == 1.0


def test_weight_decay_goes_to_exactly_kernels_and_embedding_tables():
    config = ElectraConfig.load("electra_tiny", {"vocab_size": 60, "num_layers": 1})
    pretrainer = ElectraPretrainer.from_electra_config(config)
    optimizer = create_optimizer(config)
    variables = pretrainer.trainable_variables
    optimizer.build(variables)
    decayed = decayed_variable_paths(optimizer, variables)
    expected = [v.path for v in variables if v.name in ("kernel", "embeddings")]
    assert decayed == expected
    assert "embeddings/word_embeddings/embeddings" in decayed
    assert "discriminator/transformer_layer_0/self_attention_layer/query/kernel" in decayed
    excluded = set(v.path for v in variables) - set(decayed)
    assert all(p.endswith(("gamma", "beta", "bias")) for p in excluded)
    assert "generator/generator_predictions/output_bias" in excluded
    assert "embeddings/layer_norm/gamma" in excluded


def test_clipping_applies_to_the_sum_over_replicas(two_replicas):
    strategy = two_replicas
    with strategy.scope():
        variable = keras.Variable(np.zeros(2, "float32"))
        optimizer = ElectraAdamW(learning_rate=0.1, clip_global_norm=1.0)

    def reduce_and_clip():
        first = tf.distribute.get_replica_context().replica_id_in_sync_group == 0
        grad = tf.where(first, tf.constant([3.0, 0.0]), tf.constant([0.0, 4.0]))
        return optimizer._all_reduce_sum_gradients([(grad, variable.value)])[0][0]

    per_replica = tf.function(lambda: strategy.run(reduce_and_clip))()
    for result in strategy.experimental_local_results(per_replica):
        # Sum (3, 4) clipped to norm 1. Clipping each replica first would give (1, 1).
        np.testing.assert_allclose(result.numpy(), [0.6, 0.8], rtol=1e-6)


def test_rejects_keras_clipping_arguments():
    with pytest.raises(ValueError, match="clip_global_norm"):
        ElectraAdamW(learning_rate=1e-3, global_clipnorm=1.0)
