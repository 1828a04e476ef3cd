"""LiteRT files against the SavedModel: size, latency per text at batch 1 with 1 and 2 threads,
and (with --classifier/--eval) what 8-bit weights cost in accuracy on a real dev set.

    python benchmarks/litert_latency.py                     # tiny and Small-sized classifiers
    python benchmarks/litert_latency.py --classifier runs/bbc/best.keras --eval data/bbc_news/dev.csv
    python benchmarks/litert_latency.py --tokenizer runs/electra_tiny/vocab.txt

Without --classifier: two-class classifiers over fresh discriminators (weights do not change
the cost) of the `electra_tiny` preset and of ELECTRA-Small's size (12 layers, hidden 256; the
tiny vocabulary), each written as a SavedModel and as LiteRT files with float32 and 8-bit weights
(`--quantize dynamic`). Each file is timed in a process of its own that never imports electra_tf:
LiteRT's interpreter with tensorflow-text's kernels, or TensorFlow loading the SavedModel with its
thread pools set to the same count; one text of real Wikipedia sentences filling the 128 tokens a
call, p50 and p99 over --calls calls after warm-up.

With --classifier and --eval (a .csv of text,label): the fine-tuned model's SavedModel and both
LiteRT files run every dev text once; prints each one's accuracy, and how often the LiteRT files'
argmax agrees with the SavedModel's, with the largest probability difference. Needs
`pip install -e ".[litert]"`.

With --tokenizer VOCAB: how many real texts (every paragraph of the bundled Wikipedia sample and
gensim's 300 ABC news articles) the LiteRT file's tokenizer ops give other ids for than the
SavedModel's, uncased and cased, with the pieces where they part (the ops run in TensorFlow here;
tests/serving/test_litert.py shows LiteRT's kernels give the same ids as these ops).
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import common  # noqa: F401  (TensorFlow's C++ logs quiet for this process and its children)

LOADERS = {
    "litert": r'''
import tensorflow_text
from ai_edge_litert.interpreter import InterpreterWithCustomOps
interpreter = InterpreterWithCustomOps(model_path=request["model"], num_threads=request["threads"],
                                       custom_op_registerers=tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS)
runner = interpreter.get_signature_runner("serving_default")
call = lambda text: runner(text=np.array([text]))["probabilities"]
''',
    "saved_model": r'''
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the export's tokenizer ops)
tf.config.threading.set_intra_op_parallelism_threads(request["threads"])
tf.config.threading.set_inter_op_parallelism_threads(request["threads"])
function = tf.saved_model.load(request["model"]).signatures["serving_default"]
call = lambda text: function(text=tf.constant([text]))["probabilities"].numpy()
'''}
TIMING = r'''
import json, sys, time
import numpy as np
request = json.loads(sys.stdin.read())
{loader}
assert "electra_tf" not in sys.modules
texts = request["texts"]
for text in texts[: request["warmup"]]:
    call(text)
seconds, probabilities = [], []
for i in range(request["calls"] or len(texts)):
    started = time.perf_counter()
    probabilities.append(call(texts[i % len(texts)])[0].tolist())
    seconds.append(time.perf_counter() - started)
print(json.dumps({{"p50_ms": 1e3 * float(np.percentile(seconds, 50)), "p99_ms": 1e3 * float(np.percentile(seconds, 99)),
                  "probabilities": probabilities}}))
'''


def run(kind: str, model: Path, texts: list[str], threads: int, calls: int, warmup: int) -> dict:
    request = {"model": str(model), "texts": texts, "threads": threads, "calls": calls, "warmup": warmup}
    done = subprocess.run([sys.executable, "-c", TIMING.format(loader=LOADERS[kind])], input=json.dumps(request),
                          text=True, capture_output=True)
    if done.returncode != 0:
        raise SystemExit(f"error: running {model} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def size_mib(path: Path) -> float:
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files) / 2**20


def written(model, tokenizer, config, folder: Path, name: str) -> dict:
    """{kind: path}: the SavedModel and the float and 8-bit LiteRT files of `model`."""
    from electra_tf.serving.litert import write_litert
    from electra_tf.serving.publish import export_model

    files = {"SavedModel": export_model(model, tokenizer, config, folder, name)}
    for label, quantize in (("LiteRT float32", "none"), ("LiteRT 8-bit", "dynamic")):
        files[label] = write_litert(model, tokenizer, config.max_seq_length, folder / f"{name}-{quantize}.tflite",
                                    quantize)
    return files


def fresh_classifiers(folder: Path):
    """(name, {kind: path}) of the tiny and Small-sized classifiers, and the tokenizer."""
    from serving_latency import fresh_exports

    from electra_tf.finetuning.pretrained import load_pretrained
    from electra_tf.finetuning.text.models import ElectraClassifier

    models = []
    exports, tokenizer = fresh_exports(folder / "discriminators")
    for name, export in exports:
        backbone = load_pretrained(export)
        classifier = ElectraClassifier(backbone.discriminator, 2, label_names=["no", "yes"])
        models.append((name, written(classifier, tokenizer, backbone.config, folder, name)))
    return models, tokenizer


def speed(args) -> None:
    from serving_latency import sentences_of_length

    with tempfile.TemporaryDirectory() as scratch:
        models, tokenizer = fresh_classifiers(Path(scratch))
        texts = sentences_of_length(tokenizer, 128, 20)
        print(f"{common.host()}; one text of 128 pieces a call, batch 1, {args.calls} calls")
        print(f"{'model':12} {'file':16} {'MiB':>7} {'threads':>7} {'p50 ms':>8} {'p99 ms':>8}")
        for name, files in models:
            for label, path in files.items():
                kind = "saved_model" if label == "SavedModel" else "litert"
                for threads in (1, 2):
                    row = run(kind, path, texts, threads, args.calls, args.warmup)
                    print(f"{name:12} {label:16} {size_mib(path):7.1f} {threads:>7} {row['p50_ms']:8.1f} "
                          f"{row['p99_ms']:8.1f}", flush=True)


def accuracy(args) -> None:
    from electra_tf.finetuning.pretrained import load_task_model

    model, tokenizer, config = load_task_model(args.classifier)
    with open(args.eval, newline="", encoding="utf-8") as file:
        rows = list(csv.DictReader(file))
    texts, labels = [row["text"] for row in rows], [row["label"] for row in rows]
    names = list(model.label_names)
    with tempfile.TemporaryDirectory() as scratch:
        files = written(model, tokenizer, config, Path(scratch), "classifier")
        results = {label: np.array(run("saved_model" if label == "SavedModel" else "litert", path, texts, 2, 0,
                                       0)["probabilities"]) for label, path in files.items()}
    print(f"{args.classifier} on {len(texts)} texts of {args.eval}")
    reference = results["SavedModel"]
    for label, probabilities in results.items():
        correct = np.mean([names[i] == gold for i, gold in zip(probabilities.argmax(-1), labels)])
        agree = np.mean(probabilities.argmax(-1) == reference.argmax(-1))
        print(f"  {label:16} accuracy {correct:.4f}  argmax as the SavedModel's {agree:.4f}  "
              f"max |probability difference| {np.abs(probabilities - reference).max():.2e}")


def tokenizer_agreement(args) -> None:
    import difflib

    import tensorflow as tf

    from electra_tf.data.tokenization import ElectraTokenizer
    from electra_tf.data.vocabulary_files import TokenizerSettings
    from electra_tf.serving.litert import LiteRTTokenizer

    from electra_tf.data.corpus import sample_paragraphs

    texts = sample_paragraphs() + common.news_articles()
    for name, settings in (("uncased", TokenizerSettings()), ("cased", TokenizerSettings.cased())):
        ours = ElectraTokenizer(args.tokenizer, settings)
        theirs = LiteRTTokenizer(ours).tokenize(tf.constant(texts)).to_list()
        differ = [(a, b) for a, b in zip(ours.tokenize(texts).to_list(), theirs) if a != b]
        print(f"{name}: {len(differ)} of {len(texts):,} texts tokenize differently")
        for a, b in differ:
            a, b = [ours.vocabulary[i] for i in a], [ours.vocabulary[i] for i in b]
            for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b).get_opcodes():
                if tag != "equal":
                    print(f"  SavedModel {a[i1:i2]}  LiteRT {b[j1:j2]}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--classifier", default=None, help="a fine-tuned best.keras (with --eval)")
    parser.add_argument("--eval", default=None, help="a .csv with text and label columns")
    parser.add_argument("--tokenizer", default=None, help="a vocab.txt: compare the two tokenizers on real text")
    args = parser.parse_args(argv)
    if (args.classifier is None) != (args.eval is None):
        parser.error("--classifier and --eval go together")
    common.start(compile_cache=False)
    if args.tokenizer:
        tokenizer_agreement(args)
    elif args.classifier:
        accuracy(args)
    else:
        speed(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
