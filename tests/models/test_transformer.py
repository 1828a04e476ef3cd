import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf

from electra_tf.models import transformer
from electra_tf.models.dropout import apply_keep_mask, draw_seed, keep_masks
from electra_tf.models.transformer import TransformerLayer, attention_mask

HIDDEN, HEADS, INTERMEDIATE = 32, 4, 48


def _layer(cls, hidden=HIDDEN, dtype=None, name="block"):
    keras.utils.set_random_seed(7)  # same initial weights and dropout seeds for both classes
    layer = cls(intermediate_dim=INTERMEDIATE, num_heads=HEADS, dropout=0.1, activation="gelu",
                layer_norm_epsilon=1e-12, normalize_first=False, dtype=dtype, name=name)
    layer.build((None, None, hidden))
    return layer


def _inputs(hidden=HIDDEN):
    x = tf.random.stateless_normal((3, 7, hidden), seed=[1, 2])
    padding_mask = tf.sequence_mask([7, 4, 1], 7)  # a full row, a padded one, a single token
    return x, padding_mask


def _output_and_gradients(layer, x, padding_mask, training):
    @tf.function
    def step(x, padding_mask):
        with tf.GradientTape() as tape:
            outputs = layer(x, padding_mask=padding_mask, training=training)
            # Weights that differ per position, so no gradient is zero by symmetry.
            loss = tf.reduce_sum(tf.cast(outputs, tf.float32) * tf.cos(tf.range(x.shape[-1], dtype=tf.float32)))
        return outputs, tape.gradient(loss, layer.trainable_variables)

    return step(x, padding_mask)


def _assert_gradients_close(layer, gradients, expected_gradients, rtol):
    """Equal to float32 rounding: the block's separately optimized backward body sums in a
    slightly different order than keras-hub's inlined graph (transformer.py says why). The
    absolute tolerance is relative to the layer's largest gradient: the key bias's gradient is
    zero in exact arithmetic (softmax ignores a shift), so both sides are rounding noise there."""
    scale = max(float(tf.reduce_max(tf.abs(expected))) for expected in expected_gradients)
    for variable, gradient, expected in zip(layer.trainable_variables, gradients, expected_gradients):
        np.testing.assert_allclose(gradient.numpy(), expected.numpy(), rtol=rtol, atol=rtol * scale,
                                   err_msg=variable.path)


def _with_masks_of(layer, reference):
    """Make keras-hub's three dropouts in `reference` apply the masks `layer` draws in its next
    call (dropout.keep_masks from its attention dropout's seed, whose generator starts where
    the reference's does), so the two layers' outputs can be compared in training."""
    generator = reference._self_attention_layer._dropout_layer.seed_generator
    dropouts = (reference._self_attention_layer._dropout_layer, reference._self_attention_dropout,
                reference._feedforward_dropout)

    def before_call(x):
        batch, length, hidden = x.shape
        masks = iter(keep_masks([[batch, HEADS, length, length], [batch, length, hidden], [batch, length, hidden]],
                                layer.dropout, draw_seed(generator), tf.as_dtype(layer.compute_dtype)))
        for dropout_layer in dropouts:
            dropout_layer.call = lambda inputs, training=False, keep=next(masks): (
                apply_keep_mask(inputs, keep, layer.dropout) if training else inputs)

    return before_call


