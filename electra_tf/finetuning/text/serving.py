"""What a fine-tuned text classifier or tagger serves: its signatures, text in or ids in.

A classifier returns `probabilities` [batch, classes], `label` (the most probable name) and
`label_names`, or `score` for regression; its text signature takes `text`, and `text_pair` for
pair tasks. A tagger's text signature splits `text` into words at spaces
(`ElectraTokenizer.word_white_space`) and returns per
word `words`, `tags` and `tag_probabilities` ([batch, max words, tags]; "" and 0 past a
sentence's end or for words cut off by max_seq_length) plus `tag_names`; a tagger of entity
tags (B-/I-/E-/S-) also returns the entities, by conlleval's chunk rules: `entity_text`,
`entity_type`, `entity_start`, `entity_end` (characters of the text; "" and -1 past a text's
last entity). Its ids signature returns `tags` and `tag_probabilities` per word piece. The
text and ids endpoints, and what bad input gives (`no_text` in every text signature and LiteRT
file), are the ones of `models/signatures.py`.
"""

from __future__ import annotations

import tensorflow as tf

from electra_tf.data.token_offsets import repair_utf8
from electra_tf.finetuning.text.entities import is_entity_tag_set
from electra_tf.finetuning.text.entities_in_graph import entity_outputs, words_with_offsets
from electra_tf.finetuning.text.task_data import from_unit_interval
from electra_tf.models.device_inputs import pack_pair, pack_text, pack_whitespace_words
from electra_tf.models.preprocessing import cut_text, pack_words_with_starts
from electra_tf.models.signatures import (ID_INPUTS, IDS_SIGNATURE, TEXT_INPUT, TEXT_PAIR_INPUTS, TEXT_SIGNATURE,
                                          batch_of_strings, ids_endpoint, no_text, text_endpoint)


def classifier_endpoints(classifier, tokenizer, max_seq_length: int, label_names=None,
                         score_range=None, text_pair: bool = False) -> dict:
    """{signature: (fn, inputs)} for a fine-tuned `ElectraClassifier` (ids -> logits).

    Classification (`label_names`): `probabilities` [batch, classes], `label` (the most
    probable name) and `label_names` (repeated per row: every output of a batched model
    server has the batch first). Regression (`score_range` = (low, high), the range the
    targets were scaled from): `score` [batch] on the original scale. With `text_pair` the
    text signature takes `text` and `text_pair`.
    """

    if (label_names is None) == (score_range is None):
        raise ValueError("give exactly one of label_names (classification) or score_range (regression).")

    def outputs(token_ids, segment_ids, padding_mask):
        logits = tf.cast(classifier({"token_ids": token_ids, "segment_ids": segment_ids,
                                     "padding_mask": padding_mask}, training=False), tf.float32)
        if score_range is not None:
            return {"score": from_unit_interval(logits[:, 0], score_range)}
        names = tf.constant(list(label_names))
        probabilities = tf.nn.softmax(logits, axis=-1)
        return {
            "probabilities": probabilities,
            "label": tf.gather(names, tf.argmax(probabilities, axis=-1)),
            "label_names": tf.tile(names[tf.newaxis], [tf.shape(probabilities)[0], 1]),
        }

    return {TEXT_SIGNATURE: (text_endpoint(tokenizer, max_seq_length, outputs, text_pair),
                             TEXT_PAIR_INPUTS if text_pair else TEXT_INPUT),
            IDS_SIGNATURE: (ids_endpoint(max_seq_length, tokenizer.vocabulary_size, outputs), ID_INPUTS)}


