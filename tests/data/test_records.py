"""Corpora as records: JSON Lines (plain, gzip, bzip2, zstd), JSON arrays, Parquet and Arrow.

Parquet, Arrow and zstd need the `.[records]` extra; those tests skip without it."""

import bz2
import collections
import gzip
import json

import pytest

from electra_tf.data.corpus import Skips, file_documents, iter_raw_documents
from electra_tf.data.records import MissingReader, looks_like_json_lines, record_format

TEXTS = ["The river rises in the hills.\nIt flows south to the sea.", "Bees visit the orchard in May."]
BAD = [{"id": 7}, {"text": 3}, ["a list"], {"text": "   "}]


def json_lines(records) -> str:
    return "\n".join(json.dumps(r) for r in records) + "\nthis line is not JSON\n\n"


def documents(path, field="text"):
    skips = Skips()
    found = list(iter_raw_documents(path, skips, field))
    return [document.content for document in found], dict(skips)


def expected_skips(field="text"):
    # The record without the field says which fields it has: what --text_field could have been.
    return {f"records without the field {field!r} (their fields: 'id')": 1, f"records whose {field!r} is not a string": 1,
            "records that are not JSON objects": 1, f"records with an empty {field!r}": 1,
            "records that are not valid JSON": 1}


@pytest.mark.parametrize("name,opener", [("c4.json.gz", gzip.open), ("pile.jsonl.bz2", bz2.open),
                                         ("plain.jsonl", open), ("hub.ndjson", open)])
def test_json_lines_give_a_document_per_record_and_count_bad_records_by_reason(tmp_path, name, opener):
    path = tmp_path / name
    with opener(path, "wt", encoding="utf-8") as file:
        file.write(json_lines([{"text": t, "url": "u"} for t in TEXTS] + BAD))
    contents, skips = documents(path)
    # A record's lines are its paragraphs (a blank line inside a record does not split it).
    assert contents == [["The river rises in the hills.", "It flows south to the sea."],
                        ["Bees visit the orchard in May."]]
    assert skips == expected_skips()


def test_a_nested_field_and_a_json_array(tmp_path):
    path = tmp_path / "records.json"
    path.write_text(json.dumps([{"meta": {"body": TEXTS[1]}}, {"meta": {}}, {"meta": "flat"}]), encoding="utf-8")
    contents, skips = documents(path, "meta.body")
    assert contents == [[TEXTS[1]]]
    assert skips == {"records without the field 'meta.body'": 2}  # {"meta": {}} and {"meta": "flat"}: no fields


def test_a_text_file_of_json_objects_is_read_as_records_and_said_so(tmp_path, capsys):
    """79 topics as {"id", "text"} lines in a .txt used to be read as prose: backslashes and the
    keys became tokens. By content, they are records."""
    path = tmp_path / "topics.txt"
    path.write_text("\n".join(json.dumps({"id": i, "text": f"Topic {i}.\nIts body."}) for i in range(79)) + "\n",
                    encoding="utf-8")
    contents, skips = documents(path)
    assert len(contents) == 79 and contents[3] == ["Topic 3.", "Its body."]
    assert not any("\\" in line or '"id"' in line for content in contents for line in content)
    assert skips == {"text files read as JSON Lines (their lines are JSON objects)": 1}
    err = capsys.readouterr().err
    assert "its lines are JSON objects" in err and "--text_field" in err
    # Prose with a JSON-looking line among others stays prose.
    assert not looks_like_json_lines([b'{"a": 1}', b"Plain words here."])


def test_formats_by_name():
    from pathlib import Path

    assert [record_format(Path(name)) for name in ("a.jsonl.zst", "b.json.gz", "c.parquet", "d.arrow",
                                                   "e.txt", "f.xml.bz2")] == [
        "jsonl", "jsonl", "parquet", "arrow", None, None]


