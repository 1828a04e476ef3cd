"""Corpora stored as records: JSON Lines and Parquet (and the Arrow files a HuggingFace dataset
is saved as), one document per record, its text taken from one field.

- JSON Lines: `*.jsonl`, `*.ndjson`, `*.json` (also a JSON array of records), optionally
  compressed: `.gz`, `.bz2`, `.zst` (C4 is `.json.gz`, OpenWebText2 and The Pile `.jsonl.zst`).
  A file named otherwise whose first lines are all JSON objects is read as JSON Lines too (and
  said so): a record read as prose puts its escapes and keys into the vocabulary.
- Parquet: `*.parquet` (FineWeb, HuggingFace `Dataset.to_parquet`), read a row group at a time,
  only the text's column.
- Arrow: `*.arrow`, the IPC stream files `datasets.Dataset.save_to_disk` writes (its
  `dataset_info.json` and `state.json` beside them are not records and are passed over).

`text_field` names the field, a dotted path for a nested one (`meta.text`). Bad records are
skipped and counted in the caller's `Skips` by reason: invalid JSON, not an object, the field
missing, not a string, empty; an unreadable row group or batch likewise. Parquet and Arrow need
pyarrow, and `.zst` the zstandard package: the `.[records]` extra.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import io
import json
from pathlib import Path
from typing import Iterator

from electra_tf.utils.errors import ElectraError

COMPRESSIONS = (".gz", ".bz2", ".zst")
JSON_SUFFIXES = (".jsonl", ".ndjson", ".json")
NOT_RECORDS = ("dataset_info.json", "state.json", "dataset_dict.json")  # beside a saved HuggingFace dataset
SNIFF_LINES = 20  # a text file whose first lines (up to this many) are all JSON objects is JSON Lines
INSTALL_HINT = 'pip install -e ".[records]"'
DEFAULT_TEXT_FIELD = "text"


class MissingReader(ElectraError):
    """A record format's optional reader is not installed."""


def record_format(path: Path) -> str | None:
    """"jsonl", "parquet" or "arrow" by the file's name (compression suffixes aside), or None."""
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in COMPRESSIONS:
        suffixes = suffixes[:-1]
    last = suffixes[-1] if suffixes else ""
    if last in JSON_SUFFIXES:
        return "jsonl"
    if last == ".parquet":
        return "parquet"
    if last == ".arrow":
        return "arrow"
    return None


def looks_like_json_lines(lines: list[bytes]) -> bool:
    """Whether the (first, non-empty) lines of a text file are all JSON objects."""
    lines = [line for line in lines if line.strip()][:SNIFF_LINES]
    if not lines:
        return False
    for line in lines:
        try:
            if not isinstance(json.loads(line), dict):
                return False
        except ValueError:
            return False
    return True


def field_text(record, text_field: str):
    """(the text, None) or (None, why it is not there) for a record and a dotted field path. A
    record without the field says which fields it has, so a skip count (and the error when
    nothing was usable) shows what --text_field should have been.

    >>> field_text({"content": "x", "id": 1}, "text")
    (None, "records without the field 'text' (their fields: 'content', 'id')")
    """
    if not isinstance(record, dict):
        return None, "records that are not JSON objects"
    value = record
    for key in text_field.split("."):
        if not isinstance(value, dict) or key not in value:
            return None, missing_field(text_field, value if isinstance(value, dict) else {})
        value = value[key]
    if not isinstance(value, str):
        return None, f"records whose {text_field!r} is not a string"
    if not value.strip():
        return None, f"records with an empty {text_field!r}"
    return value, None


def missing_field(text_field: str, fields) -> str:
    """The skip reason of records without `text_field`, naming the (first 8) fields they have."""
    names = sorted(map(str, fields))
    shown = ", ".join(map(repr, names[:8])) + (f", ... ({len(names)} fields)" if len(names) > 8 else "")
    return f"records without the field {text_field!r}" + (f" (their fields: {shown})" if names else "")


