"""The official SQuAD evaluation: exact match and F1 for SQuAD 1.1, and for 2.0 the no-answer
threshold, the HasAns/NoAns splits and the best threshold, in the official scripts' names and
scale (percent).

An answer is normalised before it is compared: lower case, punctuation removed, the articles
a/an/the removed, whitespace collapsed. Exact match is equality of normalised strings; F1 is
the overlap of their token bags; both take the best over a question's gold answers. For 2.0 an
unanswerable question's only gold answer is "" (exact and F1 are then 1 only for ""). A
question without a prediction counts as answered wrongly (the official 1.1 script does the
same; the 2.0 script stops with a KeyError).

>>> normalize_answer("The  Eiffel tower!")
'eiffel tower'
>>> round(f1_score("the Eiffel Tower in Paris", "Eiffel Tower"), 4)
0.6667
>>> evaluate_v1({"q1": ["Denver Broncos", "The Broncos"], "q2": ["1985"]}, {"q1": "the broncos", "q2": "1986"})
{'exact_match': 50.0, 'f1': 50.0}
"""

from __future__ import annotations

import collections
import re
import string

_PUNCTUATION = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(text: str) -> str:
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match_score(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1_score(prediction: str, gold: str) -> float:
    predicted, expected = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if not predicted or not expected:  # "" against "": 1 (2.0's no-answer), else 0
        return float(predicted == expected)
    common = sum((collections.Counter(predicted) & collections.Counter(expected)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(expected)
    return 2 * precision * recall / (precision + recall)


def _best(metric, prediction: str, golds: list[str]) -> float:
    return max(metric(prediction, gold) for gold in golds)


def evaluate_v1(gold_answers: dict[str, list[str]], predictions: dict[str, str]) -> dict:
    """SQuAD 1.1: `gold_answers` question id -> answer texts; `predictions` id -> text."""
    exact = f1 = 0.0
    for qid, golds in gold_answers.items():
        if qid in predictions:
            exact += _best(exact_match_score, predictions[qid], golds)
            f1 += _best(f1_score, predictions[qid], golds)
    total = max(len(gold_answers), 1)
    return {"exact_match": 100.0 * exact / total, "f1": 100.0 * f1 / total}


def evaluate_v2(gold_answers: dict[str, list[str]], predictions: dict[str, str],
                no_answer_probabilities: dict[str, float] | None = None, threshold: float = 1.0) -> dict:
    """SQuAD 2.0: `gold_answers` id -> answer texts ([] for an unanswerable question);
    `no_answer_probabilities` id -> how likely the question has no answer (the official
    na_prob; any score that grows with it works for the best threshold). A prediction is
    replaced by "" where that value exceeds `threshold`, as the official script does."""
    golds = {qid: [a for a in answers if normalize_answer(a)] or [""] for qid, answers in gold_answers.items()}
    has_answer = {qid: answers != [""] for qid, answers in golds.items()}
    raw_exact = {qid: _best(exact_match_score, predictions.get(qid, None) or "", g) if qid in predictions else 0.0
                 for qid, g in golds.items()}
    raw_f1 = {qid: _best(f1_score, predictions.get(qid, None) or "", g) if qid in predictions else 0.0
              for qid, g in golds.items()}
    na = {qid: (no_answer_probabilities or {}).get(qid, 0.0) for qid in golds}

    def thresholded(scores):
        return {qid: float(not has_answer[qid]) if na[qid] > threshold else score for qid, score in scores.items()}

    exact, f1 = thresholded(raw_exact), thresholded(raw_f1)
    result = _split(exact, f1, list(golds))
    for name, ids in (("HasAns", [q for q in golds if has_answer[q]]), ("NoAns", [q for q in golds if not has_answer[q]])):
        if ids:
            result.update({f"{name}_{key}": value for key, value in _split(exact, f1, ids).items()})
    for key, scores in (("exact", raw_exact), ("f1", raw_f1)):
        best, best_threshold = _best_threshold(predictions, scores, na, has_answer)
        result[f"best_{key}"], result[f"best_{key}_thresh"] = best, best_threshold
    return result


def _split(exact: dict, f1: dict, ids: list[str]) -> dict:
    total = max(len(ids), 1)
    return {"exact": 100.0 * sum(exact[q] for q in ids) / total, "f1": 100.0 * sum(f1[q] for q in ids) / total,
            "total": len(ids)}


def _best_threshold(predictions, scores, na, has_answer) -> tuple[float, float]:
    """The official search: start from answering "" everywhere (every NoAns right), then admit
    questions in order of rising no-answer probability, keeping the best running total."""
    current = best = sum(1 for qid in scores if not has_answer[qid])
    best_threshold = 0.0
    for qid in sorted(scores, key=lambda q: na[q]):
        if has_answer[qid]:
            current += scores[qid]
        elif predictions.get(qid):
            current -= 1
        if current > best:
            best, best_threshold = current, na[qid]
    return 100.0 * best / max(len(scores), 1), best_threshold
