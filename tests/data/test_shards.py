"""The shard format: records written and read in one module, metadata checked before reading."""

import json

import pytest
import tensorflow as tf

from electra_tf.data.shards import (FORMAT, METADATA_FILE, DataError, parse_padded_batch,
                                    read_metadata, resolve_data, serialize_example, shard_name)


def test_records_round_trip_unpadded_ids():
    record = serialize_example([2, 7, 9, 3], [0, 0, 1, 1])
    assert record == serialize_example([2, 7, 9, 3], [0, 0, 1, 1])  # deterministic bytes
    parsed = parse_padded_batch(tf.constant([record]), 4)
    assert parsed["token_ids"].dtype == tf.int32
    assert parsed["token_ids"].numpy().tolist() == [[2, 7, 9, 3]]
    assert parsed["segment_ids"].numpy().tolist() == [[0, 0, 1, 1]]


def test_a_batch_parses_to_its_rows_cut_or_padded_to_the_length():
    rows = [([2, 7, 9, 3], [0, 0, 1, 1]), ([2, 5, 3], [0, 0, 0]), ([2, 8, 8, 8, 8, 8, 3], [0, 0, 0, 1, 1, 1, 1])]
    batch = tf.constant([serialize_example(ids, segments) for ids, segments in rows])
    for length in (6, 9):  # one row longer than the length (cut), the others padded
        parsed = parse_padded_batch(batch, length)
        assert {key: value.shape for key, value in parsed.items()} == {
            key: (3, length) for key in ("token_ids", "segment_ids", "padding_mask")}
        for row, (ids, segments) in enumerate(rows):
            kept = min(len(ids), length)
            pad = [0] * (length - kept)
            assert parsed["token_ids"][row].numpy().tolist() == ids[:kept] + pad
            assert parsed["segment_ids"][row].numpy().tolist() == segments[:kept] + pad
            assert parsed["padding_mask"][row].numpy().tolist() == [1] * kept + pad


def test_shard_names_sort_in_order():
    names = [shard_name(i, 12) for i in range(12)]
    assert names == sorted(names) and names[0] == "shard-00000-of-00012.tfrecord"


def test_metadata_must_exist_parse_and_have_the_format(tmp_path):
    with pytest.raises(DataError, match="metadata.json is missing"):
        read_metadata(tmp_path)
    (tmp_path / METADATA_FILE).write_text("{not json")
    with pytest.raises(DataError, match="not valid JSON"):
        read_metadata(tmp_path)
    (tmp_path / METADATA_FILE).write_text(json.dumps({"format": "something else"}))
    with pytest.raises(DataError, match="unknown format"):
        read_metadata(tmp_path)
    (tmp_path / METADATA_FILE).write_text(json.dumps({"format": FORMAT, "examples": 3}))
    assert read_metadata(tmp_path)["examples"] == 3


def test_resolve_data_tells_records_from_raw_text(tmp_path):
    (tmp_path / METADATA_FILE).write_text(json.dumps({"format": FORMAT}))
    assert resolve_data(str(tmp_path)) == ("records", [str(tmp_path)])
    assert resolve_data(str(tmp_path / "shard-00000-of-00001.tfrecord")) == ("records", [str(tmp_path)])
    assert resolve_data("corpus/*.txt") == ("raw", ["corpus/*.txt"])
    lonely = tmp_path / "elsewhere"
    lonely.mkdir()
    with pytest.raises(DataError, match="need the metadata.json"):
        resolve_data(str(lonely / "a.tfrecord"))
