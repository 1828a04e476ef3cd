"""Whatever a served model is sent, every form gives the same documented answer or a clear error:
each export loaded as TF Serving loads it (a process with TensorFlow and tensorflow-text only)
and each LiteRT file as an app loads it (LiteRT's interpreter and tensorflow-text's kernels),
sent a NUL inside a text, texts with no word, invalid UTF-8, a megabyte of text, 2,000 emoji,
mixed scripts, real text in several scripts, a batch of 500 texts (10,000 under `-m slow`), and
input of the wrong rank or dtype. What each took
(seconds, peak resident memory) is printed; docs/serving.md, "What bad input gets"."""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from electra_tf.data.corpus import sample_paragraphs
from electra_tf.finetuning.pretrained import load_pretrained
from electra_tf.finetuning.text.models import ElectraClassifier, ElectraTokenClassifier
from electra_tf.models.preprocessing import MAX_CHARACTERS_PER_POSITION
from electra_tf.serving.litert import write_litert
from electra_tf.serving.publish import export_model
from tests.tokenization_corpus import EDGE_CASES, FRENCH, chinese_reviews, korean_constitution
from tests.without_electra_tf import REFUSE_ELECTRA_TF

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ai_edge_litert") is None,
                                reason="needs LiteRT's interpreter: pip install -e \".[test]\" (ai-edge-litert)")

