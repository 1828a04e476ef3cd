"""Writing a SavedModel for TensorFlow Serving: `publish`, `export_discriminator`,
`export_text_classifier`.

`EXPORT_DIR/NAME/<version>/` (saved_model.pb, variables/, assets.extra/) is the layout TF
Serving watches: the next integer version is built in a temporary folder and renamed, so a
server never sees a half-written version and an existing version is never overwritten. An
export whose weights, configuration, vocabulary, task and signatures equal the newest
version's writes nothing (rerunning a finished run or exporting the same checkpoint twice does
not make a new version): assets.extra/fingerprint holds their digest.
assets.extra/ also holds warmup requests the server replays at load, and config.json and
vocab.txt (and task.json for classifiers), which TF Serving ignores and
`electra_tf.loading` reads to fine-tune from an export.

An export computes in float32 whatever precision the model trained in (`computing_in_float32`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from pathlib import Path

from electra_tf.files import atomic_write_text
from electra_tf.run_dir import ExportMetadata
from electra_tf.serving.signatures import (TEXT_SIGNATURE, classifier_endpoints, discriminator_endpoints,
                                          tagger_endpoints)

WARMUP_TEXTS = ("ELECTRA detects replaced tokens.", "", "A longer sentence to warm up the model "
                "server, so that the first real request does not pay for graph initialisation.")


def write_saved_model(model, endpoints: dict, path: Path) -> None:
    """Writes a SavedModel with `endpoints` as signatures, plus warmup requests, to `path`.

    The object graph is the one `keras.export.ExportArchive` writes (`variables`,
    `trainable_variables`, `non_trainable_variables` and the endpoint functions on one
    AutoTrackable; the first endpoint also as `serving_default`), written with
    `tf.saved_model.save` directly so that each endpoint is traced once. ExportArchive traces
    each endpoint twice: once outside TensorFlow's save context to list the variables it uses,
    and again inside it (a function's trace is keyed on the save context's variable policy):
    exports took about twice as long (docs/results.md, "Exports traced once"). Every variable of
    the model is kept, as ExportArchive's `track(model)` keeps them. Unlike ExportArchive, lookup
    tables held by the model are not collected: none of the package's models holds one, and
    `tf.saved_model.save` refuses, naming it, a signature that captures an untracked resource.
    """
    import tensorflow as tf

    if not model.built:
        raise ValueError(f"{type(model).__name__} has not been built: call it on a batch before exporting.")
    with computing_in_float32(model):  # the endpoints are traced in here, by the save
        root = tf.__internal__.tracking.AutoTrackable()
        root.variables = list(model.variables)
        root.trainable_variables = list(model.trainable_variables)
        root.non_trainable_variables = list(model.non_trainable_variables)
        signatures = {}
        for name, (fn, inputs) in endpoints.items():
            signatures[name] = tf.function(fn, autograph=False, input_signature=[
                tf.TensorSpec(shape, dtype, name=input_name) for input_name, shape, dtype in inputs])
            setattr(root, name, signatures[name])
        signatures.setdefault("serving_default", next(iter(signatures.values())))  # TF Serving's default
        tf.saved_model.save(root, str(path), signatures=signatures)
    write_warmup_requests(path)


@contextlib.contextmanager
def computing_in_float32(model):
    """Within it, the layers of `model` under a mixed policy (mixed_bfloat16, mixed_float16)
    compute in float32; their policies are restored afterwards.

    Why exports compute in float32: the variables are float32 under every policy, so nothing is
    lost; a float32 graph runs at float32 speed on any serving hardware, where a bfloat16 one is
    slow on CPUs without native bfloat16 instructions and a float16 one on most CPUs; and it is
    what `python -m electra_tf.export` writes from a checkpoint of the same run. Keras has no public walk over
    nested layers; `_flatten_layers` is its own.
    """
    mixed = [layer for layer in model._flatten_layers(include_self=True, recursive=True)
             if layer.dtype_policy.compute_dtype != layer.dtype_policy.variable_dtype]
    policies = [layer.dtype_policy for layer in mixed]
    try:
        for layer in mixed:
            layer.dtype_policy = "float32"
        yield model
    finally:
        for layer, policy in zip(mixed, policies):
            layer.dtype_policy = policy


def write_warmup_requests(path: Path, model_name: str = "electra") -> None:
    """assets.extra/tf_serving_warmup_requests: PredictionLog records the server replays at load."""
    import tensorflow as tf
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

    metadata = ExportMetadata.of(path)
    metadata.path.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(metadata.warmup_requests)) as writer:
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


def export_fingerprint(model, endpoints: dict, config=None, tokenizer=None, task: dict | None = None) -> str:
    """A digest of everything an export is made of: the weights (by path; not the dropout seed
    states, which change with every training call and do not reach the graph), the signatures,
    the config, the vocabulary, the task's labels and the package version that wrote it."""
    import electra_tf

    digest = hashlib.sha256()
    for weight in sorted(model.weights, key=lambda w: w.path):
        digest.update(weight.path.encode())
        digest.update(weight.numpy().tobytes())
    digest.update(json.dumps({"signatures": sorted(endpoints), "task": task, "version": electra_tf.__version__,
                              "config": config.to_dict() if config is not None else None}, sort_keys=True).encode())
    if tokenizer is not None:
        digest.update("\n".join(tokenizer.vocabulary).encode())
        if tokenizer.settings != type(tokenizer.settings)():  # uncased exports keep their old digests
            digest.update(json.dumps(tokenizer.settings.to_huggingface(), sort_keys=True).encode())
    return digest.hexdigest()


