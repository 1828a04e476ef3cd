import keras
import numpy as np
import pytest
import tensorflow as tf

from electra_tf.pretraining.config import PretrainingConfig
from electra_tf.pretraining.pretrainer import pretraining_optimizer
from electra_tf.pretraining.pretrainer import ElectraPretrainer
from electra_tf.pretraining.synthetic import markov_sequences, masked_batch, remasked_each_step

SEQ = 32
REQUIRED_METRICS = {"masked_lm_loss", "masked_lm_accuracy", "sampled_masked_lm_accuracy", "disc_loss",
                    "disc_accuracy", "disc_precision", "disc_recall", "disc_auc", "loss"}


def tiny(**overrides):
    # One layer unless a test needs depth: most of these tests' time is tracing the step.
    values = {"vocab_size": 100, "num_layers": 1, "num_train_steps": 400, "num_warmup_steps": 20,
              "max_seq_length": SEQ}
    values.update(overrides)
    return PretrainingConfig.load("electra_tiny", values)


def dataset(batch, repeat=1):
    return tf.data.Dataset.from_tensors(batch).repeat(repeat)


def test_rtd_loss_alone_sends_no_gradient_into_generator_weights():
    config = tiny(dropout=0.0)
    pretrainer = ElectraPretrainer.from_pretraining_config(config)
    batch = masked_batch(config, 4, seed=3)
    shared = {id(v) for v in pretrainer.discriminator.embeddings.trainable_variables}
    generator_own = [v for v in pretrainer.generator.trainable_variables if id(v) not in shared]
    embeddings = pretrainer.discriminator.embeddings.trainable_variables
    with tf.GradientTape(persistent=True) as tape:
        outputs = pretrainer.compute_pretraining_outputs(batch, tf.constant([1, 2], tf.int64), training=True)
    disc_grads = tape.gradient(outputs["disc_loss"], generator_own)
    assert all(g is None or not np.any(g) for g in disc_grads)
    # Sanity: the same tape does carry RTD gradient into the shared embeddings, and MLM
    # gradient into the generator.
    assert any(g is not None and np.any(g) for g in tape.gradient(outputs["disc_loss"], embeddings))
    assert all(g is not None for g in tape.gradient(outputs["masked_lm_loss"], generator_own))


def test_tiny_model_reports_every_metric_and_drives_both_losses_down_on_a_fixed_batch():
    # The batch is fixed but re-masked every step, and evaluated on maskings never trained on:
    # the discriminator can only do well by reading the corrupted tokens, not by memorising
    # which positions were replaced.
    # 200 steps at 3e-3 (the preset's rate is for real text and longer runs) clear every bound
    # below with a wider margin than 400 at the preset's rate, in half the time.
    config = tiny(dropout=0.0, num_layers=2, num_train_steps=200, learning_rate=3e-3)
    keras.utils.set_random_seed(0)
    pretrainer = ElectraPretrainer.from_pretraining_config(config)
    pretrainer.compile(optimizer=pretraining_optimizer(config))
    fixed = tf.data.Dataset.from_tensors(markov_sequences(16, SEQ, config.model.vocab_size, seed=4))
    held_out = remasked_each_step(config, fixed.repeat(4), seed=99).cache()
    before = pretrainer.evaluate(held_out, return_dict=True, verbose=0)
    logs = pretrainer.fit(remasked_each_step(config, fixed.repeat(200), seed=1), verbose=0).history
    assert REQUIRED_METRICS <= set(logs)  # every metric is reported, in training and evaluation
    after = pretrainer.evaluate(held_out, return_dict=True, verbose=0)
    assert REQUIRED_METRICS <= set(after)
    assert after["masked_lm_loss"] < 0.7 * before["masked_lm_loss"]
    assert after["disc_loss"] < 0.6 * before["disc_loss"]
    assert after["masked_lm_accuracy"] > 0.15
    assert after["disc_auc"] > 0.6


