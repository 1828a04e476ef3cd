import numpy as np
import pytest

from electra_tf.finetuning.text import metrics


def test_binary_metrics_against_hand_counts():
    labels = [1, 1, 1, 0, 0, 0, 0, 1]
    predictions = [1, 1, 0, 0, 0, 1, 0, 1]   # TP 3, FN 1, FP 1, TN 3
    assert metrics.accuracy(predictions, labels) == 0.75
    assert metrics.f1(predictions, labels) == pytest.approx(2 * 3 / (4 + 4))
    # MCC = (TP*TN - FP*FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)) = (9 - 1) / 16
    assert metrics.matthews_correlation(predictions, labels) == pytest.approx(0.5)


def test_mcc_is_zero_for_a_constant_prediction_and_one_when_perfect():
    assert metrics.matthews_correlation([0, 0, 0, 0], [0, 1, 0, 1]) == 0.0
    assert metrics.matthews_correlation([2, 0, 1, 2], [2, 0, 1, 2]) == pytest.approx(1.0)


def test_correlations():
    labels = [0.0, 1.0, 2.0, 3.0, 4.0]
    assert metrics.pearson([0.0, 2.0, 4.0, 6.0, 8.0], labels) == pytest.approx(1.0)
    assert metrics.spearman([0.0, 1.0, 8.0, 27.0, 64.0], labels) == pytest.approx(1.0)
    assert metrics.pearson([0.0, 1.0, 8.0, 27.0, 64.0], labels) < 0.95
    assert metrics.spearman([1.0] * 5, labels) == 0.0  # constant output: defined as 0, not NaN


def test_compute_takes_logits_or_scores_and_averages_into_score():
    logits = np.array([[2.0, 0.0], [0.0, 1.0], [3.0, 1.0], [0.0, 5.0]])
    values = metrics.compute(("f1", "accuracy"), logits, [0, 1, 1, 1], num_classes=2)
    assert values["accuracy"] == 0.75 and values["f1"] == pytest.approx(0.8)
    assert values["score"] == pytest.approx((0.75 + 0.8) / 2)
    regression = metrics.compute(("pearson", "spearman"), np.array([[0.1], [0.5], [0.9]]), [0, 1, 2], 1)
    assert regression["pearson"] == pytest.approx(1.0) and regression["score"] == pytest.approx(1.0)
    three = metrics.compute(("macro_f1",), np.eye(3)[[0, 1, 2, 2]], [0, 1, 2, 1], 3)
    assert three["macro_f1"] == pytest.approx((1.0 + 2 / 3 + 2 / 3) / 3)
