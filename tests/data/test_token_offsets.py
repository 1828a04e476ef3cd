"""Word pieces with character offsets: the same ids as the tokenizer, spans that cut the
original text, defined behaviour on hard text."""

import pytest
import tensorflow as tf

from electra_tf.data.token_offsets import tokenize_with_offsets
from electra_tf.data.tokenization import ElectraTokenizer

VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cafe", "'", "s", "(", ")", ",", "1902",
              "book", "##s", "na", "##ive", "istanbul", "fine", "東", "京", "x", "e", "##e", "."]

HARD = ["Café's books (1902),", "İstanbul ﬁne Straße", "naïve “quoted” 東京 x", "a\u0301b \u200b c\tz", "", "   ",
        "\u00a0x", "e\u0301\u0301e.", "x" * 150, "The\n\nthe"]


@pytest.fixture(scope="module")
def tokenizer():
    return ElectraTokenizer(VOCABULARY)


def test_ids_equal_the_tokenizers_and_spans_cut_the_text(tokenizer):
    ids, starts, ends = (v.to_list() for v in tokenize_with_offsets(tokenizer, HARD))
    assert ids == tokenizer.tokenize(HARD).to_list()
    for text, row_starts, row_ends in zip(HARD, starts, ends):
        assert all(0 <= s < e <= len(text) for s, e in zip(row_starts, row_ends)), text
        assert row_starts == sorted(row_starts)
    pieces = [HARD[0][s:e] for s, e in zip(starts[0], ends[0])]
    assert pieces == ["Café", "'", "s", "book", "s", "(", "1902", ")", ","]
    assert [HARD[2][s:e] for s, e in zip(starts[2], ends[2])][:2] == ["na", "ïve"]
    assert [HARD[1][s:e] for s, e in zip(starts[1], ends[1])][:2] == ["İstanbul", "ﬁne"]
    assert [HARD[8][s:e] for s, e in zip(starts[8], ends[8])] == ["x" * 150]  # one [UNK] for a too-long word
    assert starts[4] == starts[5] == []


def test_invalid_utf8_is_repaired_and_counted_in_the_repaired_text(tokenizer):
    ids, starts, ends = (v.to_list() for v in tokenize_with_offsets(tokenizer, [b"the \xff book"]))
    repaired = "the \ufffd book"
    assert [repaired[s:e] for s, e in zip(starts[0], ends[0])] == ["the", "\ufffd", "book"]
    assert ids[0] == [5, 1, 13]


@pytest.mark.parametrize("settings", [
    dict(do_lower_case=False), dict(do_lower_case=True, strip_accents=False),
    dict(do_lower_case=False, tokenize_chinese_chars=False), dict(do_lower_case=False, strip_accents=True)])
def test_every_tokenizer_setting_gives_its_ids_and_spans(settings):
    from electra_tf.data.vocabulary_files import TokenizerSettings

    cased = ElectraTokenizer(VOCABULARY + ["Café", "café", "The", "İstanbul", "Straße", "naïve", "東京"],
                             TokenizerSettings.from_huggingface(settings))
    ids, starts, ends = (v.to_list() for v in tokenize_with_offsets(cased, HARD))
    assert ids == cased.tokenize(HARD).to_list()
    for text, row_starts, row_ends in zip(HARD, starts, ends):
        assert all(0 <= s < e <= len(text) for s, e in zip(row_starts, row_ends)), text
    first = [HARD[0][s:e] for s, e in zip(starts[0], ends[0])]
    assert first[0] == "Café" and [cased.id_to_token(i) for i in ids[0]][0] == (
        "Café" if not cased.settings.lowercase and not cased.settings.strip_accents else
        "café" if not cased.settings.strip_accents else "[UNK]" if not cased.settings.lowercase else "cafe")


def test_whole_word_spans_in_graph_equal_the_python_rule():
    import random

    from electra_tf.data.token_offsets import whole_word_span, whole_word_spans

    texts = ["Who founded it? Jane Doe in Zürich in 1950; it makes rockets.", "Der Fluß, Smith's café.",
             "北京大学 is in 北京. naïve", "e\u0301te\u0301 x-ray 3.14", "", "a"]
    generator = random.Random(0)
    cases = []
    for _ in range(600):
        text = generator.choice(texts)
        start = generator.randint(0, len(text))
        cases.append((text, start, generator.randint(start, len(text))))
    starts, ends = whole_word_spans(tf.constant([c[0] for c in cases]), tf.constant([c[1] for c in cases]),
                                    tf.constant([c[2] for c in cases]))
    assert [(int(s), int(e)) for s, e in zip(starts, ends)] == [whole_word_span(*case) for case in cases]
    # The newcomer's cuts: "rocket" of "rockets", "luß" of "Fluß"; CJK characters are words.
    text = texts[0]
    assert text[slice(*whole_word_span(text, text.index("rocket"), text.index("rocket") + 6))] == "rockets"
    assert whole_word_span("Der Fluß, x", 5, 8) == (4, 8)
    assert whole_word_span("北京大学", 1, 2) == (1, 2)
