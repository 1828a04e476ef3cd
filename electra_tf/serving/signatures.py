"""The signatures an exported model serves, as graph functions: text in or ids in.

- `serving_default`: `text` (string [batch]) -> tokenized in the graph with the run's
  vocabulary (the same WordPiece as training), `[CLS] text [SEP]`, truncated to
  max_seq_length - 2 word pieces, padded to max_seq_length.
- `encode_ids`: `token_ids`, `segment_ids`, `padding_mask` (int32 [batch, length]) for clients
  that tokenize themselves; longer inputs are cut to max_seq_length; an id outside the
  vocabulary is an error naming the valid range.

A discriminator returns `replaced_probability` (float32 [batch, length], 0 on padding),
`tokens` (string, "" on padding), `token_ids`, `padding_mask`, `cls_hidden_state`
([batch, hidden]) and `hidden_states` ([batch, length, hidden]). A fine-tuned classifier
returns `probabilities` [batch, classes], `label` (the most probable name) and `label_names`,
or `score` for regression; its text signature takes `text` and `text_pair` for pair tasks.
A fine-tuned tagger's text signature splits `text` on whitespace into words and returns
per word `words`, `tags` and `tag_probabilities` ([batch, max words, tags]; "" and 0 past
a sentence's end or for words cut off by max_seq_length) plus `tag_names`; a tagger of entity
tags (B-/I-/E-/S-) also returns the entities, by conlleval's chunk rules: `entity_text`,
`entity_type`, `entity_start`, `entity_end` (characters of the text; "" and -1 past a text's
last entity). Its ids signature returns `tags` and `tag_probabilities` per word piece.

Bad input is defined, not an error: invalid UTF-8 bytes are replaced by U+FFFD before
tokenization; an empty string gives `[CLS] [SEP]`; a long text is truncated; an empty batch
gives empty outputs. The graph holds only core TensorFlow and tf-text ops (no py_function,
no RoundRobinTrim), so the TF Serving model server (2.20+) runs it without Python.
"""

from __future__ import annotations

TEXT_SIGNATURE = "serving_default"
IDS_SIGNATURE = "encode_ids"
TEXT_INPUT = [("text", [None], "string")]
TEXT_PAIR_INPUTS = TEXT_INPUT + [("text_pair", [None], "string")]
ID_INPUTS = [(name, [None, None], "int32") for name in ("token_ids", "segment_ids", "padding_mask")]


def discriminator_endpoints(discriminator, tokenizer, max_seq_length: int) -> dict:
    """{signature: (fn, inputs)} for the pre-trained discriminator."""
    import tensorflow as tf

    vocabulary = tf.constant(tokenizer.vocabulary)

    def outputs(token_ids, segment_ids, padding_mask):
        result = discriminator({"token_ids": token_ids, "segment_ids": segment_ids,
                                "padding_mask": padding_mask}, training=False)
        mask = tf.cast(padding_mask, tf.float32)
        hidden = tf.cast(result["sequence_output"], tf.float32)
        return {
            "replaced_probability": tf.sigmoid(result["logits"]) * mask,
            "tokens": tf.where(padding_mask > 0, tf.gather(vocabulary, token_ids), ""),
            "token_ids": token_ids,
            "padding_mask": padding_mask,
            "cls_hidden_state": hidden[:, 0, :],
            "hidden_states": hidden * mask[..., tf.newaxis],
        }

    return {TEXT_SIGNATURE: (_text_endpoint(tokenizer, max_seq_length, outputs), TEXT_INPUT),
            IDS_SIGNATURE: (_ids_endpoint(max_seq_length, tokenizer.vocabulary_size, outputs), ID_INPUTS)}


