"""Entities from a served tagger's word tags, in graph: the same chunks as the Python scorer, their
text cut from the original string by character offsets."""

import tensorflow as tf

from electra_tf.data.tokenization import UNICODE_WHITE_SPACE
from electra_tf.finetuning.text.entities import entities
from electra_tf.finetuning.text.entities_in_graph import entity_outputs, words_with_offsets

TEXTS = ["Ada  Lovelace lived in London", "Über die Brücke\tnach Köln", ""]
TAGS = [["B-PER", "I-PER", "O", "O", "B-LOC"], ["O", "O", "B-LOC", "O", "I-LOC"], []]


def test_words_keep_their_characters_and_entities_are_the_python_scorers():
    text = tf.constant(TEXTS)
    words, starts, ends = words_with_offsets(text, UNICODE_WHITE_SPACE)
    assert [[w.decode() for w in row] for row in words.to_list()] == [t.split() for t in TEXTS]
    outputs = entity_outputs(text, tf.ragged.constant(TAGS, tf.string), starts, ends)
    for row, source in enumerate(TEXTS):
        found = [(kind.decode(), start, end, value.decode()) for kind, start, end, value in zip(
            outputs["entity_type"].numpy()[row], outputs["entity_start"].numpy()[row],
            outputs["entity_end"].numpy()[row], outputs["entity_text"].numpy()[row]) if start >= 0]
        assert all(source[start:end] == value for _, start, end, value in found)
        words_of_row = source.split()
        assert [(kind, " ".join(words_of_row[first:last])) for kind, first, last in entities(TAGS[row] or [])] == \
            [(kind, " ".join(value.split())) for kind, _, _, value in found]
    assert outputs["entity_text"].numpy()[1].tolist()[:2] == [b"Br\xc3\xbccke", b"K\xc3\xb6ln"]
