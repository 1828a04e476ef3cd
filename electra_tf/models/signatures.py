"""The signatures an exported model serves, as graph functions: text in or ids in.

- `serving_default`: `text` (string [batch]) -> tokenized in the graph with the run's
  vocabulary (the same WordPiece as training), `[CLS] text [SEP]`, truncated to
  max_seq_length - 2 word pieces, padded to max_seq_length.
- `encode_ids`: `token_ids`, `segment_ids`, `padding_mask` (int32 [batch, length]) for clients
  that tokenize themselves; longer inputs are cut to max_seq_length; an id outside the
  vocabulary is an error naming the valid range.

A discriminator returns `replaced_probability` (float32 [batch, length], 0 on padding),
`tokens` (string, "" on padding), `token_ids`, `padding_mask`, `cls_hidden_state`
([batch, hidden]) and `hidden_states` ([batch, length, hidden]). Fine-tuned task models give
their own signatures through the same two endpoints (`serving_endpoints` of the models in
`finetuning/`).

Bad input is defined, not an error: invalid UTF-8 bytes are replaced by U+FFFD before
tokenization; an empty string gives `[CLS] [SEP]`; a long text is truncated; an empty batch
gives empty outputs. The graph holds only core TensorFlow and tf-text ops (no py_function,
no RoundRobinTrim), so the TF Serving model server (2.20+) runs it without Python.
"""

from __future__ import annotations

import tensorflow as tf

from electra_tf.models.device_inputs import pack_text
from electra_tf.models.preprocessing import pack_texts

TEXT_SIGNATURE = "serving_default"
IDS_SIGNATURE = "encode_ids"
TEXT_INPUT = [("text", [None], "string")]
TEXT_PAIR_INPUTS = TEXT_INPUT + [("text_pair", [None], "string")]
ID_INPUTS = [(name, [None, None], "int32") for name in ("token_ids", "segment_ids", "padding_mask")]


def discriminator_endpoints(discriminator, tokenizer, max_seq_length: int) -> dict:
    """{signature: (fn, inputs)} for the pre-trained discriminator."""
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

    return {TEXT_SIGNATURE: (text_endpoint(tokenizer, max_seq_length, outputs), TEXT_INPUT),
            IDS_SIGNATURE: (ids_endpoint(max_seq_length, tokenizer.vocabulary_size, outputs), ID_INPUTS)}


def text_endpoint(tokenizer, max_seq_length: int, outputs, text_pair: bool = False):
    """Strings in, through the same packing as training (`preprocessing.pack_texts`)."""
    def endpoint(text, text_pair=None):
        inputs = pack_texts(tokenizer, max_seq_length, text, text_pair)
        return outputs(inputs["token_ids"], inputs["segment_ids"], inputs["padding_mask"])

    if text_pair:
        return lambda text, text_pair: endpoint(text, text_pair)
    return lambda text: endpoint(text)


def ids_endpoint(length: int, vocabulary_size: int, outputs):
    """The ids endpoint: inputs longer than the model's length are cut to it; ids outside the
    vocabulary are refused with a clear message instead of failing inside an embedding lookup."""
    def endpoint(token_ids, segment_ids, padding_mask):
        check = tf.debugging.assert_less(
            token_ids, vocabulary_size, message=f"token_ids must be in [0, {vocabulary_size})")
        with tf.control_dependencies([check, tf.debugging.assert_non_negative(
                token_ids, message="token_ids must be non-negative")]):
            token_ids = tf.identity(token_ids[:, :length])
        return outputs(token_ids, segment_ids[:, :length], padding_mask[:, :length])
    return endpoint


def discriminator_litert_endpoint(discriminator, lite_tokenizer, length: int):
    """A LiteRT file's function for the discriminator: text -> replaced_probability, token_ids,
    padding_mask [b, length], cls_hidden_state [b, hidden] (`device_inputs.py` packs the text)."""
    def endpoint(text):
        inputs = pack_text(lite_tokenizer.tokenize(text), lite_tokenizer.tokenizer, length)
        result = discriminator(inputs, training=False)
        mask = tf.cast(inputs["padding_mask"], tf.float32)
        return {"replaced_probability": tf.sigmoid(tf.cast(result["logits"], tf.float32)) * mask,
                "token_ids": inputs["token_ids"], "padding_mask": inputs["padding_mask"],
                "cls_hidden_state": tf.cast(result["sequence_output"], tf.float32)[:, 0, :]}

    return endpoint