SENTENCE = "The library opened in 1902 and still lends books to the whole town. "
MEGABYTE = (SENTENCE * (2 ** 20 // len(SENTENCE) + 1))[: 2 ** 20]
CASES = {
    "nul": [b"Worked great.\x00 No side effects at all."],
    "no word": [b"", b"   ", b"\x01\x02\t", b"\xe2\x80\x8b\xc2\xa0"],  # empty, spaces, controls, ZWSP + NBSP
    "invalid utf-8": [b"caf\xe9 ok", b"\xff\xfe", b"ok \xe2\x82 done"],
    "megabyte": [MEGABYTE.encode()],
    "emoji": [("\U0001F600" * 2000).encode()],
    "mixed scripts": [(SENTENCE + chinese_reviews(1)[0] + " " + korean_constitution(2)[1] + " Москва, Ελλάδα!").encode()],
    "real text": [t.encode() for t in sample_paragraphs(12) + FRENCH + EDGE_CASES + chinese_reviews(5)
                  + korean_constitution(5)],
}
# A batch of real-length texts: 500 in the default suite; `-m slow` sends 10,000 (memory grows
# with the batch, about 12 GB there: two at once would not fit a 24 GB test machine).
BATCH = [(SENTENCE * (1 + i % 3)).encode() for i in range(500)]

# Each case in a fresh interpreter or a reloaded model: one JSON line per case with its outputs'
# summary, time and the process's peak memory so far.
SAVED_MODEL = REFUSE_ELECTRA_TF + r'''
import resource, time
import numpy as np, tensorflow as tf, tensorflow_text
job = json.loads(open(sys.argv[1], encoding="utf-8").read())
signature = tf.saved_model.load(job["model"]).signatures["serving_default"]
for name, texts in job["cases"].items():
    texts = [t.encode("latin-1") for t in texts]
    inputs = {key: tf.constant(texts) for key in job["inputs"]}
    start = time.perf_counter()
    out = {k: v.numpy() for k, v in signature(**inputs).items()}
    seconds = time.perf_counter() - start
    print(json.dumps({"case": name, "seconds": seconds, "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "no_text": out["no_text"].tolist()[:8], "rows": len(out["no_text"]),
                      "answer": np.asarray(out[job["answer"]])[:8].tolist()}))
# The cut before tokenizing: words after that many spaces are never read (LiteRT cannot cut).
spaces = " " * job["cut_at"]
cut = signature(**{key: tf.constant([spaces + "The library opened.", spaces[1:] + "The library opened."])
                   for key in job["inputs"]})
print(json.dumps({"case": "cut", "no_text": cut["no_text"].numpy().tolist()}))
for name, value in (("2-D", tf.constant([["a", "b"]])), ("float", tf.constant([1.0]))):
    try:
        signature(**{key: value for key in job["inputs"]})
        print(json.dumps({"case": name, "error": None}))
    except (TypeError, ValueError, tf.errors.InvalidArgumentError) as error:
        print(json.dumps({"case": name, "error": f"{type(error).__name__}: {str(error)[:300]}"}))
'''

LITERT = REFUSE_ELECTRA_TF + r'''
import resource, time
import numpy as np, tensorflow_text
from ai_edge_litert.interpreter import InterpreterWithCustomOps
job = json.loads(open(sys.argv[1], encoding="utf-8").read())
interpreter = InterpreterWithCustomOps(model_path=job["model"],
                                       custom_op_registerers=tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS)
runner = interpreter.get_signature_runner("serving_default")
for name, texts in job["cases"].items():
    texts = np.array([t.encode("latin-1") for t in texts], dtype=object)
    start = time.perf_counter()
    out = runner(**{key: texts for key in job["inputs"]})
    seconds = time.perf_counter() - start
    print(json.dumps({"case": name, "seconds": seconds, "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "no_text": out["no_text"].tolist()[:8], "rows": len(out["no_text"]),
                      "answer": np.asarray(out[job["answer"]])[:8].tolist()}))
for name, value in (("2-D", np.array([[b"a", b"b"]], dtype=object)), ("float", np.array([1.0], dtype=np.float32))):
    try:
        runner(**{key: value for key in job["inputs"]})
        print(json.dumps({"case": name, "error": None}))
    except Exception as error:  # the interpreter's own errors: RuntimeError, ValueError
        print(json.dumps({"case": name, "error": f"{type(error).__name__}: {str(error)[:300]}"}))
'''


def served(script: str, model, inputs: list[str], answer: str, folder, cases: dict) -> dict:
    job = {"model": str(model), "inputs": inputs, "answer": answer, "cut_at": MAX_CHARACTERS_PER_POSITION * 128,
           "cases": {name: [t.decode("latin-1") for t in texts] for name, texts in cases.items()}}
    (folder / "job.json").write_text(json.dumps(job), encoding="utf-8")  # megabytes: a file, not an argument
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, "-c", script, str(folder / "job.json")], env=env, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    return {line.pop("case"): line for line in lines}


@pytest.fixture(scope="module")
def exports(pretrained_run, tmp_path_factory):
    """kind -> (SavedModel, LiteRT file, input names, the output compared) of a classifier of pairs
    or a tagger over the pre-trained run's backbone (one layer), each made when first asked for."""
    backbone = load_pretrained(pretrained_run)
    folder = tmp_path_factory.mktemp("bad_input")
    made = {}

    def get(kind: str):
        if kind not in made:
            model, inputs, answer = {
                "pairs": lambda: (ElectraClassifier(backbone.discriminator, 3, label_names=["a", "b", "c"],
                                                    text_pair=True), ["text", "text_pair"], "probabilities"),
                "tagger": lambda: (ElectraTokenClassifier(backbone.discriminator, 3, label_names=["O", "B-X", "I-X"]),
                                   ["text"], "tag_probabilities"),
                "regression": lambda: (ElectraClassifier(backbone.discriminator, 1, score_range=(0.0, 5.0)), ["text"],
                                       "score"),
                "discriminator": lambda: (backbone.discriminator, ["text"], "replaced_probability")}[kind]()
            made[kind] = (export_model(model, backbone.tokenizer, backbone.config, folder / "exports", kind),
                          write_litert(model, backbone.tokenizer, backbone.config.max_seq_length,
                                       folder / f"{kind}.tflite"), inputs, answer)
        return made[kind]
    return get


def compare(exports, kind, folder, cases: dict) -> tuple[dict, dict]:
    """(SavedModel results, LiteRT results) of `cases`, checked to agree."""
    saved, lite, inputs, answer = exports(kind)
    ours, theirs = (served(script, model, inputs, answer, folder, cases) for script, model in ((SAVED_MODEL, saved),
                                                                                             (LITERT, lite)))
    for case in cases:
        for form in (ours, theirs):
            assert form[case]["rows"] == len(cases[case]), (case, form[case])
        assert ours[case]["no_text"] == theirs[case]["no_text"], case
        mine, other = (np.asarray(form[case]["answer"], np.float32) for form in (ours, theirs))
        if kind == "tagger":  # LiteRT has a slot for each position a word can start at, the SavedModel one per word
            words = min(mine.shape[1], other.shape[1])
            assert not mine[:, words:].any() and not other[:, words:].any(), case
            mine, other = mine[:, :words], other[:, :words]
        np.testing.assert_allclose(mine, other, atol=1e-4, err_msg=case)
    print(f"\n{kind}:", json.dumps({form: {case: (round(r["seconds"], 3), round(r["peak_mib"]))
                                          for case, r in results.items() if "seconds" in r}
                                   for form, results in (("SavedModel", ours), ("LiteRT", theirs))}))
    return ours, theirs


# The other kinds under -m slow, for the suite's time: their text packing is the pair classifier's
# (the discriminator, a regression) or whitespace words (the tagger), and test_litert.py sends each
# one's LiteRT file and SavedModel the same edge cases.
@pytest.mark.parametrize("kind", ["pairs", *(pytest.param(kind, marks=pytest.mark.slow)
                                             for kind in ("tagger", "regression", "discriminator"))])
def test_every_form_answers_bad_input_the_same_documented_way(exports, kind, tmp_path):
    ours, theirs = compare(exports, kind, tmp_path, {**CASES, "500 texts": BATCH})
    # a tagger's words are runs between spaces: one of control or format characters only is a word
    # (read as [UNK]), so only the empty and all-space texts have none
    assert ours["no word"]["no_text"] == ([True, True, False, False] if kind == "tagger" else [True] * 4)
    assert not any(ours["nul"]["no_text"] + ours["emoji"]["no_text"])
    assert ours["invalid utf-8"]["no_text"] == [False] * 3
    for form in (ours, theirs):
        assert form["2-D"]["error"] and form["float"]["error"], (form["2-D"], form["float"])
    assert "must be rank 1" in theirs["2-D"]["error"] and "_must_be_1d_strings" in ours["2-D"]["error"]
    # the SavedModel cut the first text to spaces only; one space fewer and "T" is kept
    assert ours["cut"]["no_text"] == [True, False]


@pytest.mark.slow  # about 12 GB and a minute a form; the default suite sends 500 texts
@pytest.mark.parametrize("kind", ["pairs", "tagger", "discriminator"])
def test_a_batch_of_ten_thousand_texts(exports, kind, tmp_path):
    compare(exports, kind, tmp_path, {"10,000 texts": BATCH * 10})


@pytest.mark.slow  # a question answerer's export: the SavedModel only (no LiteRT file takes it)
def test_a_question_answerer_answers_bad_input(pretrained_run, tmp_path, run_python):
    from electra_tf.finetuning.question_answering.model import ElectraQuestionAnswerer

    backbone = load_pretrained(pretrained_run)
    saved = export_model(ElectraQuestionAnswerer(backbone.discriminator), backbone.tokenizer, backbone.config,
                         tmp_path / "exports", "qa")
    code = f"""
import json, time
import tensorflow as tf, tensorflow_text
signature = tf.saved_model.load({str(saved)!r}).signatures["serving_default"]
contexts = [b"", b"   ", b"Worked great.\\x00 No side effects at all.", b"caf\\xe9 in Paris", {SENTENCE!r}.encode() * 1500]
started = time.perf_counter()
out = signature(question=tf.constant([b"What worked?"] * 5), context=tf.constant(contexts))
seconds = time.perf_counter() - started
try:
    signature(question=tf.constant([["a", "b"]]), context=tf.constant([["a", "b"]]))
    error = None
except tf.errors.InvalidArgumentError as caught:
    error = str(caught)[:300]
print(json.dumps({{"no_text": out["no_text"].numpy().tolist(), "answers": [a.decode() for a in out["answer"].numpy()],
                  "seconds": seconds, "error": error}}))
"""
    result = run_python(code)
    assert result["no_text"] == [True, True, False, False, False] and result["answers"][:2] == ["", ""]
    assert "must_be_1d_strings" in result["error"]
    print(f"\nquestion answering, five contexts up to 100 KB: {result['seconds']:.2f} s")
