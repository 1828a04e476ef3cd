"""build_data --runner beam: the local builder's examples, counts and skips, from a Beam pipeline.

Needs the optional `.[beam]` extra (apache-beam); without it these tests skip, except the one
that checks the message a user without Beam gets."""

import bz2
import collections
import gzip
import json
import re
from pathlib import Path

import pytest
import tensorflow as tf

from electra_tf.data.builder import BuildRunner, ShardSpec, build_shards
from electra_tf.data.corpus import embedded_sample_path
from electra_tf.data.shards import DataError
from electra_tf.data.vocabulary import VocabularySpec


def examples(folder):
    """Every example of a build_data folder, as a multiset of serialized records."""
    found = collections.Counter()
    for shard in sorted(Path(folder).glob("shard-*.tfrecord")):
        found.update(record.numpy() for record in tf.data.TFRecordDataset(str(shard)))
    return found


@pytest.fixture(scope="module")
def real_inputs(tmp_path_factory):
    """The bundled Wikipedia sample's first 40 pages as a dump of their own, a text file, and a
    corrupt archive among them."""
    folder = tmp_path_factory.mktemp("beam_inputs")
    xml = bz2.decompress(embedded_sample_path().read_bytes()).decode("utf-8")
    head, pages = xml.split("<page>", 1)[0], re.findall(r"<page>.*?</page>", xml, re.S)
    (folder / "wiki.xml.bz2").write_bytes(bz2.compress((head + "".join(pages[:40]) + "</mediawiki>").encode()))
    (folder / "notes.txt").write_text("The river rises in the hills. It flows south.\n\nBees visit the orchard.\n",
                                      encoding="utf-8")
    (folder / "broken.bz2").write_bytes(b"BZh91AY&SY" + b"\x00not bzip2" * 20)
    # Records too: a page per record, one of them bad.
    records = [{"meta": {"text": text}} for text in re.findall(r"<text[^>]*>(.*?)</text>", "".join(pages[40:60]), re.S)]
    with gzip.open(folder / "records.jsonl.gz", "wt", encoding="utf-8") as file:
        file.write("\n".join(json.dumps(r) for r in records + [{"meta": {}}]) + "\n")
    return folder


def test_beam_builds_the_local_builders_examples_counts_and_skips(real_inputs, small_vocab, tmp_path):
    pytest.importorskip("apache_beam")
    spec = ShardSpec(64, 3, seed=5, held_out=0.1, text_field="meta.text")
    local = build_shards(tmp_path / "local", [str(real_inputs)], spec, vocab=small_vocab, runner=BuildRunner(num_workers=2))
    beam = build_shards(tmp_path / "beam", [str(real_inputs)], spec, vocab=small_vocab, runner=BuildRunner("beam"))
    assert local["skipped"]["records without the field 'meta.text'"] == 1
    assert local["examples"] > 50 and local["held_out"]["examples"] > 0
    assert examples(tmp_path / "beam") == examples(tmp_path / "local")  # example by example
    for key in ("documents", "sentences", "examples", "tokens", "skipped", "skipped_files", "vocab_fingerprint"):
        assert beam[key] == local[key], key
    for key in ("documents", "sentences", "examples", "tokens"):
        assert beam["held_out"][key] == local["held_out"][key], key
    held_out = [collections.Counter(r.numpy() for r in tf.data.TFRecordDataset(str(tmp_path / kind / "held_out.tfrecord")))
                for kind in ("beam", "local")]
    assert held_out[0] == held_out[1]
    assert beam["skipped_files"] == [{"file": str(real_inputs / "broken.bz2"), "reason": "unreadable (OSError)"}]
    assert (beam["runner"], local["runner"]) == ("beam", "local")
    assert sum(shard["examples"] for shard in beam["shards"]) == beam["examples"]
    assert not list((tmp_path / "beam").glob(".build-*"))  # the work folder is gone


