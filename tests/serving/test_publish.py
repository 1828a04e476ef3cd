"""Writing a SavedModel for TF Serving (`serving/publish.py`): layout, versions and warmup, signatures,
equality with Keras, float32 copies, a TensorFlow-only consumer."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.finetuning.pretrained import load_pretrained
from electra_tf.models.encoders import model_weights
from electra_tf.models.preprocessing import pack_texts
from electra_tf.serving import publish
from tests.conftest import SHORT_RUN_SEQ

SEQ = SHORT_RUN_SEQ  # conftest.short_run
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def exported(short_run):
    return short_run / "exports" / "run" / "1"


@pytest.fixture(scope="module")
def keras_discriminator(short_run):
    pretrained = load_pretrained(short_run / "run")
    return pretrained.discriminator, pretrained.tokenizer, pretrained.config


def test_layout_versions_and_warmup(exported, keras_discriminator, tmp_path):
    assert (exported / "saved_model.pb").is_file() and (exported / "variables").is_dir()
    discriminator, tokenizer, config = keras_discriminator
    first = publish.export_model(discriminator, tokenizer, config, tmp_path, "run")
    # The same weights again: no new version. Changed weights: the next version.
    assert publish.export_model(discriminator, tokenizer, config, tmp_path, "run") == first
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["1"]
    bias = discriminator.head.weights[-1]
    original = bias.numpy()
    bias.assign(original + 1.0)
    try:
        second = publish.export_model(discriminator, tokenizer, config, tmp_path, "run")
    finally:
        bias.assign(original)
    assert second.name == "2"
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["1", "2"]  # no temp left
    assert (second / "assets.extra" / "fingerprint").read_text() != (first / "assets.extra" / "fingerprint").read_text()
    from tensorflow_serving.apis import prediction_log_pb2
    records = list(tf.data.TFRecordDataset(str(exported / "assets.extra" / "tf_serving_warmup_requests")))
    assert len(records) == 2
    log = prediction_log_pb2.PredictionLog.FromString(records[1].numpy())
    assert log.predict_log.request.model_spec.signature_name == "serving_default"
    assert list(log.predict_log.request.inputs["text"].tensor_shape.dim)[0].size == 3


def test_outputs_equal_the_keras_model(exported, keras_discriminator):
    discriminator, tokenizer, config = keras_discriminator
    loaded = tf.saved_model.load(str(exported))
    texts = ["The river rises in the northern hills.", "Bees visit the orchard."]
    served = loaded.signatures["serving_default"](text=tf.constant(texts))
    token_ids, mask = served["token_ids"], served["padding_mask"]
    expected_ids = tokenizer.tokenize(texts).to_list()
    for row, ids in enumerate(expected_ids):
        assert token_ids[row, : len(ids) + 2].numpy().tolist() == [tokenizer.cls_id, *ids, tokenizer.sep_id]
    keras_out = discriminator({"token_ids": token_ids, "segment_ids": tf.zeros_like(token_ids),
                               "padding_mask": mask})
    expected = tf.sigmoid(keras_out["logits"]) * tf.cast(mask, tf.float32)
    np.testing.assert_allclose(served["replaced_probability"], expected, atol=1e-5)
    np.testing.assert_allclose(served["cls_hidden_state"], keras_out["sequence_output"][:, 0], atol=1e-5)
    by_ids = loaded.signatures["encode_ids"](token_ids=token_ids, segment_ids=tf.zeros_like(token_ids),
                                             padding_mask=mask)
    np.testing.assert_allclose(by_ids["replaced_probability"], expected, atol=1e-5)
    assert served["tokens"][0, 0].numpy() == b"[CLS]" and served["tokens"][0, -1].numpy() == b""


def test_a_model_trained_in_mixed_precision_exports_computing_in_float32(keras_discriminator, tmp_path):
    import keras

    discriminator, tokenizer, config = keras_discriminator
    batch = ids_batch(tokenizer)
    keras.config.set_dtype_policy("mixed_bfloat16")
    mixed = rebuilt_with_weights_of(discriminator, config, batch)
    path = publish.export_model(mixed, tokenizer, config, tmp_path, "mixed")
    assert_export_computes(path, discriminator, batch)  # the float32 model with the same weights
    assert mixed(batch)["sequence_output"].dtype == tf.bfloat16  # training precision restored


def test_each_signature_is_traced_once_and_mirrored_weights_serve_as_the_model(keras_discriminator, two_replicas,
                                                                              tmp_path):
    """A discriminator whose variables are mirrored over two replicas (as `--strategy mirrored`
    leaves it) exports the model's outputs; the save traces each signature once (Keras'
    ExportArchive traced each twice, once outside TensorFlow's save context)."""
    import functools

    from electra_tf.models.signatures import discriminator_endpoints

    discriminator, tokenizer, config = keras_discriminator
    batch = ids_batch(tokenizer)
    with two_replicas.scope():
        mirrored = rebuilt_with_weights_of(discriminator, config, batch)
    assert isinstance(mirrored.weights[0].value, tf.distribute.DistributedValues)

    traces = {}

    def counted(name, fn):
        @functools.wraps(fn)
        def trace(*args):
            traces[name] = traces.get(name, 0) + 1
            return fn(*args)
        return trace

    def endpoints(model):
        return {name: (counted(name, fn), inputs)
                for name, (fn, inputs) in discriminator_endpoints(model, tokenizer, SEQ).items()}

    path = publish.publish(mirrored, endpoints, tmp_path, "mirrored", config, tokenizer)
    assert traces == {"serving_default": 1, "encode_ids": 1}
    assert_export_computes(path, discriminator, batch)