def classifier_endpoints(classifier, tokenizer, max_seq_length: int, label_names=None,
                         score_range=None, text_pair: bool = False) -> dict:
    """{signature: (fn, inputs)} for a fine-tuned `ElectraClassifier` (ids -> logits).

    Classification (`label_names`): `probabilities` [batch, classes], `label` (the most
    probable name) and `label_names` (repeated per row: every output of a batched model
    server has the batch first). Regression (`score_range` = (low, high), the range the
    targets were scaled from): `score` [batch] on the original scale. With `text_pair` the
    text signature takes `text` and `text_pair`.
    """
    import tensorflow as tf

    from electra_tf.finetuning.text.tasks import from_unit_interval

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

    return {TEXT_SIGNATURE: (_text_endpoint(tokenizer, max_seq_length, outputs, text_pair),
                             TEXT_PAIR_INPUTS if text_pair else TEXT_INPUT),
            IDS_SIGNATURE: (_ids_endpoint(max_seq_length, tokenizer.vocabulary_size, outputs), ID_INPUTS)}


def tagger_endpoints(tagger, tokenizer, max_seq_length: int, tag_names) -> dict:
    """{signature: (fn, inputs)} for a fine-tuned `ElectraTokenClassifier`."""
    import tensorflow as tf

    from electra_tf.data.token_offsets import repair_utf8
    from electra_tf.finetuning.text.entities import is_entity_tag_set
    from electra_tf.models.preprocessing import pack_words_with_starts
    from electra_tf.serving.entities import entity_outputs, words_with_offsets

    names = tf.constant(list(tag_names))
    with_entities = is_entity_tag_set(tag_names)

    def per_piece(token_ids, segment_ids, padding_mask):
        logits = tf.cast(tagger({"token_ids": token_ids, "segment_ids": segment_ids,
                                 "padding_mask": padding_mask}, training=False), tf.float32)
        probabilities = tf.nn.softmax(logits, axis=-1) * tf.cast(padding_mask, tf.float32)[..., tf.newaxis]
        return probabilities, tf.where(padding_mask > 0, tf.gather(names, tf.argmax(logits, axis=-1)), "")

    def with_names(outputs, batch):
        return {**outputs, "tag_names": tf.tile(names[tf.newaxis], [batch, 1])}

    def text_endpoint(text):
        text = repair_utf8(tf.convert_to_tensor(text, tf.string))
        words, word_starts, word_ends = words_with_offsets(text)  # the words of tf.strings.split
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
        }
        if with_entities:  # entity tags: the entities too, with their characters in the text
            ragged_tags = tf.RaggedTensor.from_tensor(word_tags, lengths=words.row_lengths())
            outputs.update(entity_outputs(text, ragged_tags, word_starts, word_ends))
        return with_names(outputs, tf.shape(text)[0])

    def ids_outputs(token_ids, segment_ids, padding_mask):
        probabilities, tags = per_piece(token_ids, segment_ids, padding_mask)
        return with_names({"tags": tags, "tag_probabilities": probabilities}, tf.shape(token_ids)[0])

    return {TEXT_SIGNATURE: (text_endpoint, TEXT_INPUT),
            IDS_SIGNATURE: (_ids_endpoint(max_seq_length, tokenizer.vocabulary_size, ids_outputs), ID_INPUTS)}


def _text_endpoint(tokenizer, max_seq_length: int, outputs, text_pair: bool = False):
    """Strings in, through the same packing as training (`preprocessing.pack_texts`)."""
    from electra_tf.models.preprocessing import pack_texts

    def endpoint(text, text_pair=None):
        inputs = pack_texts(tokenizer, max_seq_length, text, text_pair)
        return outputs(inputs["token_ids"], inputs["segment_ids"], inputs["padding_mask"])

    if text_pair:
        return lambda text, text_pair: endpoint(text, text_pair)
    return lambda text: endpoint(text)


def _ids_endpoint(length: int, vocabulary_size: int, outputs):
    """The ids endpoint: inputs longer than the model's length are cut to it; ids outside the
    vocabulary are refused with a clear message instead of failing inside an embedding lookup."""
    import tensorflow as tf

    def endpoint(token_ids, segment_ids, padding_mask):
        check = tf.debugging.assert_less(
            token_ids, vocabulary_size, message=f"token_ids must be in [0, {vocabulary_size})")
        with tf.control_dependencies([check, tf.debugging.assert_non_negative(
                token_ids, message="token_ids must be non-negative")]):
            token_ids = tf.identity(token_ids[:, :length])
        return outputs(token_ids, segment_ids[:, :length], padding_mask[:, :length])
    return endpoint
