"""Reading text corpora into documents of sentences.

Inputs (files, globs or folders) come in three kinds:
- text files: one sentence or paragraph per line, a blank line between documents (the
  official ELECTRA/BERT format). Each line is split further into sentences by a real
  splitter (blingfire), so plain prose with a paragraph per line works too;
- records (`records.py`): JSON Lines, Parquet and Arrow files, a document per record, its
  text from one field (`text_field`), its lines as paragraphs;
- MediaWiki XML dumps (`*.xml`, `*.xml.bz2`, recognised by content), such as
  `enwiki-*-pages-articles*.xml*.bz2`: streamed page by page; article pages (namespace 0, not redirects) become documents after
  their markup is removed with mwparserfromhell.

Reading is split in two so that it can run in parallel: `iter_raw_documents` (cheap,
sequential: file reading, XML parsing) and `to_sentences` (the costly part: markup removal and
sentence splitting), which build_data runs in worker processes.

Nothing bad in the input stops a run: each problem is counted in a `Skips` by reason and the
run goes on; the caller decides whether anything usable was found.
"""

from __future__ import annotations

import collections
import dataclasses
import glob
import importlib.util
import os
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Iterator

import mwparserfromhell
import mwparserfromhell.nodes as nodes
from blingfire import text_to_sentences

from electra_tf.data.records import (DEFAULT_TEXT_FIELD, SNIFF_LINES, looks_like_json_lines, open_decompressed,
                                     record_format, record_texts)
from electra_tf.utils.errors import ElectraError

# Longer lines are skipped (and counted): a multi-megabyte "line" is a data error (a dumped
# blob, minified markup), not prose, and would make one enormous document.
MAX_LINE_CHARS = 1_000_000
BINARY_SNIFF_BYTES = 8192
EMBEDDED_SAMPLE = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
# Wikilinks to these namespaces are images and categories, not prose.
_NON_PROSE_LINKS = ("file:", "image:", "category:", "media:")
_NON_PROSE_TAGS = {"ref", "table", "gallery", "math", "timeline", "imagemap", "score", "chem"}


@dataclasses.dataclass
class RawDocument:
    source: str        # path it came from
    index: int         # position within that source
    kind: str          # "text": paragraphs are lines; "wiki": one wikitext string
    content: list[str]
    offset: int = 0    # bytes of the source file (as stored, compressed or not) read so far


class Skips(collections.Counter):
    """Counts of skipped or repaired input, by reason."""

    def describe(self) -> str:
        return ", ".join(f"{reason}: {count}" for reason, count in sorted(self.items())) or "none"


class InputError(ElectraError):
    """No usable input at all."""


def embedded_sample_path() -> Path:
    """The real English Wikipedia dump sample shipped in the PyPI package gensim."""
    spec = importlib.util.find_spec("gensim")
    if spec is None or spec.origin is None:
        raise InputError("the embedded Wikipedia sample comes with the package gensim, which is "
                         "not installed: `pip install gensim==4.4.0`, or pass --input.")
    path = Path(spec.origin).parent / "test" / "test_data" / EMBEDDED_SAMPLE
    if not path.is_file():
        raise InputError(f"gensim is installed but {path} is missing; install gensim==4.4.0.")
    return path


def sample_paragraphs(count: int | None = None) -> list[str]:
    """The embedded Wikipedia sample's article paragraphs as plain text (the first `count`):
    real English for tests, benchmarks and demos."""
    paragraphs = []
    for document in iter_raw_documents(embedded_sample_path(), Skips()):
        paragraphs += wikitext_to_paragraphs(document.content[0])
        if count is not None and len(paragraphs) >= count:
            return paragraphs[:count]
    return paragraphs


def expand_inputs(patterns: list[str], skips: Skips) -> list[Path]:
    """Files named by paths, globs or folders, sorted; missing ones are counted in `skips`."""
    files: list[Path] = []
    for pattern in patterns:
        if glob.has_magic(pattern):
            matches = sorted(Path(p) for p in glob.glob(pattern, recursive=True))
            if not matches:
                skips[f"glob matched nothing ({pattern})"] += 1
            files.extend(p for p in matches if p.is_file())
        elif Path(pattern).is_dir():
            found = sorted(p for p in Path(pattern).rglob("*") if p.is_file())
            if not found:
                skips[f"empty folder ({pattern})"] += 1
            files.extend(found)
        elif Path(pattern).is_file():
            files.append(Path(pattern))
        else:
            skips[f"missing path ({pattern})"] += 1
    unique = list(dict.fromkeys(files))
    return unique


def is_wiki_dump(head: bytes) -> bool:
    """MediaWiki XML, by content: dump names vary (`...articles1.xml-p1p41242.bz2`)."""
    return b"<mediawiki" in head[:BINARY_SNIFF_BYTES]


def iter_raw_documents(path: Path, skips: Skips, text_field: str = DEFAULT_TEXT_FIELD) -> Iterator[RawDocument]:
    """The documents of one input file; problems are counted in `skips`. `text_field` is the
    field of a record file that holds a document's text."""
    try:
        if path.stat().st_size == 0:
            skips["empty file"] += 1
            return
        if record_format(path):
            yield from _record_documents(path, text_field, skips)
            return
        with open_decompressed(path) as (stream, _):
            head = stream.read(BINARY_SNIFF_BYTES)
        if not head:
            skips["empty file"] += 1
            return
        if b"\x00" in head:
            skips["binary file"] += 1
            return
        if is_wiki_dump(head):
            yield from _wiki_documents(path, skips)
        elif looks_like_json_lines(_first_lines(path)):
            # Read as prose, a record's keys and escapes would become the vocabulary's words.
            print(f"warning: {path} is named as text, but its lines are JSON objects: reading it as JSON Lines "
                  f"records, a document per record, the text from the field {text_field!r} (--text_field names "
                  "another; name the file .jsonl to say so).", file=sys.stderr, flush=True)
            skips["text files read as JSON Lines (their lines are JSON objects)"] += 1
            yield from _record_documents(path, text_field, skips)
        else:
            yield from _text_documents(path, skips)
    except (OSError, EOFError, ElementTree.ParseError) as error:
        skips[f"unreadable ({type(error).__name__})"] += 1


