"""The transformer layer against keras-hub's `TransformerEncoder` (post-LN, exact GELU): the same
variable paths, and with the same weights and dropout masks the same outputs and gradients, to
rounding (the layer computes its LayerNorm and GELU, and their gradients, in another order than
Keras' ops: transformer.layer_norm, transformer.gelu)."""

import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf

from electra_tf.models.dropout import apply_keep_mask, draw_seed, keep_masks
from electra_tf.models.transformer import TransformerLayer, attention_mask

HIDDEN, HEADS, INTERMEDIATE = 32, 4, 48


def _ours(hidden=HIDDEN, dtype=None, name="block", dropout=0.1, fuse_projections=True):
    keras.utils.set_random_seed(7)
    layer = TransformerLayer(intermediate_dim=INTERMEDIATE, num_heads=HEADS, dropout=dropout, layer_norm_epsilon=1e-12,
                             dtype=dtype, name=name, fuse_projections=fuse_projections)
    layer.build((None, None, hidden))
    return layer


def _reference_with_weights_of(ours, dtype=None, dropout=0.1):
    """keras-hub's layer holding `ours`' weights (matched by path)."""
    reference = keras_hub.layers.TransformerEncoder(
        intermediate_dim=INTERMEDIATE, num_heads=HEADS, dropout=dropout, activation="gelu", layer_norm_epsilon=1e-12,
        normalize_first=False, dtype=dtype, name=ours.name)
    reference.build((None, None, HIDDEN))
    assert [v.path for v in reference.trainable_weights] == [v.path for v in ours.trainable_weights]
    for theirs, mine in zip(reference.trainable_weights, ours.trainable_weights):
        theirs.assign(mine)
    return reference


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
    """Equal to rounding: the absolute tolerance is relative to the layer's largest gradient (the
    key bias's gradient is zero in exact arithmetic, softmax ignores a shift, so both sides are
    rounding noise there)."""
    scale = max(float(tf.reduce_max(tf.abs(expected))) for expected in expected_gradients)
    for variable, gradient, expected in zip(layer.trainable_variables, gradients, expected_gradients):
        np.testing.assert_allclose(gradient.numpy(), expected.numpy(), rtol=rtol, atol=rtol * scale,
                                   err_msg=variable.path)


def _next_masks(layer, x):
    """The masks `layer`'s next call draws (its generator left where it was)."""
    state = layer.seed_generator.state.numpy()
    seed = draw_seed(layer.seed_generator)
    layer.seed_generator.state.assign(state)
    batch, length, hidden = x.shape
    return keep_masks([[batch, HEADS, length, length], [batch, length, hidden], [batch, length, hidden]],
                      layer.dropout, seed)


@pytest.fixture
def dropouts_apply(monkeypatch):
    """Makes Keras' Dropout layers apply the given masks, in call order (keras-hub's layer calls
    its three: attention probabilities, attention output, feed-forward output)."""
    def use(masks, rate):
        masks = iter(masks)
        monkeypatch.setattr(keras.layers.Dropout, "call", lambda self, inputs, training=False: (
            apply_keep_mask(inputs, next(masks), rate) if training else inputs))
    return use


@pytest.mark.parametrize("fuse_projections", [True, False])
@pytest.mark.parametrize("training", [True, False])
def test_same_as_keras_hub_layer(training, fuse_projections, dropouts_apply):
    """The variables are keras-hub's (paths, shapes); with the same weights and, in training, the
    same dropout masks, the outputs and gradients equal keras-hub's to float32 rounding, with the
    projections fused or not."""
    ours = _ours(fuse_projections=fuse_projections)
    reference = _reference_with_weights_of(ours)
    x, padding_mask = _inputs()
    for _ in range(2):  # the second call checks our seed advances
        if training:
            dropouts_apply(_next_masks(ours, x), ours.dropout)
        outputs, gradients = _output_and_gradients(ours, x, padding_mask, training)
        expected_outputs, expected_gradients = _output_and_gradients(reference, x, padding_mask, training)
        np.testing.assert_allclose(outputs.numpy(), expected_outputs.numpy(), rtol=1e-5, atol=2e-6)
        _assert_gradients_close(ours, gradients, expected_gradients, rtol=1e-5)


