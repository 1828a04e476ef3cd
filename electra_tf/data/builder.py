"""Text in, sharded TFRecords of packed examples out: `build_shards`.

How it runs: this process reads the inputs in order (file reading, decompression, XML
parsing) and hands document k to worker k mod W; workers (separate processes) remove markup,
split sentences, tokenize with the in-graph tokenizer, pack examples (`packing.py`) and write
their part of every shard; one worker (W = 1) does that in this process, as it reads. At the
end the parts are joined into `shard-<i>-of-<n>.tfrecord` in worker order, and `metadata.json`
is written last (`shards.py` owns the format). With `held_out > 0` a fraction of the documents (chosen by a
hash, `packing.is_held_out`) goes whole to `held_out.tfrecord` instead, never to a shard: the
text a pre-training run evaluates on. The result depends only on the inputs, vocabulary, seed,
num_workers and num_shards.

Everything is built in a hidden temporary folder inside OUTPUT_DIR and moved into place only
when complete: an interrupted or failed run leaves existing data untouched and no
half-written shard. Existing data is replaced only with `overwrite=True`.
"""

from __future__ import annotations

import array
import json
import multiprocessing
import os
import queue
import shutil
import signal
import time
import traceback
from pathlib import Path

from electra_tf.data.corpus import (
    InputError,
    Skips,
    embedded_sample_path,
    expand_inputs,
    file_documents,
    total_input_bytes,
)
from electra_tf.data.shards import FORMAT, HELD_OUT_FILE, METADATA_FILE, DataError, shard_name
from electra_tf.data.tokenization import (check_casing, read_tokenizer_settings, read_vocabulary,
                                         tokenizer_settings_path, vocabulary_files,
                                         vocabulary_fingerprint)
from electra_tf.data.vocabulary import (DEFAULT_VOCAB_SAMPLE_SENTENCES, DEFAULT_VOCAB_SIZE, build_vocabulary,
                                        vocabulary_kind)
from electra_tf.utils.files import atomic_write_text, file_sha256
from electra_tf.utils.logs import start_tensorflow, start_up_lines_left_out
from electra_tf.utils.progress import Progress
from electra_tf.utils.run_dir import VOCAB_FILE

QUEUE_DOCUMENTS = 64  # per worker: bounds memory, keeps workers busy
MIN_SEQ_LENGTH = 8


def existing_data(output_dir: Path) -> list[Path]:
    return sorted([*output_dir.glob("shard-*.tfrecord"), *output_dir.glob(HELD_OUT_FILE),
                   *output_dir.glob("metadata.json")])


def build_shards(output_dir: str | Path, inputs: list[str] | None = None, *, vocab: str | Path | None = None,
                 vocab_size: int = DEFAULT_VOCAB_SIZE, max_seq_length: int = 128, num_shards: int = 8,
                 num_workers: int | None = None, seed: int = 0, overwrite: bool = False,
                 cased: bool = False, runner: str = "local", pipeline_args=(),
                 vocab_sample_sentences: int = DEFAULT_VOCAB_SAMPLE_SENTENCES, held_out: float = 0.0,
                 text_field: str = "text", vocab_model: str = "wordpiece") -> dict:
    """Builds the shards of `inputs` (default: the embedded Wikipedia sample) into
    `output_dir`; returns the metadata written. With no `vocab`, one of `vocab_size` entries is
    learned from the inputs first (cased if `cased`; `vocab_model` wordpiece, sentencepiece or
    sentencepiece-bpe) and written to OUTPUT_DIR/vocab.txt with its tokenizer_config.json (and
    spm.model); a given `vocab` brings its own kind and casing. `held_out` (a fraction of the
    documents, 0 by default as in the official data) is set aside as the held-out split.
    `text_field`: the field of record inputs (JSON Lines, Parquet, Arrow) that holds the text. Raises `InputError` if
    nothing usable was found, `DataError` for settings or a folder it cannot use.

    `runner="beam"`: the documents are packed by an Apache Beam pipeline (`beam_builder.py`)
    run with `pipeline_args` (Beam's own options: DirectRunner by default, or Dataflow, Flink,
    Spark); the same examples, the same metadata, the same all-or-nothing swap into place."""
    if runner not in ("local", "beam"):
        raise DataError(f"runner must be 'local' or 'beam', got {runner!r}.")
    if runner == "beam":
        from electra_tf.data.beam_builder import beam_shard_writer
        produce = beam_shard_writer(list(pipeline_args))  # says how to install Beam if it is missing
    else:
        produce = None
    num_workers = num_workers or os.cpu_count() or 1
    for name, value, least in (("max_seq_length", max_seq_length, MIN_SEQ_LENGTH),
                               ("num_shards", num_shards, 1), ("num_workers", num_workers, 1)):
        if value < least:
            raise DataError(f"{name} must be at least {least}, got {value}.")
    if not 0.0 <= held_out < 0.5:
        raise DataError(f"held_out is the fraction of documents set aside for evaluation, in [0, 0.5); got {held_out}.")
    if vocab and vocab_model != "wordpiece":
        raise DataError(f"--vocab_model {vocab_model} learns a vocabulary, but --vocab gives one ({vocab}), which "
                        "brings its own kind (its tokenizer_config.json). Drop one of the two.")
    learned = vocabulary_kind(vocab_model, cased)  # what a vocabulary learned here is
    output_dir = Path(output_dir)
    from electra_tf.utils.locking import FolderLock

    with FolderLock(output_dir, "electra_tf.build_data"):
        return _build(output_dir, inputs, vocab, vocab_size, max_seq_length, num_shards, num_workers, seed, overwrite,
                      learned, produce, vocab_sample_sentences, held_out, text_field)


