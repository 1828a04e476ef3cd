"""SQuAD files in, question-answering windows out, as the official ELECTRA code builds them.

`read_squad` reads a SQuAD 1.1 or 2.0 JSON file (the version from its `version` field, or 2.0
when any question carries `is_impossible`) into `QAExample`s, with an error naming the file and
the question for anything malformed. `make_windows` turns an example into `QAWindow`s:

    [CLS] question [SEP] context window [SEP]      segment ids 0 ... 0 1 ... 1

- the question is cut to `max_query_length` word pieces;
- the context is split on whitespace into words, each word into word pieces; a window takes as
  many context pieces as fit (`max_seq_length - len(question) - 3`), and window starts advance
  by `doc_stride` pieces (the step between starts, as the official code; transformers' `stride`
  is the overlap instead);
- a piece that several windows hold counts for the window where it has the most context
  (`min(left, right) + 0.01 * window length`, the official rule); answers are only read from
  such pieces;
- a training answer maps from its characters to words, from words to pieces (start: the first
  word's first piece; end: the last word's last piece), then to the tightest sub-span whose
  pieces equal the answer text's own; a window that does not hold the whole answer, and every
  window of an unanswerable question, points at [CLS] (position 0). A training answer whose text
  is not at its `answer_start` is skipped and counted, as the official code does.

Each piece keeps its character span in the context (`char_spans`, from
`data/token_offsets.py`, the same in-graph rule the exported model uses), so an answer is cut
from the original context text by character offsets.

Example:
>>> from electra_tf.data.tokenization import ElectraTokenizer
>>> tokenizer = ElectraTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "where", "is", "the",
...                               "river", "it", "flows", "north", "##ern", "hills", "in", "?", "."])
>>> example = QAExample("q1", "Where is the river?", "It flows in the northern hills.",
...                     answers=[("the northern hills", 12)])
>>> window, = make_windows(example, tokenizer, max_seq_length=24, training=True)
>>> [tokenizer.id_to_token(i) for i in window.token_ids[window.start_position:window.end_position + 1]]
['the', 'north', '##ern', 'hills']
>>> example.context[window.char_spans[window.start_position][0]:window.char_spans[window.end_position][1]]
'the northern hills'
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field
from pathlib import Path

from electra_tf.data.token_offsets import traced_tokenize_with_offsets
from electra_tf.utils.errors import ElectraError

# The official settings (max_seq_length 512 there; see default_doc_stride for shorter ones).
MAX_QUERY_LENGTH = 64
DOC_STRIDE = 128


def default_doc_stride(max_seq_length: int) -> int:
    """The official 128 for 512-piece windows; half the window for shorter ones, so that every
    piece is in at most two windows and any answer up to about half a window fits whole in one
    (at 128 the official stride would leave no overlap at all: windows hold ~110 context pieces).

    >>> default_doc_stride(512), default_doc_stride(128)
    (128, 64)
    """
    return min(DOC_STRIDE, max_seq_length // 2)


class QADataError(ElectraError):
    """A SQuAD file that cannot be used as asked."""


@dataclass
class QAExample:
    id: str
    question: str
    context: str
    answers: list[tuple[str, int]] = field(default_factory=list)  # (text, answer_start character)
    is_impossible: bool = False


@dataclass
class QAWindow:
    example_id: str
    token_ids: list[int]
    segment_ids: list[int]
    start_position: int = 0  # training labels; 0 is [CLS] (no answer in this window)
    end_position: int = 0
    # Per position: the (start, end) characters in the context of the piece's word, or None
    # outside the context window; and whether this window is the piece's max-context window.
    char_spans: list[tuple[int, int] | None] = field(default_factory=list)
    is_max_context: list[bool] = field(default_factory=list)


@dataclass
class SquadData:
    examples: list[QAExample]
    version: str  # "1.1" or "2.0"
    skipped: int = 0  # training answers whose text is not at their answer_start


def read_squad(path, training: bool) -> SquadData:
    """The questions of a SQuAD JSON file. `training`: every answerable question must have an
    answer, and only its first answer is kept (as the official code trains)."""
    path = Path(path)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise QADataError(f"{path} does not exist.") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise QADataError(f"{path} is not a SQuAD JSON file ({error}).") from None
    if not isinstance(document, dict) or not isinstance(document.get("data"), list):
        raise QADataError(f"{path}: no 'data' list at the top; a SQuAD file is "
                          '{"version": ..., "data": [{"paragraphs": [...]}]}.')
    examples, version = [], "2.0" if str(document.get("version", "")).lstrip("v").startswith("2") else "1.1"
    for a, article in enumerate(document["data"]):
        for p, paragraph in enumerate(article.get("paragraphs", []) if isinstance(article, dict) else []):
            where = f"{path}: data[{a}].paragraphs[{p}]"
            if not isinstance(paragraph, dict) or not isinstance(paragraph.get("context"), str):
                raise QADataError(f"{where} has no 'context' text.")
            for q, qa in enumerate(paragraph.get("qas", [])):
                examples.append(_example(qa, paragraph["context"], f"{where}.qas[{q}]", training))
                version = "2.0" if "is_impossible" in qa else version
    if not examples:
        raise QADataError(f"{path} holds no questions.")
    return SquadData(examples, version)


def _example(qa, context: str, where: str, training: bool) -> QAExample:
    if not isinstance(qa, dict) or not qa.get("id"):
        raise QADataError(f"{where}: a question without an 'id'.")
    if not isinstance(qa.get("question"), str):
        raise QADataError(f"{where} (id {qa['id']}): no 'question' text.")
    impossible = bool(qa.get("is_impossible", False))
    answers = []
    for answer in qa.get("answers", []):
        if not isinstance(answer, dict) or not isinstance(answer.get("text"), str) or \
                not isinstance(answer.get("answer_start"), int):
            raise QADataError(f"{where} (id {qa['id']}): an answer needs 'text' and an integer 'answer_start'.")
        answers.append((answer["text"], answer["answer_start"]))
    if training and not impossible and not answers:
        raise QADataError(f"{where} (id {qa['id']}): a training question needs an answer "
                          "(or is_impossible: true, for SQuAD 2.0).")
    return QAExample(str(qa["id"]), qa["question"], context, answers[:1] if training else answers, impossible)


def _words(context: str) -> tuple[list[str], list[tuple[int, int]], list[int]]:
    """Whitespace words, their character spans, and each character's word index."""
    words, spans, char_to_word, in_word = [], [], [], False
    for position, character in enumerate(context):
        if character.isspace() or character == "\u202f":  # the official code's whitespace
            in_word = False
        else:
            if not in_word:
                words.append("")
                spans.append([position, position])
            words[-1] += character
            spans[-1][1] = position + 1
            in_word = True
        char_to_word.append(len(words) - 1)
    return words, [tuple(span) for span in spans], char_to_word


