"""`python -m electra_tf.build_vocab`: learn a WordPiece or SentencePiece vocabulary from text.

    python -m electra_tf.build_vocab --input "corpus/*.txt" enwiki.xml.bz2 \\
        --vocab_size 30522 --output vocab.txt
    python -m electra_tf.build_vocab --input corpus.txt --cased --output cased/vocab.txt
    python -m electra_tf.build_vocab --input zh.jsonl --vocab_model sentencepiece --output zh/vocab.txt

--vocab_model sentencepiece (unigram) or sentencepiece-bpe learns a SentencePiece model, for
languages written without spaces or with rich morphology; it writes spm.model beside vocab.txt
(the model's pieces) and tokenizer_config.json says which kind the folder holds.

Uncased by default (lower-cased, accents stripped, as the official ELECTRA models); --cased
keeps case and accents ("Apple" and "apple", "May" and "may" stay apart). The casing is
written beside the vocabulary, in the same folder's tokenizer_config.json (transformers' keys),
and every later stage reads it from there: data building, pre-training, fine-tuning and the
exports follow it without being told again.

Inputs are read like build_data's (text files, MediaWiki dumps, globs, folders); with no
--input, the embedded Wikipedia sample, and with --with_sample both (your text and general
English, for a vocabulary larger than your text alone holds). The vocabulary starts with [PAD]
[UNK] [CLS] [SEP] [MASK]. For a large corpus, --max_documents learns from its first documents only.
The work is `electra_tf.data.vocabulary.build_vocabulary`. Exit status: 0 written, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from electra_tf.data.corpus import embedded_sample_path
from electra_tf.data.vocabulary import (DEFAULT_VOCAB_SAMPLE_SENTENCES, DEFAULT_VOCAB_SIZE, MIN_VOCAB_SIZE,
                                        VOCAB_MODELS, VocabularySpec, build_vocabulary)
from electra_tf.data.vocabulary_files import tokenizer_settings_path, vocabulary_files
from electra_tf.utils.errors import ElectraError, command
from electra_tf.utils.logs import start_tensorflow


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m electra_tf.build_vocab", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", nargs="+", default=None,
                        help="text files, MediaWiki dumps, JSON Lines, Parquet or Arrow files, globs or "
                             "folders (default: the embedded Wikipedia sample)")
    parser.add_argument("--with_sample", action="store_true",
                        help="also learn from the bundled Wikipedia sample: general English beside your own text, "
                             "when yours is too small for the vocabulary asked for")
    parser.add_argument("--vocab_size", type=int, default=DEFAULT_VOCAB_SIZE,
                        help=f"largest vocabulary to learn (default {DEFAULT_VOCAB_SIZE}: right for "
                             "a small corpus; BERT's is 30522)")
    parser.add_argument("--output", required=True, help="vocab.txt to write")
    parser.add_argument("--max_documents", type=int, default=None,
                        help="learn from the first N documents only")
    parser.add_argument("--cased", action="store_true",
                        help="keep case and accents (default: lower-case and strip accents; SentencePiece: "
                             "its normaliser folds case unless --cased)")
    parser.add_argument("--vocab_model", choices=list(VOCAB_MODELS), default="wordpiece",
                        help="wordpiece (default, as BERT and the official ELECTRA), sentencepiece (unigram) or "
                             "sentencepiece-bpe: for languages written without spaces or with rich morphology; "
                             "writes spm.model beside --output")
    parser.add_argument("--vocab_sample_sentences", type=int, default=DEFAULT_VOCAB_SAMPLE_SENTENCES, metavar="N",
                        help="learn from a uniform sample of at most N sentences (a corpus too large for "
                             f"memory; default {DEFAULT_VOCAB_SAMPLE_SENTENCES:,})")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sample")
    parser.add_argument("--text_field", default="text", metavar="FIELD",
                        help="in JSON Lines, Parquet and Arrow inputs, the field that holds a document's text "
                             "(a dotted path for a nested one, e.g. meta.text; default: text)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an existing --output (and the tokenizer_config.json beside it)")
    return parser


@command(interrupted="no vocabulary was written")
def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    start_tensorflow()  # quietly, before anything else loads it
    output = Path(args.output)
    settings_file = tokenizer_settings_path(output)
    for existing in vocabulary_files(output):
        if existing.exists() and not args.overwrite:
            raise ElectraError(f"{existing} exists; pass --overwrite to replace it (a vocabulary's kind and casing are "
                               f"written to {settings_file.name} in its folder, and a SentencePiece model to "
                               "spm.model, so keep one vocabulary per folder).")
    if args.vocab_size < MIN_VOCAB_SIZE:
        raise ElectraError(f"--vocab_size must be at least {MIN_VOCAB_SIZE}.")
    if args.vocab_sample_sentences < 1:
        raise ElectraError("--vocab_sample_sentences must be at least 1.")
    spec = VocabularySpec.of(args.vocab_model, args.cased, size=args.vocab_size, max_documents=args.max_documents,
                             sample_sentences=args.vocab_sample_sentences, seed=args.seed, text_field=args.text_field)
    sample = [str(embedded_sample_path())] if args.with_sample or not args.input else []
    build_vocabulary([*(args.input or []), *sample], output, spec)
    return 0


if __name__ == "__main__":
    sys.exit(main())