FILE_LEVEL_SKIPS = ("empty file", "binary file", "unreadable")  # a whole file (or its rest) passed over


def file_documents(path: Path, skips: Skips, skipped_files: list,
                   text_field: str = DEFAULT_TEXT_FIELD) -> Iterator[RawDocument]:
    """`iter_raw_documents`, and each file-level problem (empty, binary, unreadable: a corrupt
    archive, a truncated dump) appended to `skipped_files` as {"file": ..., "reason": ...}, so
    a bad file among many is named in the metadata and the summary."""
    before = Skips(skips)
    yield from iter_raw_documents(path, skips, text_field)
    for reason in sorted(r for r in skips if skips[r] != before.get(r, 0)):
        if reason.startswith(FILE_LEVEL_SKIPS):
            skipped_files.append({"file": str(path), "reason": reason})


def _first_lines(path: Path) -> list[bytes]:
    with open_decompressed(path) as (stream, _):
        return [stream.readline(MAX_LINE_CHARS) for _ in range(SNIFF_LINES)]


def _record_documents(path: Path, text_field: str, skips: Skips) -> Iterator[RawDocument]:
    """A document per good record; its text's non-empty lines are its paragraphs."""
    for index, (text, offset) in enumerate(record_texts(path, text_field, skips)):
        paragraphs = [line.strip() for line in text.splitlines() if line.strip()]
        if any(len(line) > MAX_LINE_CHARS for line in paragraphs):
            skips[f"line over {MAX_LINE_CHARS:,} characters"] += 1
            paragraphs = [line for line in paragraphs if len(line) <= MAX_LINE_CHARS]
        if paragraphs:
            yield RawDocument(str(path), index, "text", paragraphs, offset)


def _text_documents(path: Path, skips: Skips) -> Iterator[RawDocument]:
    paragraphs: list[str] = []
    index = 0
    with open_decompressed(path) as (stream, raw):
        for raw_line in stream:
            line = raw_line.decode("utf-8", errors="replace")
            if "\ufffd" in line and "\ufffd".encode() not in raw_line:
                skips["lines with invalid UTF-8 (bytes replaced)"] += 1
            line = line.strip()
            if len(line) > MAX_LINE_CHARS:
                skips[f"line over {MAX_LINE_CHARS:,} characters"] += 1
                continue
            if line:
                paragraphs.append(line)
            elif paragraphs:
                yield RawDocument(str(path), index, "text", paragraphs, raw.tell())
                paragraphs, index = [], index + 1
        if paragraphs:
            yield RawDocument(str(path), index, "text", paragraphs, raw.tell())


def _wiki_documents(path: Path, skips: Skips) -> Iterator[RawDocument]:
    index = 0
    with open_decompressed(path) as (stream, raw):
        for _, element in ElementTree.iterparse(stream, events=("end",)):
            if element.tag.rsplit("}", 1)[-1] != "page":
                continue
            namespace = element.findtext("{*}ns")
            text = element.findtext("{*}revision/{*}text") or ""
            if element.find("{*}redirect") is not None or namespace != "0":
                skips["wiki pages that are not articles (redirects, talk, ...)"] += 1
            elif len(text) > 20 * MAX_LINE_CHARS:
                skips["wiki pages over 20M characters"] += 1
            else:
                yield RawDocument(str(path), index, "wiki", [text], raw.tell())
                index += 1
            element.clear()  # keep memory flat over a multi-gigabyte dump


def to_sentences(document: RawDocument, skips: Skips) -> list[str]:
    """The sentences of a document (markup removed for wiki pages)."""
    paragraphs = document.content
    if document.kind == "wiki":
        paragraphs = wikitext_to_paragraphs(document.content[0])
        if not paragraphs:
            skips["wiki pages with no prose after markup removal"] += 1
            return []

    sentences = []
    for paragraph in paragraphs:
        sentences.extend(s for s in text_to_sentences(paragraph).split("\n") if s.strip())
    return sentences


def wikitext_to_paragraphs(wikitext: str, min_words: int = 4) -> list[str]:
    """Prose paragraphs of a page: no templates, tables, references, images or headings."""
    code = mwparserfromhell.parse(wikitext)
    # One pass over the page's top-level nodes: `Wikicode.remove` searches the page for each
    # node it removes, quadratic in a long page's nodes.
    code.nodes = [node for node in code.nodes if not _is_non_prose(node)]
    text = code.strip_code(normalize=True, collapse=True)
    paragraphs = []
    for line in text.split("\n"):
        line = " ".join(line.split())
        if len(line.split()) >= min_words:
            paragraphs.append(line)
    return paragraphs


def _is_non_prose(node) -> bool:
    if isinstance(node, (nodes.Heading, nodes.Template, nodes.Comment)):
        return True
    if isinstance(node, nodes.Wikilink):
        return str(node.title).strip().lower().startswith(_NON_PROSE_LINKS)
    if isinstance(node, nodes.Tag):
        return str(node.tag).strip().lower() in _NON_PROSE_TAGS
    return False


def total_input_bytes(files: list[Path]) -> int:
    return sum(os.path.getsize(f) for f in files)
