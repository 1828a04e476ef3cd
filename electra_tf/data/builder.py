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
import dataclasses
import json
import multiprocessing
import os
import queue
import shutil
import signal
import time
import traceback
from pathlib import Path

from electra_tf.data.corpus import (InputError, Skips, embedded_sample_path, expand_inputs, file_documents,
                                    total_input_bytes)
from electra_tf.data.packing import DocumentPacker
from electra_tf.data.shards import FORMAT, HELD_OUT_FILE, METADATA_FILE, DataError, shard_name
from electra_tf.data.vocabulary import VocabularySpec, build_vocabulary
from electra_tf.data.vocabulary_files import (BASIC_TOKENIZATION, check_casing, read_tokenizer_settings,
                                              read_vocabulary, tokenizer_settings_path, vocabulary_files,
                                              vocabulary_fingerprint)
from electra_tf.utils.files import atomic_write_text, file_sha256
from electra_tf.utils.locking import FolderLock
from electra_tf.utils.logs import start_tensorflow, start_up_lines_left_out
from electra_tf.utils.progress import Progress
from electra_tf.utils.run_dir import VOCAB_FILE

QUEUE_DOCUMENTS = 64  # per worker: bounds memory, keeps workers busy
MIN_SEQ_LENGTH = 8


def existing_data(output_dir: Path) -> list[Path]:
    return sorted([*output_dir.glob("shard-*.tfrecord"), *output_dir.glob(HELD_OUT_FILE),
                   *output_dir.glob("metadata.json")])


@dataclasses.dataclass(frozen=True)
class ShardSpec:
    """What the shards hold: examples of `max_seq_length`, in `num_shards` files, packed with
    `seed`; `held_out` (a fraction of the documents, 0 by default as in the official data) set
    aside as the held-out split; `text_field`: the field of record inputs (JSON Lines, Parquet,
    Arrow) that holds the text. The result depends only on these, the inputs, the vocabulary
    and the number of workers."""

    max_seq_length: int = 128
    num_shards: int = 8
    seed: int = 0
    held_out: float = 0.0
    text_field: str = "text"

    def __post_init__(self):
        for name, least in (("max_seq_length", MIN_SEQ_LENGTH), ("num_shards", 1)):
            if getattr(self, name) < least:
                raise DataError(f"{name} must be at least {least}, got {getattr(self, name)}.")
        if not 0.0 <= self.held_out < 0.5:
            raise DataError(f"held_out is the fraction of documents set aside for evaluation, in [0, 0.5); got "
                            f"{self.held_out}.")


@dataclasses.dataclass(frozen=True)
class BuildRunner:
    """Who packs: this machine's worker processes (`num_workers`, default one per CPU; 1 packs in
    this process), or an Apache Beam pipeline (`kind="beam"`) run with Beam's own
    `pipeline_args` (DirectRunner by default, or Dataflow, Flink, Spark)."""

    kind: str = "local"
    num_workers: int | None = None
    pipeline_args: tuple = ()

    def __post_init__(self):
        if self.kind not in ("local", "beam"):
            raise DataError(f"runner must be 'local' or 'beam', got {self.kind!r}.")
        if self.num_workers is not None and self.num_workers < 1:
            raise DataError(f"num_workers must be at least 1, got {self.num_workers}.")

    @property
    def workers(self) -> int:
        return self.num_workers or os.cpu_count() or 1


@dataclasses.dataclass
class ShardJob:
    """One build's work, as the packers get it: the input files, the vocabulary (its file,
    tokens and settings), the temporary folder the parts go to, the spec, and what was skipped."""

    files: list
    vocab_path: Path
    work_dir: Path
    spec: ShardSpec
    skips: Skips
    skipped_files: list = dataclasses.field(default_factory=list)
    vocabulary: list = dataclasses.field(default_factory=list)
    settings: object = None  # tokenization.TokenizerSettings
    vocab_sample: dict = dataclasses.field(default_factory=dict)  # a vocabulary learned here: from what


