"""Writing a SavedModel for TensorFlow Serving: `publish`, `export_model`, and the export format
`saved_model` (`serving/exports.py`).

`EXPORT_DIR/NAME/<version>/` (saved_model.pb, variables/, assets.extra/) is the layout TF
Serving watches: the next integer version is built in a temporary folder and renamed, so a
server never sees a half-written version and an existing version is never overwritten. An
export whose weights, configuration, vocabulary, task and signatures equal the newest
version's writes nothing (rerunning a finished run or exporting the same checkpoint twice does
not make a new version): assets.extra/fingerprint holds their digest.
assets.extra/ also holds warmup requests the server replays at load, and config.json and
vocab.txt (and task.json for classifiers), which TF Serving ignores and
`finetuning/pretrained.py` reads to fine-tune from an export.

An export computes in float32 whatever precision the model trained in (`in_float32`).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import keras
import tensorflow as tf
from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

import electra_tf
from electra_tf.models.encoders import model_weights
from electra_tf.models.signatures import TEXT_SIGNATURE
from electra_tf.serving.exports import ExportFormat, ExportOptions, ExportSource, register_format
from electra_tf.utils.files import atomic_folder, atomic_write_text
from electra_tf.utils.progress import heartbeat
from electra_tf.utils.run_dir import ExportMetadata

WARMUP_TEXTS = ("ELECTRA detects replaced tokens.", "", "A longer sentence to warm up the model "
                "server, so that the first real request does not pay for graph initialisation.")


def write_saved_model(model, endpoints: dict, path: Path) -> None:
    """Writes a SavedModel with `endpoints` (functions over `model`) as signatures, plus warmup
    requests, to `path`.

    The object graph is the one `keras.export.ExportArchive` writes (`variables`,
    `trainable_variables`, `non_trainable_variables` and the endpoint functions on one
    trackable object; the first endpoint also as `serving_default`), written with
    `tf.saved_model.save` directly so that each endpoint is traced once: ExportArchive traces
    each endpoint twice (once outside TensorFlow's save context to list the variables it uses,
    and again inside it), which took about twice as long. Every variable of
    the model is kept, as ExportArchive's `track(model)` keeps them. Unlike ExportArchive, lookup
    tables held by the model are not collected: none of the package's models holds one, and
    `tf.saved_model.save` refuses, naming it, a signature that captures an untracked resource.
    """
    if not model.built:
        raise ValueError(f"{type(model).__name__} has not been built: call it on a batch before exporting.")
    # A tf.train.Checkpoint is the public AutoTrackable whose attributes may be named as
    # ExportArchive names them (a tf.Module's `variables` is a read-only property).
    root = tf.train.Checkpoint()
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


def in_float32(model):
    """`model` itself when it computes in float32; otherwise a copy of it built from its config
    under the float32 policy, holding its weights (matched by path).

    Why exports compute in float32: the variables are float32 under every policy, so nothing is
    lost; a float32 graph runs at float32 speed on any serving hardware, where a bfloat16 one is
    slow on CPUs without native bfloat16 instructions and a float16 one on most CPUs; and it is
    what `python -m electra_tf.export` writes from a checkpoint of the same run.
    """
    if model.dtype_policy.compute_dtype == model.dtype_policy.variable_dtype:
        return model
    policy = keras.config.dtype_policy()
    keras.config.set_dtype_policy("float32")  # for the layers a model makes without a dtype argument
    try:
        copy = keras.saving.deserialize_keras_object(
            _with_float32_policies(keras.saving.serialize_keras_object(model)))
    finally:
        keras.config.set_dtype_policy(policy)
    theirs, ours = model_weights(model), model_weights(copy)
    if [v.path for v in theirs] != [v.path for v in ours]:
        raise ValueError(f"{type(model).__name__} rebuilt from its config holds other weights than the model.")
    for source, target in zip(theirs, ours):
        target.assign(source)
    return copy


def _with_float32_policies(config):
    """A serialized Keras object with every dtype policy in it (nested layers' too) float32."""
    if isinstance(config, dict):
        if config.get("class_name") in ("DTypePolicy", "FloatDTypePolicy"):
            return "float32"
        return {key: _with_float32_policies(value) for key, value in config.items()}
    if isinstance(config, list):
        return [_with_float32_policies(value) for value in config]
    return config


def write_warmup_requests(path: Path, model_name: str = "electra") -> None:
    """assets.extra/tf_serving_warmup_requests: PredictionLog records the server replays at load."""
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
        if tokenizer.sentencepiece_model is not None:
            digest.update(tokenizer.sentencepiece_model)
    return digest.hexdigest()


def publish(model, make_endpoints, export_dir: Path, name: str, config=None, tokenizer=None,
            task: dict | None = None) -> Path:
    """Writes EXPORT_DIR/NAME/<next version>/ atomically; returns that folder. `make_endpoints`
    gives the signatures over the model it is handed (`in_float32(model)`: {name: (function,
    inputs)}). With `config` and `tokenizer`, assets.extra/ also keeps config.json, vocab.txt
    (and task.json)."""
    model = in_float32(model)
    endpoints = make_endpoints(model)
    model_root = Path(export_dir) / name
    fingerprint = export_fingerprint(model, endpoints, config, tokenizer, task)
    newest = model_root / str(next_version(model_root) - 1)
    if ExportMetadata.of(newest).fingerprint.is_file() and \
            ExportMetadata.of(newest).fingerprint.read_text(encoding="utf-8").strip() == fingerprint:
        print(f"  export: {newest.resolve()} already holds this model (same weights, config, vocabulary and "
              "signatures); no new version written.", flush=True)
        return newest
    with atomic_folder(lambda: model_root / str(next_version(model_root)), replace=False) as write:
        write_saved_model(model, endpoints, write.temporary)
        if config is not None:
            write_export_metadata(write.temporary, config, tokenizer, task)
        atomic_write_text(ExportMetadata.of(write.temporary).fingerprint, fingerprint + "\n")
    return write.path


def export_model(model, tokenizer, config, export_dir: Path, name: str) -> Path:
    """A servable model (the discriminator, or a fine-tuned task model of any kind) with the
    signatures and task description it gives itself (`model.serving_endpoints(tokenizer,
    max_seq_length)`, `model.serving_task(max_seq_length)`). `config.max_seq_length` is the length
    it was trained at."""
    return publish(model, lambda copy: copy.serving_endpoints(tokenizer, config.max_seq_length), export_dir, name,
                   config, tokenizer, model.serving_task(config.max_seq_length))


@register_format("saved_model")
class SavedModelFormat(ExportFormat):
    """EXPORT_DIR/NAME/<version>/: a SavedModel for TensorFlow Serving (module docstring)."""

    help = "a SavedModel for TensorFlow Serving: text in (serving_default) and token ids in (encode_ids)"

    def refuses(self, source: ExportSource) -> str | None:
        if not hasattr(source.served.model, "serving_endpoints"):
            return f"a {type(source.served.model).__name__} gives no serving_endpoints"
        return None

    def write(self, source: ExportSource, options: ExportOptions) -> tuple[Path, list[str]]:
        first_new_version = next_version(options.export_dir / options.name)
        served = source.served
        with heartbeat("export", stream=sys.stdout):
            target = export_model(served.model, served.tokenizer, served.config, options.export_dir, options.name)
        if int(target.name) < first_new_version:
            return target, []  # nothing new: publish said which version already holds this model
        return target, [f"Exported {source.describe()} for TensorFlow Serving to {target.resolve()}",
                        f"  saved_model_cli show --dir {target.resolve()} --all"]


def write_export_metadata(version_dir: Path, config, tokenizer, task: dict | None = None) -> None:
    """config.json, vocab.txt with its tokenizer_config.json (and task.json) under assets.extra/, so an export can be
    fine-tuned from or inspected without the run that made it."""
    metadata = ExportMetadata.of(version_dir)
    metadata.path.mkdir(parents=True, exist_ok=True)
    config.save(metadata.config)
    tokenizer.save(metadata.vocab)
    if task is not None:
        atomic_write_text(metadata.task, json.dumps(task, indent=2) + "\n")
