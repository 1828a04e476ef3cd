import keras
import numpy as np
import pytest
import tensorflow as tf

from electra_tf.pretraining.config import PretrainingConfig
from electra_tf.pretraining.pretrainer import pretraining_optimizer
from electra_tf.runtime.optimizer import ElectraAdamW, WarmupLinearDecay, current_learning_rate
from electra_tf.pretraining.pretrainer import ElectraPretrainer


def test_schedule_is_linear_decay_times_warmup():
    schedule = WarmupLinearDecay(2e-4, total_steps=1000, warmup_steps=100)
    for step in (0, 1, 50, 100, 101, 500, 999, 1000, 1500):
        official = 2e-4 * (1 - min(step, 1000) / 1000) * min(1.0, step / 100)
        np.testing.assert_allclose(float(schedule(step)), official, rtol=1e-5, atol=1e-12)


def test_the_logged_learning_rate_is_the_schedules_at_the_optimizers_step(two_replicas):
    config = PretrainingConfig.load("electra_tiny")
    for strategy in (None, two_replicas):  # a MirroredVariable step counter under a strategy
        with strategy.scope() if strategy else tf.init_scope():
            optimizer = pretraining_optimizer(config)
            optimizer.build([keras.Variable(tf.zeros([2]))])
        optimizer.iterations.assign(37)
        expected = float(optimizer.learning_rate)
        assert current_learning_rate(optimizer) == pytest.approx(expected, rel=1e-6) and expected > 0


def test_schedule_serializes():
    schedule = WarmupLinearDecay(1e-3, total_steps=10, warmup_steps=2)
    restored = keras.optimizers.schedules.deserialize(keras.optimizers.schedules.serialize(schedule))
    assert isinstance(restored, WarmupLinearDecay)
    assert restored.get_config() == schedule.get_config()
    optimizer = pretraining_optimizer(PretrainingConfig.load("electra_tiny"))
    clone = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert isinstance(clone, ElectraAdamW) and clone.clip_global_norm == 1.0


def test_weight_decay_goes_to_exactly_kernels_and_embedding_tables():
    config = PretrainingConfig.load("electra_tiny", {"vocab_size": 60, "num_layers": 1})
    pretrainer = ElectraPretrainer.from_pretraining_config(config)
    optimizer = pretraining_optimizer(config)
    variables = pretrainer.trainable_variables
    optimizer.build(variables)
    decayed = optimizer.decayed_paths()
    expected = [v.path for v in variables if v.name in ("kernel", "embeddings")]
    assert decayed == expected
    assert "embeddings/word_embeddings/embeddings" in decayed
    assert "discriminator/transformer_layer_0/self_attention_layer/query/kernel" in decayed
    excluded = set(v.path for v in variables) - set(decayed)
    assert all(p.endswith(("gamma", "beta", "bias")) for p in excluded)
    assert "generator/generator_predictions/output_bias" in excluded
    assert "embeddings/layer_norm/gamma" in excluded


def test_clipping_applies_to_the_sum_over_replicas(two_replicas):
    """The first moment after one step is (1 - beta_1) times the clipped gradient: the sum of the
    replicas' (3, 0) and (0, 4), clipped to norm 1. Clipping each replica first would give
    (1, 1) before the sum."""
    strategy = two_replicas
    with strategy.scope():
        variable = keras.Variable(np.zeros(2, "float32"))
        optimizer = ElectraAdamW(learning_rate=0.1, clip_global_norm=1.0)
        optimizer.build([variable])

    def apply():
        first = tf.distribute.get_replica_context().replica_id_in_sync_group == 0
        optimizer.apply([tf.where(first, tf.constant([3.0, 0.0]), tf.constant([0.0, 4.0]))], [variable])

    tf.function(lambda: strategy.run(apply))()
    for momentum in optimizer.momentum.value.values:  # each replica's copy
        np.testing.assert_allclose(momentum.numpy(), [0.06, 0.08], rtol=1e-6)


