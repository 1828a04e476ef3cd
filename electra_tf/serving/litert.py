"""LiteRT (TensorFlow Lite) files that take raw text: one `.tflite` with the tokenizer inside, for
a phone or an edge box (`write_litert`; `python -m electra_tf.export --format litert`).

What a file holds, by the model it comes from (inputs: string [batch]; a batch of one is what a
device runs, a larger one works after `resize_tensor_input`):

    classifier     text (and text_pair)  -> probabilities [b, classes], label_names [classes]
    regression     text (and text_pair)  -> score [b]
    tagger         text                  -> tag_probabilities [b, words, tags], word_start and
                                            word_end [b, words] (byte offsets of the
                                            whitespace-separated words, -1 past the last
                                            word kept), tag_names [tags]
    discriminator  text                  -> replaced_probability, token_ids, padding_mask
                                            [b, length], cls_hidden_state [b, hidden]

Output names are the SavedModel's (`serving_default`); the label and tag names travel inside the
file as constant outputs. The string outputs the SavedModel computes per row (`label`, `tokens`,
`words`, `tags`, entities) are left out: LiteRT has no kernels for those string ops, and an app
indexes the names it already has. The tagger has `words` slots for max_seq_length - 2 words.

The tokenizer inside uses tensorflow-text ops that have LiteRT kernels, so a file needs no
Select TF ops (Flex) runtime, only tensorflow-text's custom-op kernels
(`tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS` in Python; the same kernels, registered by
the registrar's `Add...` functions, in an app):
- WordPiece: `FastBertNormalizer` (lower-casing, NFD and accent stripping for an uncased
  vocabulary) and `FastWordpieceTokenizer` with its own BERT pre-tokenization (whitespace,
  punctuation and CJK ideographs split). It lower-cases where the SavedModel case-folds
  (NFKC_Casefold, `data/tokenization.py`): text with "ß", ligatures or full-width letters can
  tokenize differently (measured in docs/results.md). A vocabulary that lower-cases without
  stripping accents (or the reverse), or keeps CJK ideographs in words, has no such kernel and is
  refused. Invalid UTF-8 is not repaired first, as the SavedModel repairs it.
- SentencePiece: `FastSentencepieceTokenizer` over the same model.
The tagger splits words with `WhitespaceTokenizer`. Packing, truncation and padding are the
SavedModel's (`[CLS] a [SEP]`, a pair cut by the official rule, `models/preprocessing.pair_lengths`),
computed with dense ops; the transformer's GELU is traced as the one op LiteRT has a kernel for
(`models/transformer.gelu_form("one_op")`).

`quantize="dynamic"`: 8-bit weights, float activations (dynamic-range quantization, no calibration
data). Question answering is not exported: its windows over a long context and the answer's text
do not fit one fixed-shape graph without Flex.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from electra_tf.utils.errors import ElectraError
from electra_tf.utils.logs import litert_notes_left_out

QUANTIZATIONS = ("none", "dynamic")


class LiteRTError(ElectraError):
    """A model that cannot be written as a LiteRT file as asked; the message says why and what to try."""


class LiteRTTokenizer:
    """The model's tokenizer as tensorflow-text ops with LiteRT kernels: `tokenize(text)` ->
    ragged int32 ids [batch, (pieces)], the same ids as `ElectraTokenizer.tokenize` (but for the
    case folding named above)."""

    def __init__(self, tokenizer):
        import tensorflow as tf
        import tensorflow_text as tf_text

        from electra_tf.data.tokenization import SENTENCEPIECE, SUFFIX_INDICATOR

        self.tokenizer = tokenizer
        self.sentencepiece = self.normalizer = self.wordpiece = None
        if tokenizer.kind == SENTENCEPIECE:
            self.sentencepiece = tf_text.FastSentencepieceTokenizer(model=tokenizer.sentencepiece_model)
            return
        settings = tokenizer.settings
        if settings.lowercase != settings.strip_accents or not settings.split_cjk:
            raise LiteRTError(
                f"the vocabulary's tokenizer ({settings.describe()}) has no LiteRT kernel: tensorflow-text's "
                "FastBertNormalizer lower-cases and strips accents together or not at all, and FastWordpieceTokenizer "
                "always splits CJK ideographs. Nothing was written; serve this model with the SavedModel export.")
        self.normalizer = tf_text.FastBertNormalizer(lower_case_nfd_strip_accents=settings.lowercase)
        # A token holding whitespace (a learned vocabulary can have "## ") is never produced where
        # words are split on whitespace first, as the SavedModel splits them; FastWordpiece's own
        # splitting would match it across a space. Such tokens keep their id under a name no text has.
        vocabulary = [f"[unreachable {i}]" if any(c.isspace() for c in token) else token
                      for i, token in enumerate(tokenizer.vocabulary)]
        self.wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=vocabulary, suffix_indicator=SUFFIX_INDICATOR, unknown_token="[UNK]",
            no_pretokenization=False, token_out_type=tf.int32, support_detokenization=False)

    def tokenize(self, text):
        import tensorflow as tf

        if self.sentencepiece is not None:
            pieces = self.sentencepiece.tokenize(text)
            return pieces.with_flat_values(tf.cast(pieces.flat_values, tf.int32))
        return self.wordpiece.tokenize(self.normalizer.normalize(text))


def _edges(batch, length: int, lengths, tokenizer, body):
    """[CLS] body[:lengths] [SEP] padded to `length`: (token_ids, padding_mask), int32 [batch, length]."""
    import tensorflow as tf

    positions = tf.range(length)[tf.newaxis, :]
    lengths = lengths[:, tf.newaxis]
    token_ids = tf.concat([tf.fill([batch, 1], tokenizer.cls_id), body,
                           tf.fill([batch, length - 1 - body.shape[1]], tokenizer.pad_id)], axis=1)
    token_ids = tf.where(positions == lengths + 1, tokenizer.sep_id,
                         tf.where(positions > lengths + 1, tokenizer.pad_id, token_ids))
    return token_ids, tf.cast(positions <= lengths + 1, tf.int32)


def pack_text(pieces, tokenizer, length: int) -> dict:
    """`[CLS] text [SEP]`, the text's first length - 2 pieces, as `preprocessing.pack_texts`."""
    import tensorflow as tf

    body = pieces.to_tensor(default_value=tokenizer.pad_id, shape=[None, length - 2])
    batch = tf.shape(body)[0]
    lengths = tf.minimum(tf.cast(pieces.row_lengths(), tf.int32), length - 2)
    token_ids, padding_mask = _edges(batch, length, lengths, tokenizer, body)
    return {"token_ids": token_ids, "segment_ids": tf.zeros_like(token_ids), "padding_mask": padding_mask}