@pytest.mark.parametrize("training", [True, False])
def test_same_as_keras_hub_layer(training):
    """Same variables (paths, initial values), and call after call the same outputs to the
    last bit and the same gradients to rounding as keras-hub's TransformerEncoder: checkpoints
    and interop are unchanged by the rewrite. In training the random numbers differ by design
    (one draw per layer, dropout.py): keras-hub's dropouts are given the layer's masks."""
    ours, reference = _layer(TransformerLayer), _layer(keras_hub.layers.TransformerEncoder)
    assert [v.path for v in ours.weights] == [v.path for v in reference.weights]
    for a, b in zip(ours.weights, reference.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    x, padding_mask = _inputs()
    use_our_masks = _with_masks_of(ours, reference)
    for _ in range(2):  # the second call checks the seeds advance alike
        outputs, gradients = _output_and_gradients(ours, x, padding_mask, training)
        if training:
            use_our_masks(x)
        expected_outputs, expected_gradients = _output_and_gradients(reference, x, padding_mask, training)
        np.testing.assert_array_equal(outputs.numpy(), expected_outputs.numpy())
        _assert_gradients_close(ours, gradients, expected_gradients, rtol=1e-5)


def test_one_draw_per_layer_keeps_each_element_at_the_rate():
    """The three masks of one draw: about 1 - rate kept in each, and unrelated to each other (the
    two [B, L, H] masks agree where independent masks would, about 82% for rate 0.1)."""
    rate = 0.1
    masks = [m.numpy() for m in keep_masks([[8, 4, 64, 64], [8, 64, 96], [8, 64, 96]], rate,
                                           tf.constant([5, 9], tf.int32), tf.float32)]
    for mask in masks:
        assert abs(mask.mean() - (1 - rate)) < 0.01
    agreement = (masks[1] == masks[2]).mean()
    assert abs(agreement - ((1 - rate) ** 2 + rate ** 2)) < 0.01
    # Consecutive seeds (a generator's next draws) give unrelated masks too.
    following = keep_masks([[8, 64, 96]], rate, tf.constant([5, 10], tf.int32), tf.float32)[0].numpy()
    assert abs((masks[1] == following).mean() - ((1 - rate) ** 2 + rate ** 2)) < 0.01


def test_dropout_only_in_training():
    layer = _layer(TransformerLayer)
    x, padding_mask = _inputs()
    first, second = (layer(x, padding_mask=padding_mask, training=True) for _ in range(2))
    assert not np.array_equal(first.numpy(), second.numpy())  # a fresh mask per call
    inference = [layer(x, padding_mask=padding_mask, training=False).numpy() for _ in range(2)]
    np.testing.assert_array_equal(*inference)


def test_padded_keys_are_ignored():
    layer = _layer(TransformerLayer)
    x, _ = _inputs()
    padding_mask = tf.constant([[1, 1, 1, 0, 0, 0, 0]] * 3)
    changed = tf.concat([x[:, :3], x[:, 3:] * 5.0], axis=1)  # only the padded positions differ
    a = layer(x, padding_mask=padding_mask)[:, :3]
    b = layer(changed, padding_mask=padding_mask)[:, :3]
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-5)


def test_mask_made_once_is_the_same_as_the_padding_mask():
    layer = _layer(TransformerLayer)
    x, padding_mask = _inputs()
    np.testing.assert_array_equal(layer(x, padding_mask=padding_mask).numpy(),
                                  layer(x, padding_mask=attention_mask(padding_mask)).numpy())


def test_layers_of_one_shape_share_one_trace():
    """The point of the rewrite: N layers of the same shape trace the block once, not N times."""
    hidden = 40  # a width no other test uses, so the count starts from this test's calls
    layers = [_layer(TransformerLayer, hidden, name=f"block_{i}") for i in range(3)]
    x, padding_mask = _inputs(hidden)
    traces_before = transformer._BLOCK_NOT_INLINED.experimental_get_tracing_count()

    @tf.function
    def encode(x):
        for layer in layers:
            x = layer(x, padding_mask=padding_mask, training=True)
        return x

    encode(x)
    assert transformer._BLOCK_NOT_INLINED.experimental_get_tracing_count() == traces_before + 1


def test_mixed_precision_matches_keras_hub():
    ours = _layer(TransformerLayer, dtype="mixed_bfloat16")
    reference = _layer(keras_hub.layers.TransformerEncoder, dtype="mixed_bfloat16")
    x, padding_mask = _inputs()
    outputs, gradients = _output_and_gradients(ours, x, padding_mask, True)
    _with_masks_of(ours, reference)(x)  # in bfloat16, as the layer draws them
    expected_outputs, expected_gradients = _output_and_gradients(reference, x, padding_mask, True)
    assert outputs.dtype == expected_outputs.dtype == tf.bfloat16
    np.testing.assert_array_equal(outputs.numpy(), expected_outputs.numpy())
    assert all(gradient.dtype == tf.float32 for gradient in gradients)  # the variables stay float32
    _assert_gradients_close(ours, gradients, expected_gradients, rtol=2e-2)  # bfloat16 rounding


