"""`python -m electra_tf.build_data`: text in, sharded TFRecords of packed examples out.

    python -m electra_tf.build_data --input "corpus/*.txt" enwiki-latest-pages-articles.xml.bz2 \\
        --vocab vocab.txt --output_dir data/wiki128 --max_seq_length 128 \\
        --num_shards 64 --num_workers 8 --seed 0

With no --input, the embedded Wikipedia sample; with no --vocab, a vocabulary is learned from
the input first and written to OUTPUT_DIR/vocab.txt.

How it runs: this process reads the inputs in order (file reading, decompression, XML
parsing) and hands document k to worker k mod W; workers (separate processes) remove markup,
split sentences, tokenize with the in-graph tokenizer, pack examples (`packing.py`) and write
their part of every shard. At the end the parts are joined into
`shard-<i>-of-<n>.tfrecord` in worker order, and `metadata.json` is written last. The
result depends only on the inputs, vocabulary, seed, --num_workers and --num_shards.

Everything is built in a hidden temporary folder inside OUTPUT_DIR and moved into place only
when complete: an interrupted or failed run leaves existing data untouched and no
half-written shard. Existing data is replaced only with --overwrite.
Exit status: 0 when shards were written (skipped input is counted in the summary), 2 when
nothing usable was found or the arguments are wrong.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import queue
import shutil
import sys
import time
import traceback
from pathlib import Path

from electra_tf.build_vocab import DEFAULT_VOCAB_SIZE
from electra_tf.corpus import (InputError, Skips, embedded_sample_path, expand_inputs,
                               iter_raw_documents, total_input_bytes)
from electra_tf.files import atomic_write_text, file_sha256
from electra_tf.progress import Progress

QUEUE_DOCUMENTS = 64  # per worker: bounds memory, keeps workers busy


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="python -m electra_tf.build_data", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", nargs="+", default=None,
                        help="text files, MediaWiki dumps (.xml, .xml.bz2), globs or folders "
                             "(default: the embedded Wikipedia sample)")
    parser.add_argument("--vocab", default=None,
                        help="vocab.txt to tokenize with (default: learn one from the input)")
    parser.add_argument("--vocab_size", type=int, default=DEFAULT_VOCAB_SIZE,
                        help=f"size of a learned vocabulary (only without --vocab; default {DEFAULT_VOCAB_SIZE})")
    parser.add_argument("--output_dir", required=True, help="folder for shards and metadata.json")
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--num_shards", type=int, default=8)
    parser.add_argument("--num_workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--overwrite", action="store_true",
                        help="replace shards already in --output_dir")
    args = parser.parse_args(argv)
    for name in ("max_seq_length", "num_shards", "num_workers"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1.")
    if args.max_seq_length < 8:
        parser.error("--max_seq_length must be at least 8.")
    return args


def existing_data(output_dir: Path) -> list[Path]:
    return sorted([*output_dir.glob("shard-*.tfrecord"), *output_dir.glob("metadata.json")])


def build(args) -> dict:
    """Builds the shards; returns the metadata written. Raises InputError if nothing usable."""
    from electra_tf.data import FORMAT, METADATA_FILE, shard_name
    from electra_tf.tokenization import read_vocabulary, vocabulary_fingerprint

    output_dir = Path(args.output_dir)
    if output_dir.exists() and existing_data(output_dir) and not args.overwrite:
        raise FileExistsError(f"{output_dir} already holds pre-training data; pass --overwrite "
                              "to replace it (it is kept until the new data is complete).")
    skips = Skips()
    inputs = args.input or [str(embedded_sample_path())]
    files = expand_inputs(inputs, skips)
    if not files:
        raise InputError(f"no input files found in {' '.join(inputs)} ({skips.describe()}).")

    output_dir.mkdir(parents=True, exist_ok=True)
    work_dir = output_dir / f".build-{os.getpid()}"
    shutil.rmtree(work_dir, ignore_errors=True)
    work_dir.mkdir()
    try:
        vocab_path = Path(args.vocab) if args.vocab else None
        if vocab_path is None:
            from electra_tf.build_vocab import build_vocabulary
            vocab_path = work_dir / "vocab.txt"
            build_vocabulary([str(f) for f in files], args.vocab_size, vocab_path)
        vocabulary = read_vocabulary(vocab_path)

        stats, shard_examples = _run_workers(args, files, vocab_path, work_dir, skips)
        if stats["examples"] == 0:
            raise InputError(f"no usable text in {' '.join(map(str, files))} "
                             f"(skipped: {skips.describe()}); nothing was written.")

        shards = []
        for index in range(args.num_shards):
            name = shard_name(index, args.num_shards)
            with open(work_dir / name, "wb") as joined:
                for worker in range(args.num_workers):
                    part = work_dir / f"{name}.part-{worker:03d}"
                    if part.exists():
                        with open(part, "rb") as source:
                            shutil.copyfileobj(source, joined)
                        part.unlink()
            shards.append({"file": name, "examples": shard_examples[index],
                           "bytes": (work_dir / name).stat().st_size,
                           "sha256": file_sha256(work_dir / name)})

        capacity = stats["examples"] * args.max_seq_length
        metadata = {
            "format": FORMAT,
            "vocab_file": str((output_dir / "vocab.txt") if not args.vocab else Path(args.vocab).resolve()),
            "vocab_fingerprint": vocabulary_fingerprint(vocabulary),
            "vocab_size": len(vocabulary),
            "lowercase": True,
            "max_seq_length": args.max_seq_length,
            "seed": args.seed,
            "num_workers": args.num_workers,
            "inputs": [str(f) for f in files],
            "documents": stats["documents"],
            "sentences": stats["sentences"],
            "examples": stats["examples"],
            "tokens": stats["tokens"],
            "padding_fraction": round(1.0 - stats["tokens"] / capacity, 4),
            "skipped": dict(sorted(skips.items())),
            "shards": shards,
        }
        # Swap in: old data goes only now that the new data is complete; metadata goes last,
        # so a folder with metadata.json always has all its shards.
        for old in existing_data(output_dir):
            old.unlink()
        for shard in shards:
            os.replace(work_dir / shard["file"], output_dir / shard["file"])
        if not args.vocab:
            os.replace(vocab_path, output_dir / "vocab.txt")
        atomic_write_text(output_dir / METADATA_FILE, json.dumps(metadata, indent=2) + "\n")
        return metadata
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def _run_workers(args, files, vocab_path, work_dir, skips):
    context = multiprocessing.get_context("spawn")  # TensorFlow does not survive fork
    inboxes = [context.Queue(QUEUE_DOCUMENTS) for _ in range(args.num_workers)]
    outbox = context.Queue()
    workers = [context.Process(
        target=_worker, daemon=True,
        args=(w, args.num_workers, str(vocab_path), args.max_seq_length, args.num_shards,
              args.seed, str(work_dir), inboxes[w], outbox))
        for w in range(args.num_workers)]
    for worker in workers:
        worker.start()

    total_bytes = total_input_bytes(files)
    progress = Progress("build_data", total=total_bytes / 1e6, unit="MB")
    finished_bytes = 0
    documents_sent = 0
    worker_stats = {}
    processed = [(0, 0)] * args.num_workers  # (documents, examples) per worker

    def counts():
        documents = sum(d for d, _ in processed)
        examples = sum(e for _, e in processed)
        return f"{documents_sent:,} documents read, {documents:,} processed, {examples:,} examples"

    def drain(block=False):
        while True:
            try:
                message = outbox.get(block=block, timeout=1.0 if block else None)
            except queue.Empty:
                return
            kind, worker_id, payload = message
            if kind == "error":
                raise RuntimeError(f"build_data worker {worker_id} failed:\n{payload}")
            if kind == "progress":
                processed[worker_id] = payload
            elif kind == "done":
                worker_stats[worker_id] = payload
                processed[worker_id] = (payload["documents_seen"], payload["examples"])
            if block:
                return

    def send(worker_id, item):
        while True:
            try:
                inboxes[worker_id].put(item, timeout=1.0)
                return
            except queue.Full:
                drain()
                _check_alive(workers)

    try:
        for path in files:
            size = path.stat().st_size
            for document in iter_raw_documents(path, skips):
                send(documents_sent % args.num_workers, document)
                documents_sent += 1
                drain()
                progress.update((finished_bytes + document.offset) / 1e6, counts())
            finished_bytes += size
        for worker_id in range(args.num_workers):
            send(worker_id, None)
        # Reading is done; workers may still be busy with the last queued documents.
        while len(worker_stats) < args.num_workers:
            drain(block=True)
            _check_alive(workers, allow_finished=worker_stats)
            progress.update(total_bytes / 1e6, counts())
        progress.finish(total_bytes / 1e6, counts())
    finally:
        for worker in workers:
            if worker.is_alive():
                worker.terminate()
            worker.join(timeout=10)

    stats = {key: sum(s[key] for s in worker_stats.values())
             for key in ("documents", "sentences", "examples", "tokens")}
    shard_examples = [sum(s["shard_examples"][i] for s in worker_stats.values())
                      for i in range(args.num_shards)]
    for s in worker_stats.values():
        skips.update(s["skips"])
    return stats, shard_examples


def _check_alive(workers, allow_finished=()):
    for worker_id, worker in enumerate(workers):
        if not worker.is_alive() and worker_id not in allow_finished and worker.exitcode != 0:
            raise RuntimeError(f"build_data worker {worker_id} died (exit code {worker.exitcode}).")


def _worker(worker_id, num_workers, vocab_path, max_seq_length, num_shards, seed, work_dir,
            inbox, outbox):
    """Markup removal, sentence splitting, tokenization and packing for documents k = id mod W."""
    try:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        # TensorFlow's start-up chatter goes to file descriptor 2 before any log setting
        # applies; W workers would repeat it W times over the progress line.
        saved_stderr = os.dup(2)
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            try:
                import tensorflow as tf
            finally:
                os.dup2(saved_stderr, 2)
                os.close(saved_stderr)

        from electra_tf.corpus import to_sentences
        from electra_tf.data import serialize_example, shard_name
        from electra_tf.packing import ExamplePacker, pack_sentences
        from electra_tf.tokenization import ElectraTokenizer

        tf.config.set_visible_devices([], "GPU")
        tokenizer = ElectraTokenizer(vocab_path)
        packer = ExamplePacker(max_seq_length, tokenizer.cls_id, tokenizer.sep_id)
        writers = {}
        skips = Skips()
        stats = {"documents_seen": 0, "documents": 0, "sentences": 0, "examples": 0,
                 "tokens": 0, "shard_examples": [0] * num_shards}
        last_report = time.monotonic()
        while (document := inbox.get()) is not None:
            stats["documents_seen"] += 1
            sentences = to_sentences(document, skips)
            if not sentences:
                continue
            stats["documents"] += 1
            stats["sentences"] += len(sentences)
            for ids, segments in pack_sentences(packer, tokenizer, sentences, seed, document.source,
                                                document.index):
                # Round-robin over shards, offset by worker, so shards fill evenly.
                shard = (stats["examples"] * num_workers + worker_id) % num_shards
                if shard not in writers:
                    name = f"{shard_name(shard, num_shards)}.part-{worker_id:03d}"
                    writers[shard] = tf.io.TFRecordWriter(str(Path(work_dir) / name))
                writers[shard].write(serialize_example(ids, segments))
                stats["examples"] += 1
                stats["tokens"] += len(ids)
                stats["shard_examples"][shard] += 1
            if time.monotonic() - last_report > 1.0:
                outbox.put(("progress", worker_id, (stats["documents_seen"], stats["examples"])))
                last_report = time.monotonic()
        for writer in writers.values():
            writer.close()
        outbox.put(("done", worker_id, {**stats, "skips": dict(skips)}))
    except BaseException:
        outbox.put(("error", worker_id, traceback.format_exc()))
        raise


def print_summary(metadata: dict, output_dir: str, elapsed: float) -> None:
    print(f"\nWrote {metadata['examples']:,} examples to {len(metadata['shards'])} shards in "
          f"{output_dir} ({elapsed:.0f} s).")
    print(f"  documents         {metadata['documents']:,}")
    print(f"  sentences         {metadata['sentences']:,}")
    print(f"  examples          {metadata['examples']:,}")
    print(f"  tokens            {metadata['tokens']:,}")
    print(f"  padding fraction  {metadata['padding_fraction']:.1%}")
    print(f"  vocabulary        {metadata['vocab_file']} ({metadata['vocab_size']:,} tokens)")
    skipped = metadata["skipped"]
    print("  skipped input     " + ("none" if not skipped else ""))
    for reason, count in skipped.items():
        print(f"    {count:>8,}  {reason}")


def main(argv=None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    try:
        metadata = build(args)
    except (InputError, FileExistsError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print_summary(metadata, args.output_dir, time.monotonic() - started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