def test_clipping_uses_the_norm_of_an_embedding_gradient_not_of_its_rows():
    """Two lookups of row 0 give IndexedSlices with row 0 twice: the gradient is (2, 0, 0), norm
    2, clipped to (1, 0, 0); the listed rows' norm is sqrt(2), which would give (1.41, 0, 0)."""
    variable = keras.Variable(np.zeros((3, 1), "float32"))
    optimizer = ElectraAdamW(learning_rate=0.1, clip_global_norm=1.0)
    slices = tf.IndexedSlices(tf.constant([[1.0], [1.0]]), tf.constant([0, 0]), tf.constant([3, 1]))
    optimizer.apply([slices], [variable])
    np.testing.assert_allclose(optimizer.momentum.numpy(), [0.1, 0.0, 0.0], rtol=1e-6)


def test_clipping_matches_tensorflows_on_the_flat_gradient():
    """One norm over the concatenated gradients gives TensorFlow's per-tensor clipping: scaled
    down above the bound, untouched below it, NaN everywhere when not finite."""
    from electra_tf.runtime.optimizer import clip_flat_gradient

    rng = np.random.default_rng(0)
    gradients = [tf.constant(rng.normal(size=shape), tf.float32) for shape in [(7, 5), (5,), (3, 4, 2), (1,)] * 3]
    flat = tf.concat([tf.reshape(g, [-1]) for g in gradients], axis=0)
    for clip_norm in (1.0, 1e4):  # above the bound, then below it
        expected, _ = tf.clip_by_global_norm(gradients, clip_norm)
        expected = np.concatenate([e.numpy().ravel() for e in expected])
        np.testing.assert_allclose(clip_flat_gradient(flat, clip_norm).numpy(), expected, rtol=2e-6, atol=0)
    np.testing.assert_array_equal(clip_flat_gradient(flat, 1e4).numpy(), flat.numpy())
    for bad in (np.inf, np.nan):
        broken = tf.concat([flat, [bad]], axis=0)
        assert np.isnan(clip_flat_gradient(broken, 1.0).numpy()).all()


def test_clipped_updates_match_keras_adamw_clipping_by_global_norm():
    """On one device clipping before or after the (absent) sum is the same: the weights Keras'
    AdamW(global_clipnorm=...) reaches, over steps whose gradients are above the bound (and one
    with a variable left out, whose zeros add nothing to the norm)."""
    initial, steps = MOMENT_CASE
    steps = [[None if g is None else g * 10.0 for g in gradients] for gradients in steps]
    expected = _keras_adamw_reference(initial, steps, global_clipnorm=0.5)
    variables = [keras.Variable(value, name=name) for name, value in initial]
    optimizer = ElectraAdamW(learning_rate=0.01, weight_decay=0.1, epsilon=1e-6, clip_global_norm=0.5)
    for gradients in steps:
        optimizer.apply([None if g is None else tf.constant(g) for g in gradients], variables)
    for got, want in zip(variables, expected):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-7)


def test_rejects_keras_clipping_arguments():
    with pytest.raises(ValueError, match="clip_global_norm"):
        ElectraAdamW(learning_rate=1e-3, global_clipnorm=1.0)


def test_weight_decay_in_update_step_matches_keras_adamw():
    """Moving decay into update_step (to scale it per layer) leaves plain AdamW unchanged."""
    initial = np.array([[0.5, -1.0], [2.0, 0.25]], "float32")
    gradients = [np.array([[0.1, -0.3], [0.2, 0.05]], "float32") * k for k in (1.0, -2.0, 0.5)]
    results = []
    for optimizer in (keras.optimizers.AdamW(learning_rate=0.01, weight_decay=0.1, epsilon=1e-6),
                      ElectraAdamW(learning_rate=0.01, weight_decay=0.1, epsilon=1e-6,
                                   clip_global_norm=None)):
        variable = keras.Variable(initial, name="kernel")
        for gradient in gradients:
            optimizer.apply([tf.constant(gradient)], [variable])
        results.append(variable.numpy())
    np.testing.assert_allclose(results[1], results[0], rtol=1e-6)


