"""Latency and throughput of an exported discriminator, in a process that imports only
TensorFlow and tensorflow-text (what TF Serving's model server has: no electra_tf, no Keras).

    python benchmarks/serving_latency.py                          # tiny (random weights) and Small-sized
    python benchmarks/serving_latency.py --export runs/electra_tiny/export/electra_tiny/1 --batches 1 8 32
    python benchmarks/serving_latency.py --runtimes      # one classifier in every CPU runtime

Without `--export`, the script exports two discriminators with fresh weights through the
project's own exporter (weights do not change the cost): the `electra_tiny` preset and an
ELECTRA-Small-sized one (12 layers, hidden 256; the tiny vocabulary, which only changes the
embedding lookup). The measuring process then loads each SavedModel and calls both signatures,
`serving_default` with real sentences from the bundled Wikipedia sample, joined so every input
fills the 128 tokens, and `encode_ids` with 128 token ids, at each batch size: p50 and p99
latency per call and sequences/s, after warm-up calls. One thread of requests at a time; TF
Serving's batching (docs/serving.md) trades some of this latency for throughput.

With --runtimes: two-class classifiers over the same fresh discriminators, each as its SavedModel,
compiled by XLA, as LiteRT, ONNX Runtime and OpenVINO files, in float32 and each runtime's 8-bit
option (`serving_runtimes.py` says how each is made), timed on the same real-text ids at each batch
size with 1 and 2 threads, each thread count in a process of its own that never imports
electra_tf; every row's ratio is to the SavedModel's time in the same process, and its largest
probability difference from the SavedModel's answers. With --classifier best.keras --eval dev.csv
(text,label): that fine-tuned classifier in every runtime answers every dev text, and each one's
accuracy, argmax agreement with the SavedModel and largest difference are printed: what the 8-bit
and bfloat16 options cost. Needs `pip install -e ".[runtimes]"`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import common  # noqa: F401  (TensorFlow's C++ logs quiet for this process and its children)

MEASURE = r'''
import json, sys, time
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer ops the text signature uses)

assert "electra_tf" not in sys.modules  # the model server has no Python of ours
request = json.loads(sys.stdin.read())
model = tf.saved_model.load(request["export"])
length, calls, warmup = request["length"], request["calls"], request["warmup"]
rng = np.random.default_rng(0)
results = []
for batch in request["batches"]:
    texts = tf.constant((request["texts"] * batch)[:batch])
    ids = {"token_ids": tf.constant(rng.integers(5, request["vocab_size"], (batch, length)), tf.int32),
           "segment_ids": tf.zeros((batch, length), tf.int32), "padding_mask": tf.ones((batch, length), tf.int32)}
    for signature, inputs in (("serving_default", {"text": texts}), ("encode_ids", ids)):
        function = model.signatures[signature]
        for _ in range(warmup):
            function(**inputs)
        seconds = []
        for _ in range(calls):
            started = time.perf_counter()
            output = function(**inputs)
            next(iter(output.values())).numpy()
            seconds.append(time.perf_counter() - started)
        seconds = np.array(seconds)
        results.append({"signature": signature, "batch": batch, "p50_ms": 1e3 * np.percentile(seconds, 50),
                        "p99_ms": 1e3 * np.percentile(seconds, 99), "sequences_per_s": batch / seconds.mean()})
print(json.dumps(results))
'''

MEASURE_QA = r'''
import json, sys, time
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401

assert "electra_tf" not in sys.modules
request = json.loads(sys.stdin.read())
function = tf.saved_model.load(request["export"]).signatures["serving_default"]
results = []
for name, context in request["contexts"].items():
    inputs = {"question": tf.constant([request["question"]]), "context": tf.constant([context])}
    for _ in range(request["warmup"]):
        function(**inputs)
    seconds = []
    for _ in range(request["calls"]):
        started = time.perf_counter()
        function(**inputs)["answer"].numpy()
        seconds.append(time.perf_counter() - started)
    seconds = np.array(seconds)
    results.append({"signature": f"qa {name}", "batch": 1, "p50_ms": 1e3 * np.percentile(seconds, 50),
                    "p99_ms": 1e3 * np.percentile(seconds, 99), "sequences_per_s": 1 / seconds.mean()})
print(json.dumps(results))
'''


def sentences_of_length(tokenizer, length: int, count: int) -> list[str]:
    """`count` texts of real Wikipedia sentences, each at least `length` word pieces long."""
    from electra_tf.data.corpus import Skips, embedded_sample_path, iter_raw_documents, to_sentences

    texts, current = [], []
    skips = Skips()
    for document in iter_raw_documents(embedded_sample_path(), skips):
        for sentence in to_sentences(document, skips):
            current.append(sentence)
            if int(tokenizer.tokenize([" ".join(current)]).row_lengths()[0]) >= length:
                texts.append(" ".join(current))
                current = []
                if len(texts) == count:
                    return texts
    raise SystemExit("error: the bundled sample has too little text.")


def fresh_exports(folder: Path):
    from electra_tf.data.tokenization import ElectraTokenizer
    from electra_tf.models.backbone import BackboneConfig
    from electra_tf.pretraining.config import PretrainingConfig
    from electra_tf.models.encoders import build_discriminator
    from electra_tf.utils.run_dir import bundled_data_dir
    from electra_tf.serving.publish import export_model

    tiny = PretrainingConfig.load("electra_tiny")
    vocab = bundled_data_dir(tiny.run.max_seq_length) / "vocab.txt"
    if not vocab.is_file():
        raise SystemExit(f"error: {vocab} is missing; run `python -m electra_tf.pretrain` once (it builds the "
                         "bundled data), or pass --export.")
    tokenizer = ElectraTokenizer(vocab)
    small = PretrainingConfig.load("electra_small").replace(vocab_size=tokenizer.vocabulary_size)
    exports = []
    for name, config in (("tiny", tiny.replace(vocab_size=tokenizer.vocabulary_size)), ("small-sized", small)):
        exports.append((name, export_model(build_discriminator(config.model), tokenizer,
                                                   BackboneConfig(config.model, config.run.max_seq_length), folder, name)))
    return exports, tokenizer


def qa_export(folder: Path, tokenizer):
    """A tiny question-answering export with fresh weights, and contexts of one and eight windows."""
    import keras

    from electra_tf.finetuning.question_answering.model import ElectraQuestionAnswerer
    from electra_tf.models.backbone import BackboneConfig
    from electra_tf.pretraining.config import PretrainingConfig
    from electra_tf.models.encoders import build_discriminator
    from electra_tf.serving.publish import export_model

    keras.utils.set_random_seed(0)
    config = PretrainingConfig.load("electra_tiny").replace(vocab_size=tokenizer.vocabulary_size)
    export = export_model(ElectraQuestionAnswerer(build_discriminator(config.model), doc_stride=64), tokenizer,
                               BackboneConfig(config.model, config.run.max_seq_length), folder, "qa-tiny")
    question = "When was the first library in the town opened?"
    room = config.run.max_seq_length - int(tokenizer.tokenize([question]).row_lengths()[0]) - 3
    one, eight = sentences_of_length(tokenizer, room, 1)[0], sentences_of_length(tokenizer, room + 7 * 64, 1)[0]
    while int(tokenizer.tokenize([one]).row_lengths()[0]) > room:  # one window: at most `room` pieces
        one = one.rsplit(" ", 1)[0]
    while int(tokenizer.tokenize([eight]).row_lengths()[0]) > room + 7 * 64:
        eight = eight.rsplit(" ", 1)[0]
    return export, question, {"1 window": one, "8 windows": eight}


def measure(code: str, request: dict, export) -> list:
    finished = subprocess.run([sys.executable, "-c", code], input=json.dumps(request), text=True,
                              capture_output=True)
    if finished.returncode != 0:
        raise SystemExit(f"error: measuring {export} failed:\n{finished.stderr[-2000:]}")
    return json.loads(finished.stdout.strip().splitlines()[-1])


def runtimes_accuracy(args) -> int:
    import csv

    import numpy as np
    import serving_runtimes

    from electra_tf.finetuning.pretrained import load_task_model
    from electra_tf.models.preprocessing import pack_texts

    model, tokenizer, config = load_task_model(args.classifier)
    with open(args.eval, newline="", encoding="utf-8") as file:
        rows = list(csv.DictReader(file))
    names = list(model.label_names)
    gold = np.array([names.index(row["label"]) for row in rows])
    ids = pack_texts(tokenizer, config.max_seq_length, [row["text"] for row in rows])
    with tempfile.TemporaryDirectory() as scratch:
        runtimes = serving_runtimes.runtime_files(model, tokenizer, config, Path(scratch), "classifier")
        request = {"models": [{"ids": {k: v.numpy().tolist() for k, v in ids.items()}, "runtimes": runtimes}],
                   "answers": True, "threads": max(args.threads)}
        answers = {label: np.array(value) for label, value in measure(serving_runtimes.MEASURE, request,
                                                                      "the runtimes").items()}
    reference = answers["SavedModel"]
    print(f"{args.classifier} on the {len(rows)} texts of {args.eval}")
    for label, probabilities in answers.items():
        print(f"  {label:30} accuracy {np.mean(probabilities.argmax(-1) == gold):.4f}  argmax as the SavedModel's "
              f"{np.mean(probabilities.argmax(-1) == reference.argmax(-1)):.4f}  max |probability difference| "
              f"{np.abs(probabilities - reference).max():.2e}", flush=True)
    return 0


def compare_runtimes(args) -> int:
    import serving_runtimes

    from electra_tf.finetuning.pretrained import load_pretrained
    from electra_tf.finetuning.text.models import ElectraClassifier
    from electra_tf.models.preprocessing import pack_texts

    with tempfile.TemporaryDirectory() as scratch:
        exports, tokenizer = fresh_exports(Path(scratch) / "discriminators")
        models = []
        for name, export in exports:
            backbone = load_pretrained(export)
            classifier = ElectraClassifier(backbone.discriminator, 2, label_names=["no", "yes"])
            length = backbone.config.max_seq_length
            ids = pack_texts(tokenizer, length, sentences_of_length(tokenizer, length, max(args.batches)))
            models.append({"name": name, "ids": {k: v.numpy().tolist() for k, v in ids.items()},
                           "runtimes": serving_runtimes.runtime_files(classifier, tokenizer, backbone.config,
                                                                      Path(scratch), name)})
        print(f"{common.host()}; ids in, probabilities out, one request at a time, {args.calls} calls")
        print(f"{'model':12} {'runtime':30} {'threads':>7} {'batch':>5} {'p50 ms':>8} {'p99 ms':>8} "
              f"{'x SavedModel':>12} {'max diff':>9}")
        for threads in args.threads:
            request = {"models": models, "batches": args.batches, "calls": args.calls, "warmup": args.warmup,
                       "threads": threads}
            rows = measure(serving_runtimes.MEASURE, request, "the runtimes")
            base = {(r["model"], r["batch"]): r["p50_ms"] for r in rows if r["runtime"] == "SavedModel"}
            for r in rows:
                print(f"{r['model']:12} {r['runtime']:30} {threads:>7} {r['batch']:>5} {r['p50_ms']:8.2f} "
                      f"{r['p99_ms']:8.2f} {base[(r['model'], r['batch'])] / r['p50_ms']:11.2f}x "
                      f"{r['max_diff']:9.1e}", flush=True)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--export", action="append", default=[], help="an export version folder (repeatable)")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--no_qa", action="store_true", help="skip the question-answering rows")
    parser.add_argument("--runtimes", action="store_true",
                        help="one classifier in every CPU runtime, side by side (module docstring)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="with --runtimes")
    parser.add_argument("--classifier", default=None, help="with --runtimes and --eval: a fine-tuned best.keras")
    parser.add_argument("--eval", default=None, help="with --classifier: a .csv with text and label columns")
    args = parser.parse_args(argv)
    if bool(args.classifier) != bool(args.eval):
        parser.error("--classifier and --eval go together")
    if args.runtimes and args.classifier:
        return runtimes_accuracy(args)
    if args.runtimes:
        return compare_runtimes(args)
    from electra_tf.data.tokenization import ElectraTokenizer
    from electra_tf.models.backbone import BackboneConfig
    from electra_tf.utils.run_dir import ExportMetadata

    with tempfile.TemporaryDirectory() as scratch:
        if args.export:
            exports = [(Path(path).parent.name, Path(path)) for path in args.export]
            tokenizer = ElectraTokenizer(ExportMetadata.of(exports[0][1]).vocab)
        else:
            exports, tokenizer = fresh_exports(Path(scratch))
        print(f"{common.host()}; one request at a time")
        print(f"{'model':12} {'signature':16} {'batch':>5} {'p50 ms':>8} {'p99 ms':>8} {'sequences/s':>12}")
        for name, export in exports:
            metadata = BackboneConfig.load(ExportMetadata.of(export).config)
            length = metadata.max_seq_length
            texts = sentences_of_length(tokenizer, length, max(args.batches))
            request = {"export": str(export), "length": length, "texts": texts, "batches": args.batches,
                       "calls": args.calls, "warmup": args.warmup, "vocab_size": metadata.model.vocab_size}
            rows = measure(MEASURE, request, export)
            if name == "tiny" and not args.export and not args.no_qa:
                qa, question, contexts = qa_export(Path(scratch), tokenizer)
                rows += measure(MEASURE_QA, {"export": str(qa), "question": question, "contexts": contexts,
                                             "calls": args.calls, "warmup": args.warmup}, qa)
            for row in rows:
                print(f"{name:12} {row['signature']:16} {row['batch']:>5} {row['p50_ms']:8.1f} {row['p99_ms']:8.1f} "
                      f"{row['sequences_per_s']:12.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