def test_a_saved_datasets_folder_reads_its_arrow_files_and_passes_over_its_metadata(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.ipc

    folder = tmp_path / "saved"
    folder.mkdir()
    table = pa.table({"text": TEXTS + [None], "id": [1, 2, 3]})
    with pa.OSFile(str(folder / "data-00000-of-00001.arrow"), "wb") as sink:
        with pyarrow.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table, max_chunksize=1)
    (folder / "dataset_info.json").write_text(json.dumps({"features": {}}), encoding="utf-8")
    (folder / "state.json").write_text(json.dumps({"_data_files": []}), encoding="utf-8")
    skips, skipped_files, found = Skips(), [], []
    for path in sorted(folder.iterdir()):
        found += [d.content for d in file_documents(path, skips, skipped_files)]
    assert found == [TEXTS[0].split("\n"), [TEXTS[1]]]
    assert dict(skips) == {"dataset metadata files (not records)": 2, "records whose 'text' is not a string": 1}


def test_parquet_is_read_a_row_group_at_a_time_and_a_damaged_file_is_named(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = tmp_path / "fineweb.parquet"
    pq.write_table(pa.table({"text": TEXTS * 3, "meta": [{"lang": "en"}] * 6}), path, row_group_size=2)
    contents, skips = documents(path)
    assert contents == [TEXTS[0].split("\n"), [TEXTS[1]]] * 3 and skips == {}
    _, missing = documents(path, "body")
    assert missing == {"records without the field 'body' (their fields: 'meta', 'text')": 6}
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1 not really parquet")
    skipped_files = []
    assert list(file_documents(broken, Skips(), skipped_files)) == []
    assert skipped_files[0]["file"] == str(broken) and skipped_files[0]["reason"].startswith("unreadable")


def test_zstd_json_lines(tmp_path):
    zstandard = pytest.importorskip("zstandard")
    path = tmp_path / "owt2.jsonl.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(json_lines([{"text": t} for t in TEXTS]).encode()))
    contents, skips = documents(path)
    assert contents == [TEXTS[0].split("\n"), [TEXTS[1]]] and skips == {"records that are not valid JSON": 1}


def test_a_missing_reader_names_the_extra(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def without(name, *args, **kwargs):
        if name.startswith(("pyarrow", "zstandard")):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without)
    for name in ("a.parquet", "b.jsonl.zst"):
        (tmp_path / name).write_bytes(b"x")
        with pytest.raises(MissingReader, match=r'pip install -e "\.\[records\]"'):
            documents(tmp_path / name)


def test_build_data_reads_records_and_reports_bad_ones_and_empty_shards(tmp_path, small_vocab, capsys):
    from electra_tf import build_data
    from electra_tf.data.shards import read_metadata

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "part-0.jsonl").write_text(json_lines([{"text": t} for t in TEXTS] + BAD), encoding="utf-8")
    with gzip.open(corpus / "part-1.json.gz", "wt", encoding="utf-8") as file:
        file.write(json_lines([{"text": t} for t in TEXTS]))
    stale = tmp_path / "data" / ".build-999999"  # left by a build killed midway
    stale.mkdir(parents=True)
    (stale / "shard-00000-of-00001.tfrecord").write_bytes(b"partial")
    assert build_data.main(["--input", str(corpus), "--vocab", str(small_vocab), "--output_dir", str(tmp_path / "data"),
                            "--max_seq_length", "32", "--num_shards", "8", "--num_workers", "1"]) == 0
    printed = capsys.readouterr().out
    metadata = read_metadata(tmp_path / "data")
    assert metadata["documents"] == 4 and metadata["text_field"] == "text"
    counts = collections.Counter(metadata["skipped"])
    assert counts["records that are not valid JSON"] == 2
    assert sum(n for reason, n in counts.items() if reason.startswith("records without the field 'text'")) == 1
    assert "records whose 'text' is not a string" in printed
    assert len(metadata["empty_shards"]) == 8 - metadata["examples"] > 0
    assert "shards hold no example" in printed
    assert "removed" in printed and not stale.exists()
