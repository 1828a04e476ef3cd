"""From the question-answering model's outputs on each window to one answer per question, as
the official ELECTRA post-processing does it.

For every window of a question, the candidate spans are the model's beam (start x end, 20 x
20 for the official head; the top 20 starts and top 20 ends for the plain head). A candidate is
dropped if it starts at [CLS], starts or ends outside the context, starts at a piece whose
max-context window is another one, ends before it starts, or is longer than
`max_answer_length` pieces. The rest are ranked by start + end score (log-probabilities for
the official head, logits for the plain one), their texts cut from the context by character
offsets widened to whole words (`data/token_offsets.whole_word_span`: a span never starts or
ends inside a word, as the official `get_final_text` maps pieces back to the original words);
duplicates are dropped and the first `n_best` kept, with softmax probabilities.

SQuAD 1.1: the answer is the best text. SQuAD 2.0: the answer is the best non-empty text, and
the question's null score is the smallest answerability logit over its windows (the official
`null_odds`); the official evaluation answers "" where it exceeds the threshold (-2.75).

>>> from electra_tf.finetuning.question_answering.squad import QAExample, QAWindow
>>> example = QAExample("q1", "Where?", "In the hills.")
>>> window = QAWindow("q1", [2, 9, 3, 10, 11, 12, 3], [0, 0, 0, 1, 1, 1, 1],
...                   char_spans=[None, None, None, (0, 2), (3, 6), (7, 13), None],
...                   is_max_context=[False, False, False, True, True, True, False])
>>> beam = WindowBeam(starts=[(5, -0.1), (4, -2.5)], ends=[[(5, -0.2), (3, -1.0)], [(5, -0.3), (4, -3.0)]])
>>> answers = best_answers(example, [window], [beam])
>>> answers.text, [candidate.text for candidate in answers.n_best]
('hills.', ['hills.', 'the hills.', 'the'])
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from electra_tf.data.token_offsets import whole_word_span

N_BEST = 20
MAX_ANSWER_LENGTH = 30


@dataclass
class WindowBeam:
    """The model's candidates for one window: `starts` (position, score) and, for each start,
    `ends` (position, score); and the window's answerability logit (2.0)."""
    starts: list[tuple[int, float]]
    ends: list[list[tuple[int, float]]]
    null_logit: float = 0.0


@dataclass
class Candidate:
    text: str
    score: float
    probability: float = 0.0
    start_char: int = 0
    end_char: int = 0


@dataclass
class QuestionAnswer:
    question_id: str
    text: str  # 1.1: the best text; 2.0: the best non-empty text
    null_score: float  # 2.0's null odds: the smallest answerability logit over the windows
    n_best: list[Candidate] = field(default_factory=list)


def best_answers(example, windows, beams, n_best: int = N_BEST,
                 max_answer_length: int = MAX_ANSWER_LENGTH) -> QuestionAnswer:
    """The answer to `example` from its `windows` and the model's `beams` for them (in order)."""
    if len(windows) != len(beams):
        raise ValueError(f"question {example.id}: {len(windows)} windows but {len(beams)} model outputs.")
    ranked = []
    for window, beam in zip(windows, beams):
        length = len(window.token_ids)
        for (start, start_score), ends in zip(beam.starts, beam.ends):
            if start == 0 or start >= length or window.char_spans[start] is None or not window.is_max_context[start]:
                continue
            for end, end_score in ends:
                if end >= length or window.char_spans[end] is None or end < start or \
                        end - start + 1 > max_answer_length:
                    continue
                ranked.append((start_score + end_score, window.char_spans[start][0], window.char_spans[end][1]))
    ranked.sort(key=lambda candidate: -candidate[0])
    candidates, seen = [], set()
    for score, start_char, end_char in ranked:
        start_char, end_char = whole_word_span(example.context, start_char, end_char)
        text = example.context[start_char:end_char]
        if text in seen:
            continue
        seen.add(text)
        candidates.append(Candidate(text, score, start_char=start_char, end_char=end_char))
        if len(candidates) == n_best:
            break
    if candidates:
        top = max(c.score for c in candidates)
        total = sum(math.exp(c.score - top) for c in candidates)
        for candidate in candidates:
            candidate.probability = math.exp(candidate.score - top) / total
    best = next((c.text for c in candidates if c.text), "")
    return QuestionAnswer(example.id, best, min((b.null_logit for b in beams), default=0.0), candidates)