@pytest.mark.parametrize("schedule,top_layer_power", [("official", 2), ("corrected", 1)])
def test_layerwise_decay_scales_update_and_weight_decay(schedule, top_layer_power):
    decay, lr, weight_decay, num_layers = 0.5, 0.1, 0.01, 3
    paths = {"embeddings": "embeddings", "top": f"transformer_layer_{num_layers - 1}",
             "head": "task_specific"}
    variables = {}
    for role, scope in paths.items():
        with keras.name_scope(scope):
            variables[role] = keras.Variable(np.full((2,), 2.0, "float32"), name="kernel")
    optimizer = ElectraAdamW(learning_rate=lr, weight_decay=weight_decay, epsilon=1e-12,
                             clip_global_norm=None, layerwise_lr_decay=decay,
                             num_layers=num_layers, layer_decay_schedule=schedule)
    optimizer.apply([tf.constant([1.0, -1.0])] * 3, list(variables.values()))
    powers = {"head": 0, "top": top_layer_power, "embeddings": num_layers + top_layer_power}
    for role, variable in variables.items():
        rate = lr * decay ** powers[role]
        # First Adam step moves each coordinate by the rate (m / sqrt(v) = sign(g)); decay
        # removes rate * weight_decay of the old value.
        expected = 2.0 - 2.0 * rate * weight_decay - rate * np.array([1.0, -1.0])
        np.testing.assert_allclose(variable.numpy(), expected, rtol=1e-6, err_msg=role)


def test_layerwise_decay_needs_num_layers_and_a_known_schedule():
    with pytest.raises(ValueError, match="num_layers"):
        ElectraAdamW(learning_rate=1e-3, layerwise_lr_decay=0.8)
    with pytest.raises(ValueError, match="layer_decay_schedule"):
        ElectraAdamW(learning_rate=1e-3, layerwise_lr_decay=0.8, num_layers=2,
                     layer_decay_schedule="bert")
    optimizer = ElectraAdamW(learning_rate=1e-3, layerwise_lr_decay=0.8, num_layers=2,
                             layer_decay_schedule="corrected")
    clone = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert (clone.layerwise_lr_decay, clone.num_layers, clone.layer_decay_schedule) == (0.8, 2, "corrected")


def _keras_adamw_reference(initial, steps, weight_decay=0.1, global_clipnorm=None):
    """keras.optimizers.AdamW over variables named like ours (decay skipped for "bias"), each
    step a list of gradients (None: the variable has none that step)."""
    variables = [keras.Variable(value, name=name) for name, value in initial]
    optimizer = keras.optimizers.AdamW(learning_rate=0.01, weight_decay=weight_decay, epsilon=1e-6,
                                       global_clipnorm=global_clipnorm)
    optimizer.exclude_from_weight_decay(var_names=["bias"])
    for gradients in steps:
        present = [(g, v) for g, v in zip(gradients, variables) if g is not None]
        optimizer.apply([tf.constant(g) for g, _ in present], [v for _, v in present])
    return [v.numpy() for v in variables]


MOMENT_CASE = ([("kernel", np.array([[0.5, -1.0, 0.3], [2.0, 0.25, -0.7]], "float32")),
                ("bias", np.array([0.1, -0.2, 0.3, 0.4], "float32")),
                ("kernel", np.full((1, 2, 2), 0.75, "float32"))],
               [[np.full((2, 3), 0.1, "float32"), np.array([0.3, -0.1, 0.0, 0.2], "float32"),
                 np.array([[[0.5, -0.5], [0.25, 1.0]]], "float32")],
                [np.full((2, 3), -0.2, "float32"), None, np.full((1, 2, 2), 0.05, "float32")],
                [np.full((2, 3), 0.3, "float32"), np.array([1.0, 1.0, -1.0, 0.5], "float32"), None]])