def _build(output_dir, inputs, vocab, vocab_size, max_seq_length, num_shards, num_workers, seed, overwrite, learned,
           produce=None, vocab_sample_sentences=DEFAULT_VOCAB_SAMPLE_SENTENCES, held_out=0.0, text_field="text"):
    """`produce(files, vocab_path, work_dir, skips, skipped_files, max_seq_length, num_shards,
    seed, held_out, text_field)` writes WORK_DIR/shard-<i>-of-<n>.tfrecord (and WORK_DIR/held_out.tfrecord)
    and returns (stats, examples per shard); None: this machine's worker processes. `learned`:
    (TokenizerSettings, SentencePiece model type) of a vocabulary learned here (`vocabulary_kind`)."""
    if existing_data(output_dir) and not overwrite:
        raise DataError(f"{output_dir} already holds pre-training data; pass --overwrite "
                        "to replace it (it is kept until the new data is complete).")
    skips = Skips()
    inputs = inputs or [str(embedded_sample_path())]
    files = expand_inputs(inputs, skips)
    if not files:
        raise InputError(f"no input files found in {' '.join(inputs)} ({skips.describe()}).")

    output_dir.mkdir(parents=True, exist_ok=True)
    _remove_stale_work_folders(output_dir)
    work_dir = output_dir / f".build-{os.getpid()}"
    work_dir.mkdir()
    try:
        vocab_path = Path(vocab) if vocab else None
        vocab_sample = {}  # the sentences a learned vocabulary came from
        if vocab_path is None:
            vocab_path = work_dir / VOCAB_FILE
            build_vocabulary([str(f) for f in files], vocab_size, vocab_path, settings=learned[0],
                             sentencepiece_type=learned[1] or "unigram",
                             final_path=output_dir / VOCAB_FILE,  # the work folder is renamed into place
                             sample_sentences=vocab_sample_sentences, seed=seed, sample=vocab_sample,
                             text_field=text_field)
        vocabulary = read_vocabulary(vocab_path)
        settings = read_tokenizer_settings(vocab_path)
        check_casing(vocabulary, settings, f"vocabulary {vocab_path}")
        if not learned[0].lowercase and settings.lowercase:
            raise DataError(f"--cased, but {vocab_path} is read uncased: a given vocabulary brings its casing "
                            f"({tokenizer_settings_path(vocab_path)}). Drop --vocab to learn a cased one, or pass "
                            "a cased vocabulary (python -m electra_tf.build_vocab --cased).")

        skipped_files = []
        if produce is None:
            stats, shard_examples = _run_workers(files, vocab_path, work_dir, skips, skipped_files, max_seq_length,
                                                 num_shards, num_workers, seed, held_out, text_field)
            _join_worker_parts(work_dir, num_shards, num_workers)
        else:
            stats, shard_examples = produce(files, vocab_path, work_dir, skips, skipped_files, max_seq_length,
                                            num_shards, seed, held_out, text_field)
        if skipped_files:
            print(f"skipped {len(skipped_files)} input file(s): " + "; ".join(
                f"{entry['file']} ({entry['reason']})" for entry in skipped_files[:10])
                + (" ..." if len(skipped_files) > 10 else "") + " (all in metadata.json skipped_files)", flush=True)
        if stats["examples"] == 0:
            raise InputError(f"no usable text in {' '.join(map(str, files))} "
                             f"(skipped: {skips.describe()}); nothing was written.")

        shards = []
        for index in range(num_shards):
            name = shard_name(index, num_shards)
            shards.append({"file": name, "examples": shard_examples[index],
                           "bytes": (work_dir / name).stat().st_size,
                           "sha256": file_sha256(work_dir / name)})
        empty = [shard["file"] for shard in shards if shard["examples"] == 0]
        if empty:
            print(f"warning: {len(empty)} of the {num_shards} shards hold no example (the data made "
                  f"{stats['examples']:,} examples): {', '.join(empty[:4])}{' ...' if len(empty) > 4 else ''}. "
                  f"Training reads the others; a multi-worker run needs a non-empty shard per worker: rebuild with "
                  f"--num_shards {max(1, min(num_shards, stats['examples']))} or fewer, or with more text.", flush=True)

        capacity = stats["examples"] * max_seq_length
        metadata = {
            "format": FORMAT,
            # a vocabulary learned here lives in the folder, named relative to it so the folder can move
            "vocab_file": VOCAB_FILE if not vocab else str(Path(vocab).resolve()),
            "vocab_fingerprint": vocabulary_fingerprint(vocabulary),
            "vocab_size": len(vocabulary),
            "vocab_sample": vocab_sample or None,  # learned here: {"sentences", "of", "seed"}; given: None
            "lowercase": settings.lowercase,  # how the text was tokenized, checked when read
            "strip_accents": settings.strip_accents,
            "split_cjk": settings.split_cjk,
            "tokenizer": settings.kind,  # wordpiece or sentencepiece
            "max_seq_length": max_seq_length,
            "seed": seed,
            "runner": "local" if produce is None else "beam",
            "num_workers": num_workers if produce is None else None,  # Beam's workers are its runner's
            "inputs": [str(f) for f in files],
            "text_field": text_field,  # the field read from record inputs (JSON Lines, Parquet, Arrow)
            "documents": stats["documents"],
            "sentences": stats["sentences"],
            "examples": stats["examples"],
            "tokens": stats["tokens"],
            "padding_fraction": round(1.0 - stats["tokens"] / capacity, 4),
            "skipped": dict(sorted(skips.items())),
            "skipped_files": skipped_files,
            "shards": shards,
            "empty_shards": empty,
            "held_out": _held_out_entry(work_dir, stats, held_out),
        }
        # Swap in: old data goes only now that the new data is complete; metadata goes last,
        # so a folder with metadata.json always has all its shards.
        for old in existing_data(output_dir):
            old.unlink()
        for shard in shards:
            os.replace(work_dir / shard["file"], output_dir / shard["file"])
        if metadata["held_out"]:
            os.replace(work_dir / HELD_OUT_FILE, output_dir / HELD_OUT_FILE)
        if not vocab:  # the learned vocabulary's files replace an earlier build's (none left over)
            for learned, kept in zip(vocabulary_files(vocab_path), vocabulary_files(output_dir / VOCAB_FILE)):
                if learned.is_file():
                    os.replace(learned, kept)
                else:
                    kept.unlink(missing_ok=True)
        atomic_write_text(output_dir / METADATA_FILE, json.dumps(metadata, indent=2) + "\n")
        return metadata
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def _remove_stale_work_folders(output_dir: Path) -> None:
    """Removes the `.build-<pid>` folders that builds killed midway (SIGKILL, a lost machine) left
    in OUTPUT_DIR. This build holds the folder's lock, so no other build is writing one."""
    for stale in sorted(output_dir.glob(".build-*")):
        if stale.is_dir():
            shutil.rmtree(stale, ignore_errors=True)
            print(f"note: removed {stale}, the temporary folder of an earlier build that did not finish.", flush=True)