def test_beam_tokenizes_with_a_sentencepiece_vocabulary_as_the_local_builder(real_inputs, sentencepiece_vocab, tmp_path):
    pytest.importorskip("apache_beam")
    metadata = [build_shards(tmp_path / runner, [str(real_inputs)], ShardSpec(64, 2, text_field="meta.text"),
                             vocab=sentencepiece_vocab, runner=BuildRunner(runner, num_workers=1))
                for runner in ("local", "beam")]
    assert metadata[0]["tokenizer"] == metadata[1]["tokenizer"] == "sentencepiece"
    assert examples(tmp_path / "beam") == examples(tmp_path / "local") and metadata[0]["examples"] > 50


def test_a_pipeline_that_dies_midway_leaves_the_previous_data_and_reruns(real_inputs, small_vocab, tmp_path,
                                                                          monkeypatch):
    pytest.importorskip("apache_beam")
    from electra_tf.data import packing

    first = build_shards(tmp_path / "data", [str(real_inputs / "notes.txt")], ShardSpec(64, 1), vocab=small_vocab,
                         runner=BuildRunner("beam"))
    real_pack = packing.pack_sentences
    packed = []

    def dies_on_the_third_document(*args, **kwargs):  # a worker lost while packing
        packed.append(1)
        if len(packed) == 3:
            raise RuntimeError("worker lost")
        return real_pack(*args, **kwargs)

    monkeypatch.setattr(packing, "pack_sentences", dies_on_the_third_document)
    with pytest.raises(Exception, match="worker lost"):
        build_shards(tmp_path / "data", [str(real_inputs)], ShardSpec(64, 1), vocab=small_vocab,
                     runner=BuildRunner("beam"), overwrite=True)
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["metadata.json", "shard-00000-of-00001.tfrecord"]
    assert sum(examples(tmp_path / "data").values()) == first["examples"]  # the previous data, intact
    monkeypatch.undo()
    again = build_shards(tmp_path / "data", [str(real_inputs)], ShardSpec(64, 1), vocab=small_vocab,
                         runner=BuildRunner("beam"), overwrite=True)
    assert again["examples"] > first["examples"] and sum(examples(tmp_path / "data").values()) == again["examples"]


def test_without_beam_the_runner_says_how_to_install_it(monkeypatch, small_vocab, tmp_path):
    from electra_tf.data import beam_builder

    monkeypatch.setattr(beam_builder, "beam", None)
    with pytest.raises(DataError, match=r'pip install -e "\.\[beam\]"'):
        build_shards(tmp_path / "data", vocab=small_vocab, runner=BuildRunner("beam"))
    assert not (tmp_path / "data").exists() or not list((tmp_path / "data").iterdir())


def test_beam_options_after_the_separator_need_the_beam_runner(tmp_path, capsys):
    from electra_tf import build_data

    assert build_data.build_parser().parse_args(
        ["--output_dir", "x", "--runner", "beam", "--", "--direct_num_workers", "2"]).pipeline_args == \
        ["--direct_num_workers", "2"]
    assert build_data.main(["--output_dir", str(tmp_path / "x"), "--", "--direct_num_workers", "2"]) == 2
    assert "options after -- are Beam's; they need --runner beam" in capsys.readouterr().err


def test_a_learned_vocabulary_comes_from_the_same_seeded_sample_in_both_runners(real_inputs, tmp_path):
    pytest.importorskip("apache_beam")
    runs = {runner: build_shards(tmp_path / runner, [str(real_inputs)], ShardSpec(64, 1, seed=3),
                                 vocabulary=VocabularySpec(size=400, sample_sentences=300),
                                 runner=BuildRunner(runner, num_workers=1))
            for runner in ("local", "beam")}
    assert runs["local"]["vocab_sample"]["sentences"] == 300 and runs["local"]["vocab_sample"]["seed"] == 3
    assert runs["local"]["vocab_sample"]["of"] > 300  # a sample, not everything
    assert runs["beam"]["vocab_sample"] == runs["local"]["vocab_sample"]
    assert runs["beam"]["vocab_fingerprint"] == runs["local"]["vocab_fingerprint"]
    assert examples(tmp_path / "beam") == examples(tmp_path / "local")