def test_a_tensorflow_only_process_serves_both_signatures(run_python, exported):
    code = f"""
import json, sys
import tensorflow as tf, tensorflow_text
model = tf.saved_model.load({str(exported)!r})
text = model.signatures["serving_default"](text=tf.constant(["The library opened in 1902."]))
ids = model.signatures["encode_ids"](token_ids=text["token_ids"], segment_ids=tf.zeros_like(text["token_ids"]),
                                     padding_mask=text["padding_mask"])
print(json.dumps({{"text": sorted(text), "close": bool(abs(float(tf.reduce_max(tf.abs(
    text["replaced_probability"] - ids["replaced_probability"])))) < 1e-6),
    "foreign": sorted(m for m in sys.modules if m.split(".")[0] in ("electra_tf", "keras_hub"))}}))
"""
    result = run_python(code)
    assert result["text"] == ["cls_hidden_state", "hidden_states", "no_text", "padding_mask", "replaced_probability",
                              "token_ids", "tokens"]
    assert result["close"] and result["foreign"] == []


def test_saved_model_cli_lists_both_signatures(exported):
    cli = Path(sys.executable).with_name("saved_model_cli")
    result = subprocess.run([str(cli), "show", "--dir", str(exported), "--all"], capture_output=True, text=True,
                            timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-2000:]
    for needle in ("signature_def['serving_default']", "signature_def['encode_ids']", "inputs['text']",
                   "inputs['token_ids']", "outputs['replaced_probability']"):
        assert needle in result.stdout, needle


def test_graph_holds_only_core_and_tf_text_ops(run_python, exported):
    code = f"""
import json
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.framework import op_def_registry
saved = saved_model_pb2.SavedModel.FromString(open({str(exported / "saved_model.pb")!r}, "rb").read())
used, functions = set(), set()
for graph in (m.graph_def for m in saved.meta_graphs):
    used |= {{n.op for n in graph.node}}
    for function in graph.library.function:
        functions.add(function.signature.name)
        used |= {{n.op for n in function.node_def}}
used -= functions
not_core = {{op for op in used if op_def_registry.get(op) is None}}
import tensorflow_text  # registers the tf-text ops, as the model server links them
unknown = {{op for op in not_core if op_def_registry.get(op) is None}}
print(json.dumps({{"unknown": sorted(unknown), "text": sorted(not_core - unknown), "used": sorted(used)}}))
"""
    result = run_python(code)
    assert result["unknown"] == []
    forbidden = {"PyFunc", "PyFuncStateless", "EagerPyFunc", "RoundRobinTrim", "RoundRobinGenerateMasks"}
    assert not forbidden & set(result["used"])
    assert "FastWordpieceTokenizeWithOffsets" in result["text"]


def test_bad_input_has_defined_behaviour(exported):
    serve = tf.saved_model.load(str(exported)).signatures["serving_default"]
    out = serve(text=tf.constant(["", b"caf\xe9 \xff\xfe bytes", "river " * 5000]))
    tokens = out["tokens"].numpy()
    assert tokens[0, :3].tolist() == [b"[CLS]", b"[SEP]", b""]                    # empty string
    assert b"[UNK]" in tokens[1].tolist() and out["padding_mask"][1].numpy().sum() > 2  # bytes replaced
    assert out["padding_mask"][2].numpy().sum() == SEQ and tokens[2, -1] == b"[SEP]"  # truncated
    by_ids = tf.saved_model.load(str(exported)).signatures["encode_ids"]
    ones = tf.ones([1, 4], tf.int32)
    with pytest.raises(tf.errors.InvalidArgumentError, match="token_ids must be in \\[0, "):
        by_ids(token_ids=ones * 10**6, segment_ids=ones * 0, padding_mask=ones)
    empty = serve(text=tf.constant([], tf.string))
    assert empty["replaced_probability"].shape == (0, SEQ) and empty["tokens"].shape == (0, SEQ)


