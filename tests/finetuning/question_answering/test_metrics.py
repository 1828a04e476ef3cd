"""The official SQuAD scores on hand-worked cases."""

import pytest

from electra_tf.finetuning.question_answering.metrics import evaluate_v1, evaluate_v2, f1_score, normalize_answer


def test_normalisation_and_f1():
    assert normalize_answer("  An Apple, a Day!  ") == "apple day"
    assert f1_score("the cat sat", "a cat sat down") == pytest.approx(2 * (2 / 2) * (2 / 3) / (1 + 2 / 3))
    assert f1_score("", "") == 1.0 and f1_score("x", "") == 0.0 and f1_score("dog", "cat") == 0.0


def test_v1_takes_the_best_gold_and_counts_missing_predictions_as_wrong():
    gold = {"a": ["Denver Broncos", "Broncos"], "b": ["in 1902"], "c": ["four"]}
    scores = evaluate_v1(gold, {"a": "the Broncos", "b": "1902"})
    assert scores["exact_match"] == pytest.approx(100 / 3)
    assert scores["f1"] == pytest.approx(100 * (1 + 2 / 3) / 3)


def test_v2_splits_thresholds_and_best_threshold():
    gold = {"h1": ["Paris"], "h2": ["blue whale"], "n1": [], "n2": []}
    predictions = {"h1": "Paris", "h2": "whale", "n1": "", "n2": "London"}
    no_answer = {"h1": 0.1, "h2": 0.4, "n1": 0.9, "n2": 0.6}
    scores = evaluate_v2(gold, predictions, no_answer)  # threshold 1.0: predictions as given
    assert (scores["exact"], scores["HasAns_exact"], scores["NoAns_exact"]) == (50.0, 50.0, 50.0)
    assert scores["f1"] == pytest.approx(100 * (1 + 2 / 3 + 1 + 0) / 4)
    assert scores["HasAns_total"] == 2 and scores["NoAns_total"] == 2
    # At threshold 0.5 n2's "London" becomes "" (right); nothing else moves.
    assert evaluate_v2(gold, predictions, no_answer, threshold=0.5)["exact"] == 75.0
    # The official search starts from "" everywhere (2 of 4 right), admits questions by rising
    # no-answer probability: h1 +1 (3, best, at 0.1), h2 +0 (a tie keeps 0.1), n2 -1, n1 0.
    assert (scores["best_exact"], scores["best_exact_thresh"]) == (75.0, 0.1)