@dataclass
class TokenizedContext:
    """A context split into whitespace words and word pieces, once for all its questions."""
    text: str
    words: list[str]
    char_to_word: list[int]
    pieces: list[int]
    piece_spans: list[tuple[int, int]]  # each piece's characters in the context
    first_piece: list[int]  # each word's first piece (the next word's, for a word without pieces)


def tokenize_contexts(contexts: list[str], tokenizer, batch_size: int = 256) -> list[TokenizedContext]:
    """The word pieces of contexts, with each piece's characters (`token_offsets`, the rule the
    served model cuts answers by). SQuAD asks ~5 questions of each paragraph: tokenize it once
    and give it to `make_windows` for each of them."""
    tokenized = []
    for first in range(0, len(contexts), batch_size):
        batch = contexts[first:first + batch_size]
        ids, starts, ends = (values.to_list() for values in traced_tokenize_with_offsets(tokenizer, batch))
        for context, pieces, piece_starts, piece_ends in zip(batch, ids, starts, ends):
            words, _, char_to_word = _words(context)
            piece_words = [char_to_word[start] if start < len(context) else len(words) for start in piece_starts]
            first_piece = [bisect.bisect_left(piece_words, word) for word in range(len(words))]
            tokenized.append(TokenizedContext(context, words, char_to_word, pieces,
                                              list(zip(piece_starts, piece_ends)), first_piece))
    return tokenized


def tokenize_context(context: str, tokenizer) -> TokenizedContext:
    """One context's `TokenizedContext` (see `tokenize_contexts`)."""
    return tokenize_contexts([context], tokenizer)[0]


def tokenize_texts(texts, tokenizer, batch_size: int = 1024) -> dict:
    """{text: word pieces} for many short texts (questions, answers) in a few batched calls."""
    texts = list(dict.fromkeys(texts))
    pieces = {}
    for first in range(0, len(texts), batch_size):
        batch = texts[first:first + batch_size]
        pieces.update(zip(batch, tokenizer.tokenize(batch).to_list()))
    return pieces



