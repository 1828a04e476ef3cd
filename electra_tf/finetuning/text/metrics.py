"""The official GLUE metrics, on numpy arrays of predictions and gold labels.

accuracy; F1 of the positive class (label index 1: MRPC, QQP); Matthews correlation (CoLA,
multi-class form of Gorodkin 2004, equal to sklearn's); Pearson and Spearman correlation
(STS-B, via scipy.stats); macro F1 for tasks of your own with more than two classes.
Tagging is scored per word: the prediction at each word's first word piece.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from electra_tf.models.preprocessing import IGNORE_LABEL


def accuracy(predictions, labels) -> float:
    return float(np.mean(np.asarray(predictions) == np.asarray(labels)))


def f1(predictions, labels, positive: int = 1) -> float:
    """F1 of one class (0 when it is never predicted and never true)."""
    predictions, labels = np.asarray(predictions), np.asarray(labels)
    true_positive = np.sum((predictions == positive) & (labels == positive))
    predicted, actual = np.sum(predictions == positive), np.sum(labels == positive)
    return float(2 * true_positive / (predicted + actual)) if predicted + actual else 0.0


def macro_f1(predictions, labels, num_classes: int) -> float:
    return float(np.mean([f1(predictions, labels, k) for k in range(num_classes)]))


def matthews_correlation(predictions, labels) -> float:
    """MCC from the confusion matrix; 0 when a margin is constant (as sklearn).

    Example:
    >>> round(matthews_correlation([1, 1, 0, 0, 1], [1, 0, 0, 0, 1]), 4)
    0.6667
    """
    predictions, labels = np.asarray(predictions), np.asarray(labels)
    classes = np.union1d(predictions, labels)
    confusion = np.array([[np.sum((labels == t) & (predictions == p)) for p in classes] for t in classes],
                         dtype=np.float64)
    total, correct = confusion.sum(), np.trace(confusion)
    true_counts, predicted_counts = confusion.sum(axis=1), confusion.sum(axis=0)
    numerator = correct * total - true_counts @ predicted_counts
    denominator = np.sqrt((total**2 - predicted_counts @ predicted_counts) *
                          (total**2 - true_counts @ true_counts))
    return float(numerator / denominator) if denominator else 0.0


def pearson(predictions, labels) -> float:
    return _correlation(stats.pearsonr, predictions, labels)


def spearman(predictions, labels) -> float:
    return _correlation(stats.spearmanr, predictions, labels)


def _correlation(function, predictions, labels) -> float:
    predictions, labels = np.asarray(predictions, np.float64), np.asarray(labels, np.float64)
    if predictions.size < 2 or np.ptp(predictions) == 0 or np.ptp(labels) == 0:
        return 0.0  # undefined for a constant input; an untrained regressor can produce one
    return float(function(predictions, labels)[0])


CLASSIFICATION_METRICS = {
    "accuracy": lambda p, y, k: accuracy(p, y),
    "f1": lambda p, y, k: f1(p, y),
    "mcc": lambda p, y, k: matthews_correlation(p, y),
    "macro_f1": lambda p, y, k: macro_f1(p, y, k),
}
REGRESSION_METRICS = {"pearson": pearson, "spearman": spearman}


def compute(names, outputs, labels, num_classes: int) -> dict:
    """{name: value} for model `outputs` (logits [N, classes], or scores [N] / [N, 1] for
    regression) against gold `labels`, plus `score`: the mean of the named metrics, which is
    how GLUE combines a task's metrics and what picks the best epoch. For tagging, outputs
    [N, L, classes] and word-piece labels [N, L] (IGNORE_LABEL where no word starts): only
    the labelled positions count.

    Example:
    >>> logits = np.eye(3)[[[0, 1, 2, 0], [1, 1, 0, 0]]]          # predicts 0 1 2 0 / 1 1 0 0
    >>> compute(["accuracy"], logits, np.array([[-1, 1, 0, -1], [-1, 1, -1, -1]]), 3)
    {'accuracy': 0.6666666666666666, 'score': 0.6666666666666666}
    """
    outputs, labels = np.asarray(outputs), np.asarray(labels)
    if labels.ndim == 2:
        labelled = labels != IGNORE_LABEL
        outputs, labels = outputs[labelled], labels[labelled]
    if num_classes == 1:
        scores = outputs.reshape(-1)
        values = {name: REGRESSION_METRICS[name](scores, labels) for name in names}
    else:
        predictions = outputs.argmax(axis=-1)
        values = {name: CLASSIFICATION_METRICS[name](predictions, labels, num_classes) for name in names}
    values["score"] = float(np.mean([values[name] for name in names]))
    return values


def predicted_metrics(model, eval_inputs, eval_labels, names, num_classes: int) -> dict:
    """`compute` on the model's predictions for `eval_inputs` (classification, regression and
    tagging)."""
    return compute(names, model.predict(eval_inputs, verbose=0), np.asarray(eval_labels), num_classes)