def build_shards(output_dir: str | Path, inputs: list[str] | None = None, spec: ShardSpec = ShardSpec(), *,
                 vocab: str | Path | None = None, vocabulary: VocabularySpec = VocabularySpec(),
                 runner: BuildRunner = BuildRunner(), overwrite: bool = False) -> dict:
    """Builds the shards of `inputs` (default: the embedded Wikipedia sample) into
    `output_dir`; returns the metadata written. With no `vocab`, one is learned from the inputs
    first as `vocabulary` says (its seed and text field are the spec's) and written to
    OUTPUT_DIR/vocab.txt with its tokenizer_config.json (and spm.model); a given `vocab` brings
    its own kind and casing. Raises `InputError` if nothing usable was found, `DataError` for
    settings or a folder it cannot use.

    `runner` kind "beam": the documents are packed by an Apache Beam pipeline (`beam_builder.py`);
    the same examples, the same metadata, the same all-or-nothing swap into place."""
    produce = None
    if runner.kind == "beam":
        from electra_tf.data.beam_builder import beam_shard_writer
        produce = beam_shard_writer(list(runner.pipeline_args))  # says how to install Beam if it is missing
    learned = vocabulary.tokenizer_settings
    if vocab and learned.kind != "wordpiece":
        raise DataError(f"--vocab_model {learned.kind} learns a vocabulary, but --vocab gives one ({vocab}), which "
                        "brings its own kind (its tokenizer_config.json). Drop one of the two.")
    output_dir = Path(output_dir)

    with FolderLock(output_dir, "electra_tf.build_data"):
        return _build(output_dir, inputs, spec, _VocabularyChoice(vocab, vocabulary), runner, overwrite, produce)


@dataclasses.dataclass(frozen=True)
class _VocabularyChoice:
    """A vocabulary given (`path`), or learned as `spec` says."""

    path: str | Path | None
    spec: VocabularySpec


def _build(output_dir, inputs, spec, vocabulary, runner, overwrite, produce=None) -> dict:
    """`produce(job)` writes JOB.work_dir/shard-<i>-of-<n>.tfrecord (and held_out.tfrecord) and
    returns (stats, examples per shard); None: this machine's worker processes."""
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
        job = ShardJob(files, work_dir / VOCAB_FILE, work_dir, spec, skips)
        _prepare_vocabulary(job, vocabulary, output_dir)
        if produce is None:
            stats, shard_examples = _run_workers(job, runner.workers)
            _join_worker_parts(work_dir, spec.num_shards, runner.workers)
        else:
            stats, shard_examples = produce(job)
        _report_skipped_files(job.skipped_files)
        if stats["examples"] == 0:
            raise InputError(f"no usable text in {' '.join(map(str, files))} "
                             f"(skipped: {skips.describe()}); nothing was written.")
        shards = _shard_entries(job, shard_examples, stats["examples"])
        metadata = _metadata(job, vocabulary.path, stats, shards, runner)
        _swap_in(output_dir, job, shards, metadata, learned=not vocabulary.path)
        return metadata
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def _prepare_vocabulary(job: ShardJob, vocabulary: _VocabularyChoice, output_dir: Path) -> None:
    """The job's vocabulary: the given one, or one learned into the work folder, checked for
    its casing."""
    if vocabulary.path:
        job.vocab_path = Path(vocabulary.path)
    else:
        spec = dataclasses.replace(vocabulary.spec, seed=job.spec.seed, text_field=job.spec.text_field)
        build_vocabulary([str(f) for f in job.files], job.vocab_path, spec,
                         final_path=output_dir / VOCAB_FILE,  # the work folder is renamed into place
                         sample=job.vocab_sample)
    job.vocabulary = read_vocabulary(job.vocab_path)
    job.settings = read_tokenizer_settings(job.vocab_path)
    check_casing(job.vocabulary, job.settings, f"vocabulary {job.vocab_path}")
    if not vocabulary.spec.tokenizer_settings.lowercase and job.settings.lowercase:
        raise DataError(f"--cased, but {job.vocab_path} is read uncased: a given vocabulary brings its casing "
                        f"({tokenizer_settings_path(job.vocab_path)}). Drop --vocab to learn a cased one, or pass "
                        "a cased vocabulary (python -m electra_tf.build_vocab --cased).")


def _report_skipped_files(skipped_files: list) -> None:
    if skipped_files:
        print(f"skipped {len(skipped_files)} input file(s): " + "; ".join(
            f"{entry['file']} ({entry['reason']})" for entry in skipped_files[:10])
            + (" ..." if len(skipped_files) > 10 else "") + " (all in metadata.json skipped_files)", flush=True)


def _shard_entries(job: ShardJob, shard_examples: list, examples: int) -> list[dict]:
    """metadata.json's `shards`, warning about empty ones."""
    num_shards = job.spec.num_shards
    shards = []
    for index in range(num_shards):
        name = shard_name(index, num_shards)
        shards.append({"file": name, "examples": shard_examples[index], "bytes": (job.work_dir / name).stat().st_size,
                       "sha256": file_sha256(job.work_dir / name)})
    empty = [shard["file"] for shard in shards if shard["examples"] == 0]
    if empty:
        print(f"warning: {len(empty)} of the {num_shards} shards hold no example (the data made "
              f"{examples:,} examples): {', '.join(empty[:4])}{' ...' if len(empty) > 4 else ''}. "
              f"Training reads the others; a multi-worker run needs a non-empty shard per worker: rebuild with "
              f"--num_shards {max(1, min(num_shards, examples))} or fewer, or with more text.", flush=True)
    return shards


