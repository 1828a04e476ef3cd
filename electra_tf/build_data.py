"""`python -m electra_tf.build_data`: text in, sharded TFRecords of packed examples out.

The work is `electra_tf.data.builder.build_shards`; this module parses and reports.

    python -m electra_tf.build_data --input "corpus/*.txt" enwiki-latest-pages-articles.xml.bz2 \\
        --vocab vocab.txt --output_dir data/wiki128 --max_seq_length 128 \\
        --num_shards 64 --num_workers 8 --seed 0

With no --input, the embedded Wikipedia sample; with no --vocab, a vocabulary is learned from
the input first and written to OUTPUT_DIR/vocab.txt. Records (JSON Lines, Parquet, Arrow) give a
document each, from --text_field; --held_out sets aside a fraction of the documents.

`--runner beam` builds the same examples with an Apache Beam pipeline (`pip install -e
".[beam]"`); Beam's own pipeline options follow `--`, passed through unchanged:

    python -m electra_tf.build_data --input corpus/ --vocab vocab.txt --output_dir data/c128 \
        --runner beam -- --direct_num_workers 2 --direct_running_mode multi_processing

Shards are built in a hidden temporary folder and moved into place only when complete; existing
data is replaced only with --overwrite (and kept until the new data is complete).
Exit status: 0 when shards were written (skipped input is counted in the summary), 2 when
nothing usable was found or the arguments are wrong.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from electra_tf.data.shards import metadata_tokenizer_settings, metadata_vocab_file
from electra_tf.data.vocabulary import DEFAULT_VOCAB_SAMPLE_SENTENCES, DEFAULT_VOCAB_SIZE, VOCAB_MODELS, VocabularySpec
from electra_tf.utils.errors import RunError, command
from electra_tf.utils.logs import start_tensorflow


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m electra_tf.build_data", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", nargs="+", default=None,
                        help="text files, MediaWiki dumps (.xml, .xml.bz2), JSON Lines (.jsonl, .json, also "
                             ".gz/.bz2/.zst), Parquet or Arrow files, globs or folders (default: the embedded "
                             "Wikipedia sample)")
    parser.add_argument("--vocab", default=None,
                        help="vocab.txt to tokenize with (default: learn one from the input)")
    parser.add_argument("--vocab_size", type=int, default=DEFAULT_VOCAB_SIZE,
                        help=f"size of a learned vocabulary (only without --vocab; default {DEFAULT_VOCAB_SIZE})")
    parser.add_argument("--cased", action="store_true",
                        help="learn a cased vocabulary (case and accents kept; only without --vocab, which "
                             "brings its own casing)")
    parser.add_argument("--vocab_model", choices=list(VOCAB_MODELS), default="wordpiece",
                        help="kind of vocabulary learned without --vocab: wordpiece (default), sentencepiece "
                             "(unigram) or sentencepiece-bpe (languages without spaces, rich morphology)")
    parser.add_argument("--output_dir", required=True, help="folder for shards and metadata.json")
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--num_shards", type=int, default=8)
    parser.add_argument("--num_workers", type=int, default=os.cpu_count() or 1,
                        help="worker processes (default: one per CPU); 1 builds in this process")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--overwrite", action="store_true",
                        help="replace shards already in --output_dir")
    parser.add_argument("--vocab_sample_sentences", type=int, default=DEFAULT_VOCAB_SAMPLE_SENTENCES, metavar="N",
                        help="without --vocab: learn it from a uniform sample of at most N sentences (seeded by "
                             f"--seed; default {DEFAULT_VOCAB_SAMPLE_SENTENCES:,}); recorded in metadata.json")
    parser.add_argument("--text_field", default="text", metavar="FIELD",
                        help="in JSON Lines, Parquet and Arrow inputs, the field that holds a document's text "
                             "(a dotted path for a nested one, e.g. meta.text; default: text)")
    parser.add_argument("--held_out", type=float, default=0.0, metavar="FRACTION",
                        help="set aside this fraction of the documents (whole, chosen by a hash of --seed, file "
                             "name and document index) as held-out text, never in a training shard: pretrain "
                             "evaluates on it (default 0: no split, as the official data)")
    parser.add_argument("--runner", choices=("local", "beam"), default="local",
                        help="local: worker processes on this machine (--num_workers); beam: an Apache Beam "
                             "pipeline, on the runner its options after -- choose (default DirectRunner)")
    parser.add_argument("pipeline_args", nargs="*", metavar="-- BEAM_OPTIONS",
                        help="with --runner beam: Beam pipeline options, e.g. -- --runner DataflowRunner "
                             "--project P --region R --temp_location gs://B/tmp")
    return parser  # build_shards checks the values


def print_summary(metadata: dict, output_dir: str, elapsed: float) -> None:
    print(f"\nWrote {metadata['examples']:,} examples to {len(metadata['shards'])} shards in "
          f"{output_dir} ({elapsed:.0f} s).")
    print(f"  documents         {metadata['documents']:,}")
    print(f"  sentences         {metadata['sentences']:,}")
    print(f"  examples          {metadata['examples']:,}")
    print(f"  tokens            {metadata['tokens']:,}")
    print(f"  padding fraction  {metadata['padding_fraction']:.1%}")
    held_out = metadata.get("held_out")
    if held_out:
        print(f"  held out          {held_out['documents']:,} documents, {held_out['examples']:,} examples "
              f"({held_out['fraction']:.1%} of documents asked; {held_out['file']}, never in a shard)")
    print(f"  vocabulary        {metadata_vocab_file(output_dir, metadata)} ({metadata['vocab_size']:,} tokens, "
          f"{metadata_tokenizer_settings(metadata).describe()})")
    skipped = metadata["skipped"]
    print("  skipped input     " + ("none" if not skipped else ""))
    for reason, count in skipped.items():
        print(f"    {count:>8,}  {reason}")
    for entry in metadata.get("skipped_files", []):
        print(f"    file {entry['file']}: {entry['reason']}")


@command(interrupted="the output folder keeps what it held before; nothing partial was written")
def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    start_tensorflow()  # quietly, before anything else loads it
    if args.pipeline_args and args.runner != "beam":
        raise RunError(f"{' '.join(args.pipeline_args)}: options after -- are Beam's; they need --runner beam.")
    from electra_tf.data.builder import BuildRunner, ShardSpec, build_shards  # heavy (TensorFlow): after the arguments

    started = time.monotonic()
    spec = ShardSpec(args.max_seq_length, args.num_shards, args.seed, args.held_out, args.text_field)
    vocabulary = VocabularySpec.of(args.vocab_model, args.cased, size=args.vocab_size,
                                   sample_sentences=args.vocab_sample_sentences)
    metadata = build_shards(args.output_dir, args.input, spec, vocab=args.vocab, vocabulary=vocabulary,
                            runner=BuildRunner(args.runner, args.num_workers, tuple(args.pipeline_args)),
                            overwrite=args.overwrite)
    print_summary(metadata, args.output_dir, time.monotonic() - started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