def publish(model, endpoints: dict, export_dir: Path, name: str, config=None, tokenizer=None,
            task: dict | None = None) -> Path:
    """Writes EXPORT_DIR/NAME/<next version>/ atomically; returns that folder. With `config`
    and `tokenizer`, assets.extra/ also keeps config.json, vocab.txt (and task.json)."""
    model_root = Path(export_dir) / name
    fingerprint = export_fingerprint(model, endpoints, config, tokenizer, task)
    newest = model_root / str(next_version(model_root) - 1)
    if ExportMetadata.of(newest).fingerprint.is_file() and \
            ExportMetadata.of(newest).fingerprint.read_text(encoding="utf-8").strip() == fingerprint:
        print(f"  export: {newest.resolve()} already holds this model (same weights, config, vocabulary and "
              "signatures); no new version written.", flush=True)
        return newest
    model_root.mkdir(parents=True, exist_ok=True)
    temporary = model_root / f".tmp-{os.getpid()}"
    shutil.rmtree(temporary, ignore_errors=True)
    try:
        write_saved_model(model, endpoints, temporary)
        if config is not None:
            write_export_metadata(temporary, config, tokenizer, task)
        atomic_write_text(ExportMetadata.of(temporary).fingerprint, fingerprint + "\n")
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


def export_task_model(model, tokenizer, config, export_dir: Path, name: str) -> Path:
    """A fine-tuned `ElectraClassifier` or `ElectraTokenClassifier`, with the label names,
    score range and text-pair flag it carries. `config.max_seq_length` is the length it was
    fine-tuned at."""
    from electra_tf.finetuning.text.classifiers import ElectraTokenClassifier
    from electra_tf.finetuning.question_answering.model import ElectraQuestionAnswerer

    if isinstance(model, ElectraQuestionAnswerer):
        return export_question_answerer(model, tokenizer, config, export_dir, name)
    if isinstance(model, ElectraTokenClassifier):
        return export_tagger(model, tokenizer, config, export_dir, name, model.label_names)
    return export_text_classifier(model, tokenizer, config, export_dir, name, model.label_names,
                                  model.score_range, model.text_pair)


def export_text_classifier(classifier, tokenizer, config, export_dir: Path, name: str,
                           label_names=None, score_range=None, text_pair: bool = False) -> Path:
    """`config.max_seq_length` is the length the classifier was fine-tuned at."""
    endpoints = classifier_endpoints(classifier, tokenizer, config.max_seq_length, label_names,
                                     score_range, text_pair)
    task = {"label_names": list(label_names) if label_names is not None else None,
            "score_range": list(score_range) if score_range is not None else None,
            "text_pair": text_pair}
    return publish(classifier, endpoints, export_dir, name, config, tokenizer, task)


def export_tagger(tagger, tokenizer, config, export_dir: Path, name: str, tag_names) -> Path:
    """`config.max_seq_length` is the length the tagger was fine-tuned at."""
    endpoints = tagger_endpoints(tagger, tokenizer, config.max_seq_length, tag_names)
    return publish(tagger, endpoints, export_dir, name, config, tokenizer,
                   {"tag_names": list(tag_names), "tagging": True})


def export_question_answerer(answerer, tokenizer, config, export_dir: Path, name: str) -> Path:
    """`config.max_seq_length` is the length the model was fine-tuned at; the windowing and
    answer settings are the model's own."""
    from electra_tf.finetuning.question_answering.squad import default_doc_stride
    from electra_tf.serving.question_answering import question_answerer_endpoints

    from electra_tf.errors import RunError

    if config.max_seq_length - answerer.max_query_length - 3 < 1:
        raise RunError(f"the question answerer keeps questions of up to {answerer.max_query_length} pieces, which "
                       f"leaves no room for a context in its {config.max_seq_length}-piece windows; set its "
                       "max_query_length lower (fine-tuning: --max_query_length).")
    doc_stride = answerer.doc_stride or default_doc_stride(config.max_seq_length)
    endpoints = question_answerer_endpoints(answerer, tokenizer, config.max_seq_length, doc_stride,
                                            answerer.max_query_length, answerer.max_answer_length)
    return publish(answerer, endpoints, export_dir, name, config, tokenizer, {
        "question_answering": True, "head": answerer.head_type, "answerable": answerer.answerable,
        "doc_stride": doc_stride, "max_query_length": answerer.max_query_length,
        "max_answer_length": answerer.max_answer_length})


def write_export_metadata(version_dir: Path, config, tokenizer, task: dict | None = None) -> None:
    """config.json, vocab.txt with its tokenizer_config.json (and task.json) under assets.extra/, so an export can be
    fine-tuned from or inspected without the run that made it."""
    metadata = ExportMetadata.of(version_dir)
    metadata.path.mkdir(parents=True, exist_ok=True)
    config.save(metadata.config)
    tokenizer.save(metadata.vocab)
    if task is not None:
        atomic_write_text(metadata.task, json.dumps(task, indent=2) + "\n")
