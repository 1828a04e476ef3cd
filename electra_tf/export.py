"""`python -m electra_tf.export`: the discriminator as a SavedModel for TensorFlow Serving.

    python -m electra_tf.export --model_dir runs/electra_tiny [--checkpoint ckpt-2000] \\
        [--export_dir exports] [--name electra_tiny]

writes `EXPORT_DIR/NAME/<version>/` (saved_model.pb, variables/, assets.extra/), the layout
TF Serving watches: the next integer version, built in a temporary folder and renamed, so a
server never sees a half-written version and an existing version is never overwritten. The
generator is not exported.

Signatures (TF Serving `signature_name`):
- `serving_default`: `text` (string [batch]) -> tokenized in the graph with the run's
  vocabulary (the same WordPiece as training), `[CLS] text [SEP]`, truncated to
  max_seq_length - 2 word pieces, padded to max_seq_length.
- `encode_ids`: `token_ids`, `segment_ids`, `padding_mask` (int32 [batch, length]) for clients
  that tokenize themselves; longer inputs are cut to max_seq_length; an id outside the
  vocabulary is an error naming the valid range.
Both return `replaced_probability` (float32 [batch, length], 0 on padding), `tokens` (string,
"" on padding), `token_ids`, `padding_mask`, `cls_hidden_state` ([batch, hidden]) and
`hidden_states` ([batch, length, hidden]).

Fine-tuned classifiers export through the same path (`export_text_classifier`): the same
two signatures (the text one takes `text` and `text_pair` for pair tasks), returning
`probabilities` [batch, classes], `label` (the most probable name) and `label_names`, or
`score` for regression. assets.extra/ also keeps config.json and vocab.txt (and task.json
for classifiers), which TF Serving ignores and `electra_tf.pretrained` reads.

Bad input is defined, not an error: invalid UTF-8 bytes are replaced by U+FFFD before
tokenization; an empty string gives `[CLS] [SEP]`; a long text is truncated; an empty batch
gives empty outputs. The graph holds only core TensorFlow and tf-text ops (no py_function,
no RoundRobinTrim), so the TF Serving model server (2.20+) runs it without Python.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

TEXT_SIGNATURE = "serving_default"
IDS_SIGNATURE = "encode_ids"
WARMUP_TEXTS = ("ELECTRA detects replaced tokens.", "", "A longer sentence to warm up the model "
                "server, so that the first real request does not pay for graph initialisation.")


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

    from electra_tf.tasks import from_unit_interval

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


def _text_endpoint(tokenizer, max_seq_length: int, outputs, text_pair: bool = False):
    """Strings in, through the same packing as training (`preprocessing.pack_texts`)."""
    from electra_tf.preprocessing import pack_texts

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


def write_saved_model(model, endpoints: dict, path: Path) -> None:
    """Writes a SavedModel with `endpoints` as signatures, plus warmup requests, to `path`."""
    import keras
    import tensorflow as tf

    archive = keras.export.ExportArchive()
    archive.track(model)
    for name, (fn, inputs) in endpoints.items():
        archive.add_endpoint(name, fn, input_signature=[
            tf.TensorSpec(shape, dtype, name=input_name) for input_name, shape, dtype in inputs])
    archive.write_out(str(path), verbose=False)
    write_warmup_requests(path)


def write_warmup_requests(path: Path, model_name: str = "electra") -> None:
    """assets.extra/tf_serving_warmup_requests: PredictionLog records the server replays at load."""
    import tensorflow as tf
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

    folder = Path(path) / "assets.extra"
    folder.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(folder / "tf_serving_warmup_requests")) as writer:
        for batch in ([WARMUP_TEXTS[0]], list(WARMUP_TEXTS)):
            request = predict_pb2.PredictRequest(
                model_spec=model_pb2.ModelSpec(name=model_name, signature_name=TEXT_SIGNATURE))
            request.inputs["text"].CopyFrom(tf.make_tensor_proto(batch, dtype=tf.string))
            log = prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request))
            writer.write(log.SerializeToString())


def next_version(model_root: Path) -> int:
    versions = [int(p.name) for p in model_root.iterdir() if p.is_dir() and p.name.isdigit()] \
        if model_root.is_dir() else []
    return max(versions, default=0) + 1


def publish(model, endpoints: dict, export_dir: Path, name: str, config=None, tokenizer=None,
            task: dict | None = None) -> Path:
    """Writes EXPORT_DIR/NAME/<next version>/ atomically; returns that folder. With `config`
    and `tokenizer`, assets.extra/ also keeps config.json, vocab.txt (and task.json)."""
    from electra_tf.pretrained import write_export_metadata

    model_root = Path(export_dir) / name
    model_root.mkdir(parents=True, exist_ok=True)
    temporary = model_root / f".tmp-{os.getpid()}"
    shutil.rmtree(temporary, ignore_errors=True)
    try:
        write_saved_model(model, endpoints, temporary)
        if config is not None:
            write_export_metadata(temporary, config, tokenizer, task)
        while True:
            target = model_root / str(next_version(model_root))
            try:
                os.rename(temporary, target)  # fails if another export took this version
                return target
            except OSError:
                if not target.exists():
                    raise
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


def export_discriminator(discriminator, tokenizer, config, export_dir: Path, name: str) -> Path:
    return publish(discriminator, discriminator_endpoints(discriminator, tokenizer, config.max_seq_length),
                   export_dir, name, config, tokenizer)


def export_text_classifier(classifier, tokenizer, config, export_dir: Path, name: str,
                           label_names=None, score_range=None, text_pair: bool = False) -> Path:
    """`config.max_seq_length` is the length the classifier was fine-tuned at."""
    endpoints = classifier_endpoints(classifier, tokenizer, config.max_seq_length, label_names,
                                     score_range, text_pair)
    task = {"label_names": list(label_names) if label_names is not None else None,
            "score_range": list(score_range) if score_range is not None else None,
            "text_pair": text_pair}
    return publish(classifier, endpoints, export_dir, name, config, tokenizer, task)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m electra_tf.export", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model_dir", required=True,
                        help="a pre-training model_dir (or a .keras file / earlier export)")
    parser.add_argument("--checkpoint", default=None, help="e.g. ckpt-2000 (default: the latest)")
    parser.add_argument("--export_dir", default="exports")
    parser.add_argument("--name", default=None, help="model name (default: the model_dir's name)")
    args = parser.parse_args(argv)
    from electra_tf.pretrained import PretrainedError, load_pretrained

    model_dir = Path(args.model_dir)
    try:
        pretrained = load_pretrained(model_dir, args.checkpoint)
    except PretrainedError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    target = export_discriminator(pretrained.discriminator, pretrained.tokenizer, pretrained.config,
                                  Path(args.export_dir), args.name or model_dir.name)
    print(f"Exported the discriminator to {target}\n  saved_model_cli show --dir {target} --all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
