import numpy as np
import tensorflow as tf

from electra_tf.finetuning.text.losses import token_classification_loss


def test_tagging_loss_sums_labelled_positions_only():
    logits = np.log(np.array([[[0.5, 0.5], [0.9, 0.1], [0.2, 0.8]]], "float32"))
    labels = np.array([[-1, 0, 1]], "int32")  # [CLS] has no label
    loss = token_classification_loss(labels, logits).numpy()
    np.testing.assert_allclose(loss, [-np.log(0.9) - np.log(0.8)], rtol=1e-6)
    nothing_labelled = token_classification_loss(np.full((1, 3), -1, "int32"), logits).numpy()
    assert nothing_labelled.tolist() == [0.0]


def test_tagging_loss_gradient_is_zero_at_unlabelled_positions():
    logits = tf.Variable(np.zeros((1, 3, 4), "float32"))
    with tf.GradientTape() as tape:
        loss = token_classification_loss(tf.constant([[2, -1, 0]]), logits)
    gradient = tape.gradient(loss, logits).numpy()
    assert np.abs(gradient[0, 1]).sum() == 0 and np.abs(gradient[0, 0]).sum() > 0