def test_one_and_two_replicas_give_the_same_losses_gradients_and_update(two_replicas):
    # Deterministic sampling for the test: near-zero temperature makes the Gumbel-max draw
    # the argmax, so both set-ups see the same corrupted input. No dropout for the same reason.
    config = tiny(dropout=0.0, temperature=1e-4)
    batch = masked_batch(config, 8, seed=6)
    seed = tf.constant([3, 4], tf.int64)

    keras.utils.set_random_seed(1)
    single = ElectraPretrainer.from_pretraining_config(config)
    initial = [v.numpy() for v in single.weights]
    variables = single.trainable_variables
    with tf.GradientTape() as tape:
        single_outputs = single.compute_pretraining_outputs(batch, seed, training=True)
    single_grads = tape.gradient(single_outputs["loss"], variables)

    strategy = two_replicas
    with strategy.scope():
        mirrored = ElectraPretrainer.from_pretraining_config(config)
        mirrored.set_weights(initial)
        mirrored.compile(optimizer=pretraining_optimizer(config))
    distributed = strategy.experimental_distribute_dataset(dataset(batch))
    shard = next(iter(distributed))

    def replica_grads(data):
        with tf.GradientTape() as tape:
            outputs = mirrored.compute_pretraining_outputs(data, seed, training=True)
        return outputs["loss"], outputs["masked_lm_loss"], outputs["disc_loss"], tape.gradient(
            outputs["loss"], mirrored.trainable_variables)

    @tf.function  # around strategy.run, so both replicas share one trace (and collectives)
    def summed_over_replicas(data):
        per_replica = strategy.run(replica_grads, args=(data,))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    loss, mlm, disc, grads = summed_over_replicas(shard)
    np.testing.assert_allclose(loss, single_outputs["loss"], rtol=1e-5)
    np.testing.assert_allclose(mlm, single_outputs["masked_lm_loss"], rtol=1e-5)
    np.testing.assert_allclose(disc, single_outputs["disc_loss"], rtol=1e-5)
    for variable, g_single, g_pair in zip(variables, single_grads, grads):
        np.testing.assert_allclose(tf.convert_to_tensor(g_pair), tf.convert_to_tensor(g_single),
                                   rtol=2e-4, atol=1e-6, err_msg=variable.path)

    # The same update through fit: one step on each, same metrics and same weights after.
    single.compile(optimizer=pretraining_optimizer(config))
    single_logs = single.fit(dataset(batch), verbose=0).history
    mirrored_logs = mirrored.fit(dataset(batch), verbose=0).history
    for name in sorted(REQUIRED_METRICS):
        np.testing.assert_allclose(mirrored_logs[name], single_logs[name], rtol=1e-5, err_msg=name)
    for a, b in zip(single.weights, mirrored.weights):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-4, atol=1e-6, err_msg=a.path)


def test_each_replica_draws_its_own_samples(two_replicas):
    config = tiny()
    strategy = two_replicas
    with strategy.scope():
        pretrainer = ElectraPretrainer.from_pretraining_config(config)
    batch = masked_batch(config, 4, seed=7)
    # Both replicas get the same examples; only their random streams differ.
    same_twice = {k: np.concatenate([v, v]) for k, v in batch.items()}
    shard = next(iter(strategy.experimental_distribute_dataset(dataset(same_twice))))
    def sample(data):
        return pretrainer.compute_pretraining_outputs(data, pretrainer._next_seed())["sampled_ids"]

    per_replica = tf.function(lambda data: strategy.run(sample, args=(data,)))(shard)
    first, second = strategy.experimental_local_results(per_replica)
    assert (first.numpy() != second.numpy()).any()