def _metadata(job: ShardJob, given_vocab, stats: dict, shards: list, runner: BuildRunner) -> dict:
    spec, settings = job.spec, job.settings
    return {
        "format": FORMAT,
        # a vocabulary learned here lives in the folder, named relative to it so the folder can move
        "vocab_file": VOCAB_FILE if not given_vocab else str(Path(given_vocab).resolve()),
        "vocab_fingerprint": vocabulary_fingerprint(job.vocabulary),
        "vocab_size": len(job.vocabulary),
        "vocab_sample": job.vocab_sample or None,  # learned here: {"sentences", "of", "seed"}; given: None
        "lowercase": settings.lowercase,  # how the text was tokenized, checked when read
        "strip_accents": settings.strip_accents,
        "split_cjk": settings.split_cjk,
        BASIC_TOKENIZATION: settings.rule,
        "tokenizer": settings.kind,  # wordpiece or sentencepiece
        "max_seq_length": spec.max_seq_length,
        "seed": spec.seed,
        "runner": runner.kind,
        "num_workers": runner.workers if runner.kind == "local" else None,  # Beam's workers are its runner's
        "inputs": [str(f) for f in job.files],
        "text_field": spec.text_field,  # the field read from record inputs (JSON Lines, Parquet, Arrow)
        "documents": stats["documents"],
        "sentences": stats["sentences"],
        "examples": stats["examples"],
        "tokens": stats["tokens"],
        "padding_fraction": round(1.0 - stats["tokens"] / (stats["examples"] * spec.max_seq_length), 4),
        "skipped": dict(sorted(job.skips.items())),
        "skipped_files": job.skipped_files,
        "shards": shards,
        "empty_shards": [shard["file"] for shard in shards if shard["examples"] == 0],
        "held_out": _held_out_entry(job.work_dir, stats, spec.held_out),
    }


def _swap_in(output_dir: Path, job: ShardJob, shards: list, metadata: dict, learned: bool) -> None:
    """Old data goes only now that the new data is complete; metadata goes last, so a folder
    with metadata.json always has all its shards."""
    for old in existing_data(output_dir):
        old.unlink()
    for shard in shards:
        os.replace(job.work_dir / shard["file"], output_dir / shard["file"])
    if metadata["held_out"]:
        os.replace(job.work_dir / HELD_OUT_FILE, output_dir / HELD_OUT_FILE)
    if learned:  # the learned vocabulary's files replace an earlier build's (none left over)
        for made, kept in zip(vocabulary_files(job.vocab_path), vocabulary_files(output_dir / VOCAB_FILE)):
            if made.is_file():
                os.replace(made, kept)
            else:
                kept.unlink(missing_ok=True)
    atomic_write_text(output_dir / METADATA_FILE, json.dumps(metadata, indent=2) + "\n")


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


def _run_workers(job: ShardJob, num_workers: int):
    """(stats, examples per shard) of the job packed by `num_workers` worker processes (in this
    process for one)."""
    if num_workers == 1:
        return _run_in_this_process(job)
    with _WorkerPool(job, num_workers) as pool:
        for path in job.files:
            for document in file_documents(path, job.skips, job.skipped_files, job.spec.text_field):
                pool.send(document)
            pool.finished_file(path.stat().st_size)
        return pool.finish()