def test_the_flat_moments_update_as_keras_adamw_with_variables_left_out_of_a_step():
    """All weights' moments in two flat variables: the same weights as Keras' AdamW (one slot pair
    per weight) over several shapes, a step in which some weights have no gradient (their moments
    stay), and decay skipped for biases."""
    initial, steps = MOMENT_CASE
    expected = _keras_adamw_reference(initial, steps)
    variables = [keras.Variable(value, name=name) for name, value in initial]
    optimizer = ElectraAdamW(learning_rate=0.01, weight_decay=0.1, epsilon=1e-6, clip_global_norm=None)
    for gradients in steps:
        optimizer.apply([None if g is None else tf.constant(g) for g in gradients], variables)
    assert [v.path for v in optimizer.variables][-2:] == ["electra_adam_w/momentum", "electra_adam_w/velocity"]
    assert optimizer.momentum.shape == (6 + 4 + 4,)
    for got, want in zip(variables, expected):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-7)


def test_the_flat_moments_update_every_replicas_copy_alike(two_replicas):
    """Under MirroredStrategy each replica updates its own copies of the flat moments and the
    weights; with the same gradients on both replicas, to the weights Keras' AdamW reaches on one
    device (the per-variable optimizer before the flat moments did the same)."""
    initial, steps = MOMENT_CASE
    expected = _keras_adamw_reference(initial, steps)
    with two_replicas.scope():
        variables = [keras.Variable(value, name=name) for name, value in initial]
        optimizer = ElectraAdamW(learning_rate=0.01, weight_decay=0.1, epsilon=1e-6, clip_global_norm=None)
        optimizer.build(variables)

    for gradients in steps:
        present = [(tf.constant(g), v) for g, v in zip(gradients, variables) if g is not None]
        tf.function(lambda: two_replicas.run(
            lambda: optimizer.apply([g for g, _ in present], [v for _, v in present])))()
    for got, want in zip(variables, expected):
        for copy in got.value.values:
            np.testing.assert_allclose(copy.numpy(), want, rtol=1e-6, atol=1e-7)
    momentum_copies = optimizer.momentum.value.values
    np.testing.assert_array_equal(momentum_copies[0].numpy(), momentum_copies[1].numpy())


def test_the_optimizer_refuses_what_flat_moments_cannot_hold():
    with pytest.raises(ValueError, match="amsgrad"):  # no such option (the official optimizer has none)
        ElectraAdamW(learning_rate=0.01, amsgrad=True)
    with pytest.raises(ValueError, match="float32"):
        ElectraAdamW(learning_rate=0.01).build([keras.Variable(np.zeros(2, "float16"), dtype="float16")])


def lamb_reference(weights, gradient_steps, lr, beta_1, beta_2, epsilon, decay, adapts, decays):
    """LAMB in numpy, as TensorFlow Addons' LAMB computes it (NVIDIA's recipe), weight by weight."""
    weights = [w.astype(np.float64).copy() for w in weights]
    m = [np.zeros_like(w) for w in weights]
    v = [np.zeros_like(w) for w in weights]
    for t, gradients in enumerate(gradient_steps, start=1):
        for i, g in enumerate(gradients):
            m[i] = beta_1 * m[i] + (1 - beta_1) * g
            v[i] = beta_2 * v[i] + (1 - beta_2) * g * g
            update = (m[i] / (1 - beta_1 ** t)) / (np.sqrt(v[i] / (1 - beta_2 ** t)) + epsilon)
            if decays[i]:
                update = update + decay * weights[i]
            ratio = 1.0
            if adapts[i]:
                w_norm, u_norm = np.linalg.norm(weights[i]), np.linalg.norm(update)
                ratio = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
            weights[i] = weights[i] - lr * ratio * update
    return weights


