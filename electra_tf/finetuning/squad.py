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

Each piece keeps its character span in the context (`char_spans`: the piece's characters
found again in its word, through the tokenizer's lower-casing and accent stripping), so an
answer is cut from the original context text by character offsets.

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

import json
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from electra_tf.errors import ElectraError

# The official settings (max_seq_length 512 there; see docs/finetuning.md for shorter ones).
MAX_QUERY_LENGTH = 64
DOC_STRIDE = 128


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
    first_piece: list[int]  # each word's first piece


def tokenize_context(context: str, tokenizer) -> TokenizedContext:
    """The word pieces of a context (SQuAD asks ~5 questions of each: tokenize it once and give
    it to `make_windows` for each of them)."""
    words, word_spans, char_to_word = _words(context)
    pieces_per_word = tokenizer.tokenize(words).to_list() if words else []
    pieces, piece_spans, first_piece = [], [], []
    for index, word_pieces in enumerate(pieces_per_word):
        first_piece.append(len(pieces))
        word_pieces = word_pieces or [tokenizer.unk_id]  # a word with no pieces still has a place
        pieces += word_pieces
        piece_spans += piece_char_spans(words[index], word_spans[index][0],
                                        [tokenizer.id_to_token(i) for i in word_pieces])
    return TokenizedContext(context, words, char_to_word, pieces, piece_spans, first_piece)


def make_windows(example: QAExample, tokenizer, max_seq_length: int, doc_stride: int = DOC_STRIDE,
                 max_query_length: int = MAX_QUERY_LENGTH, training: bool = False,
                 counts: dict | None = None, context: TokenizedContext | None = None) -> list[QAWindow]:
    """The windows of one question (see the module docstring). `counts["skipped"]` is raised
    for a training answer that is not where it says. `context`: its context, already tokenized."""
    if context is None or context.text != example.context:
        context = tokenize_context(example.context, tokenizer)
    words, char_to_word, pieces = context.words, context.char_to_word, context.pieces
    piece_spans, first_piece = context.piece_spans, context.first_piece
    query = tokenizer.tokenize([example.question]).to_list()[0][:max_query_length]

    answer = None  # (first piece, last piece) of a training answer
    if training and not example.is_impossible:
        text, start_char = example.answers[0]
        end_char = start_char + len(text) - 1
        found = 0 <= start_char <= end_char < len(example.context) and \
            " ".join(text.split()) in " ".join(words[char_to_word[start_char]:char_to_word[end_char] + 1])
        if not found:
            if counts is not None:
                counts["skipped"] = counts.get("skipped", 0) + 1
            return []
        first_word, last_word = char_to_word[start_char], char_to_word[end_char]
        last = first_piece[last_word + 1] - 1 if last_word + 1 < len(words) else len(pieces) - 1
        answer = _tightest_span(pieces, first_piece[first_word], last, tokenizer.tokenize([text]).to_list()[0])

    room = max_seq_length - len(query) - 3
    if room < 1:
        raise QADataError(f"max_seq_length {max_seq_length} leaves no room for the context after a "
                          f"{len(query)}-piece question; raise it or lower max_query_length.")
    spans = []  # (first context piece, length) of each window
    start = 0
    while True:
        length = min(len(pieces) - start, room)
        spans.append((start, length))
        if start + length >= len(pieces):
            break
        start += min(length, doc_stride)

    windows = []
    offset = len(query) + 2  # [CLS] question [SEP]
    for number, (start, length) in enumerate(spans):
        window = QAWindow(example.id, [tokenizer.cls_id, *query, tokenizer.sep_id], [0] * offset,
                          char_spans=[None] * offset, is_max_context=[False] * offset)
        for piece in range(start, start + length):
            window.token_ids.append(pieces[piece])
            window.segment_ids.append(1)
            window.char_spans.append(piece_spans[piece])
            window.is_max_context.append(_is_max_context(spans, number, piece))
        window.token_ids.append(tokenizer.sep_id)
        window.segment_ids.append(1)
        window.char_spans.append(None)
        window.is_max_context.append(False)
        if answer is not None and start <= answer[0] and answer[1] < start + length:
            window.start_position, window.end_position = answer[0] - start + offset, answer[1] - start + offset
        windows.append(window)
    return windows


def _normalized(word: str) -> tuple[str, list[int]]:
    """The word as the tokenizer sees it (lower case, accents stripped) and, for each of its
    characters, the index of the original character it came from."""
    text, origin = [], []
    for index, character in enumerate(word):
        for normal in unicodedata.normalize("NFD", character.lower()):
            if unicodedata.category(normal) != "Mn":
                text.append(normal)
                origin.append(index)
    return "".join(text), origin


def _splits_alone(character: str) -> bool:
    """Punctuation and CJK ideographs: the tokenizer makes each one a word of its own."""
    code = ord(character)
    return (33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126
            or unicodedata.category(character).startswith("P") or 0x4E00 <= code <= 0x9FFF
            or 0x3400 <= code <= 0x4DBF or 0xF900 <= code <= 0xFAFF)


def piece_char_spans(word: str, word_start: int, tokens: list[str]) -> list[tuple[int, int]]:
    """Each word piece's (start, end) characters in the context, for a word starting at
    `word_start`: a piece is found again in the normalised word ("##" dropped), [UNK] covers a
    punctuation mark or a run up to the next one; a piece that cannot be placed gets the rest of
    the word.

    >>> piece_char_spans("Hills.", 10, ["hills", "."]), piece_char_spans("Ünited", 0, ["unit", "##ed"])
    ([(10, 15), (15, 16)], [(0, 4), (4, 6)])
    """
    normal, origin = _normalized(word)
    spans, position = [], 0
    for token in tokens:
        piece = token[2:] if token.startswith("##") else token
        if token == "[UNK]":
            end = position + 1
            if position < len(normal) and not _splits_alone(normal[position]):
                while end < len(normal) and not _splits_alone(normal[end]):
                    end += 1
        elif normal.startswith(piece, position):
            end = position + len(piece)
        else:
            end = len(normal)
        end = max(min(end, len(normal)), position + 1) if position < len(normal) else position
        if position >= len(normal):  # nothing left to place it on: the word's end
            spans.append((word_start + len(word), word_start + len(word)))
            continue
        first, last = origin[position], origin[end - 1]
        spans.append((word_start + first, word_start + last + 1))
        position = end
    return spans


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