def test_a_step_xla_compiles_samples_with_the_categorical_sampler(two_replicas):
    """XLA compiles TensorFlow's categorical sampler as one Gumbel-max kernel; TensorFlow's own
    kernels run the inverse-CDF search, which costs a CPU less (`losses.sample_replacements`)."""
    config = tiny()
    pretrainer = ElectraPretrainer.from_pretraining_config(config)
    pretrainer.compile(optimizer=pretraining_optimizer(config), jit_compile=False)
    assert pretrainer.sampling_method() == "inverse_cdf"
    pretrainer.compile(optimizer=pretraining_optimizer(config), jit_compile=True)
    assert pretrainer.sampling_method() == "categorical"
    with two_replicas.scope():  # XLA compiles the gradients' function only
        mirrored = ElectraPretrainer.from_pretraining_config(config)
        mirrored.compile(optimizer=pretraining_optimizer(config), jit_compile=True)
    assert mirrored.compiles_gradients_only and mirrored.compiles_with_xla
    assert mirrored.sampling_method() == "categorical"


def test_disallow_correct_means_every_slot_is_replaced():
    config = tiny(disallow_correct=True)
    pretrainer = ElectraPretrainer.from_pretraining_config(config)
    pretrainer.compile(optimizer=pretraining_optimizer(config))
    logs = pretrainer.evaluate(dataset(masked_batch(config, 8, seed=8)), return_dict=True, verbose=0)
    assert logs["sampled_masked_lm_accuracy"] == 0.0


def test_mlm_only_baseline_trains_a_full_size_generator():
    config = tiny(objective="mlm", dropout=0.0)
    pretrainer = ElectraPretrainer.from_pretraining_config(config)
    assert pretrainer.discriminator is None
    assert pretrainer.generator.hidden_size == config.model.hidden_size
    pretrainer.compile(optimizer=pretraining_optimizer(config))
    batch = masked_batch(config, 8, seed=9)
    history = pretrainer.fit(dataset(batch, 60), verbose=0).history
    logs = pretrainer.evaluate(dataset(batch), return_dict=True, verbose=0)
    assert set(logs) == {"masked_lm_loss", "masked_lm_accuracy", "loss"}
    assert logs["masked_lm_loss"] < history["masked_lm_loss"][0]


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_keeps_sampling_and_losses_in_float32(policy):
    keras.config.set_dtype_policy(policy)
    config = tiny()
    pretrainer = ElectraPretrainer.from_pretraining_config(config)
    pretrainer.compile(optimizer=pretraining_optimizer(config))
    if policy == "mixed_float16":
        assert isinstance(pretrainer.optimizer, keras.optimizers.LossScaleOptimizer)
    batch = masked_batch(config, 4, seed=10)
    outputs = pretrainer.compute_pretraining_outputs(batch, tf.constant([0, 1], tf.int64))
    assert outputs["mlm_logits"].dtype == tf.float32 and outputs["disc_logits"].dtype == tf.float32
    assert outputs["loss"].dtype == tf.float32
    assert pretrainer.discriminator.transformer_layers[0].compute_dtype == policy.split("_")[1]
    # Training in each precision, strategy and XLA setting: tests/runtime/test_compiled_step.py.


def test_a_batch_without_masking_fields_is_explained():
    config = tiny()
    pretrainer = ElectraPretrainer.from_pretraining_config(config)
    batch = masked_batch(config, 2, seed=11)
    del batch["mask_positions"]
    with pytest.raises(KeyError, match="missing \\['mask_positions'\\].*mask_tokens"):
        pretrainer.compute_pretraining_outputs(batch, tf.constant([0, 0], tf.int64))