class _WorkerPool:
    """W worker processes (`_worker`) and the parent's side of them: documents sent round-robin
    through bounded queues, progress and counts read back. Progress counts the input whose
    documents the workers have packed, not what was read: reading runs ahead of packing by the
    queues' depth (the end offset of every document sent is kept)."""

    def __init__(self, job: ShardJob, num_workers: int):
        self.job, self.num_workers = job, num_workers
        context = multiprocessing.get_context("spawn")  # TensorFlow does not survive fork
        self.inboxes = [context.Queue(QUEUE_DOCUMENTS) for _ in range(num_workers)]
        self.outbox = context.Queue()
        self.workers = [context.Process(target=_worker, daemon=True, args=(
            w, num_workers, str(job.vocab_path), job.spec, str(job.work_dir), self.inboxes[w], self.outbox))
            for w in range(num_workers)]
        self.total_bytes = total_input_bytes(job.files)
        self.progress = Progress("build_data", total=self.total_bytes / 1e6, unit="MB")
        self.finished_bytes = self.documents_sent = 0
        self.sent_ends = array.array("q")
        self.worker_stats = {}
        self.processed = [(0, 0)] * num_workers  # (documents, examples) per worker

    def __enter__(self):
        # Ctrl-C reaches every process of the terminal's group; the parent stops the workers. They
        # are born ignoring SIGINT (a disposition a new process inherits), so it cannot catch one
        # half-started.
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            for worker in self.workers:
                worker.start()
        finally:
            signal.signal(signal.SIGINT, previous)
        return self

    def send(self, document) -> None:
        self._put(self.documents_sent % self.num_workers, document)
        self.documents_sent += 1
        self.sent_ends.append(self.finished_bytes + document.offset)
        self._drain()
        self.progress.update(self._packed_megabytes(), self._counts())

    def finished_file(self, size: int) -> None:
        self.finished_bytes += size

    def finish(self):
        """(stats, examples per shard) once every worker has packed its last document."""
        for worker_id in range(self.num_workers):
            self._put(worker_id, None)
        while len(self.worker_stats) < self.num_workers:  # workers may still pack queued documents
            self._drain(block=True)
            _check_alive(self.workers, allow_finished=self.worker_stats)
            self.progress.update(self._packed_megabytes(), self._counts())
        self.progress.finish(self.total_bytes / 1e6, self._counts())
        stats = {key: sum(s[key] for s in self.worker_stats.values()) for key in SUMMED_STATS}
        shard_examples = [sum(s["shard_examples"][i] for s in self.worker_stats.values())
                          for i in range(self.job.spec.num_shards)]
        for s in self.worker_stats.values():
            self.job.skips.update(s["skips"])
        return stats, shard_examples

    def __exit__(self, *error):
        for worker in self.workers:
            if worker.is_alive():
                worker.terminate()
            worker.join(timeout=10)
        # Documents still buffered for a worker that is gone would make this process wait at
        # exit for a queue nobody reads (Ctrl-C or a failed worker).
        for inbox in self.inboxes:
            inbox.cancel_join_thread()
            inbox.close()

    def _packed_megabytes(self) -> float:
        documents = sum(d for d, _ in self.processed)
        return (self.sent_ends[min(documents, len(self.sent_ends)) - 1] if documents else 0) / 1e6

    def _counts(self) -> str:
        documents = sum(d for d, _ in self.processed)
        examples = sum(e for _, e in self.processed)
        return f"{self.documents_sent:,} documents read, {documents:,} processed, {examples:,} examples"

    def _drain(self, block=False) -> None:
        while True:
            try:
                kind, worker_id, payload = self.outbox.get(block=block, timeout=1.0 if block else None)
            except queue.Empty:
                return
            if kind == "error":
                raise RuntimeError(f"build_data worker {worker_id} failed:\n{payload}")
            if kind == "progress":
                self.processed[worker_id] = payload
            elif kind == "done":
                self.worker_stats[worker_id] = payload
                self.processed[worker_id] = (payload["documents_seen"], payload["examples"])
            if block:
                return

    def _put(self, worker_id: int, item) -> None:
        while True:
            try:
                self.inboxes[worker_id].put(item, timeout=1.0)
                return
            except queue.Full:
                self._drain()
                _check_alive(self.workers)


def _run_in_this_process(job: ShardJob):
    """One worker's build in this process, each document packed as it is read: the same parts as
    one worker process writes, without starting one (a process start imports TensorFlow again,
    seconds on a small machine)."""
    start_tensorflow()  # its start-up lines left out, as in a worker (the commands have started it)
    parts = _ShardParts(0, 1, job.vocab_path, job.spec, job.work_dir)
    total_bytes = total_input_bytes(job.files)
    progress = Progress("build_data", total=total_bytes / 1e6, unit="MB")
    finished_bytes = 0

    def counts():
        stats = parts.stats
        return (f"{stats['documents_seen']:,} documents read, {stats['documents_seen']:,} processed, "
                f"{stats['examples']:,} examples")

    try:
        for path in job.files:
            for document in file_documents(path, job.skips, job.skipped_files, job.spec.text_field):
                parts.add(document)
                progress.update((finished_bytes + document.offset) / 1e6, counts())
            finished_bytes += path.stat().st_size
    finally:
        stats = parts.close()  # on failure too: the caller removes the work folder
    progress.finish(total_bytes / 1e6, counts())
    job.skips.update(stats["skips"])
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

    def __init__(self, worker_id: int, num_workers: int, vocab_path, spec: ShardSpec, work_dir):
        import tensorflow as tf

        self._tf = tf
        self.worker_id, self.num_workers, self.num_shards = worker_id, num_workers, spec.num_shards
        self.work_dir = Path(work_dir)
        self.packer = DocumentPacker(vocab_path, spec.max_seq_length, spec.seed, spec.held_out)
        self.writers = {}
        self.skips = Skips()
        self.stats = {"documents_seen": 0, "shard_examples": [0] * spec.num_shards, **dict.fromkeys(SUMMED_STATS, 0)}

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


def _worker(worker_id, num_workers, vocab_path, spec: ShardSpec, work_dir, inbox, outbox):
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
        parts = _ShardParts(worker_id, num_workers, vocab_path, spec, work_dir)
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