def _held_out_entry(work_dir: Path, stats: dict, fraction: float) -> dict | None:
    """metadata.json's `held_out`: the split's file and counts (None: no split was asked for)."""
    if fraction <= 0.0:
        return None
    path = work_dir / HELD_OUT_FILE
    if not path.exists():
        path.touch()  # no document fell in the split: an empty file says so
    if stats.get("held_out_examples", 0) == 0:
        print(f"warning: no document fell in the held-out split ({fraction:.2%} of {stats['documents']:,} documents); "
              "pretrain will evaluate on training text. Use a larger --held_out or more text.", flush=True)
    return {"file": HELD_OUT_FILE, "fraction": fraction,
            **{key: stats.get(f"held_out_{key}", 0) for key in ("documents", "sentences", "examples", "tokens")},
            "bytes": path.stat().st_size, "sha256": file_sha256(path)}


def _join_worker_parts(work_dir: Path, num_shards: int, num_workers: int) -> None:
    """Each shard (and the held-out split) is its workers' parts, joined in worker order."""
    names = [shard_name(index, num_shards) for index in range(num_shards)]
    if any(work_dir.glob(f"{HELD_OUT_FILE}.part-*")):
        names.append(HELD_OUT_FILE)
    for name in names:
        with open(work_dir / name, "wb") as joined:
            for worker in range(num_workers):
                part = work_dir / f"{name}.part-{worker:03d}"
                if part.exists():
                    with open(part, "rb") as source:
                        shutil.copyfileobj(source, joined)
                    part.unlink()