def test_float16_loss_scaling_skips_a_non_finite_step_and_recovers():
    keras.config.set_dtype_policy("mixed_float16")
    config = tiny(dropout=0.0)
    pretrainer = ElectraPretrainer.from_pretraining_config(config)
    # A loss scale far beyond float16's range: the first steps' gradients overflow to inf.
    optimizer = keras.optimizers.LossScaleOptimizer(pretraining_optimizer(config), initial_scale=2.0 ** 40)
    pretrainer.compile(optimizer=optimizer)
    batch = masked_batch(config, 4, seed=12)
    before = [w.numpy().copy() for w in pretrainer.trainable_weights]
    pretrainer.train_on_batch(batch)
    assert int(optimizer.iterations) == 0  # skipped: no update counted
    assert float(optimizer.dynamic_scale) == 2.0 ** 39  # and the scale was halved
    for w, b in zip(pretrainer.trainable_weights, before):
        np.testing.assert_array_equal(w.numpy(), b)
    for _ in range(40):
        logs = pretrainer.train_on_batch(batch, return_dict=True)
        if int(optimizer.iterations) > 1:  # step 0 has learning rate 0 (warmup factor 0)
            break
    assert int(optimizer.iterations) >= 2 and float(optimizer.dynamic_scale) < 2.0 ** 39
    assert np.isfinite(logs["masked_lm_loss"])
    assert any((w.numpy() != b).any() for w, b in zip(pretrainer.trainable_weights, before))


def test_replicas_agree_to_skip_when_only_one_overflows(two_replicas):
    from electra_tf.runtime.compiled_step import agree_on_finiteness

    def step():
        first = tf.distribute.get_replica_context().replica_id_in_sync_group == 0
        gradient = tf.where(first, tf.constant([1.0, 2.0]), tf.constant([np.inf, 2.0]))
        return agree_on_finiteness([gradient, None])[0]

    results = two_replicas.experimental_local_results(tf.function(lambda: two_replicas.run(step))())
    assert all(not np.isfinite(r.numpy()).all() for r in results)  # both skip, not just replica 1

    def healthy():
        return agree_on_finiteness([tf.constant([1.0, 2.0])])[0]

    results = two_replicas.experimental_local_results(tf.function(lambda: two_replicas.run(healthy))())
    assert all((r.numpy() == [1.0, 2.0]).all() for r in results)




def test_gdes_sends_no_replaced_token_gradient_into_the_shared_tables():
    """DeBERTaV3's gradient-disentangled sharing: at the first step the RTD loss reaches the
    discriminator's residual tables and not the generator's (shared) ones, which the MLM loss
    alone trains; the residuals start at zero, so the first step reads the shared tables."""
    config = tiny(dropout=0.0, embedding_sharing="gdes")
    pretrainer = ElectraPretrainer.from_pretraining_config(config)
    gdes = pretrainer.discriminator.embeddings
    assert gdes.shared is pretrainer.generator.embeddings
    shared = [gdes.shared.word_embeddings.embeddings, gdes.shared.position_embeddings.position_embeddings]
    residual = [gdes.word_embeddings.embeddings, gdes.position_embeddings.position_embeddings]
    batch = masked_batch(config, 4, seed=3)
    with tf.GradientTape(persistent=True) as tape:
        outputs = pretrainer.compute_pretraining_outputs(batch, tf.constant([1, 2], tf.int64), training=True)
    assert all(not np.any(v.numpy()) for v in residual)
    assert all(g is None or not np.any(g) for g in tape.gradient(outputs["disc_loss"], shared))
    assert all(g is not None and np.any(tf.convert_to_tensor(g)) for g in tape.gradient(outputs["disc_loss"],
                                                                                         residual))
    assert all(g is not None and np.any(tf.convert_to_tensor(g)) for g in tape.gradient(outputs["masked_lm_loss"],
                                                                                         shared))
    # The discriminator saved on its own holds the summed tables and computes the same logits.
    for v in residual:
        v.assign(tf.random.normal(v.shape, stddev=0.02, seed=1))
    inputs = {"token_ids": batch["token_ids"], "segment_ids": batch["segment_ids"],
              "padding_mask": batch["padding_mask"]}
    standalone = pretrainer.standalone_discriminator()
    np.testing.assert_allclose(standalone(inputs)["logits"], pretrainer.discriminator(inputs)["logits"], atol=1e-5)
    np.testing.assert_allclose(standalone.embeddings.word_embeddings.embeddings.numpy(),
                               shared[0].numpy() + residual[0].numpy())