def pack_pair(pieces_a, pieces_b, tokenizer, length: int) -> dict:
    """`[CLS] a [SEP] b [SEP]`, cut to length - 3 pieces by the official rule, as `pack_texts`."""
    import tensorflow as tf

    from electra_tf.models.preprocessing import pair_lengths

    budget = length - 3
    a, b = (p.to_tensor(default_value=tokenizer.pad_id, shape=[None, budget]) for p in (pieces_a, pieces_b))
    kept_a, kept_b = pair_lengths(tf.cast(pieces_a.row_lengths(), tf.int32), tf.cast(pieces_b.row_lengths(), tf.int32),
                                  budget)
    positions = tf.tile(tf.range(length)[tf.newaxis, :], [tf.shape(a)[0], 1])  # [b, length]
    kept_a, kept_b = kept_a[:, tf.newaxis], kept_b[:, tf.newaxis]
    from_a = tf.gather(a, tf.clip_by_value(positions - 1, 0, budget - 1), batch_dims=1)
    from_b = tf.gather(b, tf.clip_by_value(positions - kept_a - 2, 0, budget - 1), batch_dims=1)
    first_sep, last_sep = kept_a + 1, kept_a + kept_b + 2
    token_ids = tf.where(positions == 0, tokenizer.cls_id, tf.where(
        positions < first_sep, from_a, tf.where(positions == first_sep, tokenizer.sep_id, tf.where(
            positions < last_sep, from_b, tf.where(positions == last_sep, tokenizer.sep_id, tokenizer.pad_id)))))
    # 1 on b and its [SEP], as integer arithmetic: the converter turns a cast bool there into a
    # bool zeros_like, which LiteRT has no kernel for.
    segment_ids = tf.clip_by_value(positions - first_sep, 0, 1) * tf.clip_by_value(last_sep + 1 - positions, 0, 1)
    return {"token_ids": token_ids, "segment_ids": segment_ids,
            "padding_mask": tf.cast(positions <= last_sep, tf.int32)}