def _run_workers(files, vocab_path, work_dir, skips, skipped_files, max_seq_length, num_shards, num_workers, seed,
                 held_out=0.0, text_field="text"):
    if num_workers == 1:
        return _run_in_this_process(files, vocab_path, work_dir, skips, skipped_files, max_seq_length, num_shards,
                                    seed, held_out, text_field)
    context = multiprocessing.get_context("spawn")  # TensorFlow does not survive fork
    inboxes = [context.Queue(QUEUE_DOCUMENTS) for _ in range(num_workers)]
    outbox = context.Queue()
    workers = [context.Process(
        target=_worker, daemon=True,
        args=(w, num_workers, str(vocab_path), max_seq_length, num_shards, seed, str(work_dir),
              inboxes[w], outbox, held_out))
        for w in range(num_workers)]
    # Ctrl-C reaches every process of the terminal's group; the parent stops the workers. They
    # are born ignoring SIGINT (a disposition a new process inherits), so it cannot catch one
    # half-started.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        for worker in workers:
            worker.start()
    finally:
        signal.signal(signal.SIGINT, previous)

    total_bytes = total_input_bytes(files)
    # Progress counts the input whose documents the workers have packed, not what was read:
    # reading runs ahead of packing by the queues' depth (the end offset of every document sent).
    progress = Progress("build_data", total=total_bytes / 1e6, unit="MB")
    finished_bytes = 0
    documents_sent = 0
    sent_ends = array.array("q")
    worker_stats = {}
    processed = [(0, 0)] * num_workers  # (documents, examples) per worker

    def packed_megabytes():
        documents = sum(d for d, _ in processed)
        return (sent_ends[min(documents, len(sent_ends)) - 1] if documents else 0) / 1e6

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
            for document in file_documents(path, skips, skipped_files, text_field):
                send(documents_sent % num_workers, document)
                documents_sent += 1
                sent_ends.append(finished_bytes + document.offset)
                drain()
                progress.update(packed_megabytes(), counts())
            finished_bytes += size
        for worker_id in range(num_workers):
            send(worker_id, None)
        # Reading is done; workers may still be busy with the last queued documents.
        while len(worker_stats) < num_workers:
            drain(block=True)
            _check_alive(workers, allow_finished=worker_stats)
            progress.update(packed_megabytes(), counts())
        progress.finish(total_bytes / 1e6, counts())
    finally:
        for worker in workers:
            if worker.is_alive():
                worker.terminate()
            worker.join(timeout=10)
        # Documents still buffered for a worker that is gone would make this process wait at
        # exit for a queue nobody reads (Ctrl-C or a failed worker).
        for inbox in inboxes:
            inbox.cancel_join_thread()
            inbox.close()

    stats = {key: sum(s[key] for s in worker_stats.values()) for key in SUMMED_STATS}
    shard_examples = [sum(s["shard_examples"][i] for s in worker_stats.values())
                      for i in range(num_shards)]
    for s in worker_stats.values():
        skips.update(s["skips"])
    return stats, shard_examples


def _run_in_this_process(files, vocab_path, work_dir, skips, skipped_files, max_seq_length, num_shards, seed,
                         held_out, text_field):
    """One worker's build in this process, each document packed as it is read: the same parts as
    one worker process writes, without starting one (a process start imports TensorFlow again,
    seconds on a small machine)."""
    start_tensorflow()  # its start-up lines left out, as in a worker (the commands have started it)
    parts = _ShardParts(0, 1, vocab_path, max_seq_length, num_shards, seed, work_dir, held_out)
    total_bytes = total_input_bytes(files)
    progress = Progress("build_data", total=total_bytes / 1e6, unit="MB")
    finished_bytes = 0

    def counts():
        stats = parts.stats
        return (f"{stats['documents_seen']:,} documents read, {stats['documents_seen']:,} processed, "
                f"{stats['examples']:,} examples")

    try:
        for path in files:
            for document in file_documents(path, skips, skipped_files, text_field):
                parts.add(document)
                progress.update((finished_bytes + document.offset) / 1e6, counts())
            finished_bytes += path.stat().st_size
    finally:
        stats = parts.close()  # on failure too: the caller removes the work folder
    progress.finish(total_bytes / 1e6, counts())
    skips.update(stats["skips"])
    return {key: stats[key] for key in SUMMED_STATS}, stats["shard_examples"]


