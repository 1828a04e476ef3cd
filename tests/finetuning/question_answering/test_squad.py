"""SQuAD files: versions, clear errors, and the official windows, labels and max-context rule."""

import json

import pytest

from electra_tf.data.tokenization import ElectraTokenizer
from electra_tf.finetuning.question_answering.squad import QADataError, QAExample, make_windows, read_squad

WORDS = ("when did the library open it opened in 1902 with four thousand books and a reading room children "
         "come after school to borrow novels atlases what does hold river rises hills").split()
VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "(", ")", ".", ",", "?", "##s", *WORDS]


@pytest.fixture(scope="module")
def tokenizer():
    return ElectraTokenizer(VOCABULARY)


def squad_file(path, questions, version="1.1", context="The library opened in 1902 with four thousand books."):
    path.write_text(json.dumps({"version": version, "data": [{"title": "t", "paragraphs": [
        {"context": context, "qas": questions}]}]}), encoding="utf-8")
    return path


def test_versions_and_examples(tmp_path):
    one = read_squad(squad_file(tmp_path / "a.json", [
        {"id": "q1", "question": "When did it open?", "answers": [{"text": "1902", "answer_start": 22},
                                                                  {"text": "in 1902", "answer_start": 19}]}]),
                     training=False)
    assert one.version == "1.1" and one.examples[0].answers == [("1902", 22), ("in 1902", 19)]
    assert read_squad(tmp_path / "a.json", training=True).examples[0].answers == [("1902", 22)]  # the first
    two = read_squad(squad_file(tmp_path / "b.json", [
        {"id": "q2", "question": "What does it hold?", "answers": [], "is_impossible": True}], version="1.1"),
                     training=True)
    assert two.version == "2.0" and two.examples[0].is_impossible  # recognised from is_impossible


@pytest.mark.parametrize("content, message", [
    ("not json", "a.json is not a SQuAD JSON file"),
    ('{"version": "1.1"}', "a.json: no 'data' list"),
    ('{"data": []}', "a.json holds no questions"),
    ('{"data": [{"paragraphs": [{"context": "x", "qas": [{"question": "q?", "answers": []}]}]}]}',
     r"data\[0\].paragraphs\[0\].qas\[0\]: a question without an 'id'"),
    ('{"data": [{"paragraphs": [{"context": "x", "qas": [{"id": "q9", "question": "q?", "answers": []}]}]}]}',
     r"qas\[0\] \(id q9\): a training question needs an answer"),
    ('{"data": [{"paragraphs": [{"qas": []}]}]}', r"paragraphs\[0\] has no 'context' text"),
])
def test_malformed_files_name_the_file_and_the_question(tmp_path, content, message):
    (tmp_path / "a.json").write_text(content, encoding="utf-8")
    with pytest.raises(QADataError, match=message):
        read_squad(tmp_path / "a.json", training=True)


def test_a_short_context_is_one_window_with_the_answer_labelled(tokenizer):
    example = QAExample("q1", "When did the library open?", "The library opened in 1902 with four thousand books.",
                        [("in 1902", 19)])
    window, = make_windows(example, tokenizer, max_seq_length=32, training=True)
    query = tokenizer.tokenize([example.question]).to_list()[0]
    assert window.token_ids[:len(query) + 2] == [tokenizer.cls_id, *query, tokenizer.sep_id]
    assert window.token_ids[-1] == tokenizer.sep_id and set(window.segment_ids[len(query) + 2:]) == {1}
    start, end = window.start_position, window.end_position
    assert [tokenizer.id_to_token(i) for i in window.token_ids[start:end + 1]] == ["in", "1902"]
    assert example.context[window.char_spans[start][0]:window.char_spans[end][1]] == "in 1902"


def test_long_contexts_slide_and_each_piece_has_one_max_context_window(tokenizer):
    context = " ".join(["children come after school to borrow novels and atlases ."] * 6) + \
        " the library opened in 1902 ."
    example = QAExample("q1", "When did the library open?", context, [("1902", context.index("1902"))])
    windows = make_windows(example, tokenizer, max_seq_length=32, doc_stride=8, training=True)
    query_length = len(tokenizer.tokenize([example.question]).to_list()[0])
    room = 32 - query_length - 3
    pieces = len(tokenizer.tokenize(context.split()).flat_values)
    assert len(windows) == 1 + -(-(pieces - room) // 8)  # starts every 8 pieces until the end fits
    for window in windows:
        assert len(window.token_ids) <= 32 and len(window.token_ids) == len(window.char_spans)
    # Every context piece is the max-context piece of exactly one window.
    owners = {}
    for number, window in enumerate(windows):
        for position, (span, best) in enumerate(zip(window.char_spans, window.is_max_context)):
            if best:
                assert span is not None and span not in owners
                owners[span] = number
    assert len(owners) == len({s for w in windows for s in w.char_spans if s is not None})
    # The answer is labelled in the windows that hold it, [CLS] elsewhere.
    holding = [w for w in windows if w.start_position]
    assert holding and all(context[w.char_spans[w.start_position][0]:w.char_spans[w.end_position][1]] == "1902"
                           for w in holding)
    assert windows[0].start_position == windows[0].end_position == 0


def test_impossible_questions_misplaced_answers_and_the_tightest_span(tokenizer):
    impossible = QAExample("q2", "What does the river hold?", "The river rises in the hills.", is_impossible=True)
    assert all(w.start_position == w.end_position == 0
               for w in make_windows(impossible, tokenizer, max_seq_length=32, training=True))
    counts = {}
    misplaced = QAExample("q3", "When?", "It opened in 1902.", [("1902", 0)])
    assert make_windows(misplaced, tokenizer, max_seq_length=32, training=True, counts=counts) == []
    assert counts == {"skipped": 1}
    # The answer "1902" inside the word "(1902)": narrowed to its own piece, cut without brackets.
    bracketed = QAExample("q4", "When?", "It opened (1902) with books.", [("1902", 11)])
    window, = make_windows(bracketed, tokenizer, max_seq_length=32, training=True)
    assert tokenizer.id_to_token(window.token_ids[window.start_position]) == "1902"
    assert window.start_position == window.end_position
    assert bracketed.context[slice(window.char_spans[window.start_position][0],
                                   window.char_spans[window.end_position][1])] == "1902"
    with pytest.raises(QADataError, match="leaves no room for the context"):
        make_windows(bracketed, tokenizer, max_seq_length=4)


def test_a_context_tokenized_once_serves_each_of_its_questions(tokenizer):
    from electra_tf.finetuning.question_answering.squad import tokenize_context

    context_text = "The library opened in 1902 with four thousand books."
    context = tokenize_context(context_text, tokenizer)
    for question, answer in (("When did it open?", ("1902", 22)), ("What does it hold?", ("four thousand books", 32))):
        example = QAExample("q", question, context_text, [answer])
        given = make_windows(example, tokenizer, max_seq_length=32, training=True, context=context)
        assert given == make_windows(example, tokenizer, max_seq_length=32, training=True)