def tagger_endpoints(tagger, tokenizer, max_seq_length: int, tag_names) -> dict:
    """{signature: (fn, inputs)} for a fine-tuned `ElectraTokenClassifier`. The tag names are
    made in each traced graph (see `models/signatures.discriminator_endpoints`)."""
    tag_names = list(tag_names)
    with_entities = is_entity_tag_set(tag_names)

    def per_piece(token_ids, segment_ids, padding_mask):
        logits = tf.cast(tagger({"token_ids": token_ids, "segment_ids": segment_ids,
                                 "padding_mask": padding_mask}, training=False), tf.float32)
        probabilities = tf.nn.softmax(logits, axis=-1) * tf.cast(padding_mask, tf.float32)[..., tf.newaxis]
        tags = tf.gather(tf.constant(tag_names), tf.argmax(logits, axis=-1))
        return probabilities, tf.where(padding_mask > 0, tags, "")

    def with_names(outputs, batch):
        return {**outputs, "tag_names": tf.tile(tf.constant(tag_names)[tf.newaxis], [batch, 1])}

    def text_endpoint(text):
        text = cut_text(repair_utf8(batch_of_strings(text, "text")), max_seq_length)
        words, word_starts, word_ends = words_with_offsets(text, tokenizer.word_white_space)
        inputs, starts = pack_words_with_starts(tokenizer, max_seq_length, words)
        probabilities, tags = per_piece(inputs["token_ids"], inputs["segment_ids"], inputs["padding_mask"])
        kept = (starts >= 0).to_tensor(False)
        positions = tf.maximum(starts.to_tensor(-1), 0)
        word_tags = tf.where(kept, tf.gather(tags, positions, batch_dims=1), "")
        outputs = {
            "words": words.to_tensor(""),
            "tags": word_tags,
            "tag_probabilities": tf.gather(probabilities, positions, batch_dims=1)
            * tf.cast(kept, tf.float32)[..., tf.newaxis],
            "no_text": no_text(inputs, tokenizer.sep_id),
        }
        if with_entities:  # entity tags: the entities too, with their characters in the text
            ragged_tags = tf.RaggedTensor.from_tensor(word_tags, lengths=words.row_lengths())
            outputs.update(entity_outputs(text, ragged_tags, word_starts, word_ends))
        return with_names(outputs, tf.shape(text)[0])

    def ids_outputs(token_ids, segment_ids, padding_mask):
        probabilities, tags = per_piece(token_ids, segment_ids, padding_mask)
        return with_names({"tags": tags, "tag_probabilities": probabilities}, tf.shape(token_ids)[0])

    return {TEXT_SIGNATURE: (text_endpoint, TEXT_INPUT),
            IDS_SIGNATURE: (ids_endpoint(max_seq_length, tokenizer.vocabulary_size, ids_outputs), ID_INPUTS)}


def classifier_litert_endpoint(classifier, lite_tokenizer, length: int):
    """A LiteRT file's function for a fine-tuned `ElectraClassifier`: text (and text_pair) ->
    probabilities [b, classes] and label_names [classes], or score [b] (`models/device_inputs.py`
    packs the text); returns (function, input names)."""
    tokenizer = lite_tokenizer.tokenizer

    def outputs(inputs):
        logits = tf.cast(classifier(inputs, training=False), tf.float32)
        flag = {"no_text": no_text(inputs, tokenizer.sep_id, classifier.text_pair)}
        if classifier.is_regression:
            return {"score": from_unit_interval(logits[:, 0], classifier.score_range), **flag}
        return {"probabilities": tf.nn.softmax(logits, axis=-1),
                "label_names": tf.constant(list(classifier.label_names)), **flag}

    if classifier.text_pair:
        return (lambda text, text_pair: outputs(pack_pair(lite_tokenizer.tokenize(text),
                                                          lite_tokenizer.tokenize(text_pair), tokenizer, length)),
                ["text", "text_pair"])
    return lambda text: outputs(pack_text(lite_tokenizer.tokenize(text), tokenizer, length)), ["text"]


def tagger_litert_endpoint(tagger, lite_tokenizer, length: int):
    """A LiteRT file's function for a fine-tuned `ElectraTokenClassifier`: text -> tag_probabilities
    [b, words, tags], word_start and word_end [b, words] (byte offsets of the words, split as the
    SavedModel splits them, -1 past the last word kept), tag_names [tags]; returns (function, input names)."""
    def endpoint(text):
        inputs, positions, word_start, word_end = pack_whitespace_words(text, lite_tokenizer, length)
        probabilities = tf.nn.softmax(tf.cast(tagger(inputs, training=False), tf.float32), axis=-1)
        per_word = tf.gather(probabilities, tf.maximum(positions, 0), batch_dims=1)
        return {"tag_probabilities": per_word * tf.cast(positions >= 0, tf.float32)[..., tf.newaxis],
                "word_start": word_start, "word_end": word_end, "tag_names": tf.constant(list(tagger.label_names)),
                "no_text": no_text(inputs, lite_tokenizer.tokenizer.sep_id) & lite_tokenizer.accepts(text)}

    return endpoint, ["text"]