def _check_alive(workers, allow_finished=()):
    for worker_id, worker in enumerate(workers):
        if not worker.is_alive() and worker_id not in allow_finished and worker.exitcode != 0:
            raise RuntimeError(f"build_data worker {worker_id} died (exit code {worker.exitcode}).")


HELD_OUT_STATS = ("held_out_documents", "held_out_sentences", "held_out_examples", "held_out_tokens")
SUMMED_STATS = ("documents", "sentences", "examples", "tokens", *HELD_OUT_STATS)  # a build's totals


class _ShardParts:
    """One worker's share of the build: packs the documents it is given (k = id mod W) and writes
    its part of every shard (`<shard>.part-<id>`) and of the held-out file."""

    def __init__(self, worker_id, num_workers, vocab_path, max_seq_length, num_shards, seed, work_dir,
                 held_out=0.0):
        import tensorflow as tf

        from electra_tf.data.packing import DocumentPacker

        self._tf = tf
        self.worker_id, self.num_workers, self.num_shards = worker_id, num_workers, num_shards
        self.work_dir = Path(work_dir)
        self.packer = DocumentPacker(vocab_path, max_seq_length, seed, held_out)
        self.writers = {}
        self.skips = Skips()
        self.stats = {"documents_seen": 0, "shard_examples": [0] * num_shards, **dict.fromkeys(SUMMED_STATS, 0)}

    def _writer(self, key, name):
        if key not in self.writers:
            self.writers[key] = self._tf.io.TFRecordWriter(str(self.work_dir / f"{name}.part-{self.worker_id:03d}"))
        return self.writers[key]

    def add(self, document) -> None:
        stats = self.stats
        stats["documents_seen"] += 1
        sentences, examples = self.packer.pack(document, self.skips)
        if not sentences:
            return
        if self.packer.holds_out(document):
            writer = self._writer("held_out", HELD_OUT_FILE)
            for record, tokens in examples:
                writer.write(record)
                stats["held_out_examples"] += 1
                stats["held_out_tokens"] += tokens
            stats["held_out_documents"] += 1
            stats["held_out_sentences"] += len(sentences)
            return
        stats["documents"] += 1
        stats["sentences"] += len(sentences)
        for record, tokens in examples:
            # Round-robin over shards, offset by worker, so shards fill evenly.
            shard = (stats["examples"] * self.num_workers + self.worker_id) % self.num_shards
            self._writer(shard, shard_name(shard, self.num_shards)).write(record)
            stats["examples"] += 1
            stats["tokens"] += tokens
            stats["shard_examples"][shard] += 1

    def close(self) -> dict:
        """Closes the parts; returns the worker's counts and its skips."""
        for writer in self.writers.values():
            writer.close()
        return {**self.stats, "skips": dict(self.skips)}


def _worker(worker_id, num_workers, vocab_path, max_seq_length, num_shards, seed, work_dir,
            inbox, outbox, held_out=0.0):
    """A worker process: markup removal, sentence splitting, tokenization and packing for
    documents k = id mod W (`_ShardParts`), reporting to the parent through `outbox`."""
    try:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        # TensorFlow's start-up lines (and, without an NVIDIA driver, the failed cuInit when the
        # devices are first listed) go to file descriptor 2 before any log setting applies; W
        # workers would repeat them W times over the progress line.
        with start_up_lines_left_out():
            import tensorflow as tf

            tf.config.set_visible_devices([], "GPU")
        parts = _ShardParts(worker_id, num_workers, vocab_path, max_seq_length, num_shards, seed, work_dir, held_out)
        last_report = time.monotonic()
        while (document := inbox.get()) is not None:
            parts.add(document)
            if time.monotonic() - last_report > 1.0:
                outbox.put(("progress", worker_id, (parts.stats["documents_seen"], parts.stats["examples"])))
                last_report = time.monotonic()
        outbox.put(("done", worker_id, parts.close()))
    except BaseException:
        outbox.put(("error", worker_id, traceback.format_exc()))
        raise