@pytest.mark.parametrize("precision", ["float32", "mixed_bfloat16"])
def test_a_fine_tuned_classifier_exports_through_the_same_path(keras_discriminator, tmp_path, precision):
    """A task model gives its own signatures (`serving_endpoints`); one trained in mixed precision
    is exported as a float32 copy rebuilt from its config, computing what the float32 model does."""
    import keras

    from electra_tf.finetuning.text.models import ElectraClassifier

    discriminator, tokenizer, config = keras_discriminator
    probe = {"token_ids": tf.ones([1, SEQ], tf.int32), "segment_ids": tf.zeros([1, SEQ], tf.int32),
             "padding_mask": tf.ones([1, SEQ], tf.int32)}
    keras.utils.set_random_seed(3)
    classifier = ElectraClassifier(discriminator, num_classes=3, label_names=["sport", "tech", "politics"])
    classifier(probe)
    trained = classifier
    if precision != "float32":
        keras.config.set_dtype_policy(precision)
        trained = ElectraClassifier(rebuilt_with_weights_of(discriminator, config, probe), num_classes=3,
                                    label_names=["sport", "tech", "politics"])
        trained(probe)
        for mine, theirs in zip(trained.weights, classifier.weights):
            mine.assign(theirs)
    path = publish.export_model(trained, tokenizer, config, tmp_path, "topics")
    serve = tf.saved_model.load(str(path)).signatures["serving_default"]
    out = serve(text=tf.constant(["The river rises.", "Bees visit the orchard."]))
    assert out["probabilities"].shape == (2, 3)
    np.testing.assert_allclose(out["probabilities"].numpy().sum(-1), 1.0, rtol=1e-5)
    assert out["label_names"].numpy()[0].tolist() == [b"sport", b"tech", b"politics"]
    assert out["label"].numpy()[0] in (b"sport", b"tech", b"politics")
    expected = tf.nn.softmax(classifier(pack_texts(tokenizer, SEQ, tf.constant(["The river rises."]))))
    np.testing.assert_allclose(out["probabilities"][:1], expected, atol=1e-5)
    assert json.loads((path / "assets.extra" / "task.json").read_text())["label_names"] == ["sport", "tech", "politics"]


def test_an_export_is_a_pretrained_source(exported, keras_discriminator):
    """Fine-tuning can start from a served model: weights matched by name, config and
    vocabulary from assets.extra/."""
    discriminator, tokenizer, config = keras_discriminator
    assert (exported / "assets.extra" / "config.json").is_file()
    for source in (exported, exported.parent):  # a version folder, or the model folder
        restored = load_pretrained(source)
        assert restored.config == config and restored.tokenizer.vocabulary == tokenizer.vocabulary
        for mine, theirs in zip(model_weights(restored.discriminator), model_weights(discriminator)):
            assert mine.path == theirs.path
            np.testing.assert_array_equal(mine.numpy(), theirs.numpy())


def rebuilt_with_weights_of(discriminator, config, batch):
    """A new discriminator (under the current dtype policy and strategy) holding `discriminator`'s weights."""
    from electra_tf.models.encoders import build_discriminator

    copy = build_discriminator(config.model)
    copy(batch)
    for mine, theirs in zip(model_weights(copy), model_weights(discriminator)):
        mine.assign(theirs)
    return copy


def ids_batch(tokenizer):
    ids = tf.constant([[tokenizer.cls_id, 7, 9, 11, tokenizer.sep_id] + [0] * (SEQ - 5)])
    return {"token_ids": ids, "segment_ids": tf.zeros_like(ids), "padding_mask": tf.cast(ids > 0, tf.int32)}


def assert_export_computes(path, discriminator, batch):
    """The export's `encode_ids` gives `discriminator`'s (float32) outputs for `batch`."""
    served = tf.saved_model.load(str(path)).signatures["encode_ids"](**batch)
    expected = discriminator(batch)
    np.testing.assert_allclose(served["replaced_probability"],
                               tf.sigmoid(expected["logits"]) * tf.cast(batch["padding_mask"], tf.float32),
                               atol=1e-5)
    np.testing.assert_allclose(served["cls_hidden_state"], expected["sequence_output"][:, 0], atol=1e-5)
