"""`python -m electra_tf.build_vocab`: learn an uncased WordPiece vocabulary from text.

    python -m electra_tf.build_vocab --input "corpus/*.txt" enwiki.xml.bz2 \\
        --vocab_size 30522 --output vocab.txt

Inputs are read like build_data's (text files, MediaWiki dumps, globs, folders); with no
--input, the embedded Wikipedia sample. The vocabulary starts with [PAD] [UNK] [CLS] [SEP]
[MASK]. For a large corpus, --max_documents learns from its first documents only.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from electra_tf.corpus import InputError, Skips, embedded_sample_path, expand_inputs, iter_raw_documents, to_sentences
from electra_tf.progress import Progress

# Right for a small corpus such as the bundled sample (BERT's is 30522).
DEFAULT_VOCAB_SIZE = 8192


def collect_sentences(inputs: list[str], skips: Skips, max_documents: int | None = None,
                      progress_label: str = "reading text") -> list[str]:
    files = expand_inputs(inputs, skips)
    if not files:
        raise InputError(f"no input files found in {inputs} ({skips.describe()}).")
    progress = Progress(progress_label, total=max_documents, unit="documents")
    sentences: list[str] = []
    documents = 0
    for path in files:
        for document in iter_raw_documents(path, skips):
            sentences.extend(to_sentences(document, skips))
            documents += 1
            progress.update(documents, f"{len(sentences):,} sentences")
            if max_documents and documents >= max_documents:
                break
        if max_documents and documents >= max_documents:
            break
    progress.finish(documents, f"{len(sentences):,} sentences")
    if not sentences:
        raise InputError(f"no text found in {', '.join(map(str, files))} ({skips.describe()}).")
    return sentences


def build_vocabulary(inputs: list[str], vocab_size: int, output: Path,
                     max_documents: int | None = None) -> list[str]:
    """Learns a vocabulary from `inputs` and writes it to `output` (atomically)."""
    import tensorflow as tf

    from electra_tf.tokenization import learn_vocabulary, write_vocabulary

    skips = Skips()
    sentences = collect_sentences(inputs, skips, max_documents)
    print(f"Learning a {vocab_size}-entry WordPiece vocabulary from {len(sentences):,} sentences "
          f"(skipped or repaired input: {skips.describe()}) ...", file=sys.stderr)
    started = time.monotonic()
    vocabulary = learn_vocabulary(tf.data.Dataset.from_tensor_slices(sentences).batch(1000), vocab_size)
    write_vocabulary(output, vocabulary)
    print(f"Wrote {len(vocabulary):,} tokens to {output} in {time.monotonic() - started:.0f} s.",
          file=sys.stderr)
    return vocabulary


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m electra_tf.build_vocab", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", nargs="+", default=None,
                        help="text files, MediaWiki dumps, globs or folders "
                             "(default: the embedded Wikipedia sample)")
    parser.add_argument("--vocab_size", type=int, default=DEFAULT_VOCAB_SIZE,
                        help=f"largest vocabulary to learn (default {DEFAULT_VOCAB_SIZE}: right for "
                             "a small corpus; BERT's is 30522)")
    parser.add_argument("--output", required=True, help="vocab.txt to write")
    parser.add_argument("--max_documents", type=int, default=None,
                        help="learn from the first N documents only")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    args = parser.parse_args(argv)
    output = Path(args.output)
    if output.exists() and not args.overwrite:
        print(f"error: {output} exists; pass --overwrite to replace it.", file=sys.stderr)
        return 2
    if args.vocab_size < 100:
        print("error: --vocab_size must be at least 100.", file=sys.stderr)
        return 2
    try:
        inputs = args.input or [str(embedded_sample_path())]
        build_vocabulary(inputs, args.vocab_size, output, args.max_documents)
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