def pack_whitespace_words(text, lite_tokenizer, length: int):
    """A tagger's input: the text's whitespace-separated words, each tokenized on its own (an
    empty one as [UNK], a SentencePiece word's bare word start dropped, as
    `preprocessing.pack_words`). Returns (inputs, word_positions [b, words]: each word's first
    piece, or -1 when cut off, word_start, word_end [b, words]: its bytes in the text, -1 past
    the last word)."""
    import tensorflow as tf
    import tensorflow_text as tf_text

    tokenizer, slots = lite_tokenizer.tokenizer, length - 2
    words, starts, ends = tf_text.WhitespaceTokenizer().tokenize_with_offsets(text)
    word_count = tf.minimum(tf.cast(words.row_lengths(), tf.int32), slots)
    batch = tf.shape(word_count)[0]
    # Every word's pieces, then [batch, words, pieces]: LiteRT pads ragged numbers, not strings.
    word_pieces = lite_tokenizer.tokenize(words.flat_values)  # [all words, (pieces)]
    table = words.with_flat_values(word_pieces).to_tensor(default_value=tokenizer.pad_id, shape=[None, slots, slots])
    counts = words.with_flat_values(tf.cast(word_pieces.row_lengths(), tf.int32)).to_tensor(0, shape=[None, slots])
    counts = tf.minimum(counts, slots)
    if tokenizer.bare_word_start_id is not None:  # as ElectraTokenizer.tokenize_words
        bare = (table[:, :, 0] == tokenizer.bare_word_start_id) & (counts > 1)
        shifted = tf.concat([table[:, :, 1:], tf.fill([batch, slots, 1], tokenizer.pad_id)], axis=2)
        table, counts = tf.where(bare[..., tf.newaxis], shifted, table), counts - tf.cast(bare, tf.int32)
    table = tf.where(((counts == 0)[..., tf.newaxis]) & (tf.range(slots) == 0), tokenizer.unk_id, table)
    is_word = tf.range(slots)[tf.newaxis, :] < word_count[:, tf.newaxis]
    counts = tf.where(is_word, tf.maximum(counts, 1), 0)
    word_positions = 1 + tf.cumsum(counts, axis=1, exclusive=True)  # [b, words]
    positions = tf.range(1, slots + 1)[tf.newaxis, :, tf.newaxis]  # body positions 1 .. slots, [1, slots, 1]
    inside = (positions >= word_positions[:, tf.newaxis, :]) & (positions < (word_positions + counts)[:, tf.newaxis, :])
    word_of = tf.argmax(tf.cast(inside, tf.int32), axis=2, output_type=tf.int32)  # [b, slots]
    within = tf.range(1, slots + 1)[tf.newaxis, :] - tf.gather(word_positions, word_of, batch_dims=1)
    body = tf.gather(tf.gather(table, word_of, batch_dims=1), tf.maximum(within, 0)[..., tf.newaxis],
                     batch_dims=2)[..., 0]
    total = tf.minimum(tf.reduce_sum(counts, axis=1), slots)
    token_ids, padding_mask = _edges(batch, length, total, tokenizer, body)
    kept = is_word & (word_positions <= slots)
    offsets = [tf.where(kept, tf.cast(o.to_tensor(-1, shape=[None, slots]), tf.int32), -1) for o in (starts, ends)]
    inputs = {"token_ids": token_ids, "segment_ids": tf.zeros_like(token_ids), "padding_mask": padding_mask}
    return inputs, tf.where(kept, word_positions, -1), offsets[0], offsets[1]


