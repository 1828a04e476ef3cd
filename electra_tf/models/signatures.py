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

Every text signature also returns `no_text` (bool [batch]): true where the text (or either text
of a pair) gave no word piece, i.e. it was empty or held only spaces, control or format
characters; the row's other outputs are then the model's answer to `[CLS] [SEP]` and say nothing
about the text. Bad input is defined, not an error: invalid UTF-8 bytes are replaced by U+FFFD
before tokenization (a word holding one is [UNK]); a NUL byte is a control character like any
other (`data/tokenization.py`); a text is cut to MAX_CHARACTERS_PER_POSITION characters per
position of max_seq_length before tokenizing (`preprocessing.cut_text`), then truncated to the
sequence length; an empty batch gives empty outputs. Input of another dtype or rank is refused
by the signature with TensorFlow's error naming the input. The graph holds only core TensorFlow and tf-text ops (no py_function,
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
    def outputs(token_ids, segment_ids, padding_mask):
        # The vocabulary made in each traced graph, not captured from outside it: tf2onnx cannot
        # import a function that captures a string tensor, even one its outputs do not use.
        vocabulary = tf.constant(tokenizer.vocabulary)
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


def batch_of_strings(value, name: str):
    """`value` checked to be string [batch] when the signature runs: a concrete function takes a
    tensor of another rank without a word, so a [1, 2] array of strings would be read as
    something. `tf.ensure_shape` stays in the graph and fails naming the input."""
    return tf.ensure_shape(tf.convert_to_tensor(value, tf.string), [None], name=f"{name}_must_be_1d_strings")


def no_text(inputs: dict, sep_id: int, text_pair: bool = False):
    """bool [batch]: the text, or either text of a pair, gave no word piece (empty, spaces,
    control or format characters only), so the row's answer is about no text at all. Read from
    the packed ids: `[CLS] [SEP]`, or a [SEP] where a pair's text would start."""
    lengths = tf.reduce_sum(tf.cast(inputs["padding_mask"], tf.int32), axis=1)
    if not text_pair:
        return lengths <= 2
    token_ids = inputs["token_ids"]
    return (token_ids[:, 1] == sep_id) | (tf.gather(token_ids, tf.maximum(lengths - 2, 0), batch_dims=1) == sep_id)


def text_endpoint(tokenizer, max_seq_length: int, outputs, text_pair: bool = False):
    """Strings in, through the same packing as training (`preprocessing.pack_texts`); the
    outputs gain `no_text`."""
    def endpoint(text, text_pair=None):
        text = batch_of_strings(text, "text")
        text_pair = None if text_pair is None else batch_of_strings(text_pair, "text_pair")
        inputs = pack_texts(tokenizer, max_seq_length, text, text_pair)
        return {**outputs(inputs["token_ids"], inputs["segment_ids"], inputs["padding_mask"]),
                "no_text": no_text(inputs, tokenizer.sep_id, text_pair is not None)}

    if text_pair:
        return lambda text, text_pair: endpoint(text, text_pair)
    return lambda text: endpoint(text)


def ids_endpoint(length: int, vocabulary_size: int, outputs):
    """The ids endpoint: inputs longer than the model's length are cut to it; ids outside the
    vocabulary are refused with a clear message instead of failing inside an embedding lookup."""
    def endpoint(token_ids, segment_ids, padding_mask):
        token_ids, segment_ids, padding_mask = (tf.ensure_shape(value, [None, None], name=f"{name}_must_be_2d") for
                                                value, name in ((token_ids, "token_ids"), (segment_ids, "segment_ids"),
                                                                (padding_mask, "padding_mask")))
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
                "cls_hidden_state": tf.cast(result["sequence_output"], tf.float32)[:, 0, :],
                "no_text": no_text(inputs, lite_tokenizer.tokenizer.sep_id)}

    return endpoint
