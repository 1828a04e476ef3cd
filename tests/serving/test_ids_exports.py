"""The OpenVINO and ONNX exports: a classifier's ids signature in each runtime's files (a tagger's and
the discriminator's written and checked too), run in a
process with the runtime and tensorflow-text only (no electra_tf, no model code), fed ids packed as
docs/serving.md tells a client to, answers as the SavedModel answers the same texts."""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from electra_tf import export
from electra_tf.finetuning.pretrained import load_pretrained
from electra_tf.finetuning.text.models import ElectraClassifier, ElectraTokenClassifier
from electra_tf.serving.exports import FORMATS
from electra_tf.serving.ids_exports import IdsExportError
from electra_tf.serving.publish import export_model
from tests.tokenization_corpus import EDGE_CASES, FRENCH
from tests.without_electra_tf import REFUSE_ELECTRA_TF

RUNTIMES = [pytest.param(name, marks=pytest.mark.skipif(
    any(importlib.util.find_spec(package) is None for package in packages),
    reason=f"needs {', '.join(packages)}: pip install -e \".[runtimes]\""))
    for name, packages in (("openvino", ["openvino"]), ("onnx", ["onnxruntime", "tf2onnx"]))]

TEXTS = ["The library opened in 1902 and still lends books.", "river " * 300] + FRENCH + EDGE_CASES

# What docs/serving.md ("OpenVINO") tells a client to do, run as a client would.
CLIENT = REFUSE_ELECTRA_TF + r'''
import numpy as np, tensorflow as tf, tensorflow_text as tf_text
job = json.loads(open(sys.argv[1], encoding="utf-8").read())
folder = job["folder"]
meta = json.load(open(f"{folder}/export.json"))
vocab = open(f"{folder}/vocab.txt", encoding="utf-8").read().splitlines()
length = meta["max_seq_length"]
normalizer = tf_text.FastBertNormalizer(lower_case_nfd_strip_accents=json.load(open(f"{folder}/tokenizer_config.json"))["do_lower_case"])
wordpiece = tf_text.FastWordpieceTokenizer(vocab=[t if not any(c.isspace() for c in t) else f"[unreachable {i}]"
                                                  for i, t in enumerate(vocab)],
                                           token_out_type=tf.int32, no_pretokenization=False)
pieces = wordpiece.tokenize(normalizer.normalize(job["texts"])).to_list()
cls, sep = vocab.index("[CLS]"), vocab.index("[SEP]")
token_ids = np.zeros((len(pieces), length), np.int32)
padding_mask = np.zeros_like(token_ids)
for row, ids in enumerate(pieces):
    ids = [cls] + ids[: length - 2] + [sep]
    token_ids[row, : len(ids)], padding_mask[row, : len(ids)] = ids, 1
inputs = {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids), "padding_mask": padding_mask}
if job["runtime"] == "openvino":
    import openvino
    compiled = openvino.Core().compile_model(f"{folder}/model.xml", "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    out = {port.get_any_name(): value for port, value in compiled(inputs).items()}
else:
    import onnxruntime
    runner = onnxruntime.InferenceSession(f"{folder}/model.onnx", providers=["CPUExecutionProvider"])
    out = dict(zip([o.name for o in runner.get_outputs()], runner.run(None, inputs)))
print(json.dumps({name: value.tolist() for name, value in out.items()}))
'''


def client(runtime, folder, texts, tmp_path) -> dict:
    (tmp_path / "job.json").write_text(json.dumps({"runtime": runtime, "folder": str(folder), "texts": texts}),
                                       encoding="utf-8")
    result = subprocess.run([sys.executable, "-c", CLIENT, str(tmp_path / "job.json")], capture_output=True, text=True,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return {k: np.asarray(v) for k, v in json.loads(result.stdout.strip().splitlines()[-1]).items()}


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_classifier_answers_as_its_saved_model(runtime, pretrained_run, tmp_path, run_python):
    backbone = load_pretrained(pretrained_run)
    classifier = ElectraClassifier(backbone.discriminator, 3, label_names=["a", "b", "c"])
    exporter = FORMATS[runtime]()
    folder = exporter.write_folder(classifier, backbone.tokenizer, backbone.config, tmp_path / f"classes-{runtime}")
    assert json.loads((folder / "export.json").read_text())["label_names"] == ["a", "b", "c"]
    saved = export_model(classifier, backbone.tokenizer, backbone.config, tmp_path / "exports", "classes")
    ours = run_python(f"""
import json, tensorflow as tf, tensorflow_text
f = tf.saved_model.load({str(saved)!r}).signatures["serving_default"]
print(json.dumps(f(text=tf.constant({TEXTS!r}))["probabilities"].numpy().tolist()))""")
    theirs = client(runtime, folder, TEXTS, tmp_path)
    assert sorted(theirs) == ["probabilities"]
    np.testing.assert_allclose(theirs["probabilities"], np.asarray(ours), atol=1e-4)
    with pytest.raises(IdsExportError, match="--overwrite"):
        exporter.write_folder(classifier, backbone.tokenizer, backbone.config, folder)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_tagger_is_written_and_checked_against_the_model(runtime, pretrained_run, tmp_path):
    backbone = load_pretrained(pretrained_run)
    tags = ["O", "B-PER", "I-PER"]
    tagger = ElectraTokenClassifier(backbone.discriminator, len(tags), label_names=tags)
    # write_folder runs the files on real ids against the model (within 1e-4) before naming the folder
    folder = FORMATS[runtime]().write_folder(tagger, backbone.tokenizer, backbone.config, tmp_path / runtime)
    meta = json.loads((folder / "export.json").read_text())
    assert meta["outputs"] == ["tag_probabilities"]  # per word piece; the names are in export.json
    assert meta["label_names"] == tags


@pytest.mark.parametrize("runtime", RUNTIMES)  # the discriminator
def test_the_command_exports_a_run_and_refuses_an_existing_folder(runtime, pretrained_run, tmp_path, capsys):
    argv = ["--model_dir", str(pretrained_run), "--format", runtime, "--export_dir", str(tmp_path)]
    assert export.main(argv) == 0
    assert "checked: its answers equal the model's" in capsys.readouterr().out
    files = {"openvino": ["model.bin", "model.xml"], "onnx": ["model.onnx"]}[runtime]
    assert sorted(p.name for p in (tmp_path / f"electra_tiny-{runtime}").iterdir()) == sorted(
        ["export.json", "tokenizer_config.json", "vocab.txt", *files])
    assert export.main(argv) == 2
    assert "--overwrite" in capsys.readouterr().err