def litert_endpoint(model, lite_tokenizer, length: int):
    """(function of the text input(s) -> outputs, input names) for a discriminator, a fine-tuned
    `ElectraClassifier` or an `ElectraTokenClassifier`."""
    from electra_tf.finetuning.question_answering.model import ElectraQuestionAnswerer
    from electra_tf.finetuning.text.classifiers import ElectraClassifier, ElectraTokenClassifier
    from electra_tf.models.encoders import Discriminator

    if isinstance(model, ElectraClassifier):
        return _classifier_endpoint(model, lite_tokenizer, length)
    if isinstance(model, ElectraTokenClassifier):
        return _tagger_endpoint(model, lite_tokenizer, length), ["text"]
    if isinstance(model, Discriminator):
        return _discriminator_endpoint(model, lite_tokenizer, length), ["text"]
    if isinstance(model, ElectraQuestionAnswerer):
        raise LiteRTError("question answering is not exported to LiteRT: its windows over a long context and the "
                          "answer's text do not fit one fixed-shape graph without Select TF ops. Serve it with the "
                          "SavedModel export (python -m electra_tf.export --model_dir ... best.keras).")
    raise LiteRTError(f"a {type(model).__name__} has no LiteRT export; give a pre-training run or a fine-tuned "
                      "classifier or tagger (best.keras).")


def _classifier_endpoint(classifier, lite_tokenizer, length: int):
    import tensorflow as tf

    from electra_tf.finetuning.text.task_data import from_unit_interval

    tokenizer = lite_tokenizer.tokenizer

    def outputs(inputs):
        logits = tf.cast(classifier(inputs, training=False), tf.float32)
        if classifier.is_regression:
            return {"score": from_unit_interval(logits[:, 0], classifier.score_range)}
        return {"probabilities": tf.nn.softmax(logits, axis=-1), "label_names": tf.constant(list(classifier.label_names))}

    if classifier.text_pair:
        return (lambda text, text_pair: outputs(pack_pair(lite_tokenizer.tokenize(text),
                                                          lite_tokenizer.tokenize(text_pair), tokenizer, length)),
                ["text", "text_pair"])
    return lambda text: outputs(pack_text(lite_tokenizer.tokenize(text), tokenizer, length)), ["text"]


def _tagger_endpoint(tagger, lite_tokenizer, length: int):
    import tensorflow as tf

    def endpoint(text):
        inputs, positions, word_start, word_end = pack_whitespace_words(text, lite_tokenizer, length)
        probabilities = tf.nn.softmax(tf.cast(tagger(inputs, training=False), tf.float32), axis=-1)
        per_word = tf.gather(probabilities, tf.maximum(positions, 0), batch_dims=1)
        return {"tag_probabilities": per_word * tf.cast(positions >= 0, tf.float32)[..., tf.newaxis],
                "word_start": word_start, "word_end": word_end, "tag_names": tf.constant(list(tagger.label_names))}

    return endpoint


def _discriminator_endpoint(discriminator, lite_tokenizer, length: int):
    import tensorflow as tf

    def endpoint(text):
        inputs = pack_text(lite_tokenizer.tokenize(text), lite_tokenizer.tokenizer, length)
        result = discriminator(inputs, training=False)
        mask = tf.cast(inputs["padding_mask"], tf.float32)
        return {"replaced_probability": tf.sigmoid(tf.cast(result["logits"], tf.float32)) * mask,
                "token_ids": inputs["token_ids"], "padding_mask": inputs["padding_mask"],
                "cls_hidden_state": tf.cast(result["sequence_output"], tf.float32)[:, 0, :]}

    return endpoint