def test_lamb_matches_the_reference_with_decay_and_layer_norm_excluded():
    from electra_tf.runtime.optimizer import ElectraLamb

    rng = np.random.default_rng(0)
    shapes = {"dense/kernel": (4, 3), "dense/bias": (3,), "layer_norm/gamma": (3,), "zero/kernel": (2,)}
    initial = [rng.normal(size=s).astype("float32") if not p.startswith("zero") else np.zeros(s, "float32")
               for p, s in shapes.items()]
    variables = []
    for path, weight in zip(shapes, initial):
        scope, name = path.split("/")
        with keras.name_scope(scope):  # the paths Keras gives inside layers of these names
            variables.append(keras.Variable(weight, name=name))
    assert [v.path for v in variables] == list(shapes)
    steps = [[rng.normal(size=s).astype("float32") for s in shapes.values()] for _ in range(3)]
    optimizer = ElectraLamb(learning_rate=0.05, weight_decay=0.01, beta_1=0.878, beta_2=0.974, epsilon=1e-6,
                            clip_global_norm=None)
    for gradients in steps:
        optimizer.apply([tf.constant(g) for g in gradients], variables)
    decays = [p.endswith("kernel") for p in shapes]
    expected = lamb_reference(initial, steps, 0.05, 0.878, 0.974, 1e-6, 0.01, adapts=decays, decays=decays)
    for variable, reference in zip(variables, expected):
        np.testing.assert_allclose(variable.numpy(), reference, rtol=2e-5, atol=1e-6)
    assert not np.allclose(expected[3], 0.0)  # a zero weight moves without the trust ratio


def test_lamb_without_decay_matches_keras_lamb():
    from electra_tf.runtime.optimizer import ElectraLamb

    rng = np.random.default_rng(1)
    initial = [rng.normal(size=(5, 2)).astype("float32"), rng.normal(size=(7,)).astype("float32")]
    ours = [keras.Variable(w, name="kernel") for w in initial]
    theirs = [keras.Variable(w, name="kernel") for w in initial]
    optimizer = ElectraLamb(learning_rate=0.01, weight_decay=0.0, epsilon=1e-6, clip_global_norm=None)
    reference = keras.optimizers.Lamb(learning_rate=0.01, epsilon=1e-6)
    for _ in range(3):
        gradients = [tf.constant(rng.normal(size=w.shape).astype("float32")) for w in initial]
        optimizer.apply(gradients, ours)
        reference.apply(gradients, theirs)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


def test_config_chooses_lamb_with_its_betas_and_decay_power():
    from electra_tf.runtime.optimizer import ElectraLamb

    config = PretrainingConfig.load("electra_tiny", {"optimizer": "lamb", "adam_beta_1": 0.878, "adam_beta_2": 0.974,
                                                 "lr_decay_power": 0.5, "num_train_steps": 100,
                                                 "num_warmup_steps": 0})
    optimizer = pretraining_optimizer(config)
    assert isinstance(optimizer, ElectraLamb) and (optimizer.beta_1, optimizer.beta_2) == (0.878, 0.974)
    optimizer.build([keras.Variable(tf.zeros([2]))])
    optimizer.iterations.assign(75)  # a quarter of the way left: 0.25 ** 0.5 of the peak
    assert current_learning_rate(optimizer) == pytest.approx(config.optimizer.learning_rate * 0.25 ** 0.5, rel=1e-5)


def test_lamb_trains_the_pretrainer():
    from electra_tf.pretraining.synthetic import masked_batch

    config = PretrainingConfig.load("electra_tiny", {"vocab_size": 60, "num_layers": 1, "optimizer": "lamb",
                                                 "learning_rate": 1e-2, "num_train_steps": 20, "num_warmup_steps": 2})
    keras.utils.set_random_seed(0)
    pretrainer = ElectraPretrainer.from_pretraining_config(config)
    pretrainer.compile(optimizer=pretraining_optimizer(config))
    batch = masked_batch(config, 8, seq_length=32)
    losses = [pretrainer.train_on_batch(batch, return_dict=True)["masked_lm_loss"] for _ in range(12)]
    assert np.isfinite(losses).all() and losses[-1] < losses[0] - 0.5
