"""`build_data --runner beam`: the packing of `builder.build_shards` as an Apache Beam pipeline.

The same code does the work; Beam only spreads it. Per stage:

    input files -> documents      corpus.file_documents (reading, decompression, MediaWiki XML), one file per task
    Reshuffle                     spreads the documents of a few large files over every worker
    documents -> examples         packing.DocumentPacker: corpus.to_sentences + packing.pack_sentences
    examples -> num_shards files  Beam's WriteToTFRecord, the records `shards.serialize_example` wrote

Packing draws its random stream from (seed, file name, document index) alone, so the examples
are those of the local builder for the same inputs, vocabulary, max_seq_length and seed: the
same multiset (tested example by example). Which shard an example lands in is Beam's choice,
and differs. Counts and skips travel as (key, count) pairs summed by the pipeline; the
vocabulary, the metadata and the all-or-nothing swap into OUTPUT_DIR are the local builder's.

The pipeline options are Beam's own, passed through unchanged: none (DirectRunner, one
process), `--direct_num_workers 2 --direct_running_mode multi_processing`, or a Dataflow,
Flink or Spark runner's options (not tested here: no cluster is reachable). On a cluster, the
inputs, the vocabulary and OUTPUT_DIR must be paths every worker can read and write.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from electra_tf.data.corpus import Skips, file_documents
from electra_tf.data.packing import DocumentPacker
from electra_tf.data.shards import HELD_OUT_FILE, DataError, shard_name
from electra_tf.utils.logs import start_up_lines_left_out

try:  # an optional extra: without it, --runner beam says how to install it
    import apache_beam as beam
except ImportError:
    beam = None

INSTALL_HINT = ('--runner beam needs Apache Beam: pip install -e ".[beam]" (or pip install "apache-beam>=2.77"); '
                "the local builder (--runner local, the default) needs nothing more.")


def beam_shard_writer(pipeline_args: list[str]):
    """The shard-producing step of `builder.build_shards` (`produce(job)`), run as a Beam pipeline
    with `pipeline_args`."""
    if beam is None:
        raise DataError(INSTALL_HINT)

    def produce(job):
        return run_pipeline(job, pipeline_args)

    return produce


def run_pipeline(job, pipeline_args: list[str]):
    """(stats, examples per shard) of a `builder.ShardJob` packed by a Beam pipeline."""
    spec, files, work_dir = job.spec, [str(f) for f in job.files], Path(job.work_dir)
    beam_dir = work_dir / "beam"
    beam_dir.mkdir()
    print(f"build_data: Beam pipeline over {len(files)} file(s), options: {' '.join(pipeline_args) or '(DirectRunner)'}",
          flush=True)
    _pipeline(files, str(job.vocab_path), spec, beam_dir, pipeline_args)
    return _results(job, beam_dir)


def _pipeline(files: list[str], vocab_path: str, spec, beam_dir: Path, pipeline_args: list[str]) -> None:
    from apache_beam.options.pipeline_options import PipelineOptions

    with beam.Pipeline(options=PipelineOptions(pipeline_args)) as pipeline:
        read = (pipeline
                | "Files" >> beam.Create(files)
                | "Documents" >> beam.ParDo(ReadDocuments(spec.text_field)).with_outputs(COUNTS, main="documents"))
        packed = (read.documents
                  | "Spread" >> beam.Reshuffle()
                  | "Pack" >> beam.ParDo(PackDocuments(vocab_path, spec.max_seq_length, spec.seed,
                                                       spec.held_out)).with_outputs(COUNTS, HELD_OUT, main="examples"))
        _ = packed.examples | "Write" >> beam.io.WriteToTFRecord(
            str(beam_dir / "shard"), num_shards=spec.num_shards, shard_name_template="-SSSSS-of-NNNNN")
        if spec.held_out > 0:
            _ = packed[HELD_OUT] | "WriteHeldOut" >> beam.io.WriteToTFRecord(
                str(beam_dir / "held_out"), num_shards=1, shard_name_template="")
        _ = ((read[COUNTS], packed[COUNTS])
             | "AllCounts" >> beam.Flatten()
             | "Sum" >> beam.CombinePerKey(sum)
             | "AsJson" >> beam.Map(json.dumps)
             | "WriteCounts" >> beam.io.WriteToText(str(beam_dir / "counts"), shard_name_template="",
                                                    file_name_suffix=".jsonl"))


def _results(job, beam_dir: Path):
    """The pipeline's counts into the job (skips, skipped files), and its shards into the work folder."""
    skips, skipped_files, work_dir, num_shards = job.skips, job.skipped_files, Path(job.work_dir), job.spec.num_shards
    stats = {"documents": 0, "sentences": 0, "examples": 0, "tokens": 0}
    if job.spec.held_out > 0 and (beam_dir / "held_out").exists():
        (beam_dir / "held_out").replace(work_dir / HELD_OUT_FILE)
    for line in (beam_dir / "counts.jsonl").read_text(encoding="utf-8").splitlines():
        key, count = json.loads(line)
        kind, _, name = key.partition(":")
        if kind == "stat":
            stats[name] = count
        elif kind == "skip":
            skips[name] += count
        else:  # "file": a skipped file, as "path\treason"
            path, reason = name.split("\t", 1)
            skipped_files.append({"file": path, "reason": reason})
    skipped_files.sort(key=lambda entry: (entry["file"], entry["reason"]))
    shard_examples = []
    for index in range(num_shards):
        written = beam_dir / f"shard-{index:05d}-of-{num_shards:05d}"
        target = work_dir / shard_name(index, num_shards)
        written.replace(target)
        shard_examples.append(count_records(target))
    return stats, shard_examples


