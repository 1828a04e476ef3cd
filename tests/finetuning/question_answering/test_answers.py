"""The official post-processing: which candidate spans count, ranking, duplicates, null scores."""

import pytest

from electra_tf.finetuning.question_answering.answers import WindowBeam, best_answers
from electra_tf.finetuning.question_answering.squad import QAExample, QAWindow

CONTEXT = "In the northern hills."  # words: In(0,2) the(3,6) northern(7,15) hills.(16,22)
SPANS = [None, None, None, (0, 2), (3, 6), (7, 15), (16, 22), None]  # [CLS] q [SEP] 4 words [SEP]


def window(max_context=(True, True, True, True)):
    return QAWindow("q", [2, 9, 3, 10, 11, 12, 13, 3], [0, 0, 0, 1, 1, 1, 1, 1], char_spans=list(SPANS),
                    is_max_context=[False] * 3 + list(max_context) + [False])


def test_invalid_spans_are_dropped():
    example = QAExample("q", "Where?", CONTEXT)
    beam = WindowBeam(starts=[(0, 0.0), (1, -0.1), (7, -0.2), (4, -0.3), (5, -0.4)],
                      ends=[[(6, 0.0)], [(6, 0.0)], [(7, 0.0)], [(3, 0.0), (6, -1.0)], [(6, -0.5), (7, -0.1)]])
    answer = best_answers(example, [window()], [beam], max_answer_length=2)
    # [CLS], question and [SEP] starts go; "the northern hills." is 3 pieces (> 2); end before start goes.
    assert [c.text for c in answer.n_best] == ["northern hills."]
    assert answer.n_best[0].score == pytest.approx(-0.9) and answer.n_best[0].probability == pytest.approx(1.0)


def test_only_the_max_context_window_may_start_an_answer_and_texts_are_unique():
    example = QAExample("q", "Where?", CONTEXT)
    beam = WindowBeam(starts=[(5, -0.1), (6, -0.2)], ends=[[(6, -0.1)], [(6, -0.1)]])
    elsewhere = window(max_context=(True, True, False, True))  # "northern" is better held elsewhere
    answer = best_answers(example, [elsewhere, window()], [beam, beam])
    assert [c.text for c in answer.n_best] == ["northern hills.", "hills."]  # once each, from window 2
    assert sum(c.probability for c in answer.n_best) == pytest.approx(1.0)
    assert answer.n_best[0].start_char == 7 and answer.n_best[0].end_char == 22


def test_null_score_is_the_smallest_answerability_logit_and_n_best_is_capped():
    example = QAExample("q", "Where?", CONTEXT)
    beams = [WindowBeam(starts=[(s, -s) for s in (3, 4, 5, 6)], ends=[[(e, -e) for e in (3, 4, 5, 6)]] * 4,
                        null_logit=logit) for logit in (1.5, -0.5)]
    answer = best_answers(example, [window(), window()], beams, n_best=3)
    assert answer.null_score == -0.5 and len(answer.n_best) == 3 and answer.text == "In"
    with pytest.raises(ValueError, match="2 windows but 1 model outputs"):
        best_answers(example, [window(), window()], beams[:1])
    nothing = best_answers(example, [window()], [WindowBeam(starts=[(0, 0.0)], ends=[[(0, 0.0)]])])
    assert nothing.text == "" and nothing.n_best == []