def litert_file_name(name: str, quantize: str) -> str:
    """NAME.tflite (float32 weights) or NAME-int8.tflite (`quantize="dynamic"`)."""
    return f"{name}-int8.tflite" if quantize == "dynamic" else f"{name}.tflite"


def write_litert(model, tokenizer, max_seq_length: int, output: str | Path, quantize: str = "none",
                 overwrite: bool = False) -> Path:
    """Converts `model` (with the tokenizer inside) into the LiteRT file `output`, written to a
    temporary file beside it and renamed; refused, with nothing written, when it cannot be."""
    import tensorflow as tf

    from electra_tf.models.transformer import gelu_form
    from electra_tf.serving.publish import in_float32

    output = Path(output)
    if quantize not in QUANTIZATIONS:
        raise LiteRTError(f"--quantize {quantize!r}: choose one of {', '.join(QUANTIZATIONS)}.")
    if output.exists() and not overwrite:
        raise LiteRTError(f"{output} exists; pass --overwrite to replace it, or another --export_dir or --name.")
    lite_tokenizer = LiteRTTokenizer(tokenizer)
    model = in_float32(model)
    endpoint, inputs = litert_endpoint(model, lite_tokenizer, max_seq_length)
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=output.parent, prefix=f".{output.name}.") as work:
        root = tf.train.Checkpoint()
        # The backend's tf.Variables themselves (`keras.Variable.value`): tracked so, the
        # converter finds each captured variable in the SavedModel and folds it into a constant;
        # tracked as Keras variables, they stayed uninitialised resource variables (NaN outputs).
        root.variables = [variable.value for variable in model.variables]
        signature = tf.function(endpoint, autograph=False, input_signature=[
            tf.TensorSpec([None], tf.string, name=name) for name in inputs])
        with gelu_form("one_op"):
            concrete = signature.get_concrete_function()
        tf.saved_model.save(root, f"{work}/saved_model", signatures={"serving_default": concrete})
        temporary = Path(work) / output.name
        with litert_notes_left_out():
            temporary.write_bytes(_convert(f"{work}/saved_model", quantize))
            check_runs(temporary)  # every op has a kernel, before the file takes its name
        os.replace(temporary, output)
    return output


def _convert(saved_model: str, quantize: str) -> bytes:
    """The converter's flatbuffer: builtin ops and tensorflow-text's custom ops only (no Flex)."""
    import tensorflow as tf

    converter = tf.lite.TFLiteConverter.from_saved_model(saved_model, signature_keys=["serving_default"])
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    converter.allow_custom_ops = True  # tensorflow-text's ops, which its registrar gives kernels
    if quantize == "dynamic":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    try:
        return converter.convert()
    except Exception as error:  # the converter raises ConverterError and others, with its diagnostics
        message = " ".join(str(error).split())[-1500:]
        raise LiteRTError(f"the LiteRT converter failed ({type(error).__name__}): {message}. Nothing was written. "
                          "Try --quantize none, or the SavedModel export; an op the message names has no LiteRT "
                          "kernel.") from None


def check_runs(path: str | Path) -> dict | None:
    """Loads the file in LiteRT's interpreter with tensorflow-text's kernels and answers an empty
    string: every op has a kernel. Returns the signature's outputs, or None when the `ai_edge_litert`
    runtime is not installed (`pip install -e ".[litert]"`)."""
    import importlib.util

    if importlib.util.find_spec("ai_edge_litert") is None:
        return None
    import numpy as np
    import tensorflow_text
    from ai_edge_litert.interpreter import InterpreterWithCustomOps

    interpreter = InterpreterWithCustomOps(model_path=str(path),
                                           custom_op_registerers=tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS)
    runner = interpreter.get_signature_runner("serving_default")
    try:
        return runner(**{name: np.array([""]) for name in runner.get_input_details()})
    except RuntimeError as error:
        raise LiteRTError(f"{path} was written but does not run in LiteRT's interpreter ({error}).") from None