def count_records(path: Path) -> int:
    import tensorflow as tf

    return int(tf.data.TFRecordDataset(str(path)).reduce(0, lambda count, _: count + 1))


HELD_OUT = "held_out"  # the tagged output of the held-out split's examples
COUNTS = "counts"  # the tagged output of (key, count) pairs: "stat:...", "skip:...", "file:path\treason"


DoFn = beam.DoFn if beam is not None else object


class ReadDocuments(DoFn):
    """One input file -> its documents; its skips (and the file itself, if unreadable) as counts."""

    def __init__(self, text_field: str = "text"):
        self.text_field = text_field

    def process(self, path):
        skips, skipped_files = Skips(), []
        yield from file_documents(Path(path), skips, skipped_files, self.text_field)
        for reason, count in skips.items():
            yield beam.pvalue.TaggedOutput(COUNTS, (f"skip:{reason}", count))
        for entry in skipped_files:
            yield beam.pvalue.TaggedOutput(COUNTS, (f"file:{entry['file']}\t{entry['reason']}", 1))


class PackDocuments(DoFn):
    """A document -> its packed examples (serialized), by `packing.DocumentPacker`, as a local worker."""

    def __init__(self, vocab_path: str, max_seq_length: int, seed: int, held_out: float = 0.0):
        self.vocab_path, self.max_seq_length, self.seed = vocab_path, max_seq_length, seed
        self.held_out = held_out

    def setup(self):
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

        with start_up_lines_left_out():  # TensorFlow's start-up lines, once per Beam worker
            import tensorflow as tf

            tf.config.set_visible_devices([], "GPU")

        self.packer = DocumentPacker(self.vocab_path, self.max_seq_length, self.seed, self.held_out)

    def process(self, document):
        skips = Skips()
        sentences, examples = self.packer.pack(document, skips)
        for reason, count in skips.items():
            yield beam.pvalue.TaggedOutput(COUNTS, (f"skip:{reason}", count))
        if not sentences:
            return
        held_out = self.packer.holds_out(document)
        for record, _ in examples:
            yield beam.pvalue.TaggedOutput(HELD_OUT, record) if held_out else record
        prefix = "held_out_" if held_out else ""
        for name, count in (("documents", 1), ("sentences", len(sentences)), ("examples", len(examples)),
                            ("tokens", sum(tokens for _, tokens in examples))):
            yield beam.pvalue.TaggedOutput(COUNTS, (f"stat:{prefix}{name}", count))