@pytest.mark.parametrize("change, message", [({"normalize_first": True}, "post-LayerNorm"),
                                             ({"activation": "relu"}, "GELU")])
def test_only_berts_block(change, message):
    arguments = dict(intermediate_dim=8, num_heads=2, activation="gelu", normalize_first=False) | change
    with pytest.raises(ValueError, match=message):
        TransformerLayer(**arguments)


def test_config_round_trip():
    layer = _layer(TransformerLayer)
    rebuilt = TransformerLayer.from_config(layer.get_config())
    assert rebuilt.get_config() == layer.get_config()


def test_which_block_runs_where(monkeypatch):
    """The shared function only where it pays: not inlined in training, inlined in inference,
    and under XLA plain ops (a function per layer in a compiled step ran ELECTRA-Small's step
    at 20 s instead of 1.6 s; transformer.py)."""
    layer = _layer(TransformerLayer)
    x, padding_mask = _inputs()
    seen = []
    for attribute, name in (("_BLOCK_NOT_INLINED", "not inlined"), ("_BLOCK_INLINED", "inlined"),
                            ("post_ln_block", "plain")):
        block = getattr(transformer, attribute)
        monkeypatch.setattr(transformer, attribute,
                            lambda *args, block=block, name=name, **kwargs: seen.append(name) or block(*args, **kwargs))
    for jit_compile, training in ((False, True), (False, False), (True, True), (True, False)):
        tf.function(lambda x: layer(x, padding_mask=padding_mask, training=training), jit_compile=jit_compile)(x)
    assert seen == ["not inlined", "inlined", "plain", "plain"]


@pytest.mark.parametrize("training", [True, False])
def test_looped_layers_compute_what_the_layers_compute_one_by_one(training):
    """Under XLA a stack can run as one loop (ELECTRA_TF_LOOP_LAYERS=1): the same outputs, each
    layer's own dropout draw included, and the same gradients to float32 rounding."""
    layers = [_layer(TransformerLayer, name=f"block_{i}") for i in range(3)]
    for i, layer in enumerate(layers):  # different weights and seeds per layer, so a mixed-up slice shows
        for variable in layer.trainable_variables:
            variable.assign(variable * (1.0 + 0.5 * i) + 0.01 * i)
        for state in layer.non_trainable_variables:  # the dropout seed generators' states
            state.assign(state + 1000 * i)
    x, padding_mask = _inputs()
    mask = attention_mask(padding_mask)
    variables = [variable for layer in layers for variable in layer.trainable_variables]
    states = [variable.numpy() for layer in layers for variable in layer.non_trainable_variables]

    def run(looped):
        for variable, state in zip([v for layer in layers for v in layer.non_trainable_variables], states):
            variable.assign(state)  # the dropout seed generators: both runs draw the same masks

        @tf.function(jit_compile=True)
        def step(x):
            with tf.GradientTape() as tape:
                if looped:
                    outputs = transformer.looped_layers(layers, x, mask, training=training)
                else:
                    outputs = x
                    for layer in layers:
                        outputs = layer(outputs, padding_mask=mask, training=training)
                loss = tf.reduce_sum(outputs * tf.cos(tf.range(x.shape[-1], dtype=tf.float32)))
            return outputs, tape.gradient(loss, variables)

        return step(x)

    outputs, gradients = run(looped=True)
    expected, expected_gradients = run(looped=False)
    np.testing.assert_allclose(outputs.numpy(), expected.numpy(), rtol=1e-5, atol=1e-5)
    scale = max(float(tf.reduce_max(tf.abs(g))) for g in expected_gradients)
    for variable, gradient, want in zip(variables, gradients, expected_gradients):
        np.testing.assert_allclose(gradient.numpy(), want.numpy(), rtol=1e-4, atol=1e-5 * scale, err_msg=variable.path)
    # Layers that differ in heads (or dropout, epsilon, dtype) cannot share one loop body.
    odd = TransformerLayer(intermediate_dim=INTERMEDIATE, num_heads=2, dropout=0.1, activation="gelu",
                           layer_norm_epsilon=1e-12, normalize_first=False, name="odd")
    odd.build((None, None, HIDDEN))
    with pytest.raises(ValueError, match="differ"):
        transformer.looped_layers([layers[0], odd], x, mask)