@contextlib.contextmanager
def open_decompressed(path: Path):
    """Yields (decompressed binary stream, raw file); raw.tell() measures progress."""
    with open(path, "rb") as raw:
        suffix = path.suffix.lower()
        if suffix == ".gz":
            with gzip.open(raw, "rb") as stream:
                yield stream, raw
        elif suffix == ".bz2":
            with bz2.open(raw, "rb") as stream:
                yield stream, raw
        elif suffix == ".zst":
            try:
                import zstandard
            except ImportError:
                raise MissingReader(f"{path} is zstd-compressed, which needs the zstandard package: "
                                    f"{INSTALL_HINT}.") from None
            reader = zstandard.ZstdDecompressor(max_window_size=2 ** 31).stream_reader(raw)
            yield io.BufferedReader(reader), raw
        else:
            yield raw, raw


def record_texts(path: Path, text_field: str, skips) -> Iterator[tuple[str, int]]:
    """(text, bytes of the file read so far) for each good record of a record file."""
    kind = record_format(path) or "jsonl"
    if path.name in NOT_RECORDS:
        skips["dataset metadata files (not records)"] += 1
        return
    if kind == "jsonl":
        yield from _json_texts(path, text_field, skips)
    else:
        yield from _arrow_texts(path, text_field, skips, kind)


def _json_texts(path, text_field, skips):
    with open_decompressed(path) as (stream, raw):
        if stream.peek(4096).lstrip()[:1] == b"[":  # a JSON array of records, not JSON Lines
            for record in _json_array(stream, skips):
                yield from _checked(record, text_field, skips, raw.tell())
            return
        for line in stream:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                skips["records that are not valid JSON"] += 1
                continue
            yield from _checked(record, text_field, skips, raw.tell())


def _json_array(stream, skips) -> list:
    try:
        records = json.load(stream)
    except ValueError:
        skips["unreadable (a JSON array that does not parse)"] += 1
        return []
    return records if isinstance(records, list) else []


def _checked(record, text_field, skips, offset: int):
    """(text, offset) for a good record; a bad one is counted in `skips` by its problem."""
    text, problem = field_text(record, text_field)
    if problem:
        skips[problem] += 1
    else:
        yield text, offset


def _arrow_texts(path, text_field, skips, kind):
    try:
        import pyarrow
        import pyarrow.ipc
        import pyarrow.parquet
    except ImportError:
        raise MissingReader(f"{path} is {'Parquet' if kind == 'parquet' else 'Arrow'}, which needs pyarrow: "
                            f"{INSTALL_HINT}.") from None
    column = text_field.split(".")[0]
    size = max(path.stat().st_size, 1)
    if kind == "parquet":
        try:
            parquet = pyarrow.parquet.ParquetFile(path)
        except (pyarrow.ArrowException, OSError) as error:
            skips[f"unreadable ({type(error).__name__}: not a Parquet file)"] += 1
            return
        if column not in parquet.schema_arrow.names:
            skips[missing_field(text_field, parquet.schema_arrow.names)] += parquet.metadata.num_rows
            return
        for group in range(parquet.num_row_groups):
            try:
                rows = parquet.read_row_group(group, columns=[column]).column(0).to_pylist()
            except (pyarrow.ArrowException, OSError):
                skips["unreadable Parquet row groups"] += 1
                continue
            read = int(size * (group + 1) / parquet.num_row_groups)
            for value in rows:
                yield from _checked({column: value}, text_field, skips, read)
        return
    with open(path, "rb") as raw:
        try:
            batches = iter(pyarrow.ipc.open_stream(raw))
        except pyarrow.ArrowInvalid:
            raw.seek(0)
            try:
                file_reader = pyarrow.ipc.open_file(raw)
            except (pyarrow.ArrowException, OSError) as error:
                skips[f"unreadable ({type(error).__name__}: not an Arrow file)"] += 1
                return
            batches = (file_reader.get_batch(i) for i in range(file_reader.num_record_batches))
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                return
            except (pyarrow.ArrowException, OSError):
                skips["unreadable Arrow record batches (the rest of the file)"] += 1
                return
            if column not in batch.schema.names:
                skips[missing_field(text_field, batch.schema.names)] += batch.num_rows
                continue
            for value in batch.column(column).to_pylist():
                yield from _checked({column: value}, text_field, skips, raw.tell())
