"""Templates and label words: what is refused (naming what to fix), and the filled sequences,
checked against the same sequences built in plain Python for texts of every length (the label
word never cut off, a pair cut by the official rule) and multi-piece and alternative words."""

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.data.tokenization import SPECIAL_TOKENS, ElectraTokenizer
from electra_tf.finetuning.text.prompts import LabelWords, PromptError, PromptLayout, PromptPreprocessor, Template

WORDS = ["it", "was", "good", "bad", "film", "river", "hill", "very", "?", ",", ".", "terr", "##ible", "great"]
VOCABULARY = [*SPECIAL_TOKENS, *WORDS]


@pytest.fixture(scope="module")
def tokenizer():
    return ElectraTokenizer(VOCABULARY)


@pytest.mark.parametrize("template, message", [
    ("", "is empty"),
    ("{text} It was.", "holds {label} 0 times"),
    ("It was {label}.", "holds {text} 0 times"),
    ("{text} {label} {label}", "holds {label} 2 times"),
    ("{text} It was {mask}.", "unknown slot {mask}"),
    ("{text} It was {label!r}.", "unknown slot"),
    ("{text} It was {label", "expected '}'"),
])
def test_a_template_without_its_slots_is_refused(template, message):
    with pytest.raises(PromptError, match=message.replace("{", r"\{").replace("}", r"\}")):
        Template.parse(template)


def test_braces_of_the_text_and_pairs():
    assert Template.parse("{{{text}}} {label}").parts == (
        ("literal", "{"), ("slot", "text"), ("literal", "} "), ("slot", "label"))
    assert Template.parse("{text_a} ? {label}, {text_b}").pair


@pytest.mark.parametrize("spec, message", [
    ("", "is empty"),
    ("positive=great", "names 1 class"),
    ("positive=great; positive=good", "names class 'positive' twice"),
    ("positive=; negative=bad", "class 'positive' has an empty word"),
    ("positive=great|; negative=bad", "class 'positive' has an empty word"),
    ("great; negative=bad", "is not CLASS=WORD"),
    ("positive=great negative=bad", "holds another '='"),
    ("positive=great; negative=Great", "share the word 'Great'"),
])
def test_label_words_that_cannot_name_classes_are_refused(spec, message):
    with pytest.raises(PromptError, match=message):
        LabelWords.parse(spec)


def test_label_words_round_trip_with_phrases_and_alternatives():
    words = LabelWords.parse(" positive = very  good|great ;negative=terrible ")
    assert (words.classes, words.words) == (("positive", "negative"), (("very good", "great"), ("terrible",)))
    assert LabelWords.parse(words.spec()) == words


def test_a_word_the_vocabulary_cannot_spell_or_two_words_of_one_spelling_are_refused(tokenizer):
    template = Template.parse("{text} It was {label}.")
    with pytest.raises(PromptError, match=r"no pieces for the word 'superb' of class 'positive' \(it reads as \[UNK\]"):
        PromptLayout.build(template, LabelWords.parse("positive=superb; negative=bad"), tokenizer, 16)
    with pytest.raises(PromptError, match="classes 'positive' and 'negative' give the same pieces"):
        PromptLayout.build(template, LabelWords.parse("positive=good; negative=góod"), tokenizer, 16)


def test_a_template_that_leaves_no_room_for_the_text_is_refused(tokenizer):
    template = Template.parse("{text} It was very very {label}.")
    words = LabelWords.parse("positive=very good; negative=bad")
    with pytest.raises(PromptError, match="take 9 of the 9 positions .* raise --max_seq_length"):
        PromptLayout.build(template, words, tokenizer, 9)
    assert PromptLayout.build(template, words, tokenizer, 10).text_budget == 1


def reference_fill(layout, tokenizer, text_ids, pair_ids, length):
    """The filled variants in plain Python: [CLS] parts [SEP], the text(s) cut as the official rule."""
    budget = layout.text_budget
    if pair_ids is None:
        texts = {"text": text_ids[:budget]}
    else:
        a, b = list(text_ids), list(pair_ids)
        while len(a) + len(b) > budget:  # the official _truncate_seq_pair
            (a if len(a) > len(b) else b).pop()
        texts = {"text": a, "text_b": b}
    rows = []
    for variant in layout.variants:
        ids, mask = [tokenizer.cls_id], [0]
        for kind, value in layout.parts:
            values = value if kind == "ids" else variant if value == "label" else texts[value]
            ids += list(values)
            mask += [int(kind == "slot" and value == "label")] * len(values)
        ids.append(tokenizer.sep_id)
        mask.append(0)
        rows.append((ids + [tokenizer.pad_id] * (length - len(ids)), mask + [0] * (length - len(mask)), len(ids)))
    return rows


@pytest.mark.parametrize("template, pair", [("{text} It was {label}.", False), ("{label}: {text}", False),
                                            ("{text_a} ? {label}, {text_b}", True)])
def test_filled_templates_equal_a_plain_python_filling(tokenizer, template, pair):
    length = 14
    preprocessor = PromptPreprocessor(tokenizer, length, template=template,
                                      label_words="positive=very good|great; negative=terrible")
    rng = np.random.default_rng(0)
    word_ids = [tokenizer.vocabulary.index(w) for w in ("film", "river", "hill", "good", "it")]
    texts = [" ".join(VOCABULARY[i] for i in rng.choice(word_ids, n)) for n in (0, 1, 3, 5, 9, 20)]
    pairs = [" ".join(VOCABULARY[i] for i in rng.choice(word_ids, n)) for n in (7, 0, 2, 12, 1, 20)]
    inputs = preprocessor((texts, pairs) if pair else texts)
    assert inputs["token_ids"].shape == (6, 3, length)
    for row, text in enumerate(texts):
        text_ids = tokenizer.tokenize(tf.constant([text])).to_list()[0]
        pair_ids = tokenizer.tokenize(tf.constant([pairs[row]])).to_list()[0] if pair else None
        for variant, (ids, mask, used) in enumerate(reference_fill(preprocessor.layout, tokenizer, text_ids, pair_ids,
                                                                   length)):
            assert inputs["token_ids"][row, variant].numpy().tolist() == ids
            assert inputs["label_mask"][row, variant].numpy().tolist() == mask
            assert int(inputs["padding_mask"][row, variant].numpy().sum()) == used
            assert int(inputs["segment_ids"][row, variant].numpy().sum()) == 0
            assert sum(mask) == len(preprocessor.layout.variants[variant])  # the word is never cut off
