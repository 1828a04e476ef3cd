"""The shard builder as a library (`build_shards`): its settings checked, a build in this process,
its metadata, and an existing folder kept whole until a build replaces it entirely."""

import json

import pytest

from electra_tf.data.builder import BuildRunner, ShardSpec, build_shards, existing_data
from electra_tf.data.shards import DataError


@pytest.mark.parametrize("make, message", [
    (lambda: ShardSpec(max_seq_length=2), "max_seq_length must be at least"),
    (lambda: ShardSpec(num_shards=0), "num_shards must be at least 1"),
    (lambda: ShardSpec(held_out=0.5), "held_out is the fraction of documents set aside"),
    (lambda: BuildRunner(kind="spark"), "runner must be 'local' or 'beam'"),
    (lambda: BuildRunner(num_workers=0), "num_workers must be at least 1"),
])
def test_settings_are_checked(make, message):
    with pytest.raises(DataError, match=message):
        make()


def test_a_build_in_this_process_writes_shards_and_metadata_whole(corpus, small_vocab, tmp_path):
    text = corpus.write_sentence_file(tmp_path / "corpus.txt", repeat=4)
    spec, runner = ShardSpec(max_seq_length=32, num_shards=2, held_out=0.25), BuildRunner(num_workers=1)
    metadata = build_shards(tmp_path / "data", [str(text)], spec, vocab=small_vocab, runner=runner)
    written = {p.name for p in existing_data(tmp_path / "data")}
    assert written == {"shard-00000-of-00002.tfrecord", "shard-00001-of-00002.tfrecord", "held_out.tfrecord",
                       "metadata.json"}
    assert json.loads((tmp_path / "data" / "metadata.json").read_text()) == metadata
    assert metadata["examples"] == sum(s["examples"] for s in metadata["shards"]) > 0
    with pytest.raises(DataError, match="already holds"):  # an existing build is not overwritten by accident
        build_shards(tmp_path / "data", [str(text)], spec, vocab=small_vocab, runner=runner)
    assert {p.name for p in existing_data(tmp_path / "data")} == written