def make_windows(example: QAExample, tokenizer, max_seq_length: int, doc_stride: int | None = None,
                 max_query_length: int = MAX_QUERY_LENGTH, training: bool = False,
                 counts: dict | None = None, context: TokenizedContext | None = None,
                 pieces_of: dict | None = None) -> list[QAWindow]:
    """The windows of one question (see the module docstring). `counts["skipped"]` is raised
    for a training answer that is not where it says. `context`: its context, already tokenized.
    `doc_stride`: by default `default_doc_stride(max_seq_length)`. `pieces_of`: text -> its
    word pieces, for questions and answers tokenized ahead in one batch (`tokenize_texts`)."""
    doc_stride = doc_stride or default_doc_stride(max_seq_length)
    if context is None or context.text != example.context:
        context = tokenize_context(example.context, tokenizer)

    def pieces_for(text):
        return pieces_of[text] if pieces_of is not None and text in pieces_of else \
            tokenizer.tokenize([text]).to_list()[0]

    query = pieces_for(example.question)[:max_query_length]
    answer = None  # (first piece, last piece) of a training answer
    if training and not example.is_impossible:
        answer = _training_answer(example, context, pieces_for)
        if answer is None:
            if counts is not None:
                counts["skipped"] = counts.get("skipped", 0) + 1
            return []
    room = max_seq_length - len(query) - 3
    if room < 1:
        raise QADataError(f"max_seq_length {max_seq_length} leaves no room for the context after a "
                          f"{len(query)}-piece question; raise it or lower max_query_length.")
    spans = _window_spans(len(context.pieces), room, doc_stride)
    windows = [_window(example.id, tokenizer, query, context, spans, number) for number in range(len(spans))]
    offset = len(query) + 2  # [CLS] question [SEP]
    for window, (start, length) in zip(windows, spans):
        if answer is not None and start <= answer[0] and answer[1] < start + length:
            window.start_position, window.end_position = answer[0] - start + offset, answer[1] - start + offset
    return windows


def _training_answer(example: QAExample, context: TokenizedContext, pieces_for) -> tuple[int, int] | None:
    """(first piece, last piece) of the first answer, or None when it is not where its
    answer_start says (the official reader skips such examples)."""
    words, char_to_word, pieces, first_piece = context.words, context.char_to_word, context.pieces, context.first_piece
    text, start_char = example.answers[0]
    end_char = start_char + len(text) - 1
    found = 0 <= start_char <= end_char < len(example.context) and \
        " ".join(text.split()) in " ".join(words[char_to_word[start_char]:char_to_word[end_char] + 1])
    if not found:
        return None
    first_word, last_word = char_to_word[start_char], char_to_word[end_char]
    last = first_piece[last_word + 1] - 1 if last_word + 1 < len(words) else len(pieces) - 1
    return _tightest_span(pieces, first_piece[first_word], last, pieces_for(text))


def _window_spans(num_pieces: int, room: int, doc_stride: int) -> list[tuple[int, int]]:
    """(first context piece, length) of each window: `room` pieces, `doc_stride` apart."""
    spans, start = [], 0
    while True:
        length = min(num_pieces - start, room)
        spans.append((start, length))
        if start + length >= num_pieces:
            return spans
        start += min(length, doc_stride)


def _window(example_id, tokenizer, query: list[int], context: TokenizedContext, spans, number: int) -> QAWindow:
    """`[CLS] question [SEP] context window [SEP]` of window `number`, with each position's
    characters and whether it is the piece's max-context window."""
    offset = len(query) + 2
    window = QAWindow(example_id, [tokenizer.cls_id, *query, tokenizer.sep_id], [0] * offset,
                      char_spans=[None] * offset, is_max_context=[False] * offset)
    start, length = spans[number]
    for piece in range(start, start + length):
        window.token_ids.append(context.pieces[piece])
        window.segment_ids.append(1)
        window.char_spans.append(context.piece_spans[piece])
        window.is_max_context.append(_is_max_context(spans, number, piece))
    window.token_ids.append(tokenizer.sep_id)
    window.segment_ids.append(1)
    window.char_spans.append(None)
    window.is_max_context.append(False)
    return window


def _tightest_span(pieces: list[int], first: int, last: int, answer_pieces: list[int]) -> tuple[int, int]:
    """The official narrowing: the first sub-span of [first, last] whose pieces are the answer
    text's own pieces (the answer " 1895" inside the word "(1895)" is the piece "1895"), else
    the whole span."""
    for start in range(first, last + 1):
        for end in range(last, start - 1, -1):
            if pieces[start:end + 1] == answer_pieces:
                return start, end
    return first, last


def _is_max_context(spans, current: int, piece: int) -> bool:
    best, best_score = None, None
    for number, (start, length) in enumerate(spans):
        end = start + length - 1
        if start <= piece <= end:
            score = min(piece - start, end - piece) + 0.01 * length
            if best_score is None or score > best_score:
                best, best_score = number, score
    return best == current