def test_one_draw_per_layer_keeps_each_element_at_the_rate():
    """The three masks of one draw: about 1 - rate kept in each, and unrelated to each other (the
    two [B, L, H] masks agree where independent masks would, about 82% for rate 0.1)."""
    rate = 0.1
    masks = [m.numpy() for m in keep_masks([[8, 4, 64, 64], [8, 64, 96], [8, 64, 96]], rate,
                                           tf.constant([5, 9], tf.int32))]
    for mask in masks:
        assert abs(mask.mean() - (1 - rate)) < 0.01
    agreement = (masks[1] == masks[2]).mean()
    assert abs(agreement - ((1 - rate) ** 2 + rate ** 2)) < 0.01
    # Consecutive seeds (a generator's next draws) give unrelated masks too.
    following = keep_masks([[8, 64, 96]], rate, tf.constant([5, 10], tf.int32))[0].numpy()
    assert abs((masks[1] == following).mean() - ((1 - rate) ** 2 + rate ** 2)) < 0.01


def test_dropout_only_in_training():
    layer = _ours()
    x, padding_mask = _inputs()
    first, second = (layer(x, padding_mask=padding_mask, training=True) for _ in range(2))
    assert not np.array_equal(first.numpy(), second.numpy())  # a fresh mask per call
    inference = [layer(x, padding_mask=padding_mask, training=False).numpy() for _ in range(2)]
    np.testing.assert_array_equal(*inference)


def test_padded_keys_are_ignored():
    layer = _ours()
    x, _ = _inputs()
    padding_mask = tf.constant([[1, 1, 1, 0, 0, 0, 0]] * 3)
    changed = tf.concat([x[:, :3], x[:, 3:] * 5.0], axis=1)  # only the padded positions differ
    a = layer(x, padding_mask=padding_mask)[:, :3]
    b = layer(changed, padding_mask=padding_mask)[:, :3]
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-5)


def test_mask_made_once_is_the_same_as_the_padding_mask():
    layer = _ours()
    x, padding_mask = _inputs()
    np.testing.assert_array_equal(layer(x, padding_mask=padding_mask).numpy(),
                                  layer(x, padding_mask=attention_mask(padding_mask)).numpy())


def test_mixed_precision_matches_keras_hub(dropouts_apply):
    ours = _ours(dtype="mixed_bfloat16")
    reference = _reference_with_weights_of(ours, dtype="mixed_bfloat16")
    x, padding_mask = _inputs()
    dropouts_apply(_next_masks(ours, x), ours.dropout)  # in bfloat16, as the layer draws them
    outputs, gradients = _output_and_gradients(ours, x, padding_mask, True)
    expected_outputs, expected_gradients = _output_and_gradients(reference, x, padding_mask, True)
    assert outputs.dtype == expected_outputs.dtype == tf.bfloat16
    np.testing.assert_allclose(tf.cast(outputs, tf.float32).numpy(), tf.cast(expected_outputs, tf.float32).numpy(),
                               rtol=2e-2, atol=2e-2)  # bfloat16 rounding
    assert all(gradient.dtype == tf.float32 for gradient in gradients)  # the variables stay float32
    _assert_gradients_close(ours, gradients, expected_gradients, rtol=2e-2)  # bfloat16 rounding


def test_heads_must_divide_the_width():
    layer = TransformerLayer(intermediate_dim=8, num_heads=3)
    with pytest.raises(ValueError, match="not a multiple of num_heads"):
        layer.build((None, None, 32))


def test_config_round_trip():
    layer = _ours()
    rebuilt = TransformerLayer.from_config(layer.get_config())
    assert rebuilt.get_config() == layer.get_config()


def test_inference_gelu_and_layer_norm_are_tensorflows():
    """The block's inference GELU and LayerNorm (`fused.py`'s equations as TensorFlow ops) against
    TensorFlow's and Keras' own, in float32 and from bfloat16 inputs (the training path's
    functions and gradients: tests/models/test_fused.py)."""
    from electra_tf.models.transformer import gelu, layer_norm

    x = tf.random.stateless_normal((4, 6, 16), seed=[3, 4]) * 2.0
    gamma, beta = tf.random.stateless_normal((16,), seed=[5, 6]), tf.random.stateless_normal((16,), seed=[7, 8])
    np.testing.assert_allclose(gelu(x).numpy(), tf.nn.gelu(x, approximate=False).numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(layer_norm(x, gamma, beta, 1e-12).numpy(),
                               keras.ops.layer_normalization(x, gamma, beta, axis=-1, epsilon=1e-12).numpy(),
                               rtol=1e-5, atol=1e-6)
    low = tf.cast(x, tf.bfloat16)
    assert layer_norm(low, tf.cast(gamma, tf.bfloat16), tf.cast(beta, tf.bfloat16), 1e-12).dtype == tf.bfloat16
    assert gelu(low).dtype == tf.bfloat16
