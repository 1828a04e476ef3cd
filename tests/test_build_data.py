import json

import pytest
import tensorflow as tf

from electra_tf import build_data
from electra_tf.data.shards import metadata_vocab_file, read_metadata
from electra_tf.utils.files import file_sha256


def run(*argv):
    return build_data.main([str(a) for a in argv])


def records(path):
    return [r.numpy() for r in tf.data.TFRecordDataset(str(path))]


@pytest.fixture(scope="module")
def corpus_folder(corpus, tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    corpus.write_sentence_file(folder / "sentences.txt", repeat=10)
    corpus.write_prose_file(folder / "prose.txt", repeat=5)
    corpus.write_wiki_dump(folder / "wiki.xml.bz2", [("River", 0, corpus.ARTICLE, False)] * 3)
    return folder


@pytest.fixture(scope="module")
def built(corpus_folder, small_vocab, tmp_path_factory):
    output = tmp_path_factory.mktemp("built") / "data"
    assert run("--input", corpus_folder / "*.txt", corpus_folder / "wiki.xml.bz2", "--vocab", small_vocab,
               "--output_dir", output, "--max_seq_length", 32, "--num_shards", 3,
               "--num_workers", 2, "--seed", 5) == 0
    return output


def test_shards_and_metadata_agree(built, capsys):
    metadata = read_metadata(built)
    assert metadata["documents"] == 4 * 10 + 4 * 5 + 3
    assert metadata["max_seq_length"] == 32
    total = 0
    for shard in metadata["shards"]:
        path = built / shard["file"]
        assert len(records(path)) == shard["examples"] > 0
        assert path.stat().st_size == shard["bytes"] and file_sha256(path) == shard["sha256"]
        total += shard["examples"]
    assert total == metadata["examples"]
    assert 0.0 <= metadata["padding_fraction"] < 0.5
    assert sorted(p.name for p in built.iterdir()) == sorted(
        ["metadata.json"] + [s["file"] for s in metadata["shards"]])  # no temp files left


def test_deterministic_for_a_seed(built, corpus_folder, small_vocab, tmp_path):
    again = tmp_path / "again"
    assert run("--input", corpus_folder / "*.txt", corpus_folder / "wiki.xml.bz2", "--vocab", small_vocab,
               "--output_dir", again, "--max_seq_length", 32, "--num_shards", 3,
               "--num_workers", 2, "--seed", 5) == 0
    for shard in read_metadata(built)["shards"]:
        assert (again / shard["file"]).read_bytes() == (built / shard["file"]).read_bytes()


def test_a_held_out_split_takes_whole_documents_out_of_the_shards(built, corpus_folder, small_vocab, tmp_path,
                                                                  capsys):
    """--held_out: the examples of about that fraction of the documents go to held_out.tfrecord
    instead of a shard; with the shards they are the examples of the build without a split
    (an example depends only on its document), whatever the number of workers."""
    examples = {}
    for workers in (1, 2):
        output = tmp_path / f"split-{workers}"
        assert run("--input", corpus_folder / "*.txt", corpus_folder / "wiki.xml.bz2", "--vocab", small_vocab,
                   "--output_dir", output, "--max_seq_length", 32, "--num_shards", 3, "--num_workers", workers,
                   "--seed", 5, "--held_out", 0.25) == 0
        metadata = read_metadata(output)
        held_out = metadata["held_out"]
        assert held_out["file"] == "held_out.tfrecord" and held_out["fraction"] == 0.25
        held_out_records = records(output / "held_out.tfrecord")
        assert len(held_out_records) == held_out["examples"] > 0
        assert file_sha256(output / "held_out.tfrecord") == held_out["sha256"]
        assert 0.1 < held_out["documents"] / (held_out["documents"] + metadata["documents"]) < 0.4
        training = [r for shard in metadata["shards"] for r in records(output / shard["file"])]
        assert len(training) == metadata["examples"]
        examples[workers] = (sorted(training), sorted(held_out_records))
    assert examples[1] == examples[2]
    whole = [r for shard in read_metadata(built)["shards"] for r in records(built / shard["file"])]
    assert sorted(examples[1][0] + examples[1][1]) == sorted(whole)
    assert read_metadata(built)["held_out"] is None  # no split unless asked
    assert "held out          " in capsys.readouterr().out
    assert run("--input", corpus_folder / "*.txt", "--vocab", small_vocab, "--output_dir", tmp_path / "bad",
               "--held_out", 0.7) == 2


def test_one_worker_builds_in_this_process(corpus_folder, small_vocab, tmp_path, monkeypatch):
    """--num_workers 1 packs in the command's own process (no process start, TensorFlow imported
    once); the held-out test above checks it builds the examples two worker processes build."""
    from electra_tf.data import builder

    def no_processes(method):
        raise AssertionError("a worker process was started")

    monkeypatch.setattr(builder.multiprocessing, "get_context", no_processes)
    assert run("--input", corpus_folder / "sentences.txt", "--vocab", small_vocab, "--output_dir", tmp_path / "o",
               "--max_seq_length", 32, "--num_shards", 2, "--num_workers", 1) == 0
    assert read_metadata(tmp_path / "o")["examples"] > 0


def test_refuses_existing_output_unless_told(corpus_folder, small_vocab, tmp_path, capsys):
    output = tmp_path / "out"
    args = ["--input", corpus_folder / "sentences.txt", "--vocab", small_vocab, "--output_dir", output,
            "--max_seq_length", 32, "--num_shards", 2, "--num_workers", 1]
    assert run(*args) == 0
    before = (output / "metadata.json").read_text()
    assert run(*args) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert (output / "metadata.json").read_text() == before
    assert run(*args, "--seed", 9, "--overwrite") == 0
    assert json.loads((output / "metadata.json").read_text())["seed"] == 9


def test_nothing_usable_fails_clearly_and_keeps_existing_data(corpus_folder, small_vocab, tmp_path, capsys):
    output = tmp_path / "out"
    assert run("--input", corpus_folder / "sentences.txt", "--vocab", small_vocab, "--output_dir", output,
               "--num_shards", 1, "--num_workers", 1) == 0
    before = sorted((p.name, p.read_bytes()) for p in output.iterdir())
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01" * 5000)
    code = run("--input", tmp_path / "empty.txt", tmp_path / "blob.bin", tmp_path / "missing.txt",
               "--vocab", small_vocab, "--output_dir", output, "--num_workers", 1, "--overwrite")
    assert code == 2
    error = capsys.readouterr().err
    assert "no usable text" in error and "empty file: 1" in error and "binary file: 1" in error
    assert "missing path" in error
    assert sorted((p.name, p.read_bytes()) for p in output.iterdir()) == before


def test_records_without_the_text_field_name_the_fields_they_have(corpus, small_vocab, tmp_path, capsys):
    import json

    records = tmp_path / "reviews.jsonl.gz"
    import gzip

    with gzip.open(records, "wt", encoding="utf-8") as file:
        for document in corpus.DOCUMENTS:
            file.write(json.dumps({"content": " ".join(document), "lang": "en"}) + "\n")
    assert run("--input", records, "--vocab", small_vocab, "--output_dir", tmp_path / "out", "--num_workers", 1) == 2
    error = capsys.readouterr().err
    assert "no usable text" in error and "records without the field 'text' (their fields: 'content', 'lang')" in error
    assert run("--input", records, "--vocab", small_vocab, "--output_dir", tmp_path / "out", "--num_workers", 1,
               "--text_field", "content", "--num_shards", 1) == 0


def test_only_missing_inputs(tmp_path, small_vocab, capsys):
    assert run("--input", tmp_path / "nope*.txt", "--vocab", small_vocab, "--output_dir", tmp_path / "o") == 2
    assert "glob matched nothing" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_vocabulary_without_special_tokens_is_rejected(corpus_folder, tmp_path, capsys):
    vocab = tmp_path / "bad_vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\nthe\nriver\n")
    assert run("--input", corpus_folder / "sentences.txt", "--vocab", vocab, "--output_dir", tmp_path / "o",
               "--num_workers", 1) == 2
    error = capsys.readouterr().err
    assert "bad_vocab.txt lacks [CLS], [SEP], [MASK]" in error
    assert not list((tmp_path / "o").glob("*"))


def test_bad_files_among_good_ones_are_counted_in_the_summary(corpus_folder, small_vocab, tmp_path, capsys):
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "latin1.txt").write_bytes("The caf\xe9 by the river is open.\n".encode("latin-1"))
    assert run("--input", corpus_folder / "sentences.txt", tmp_path / "empty.txt", tmp_path / "latin1.txt",
               tmp_path / "missing.txt", "--vocab", small_vocab, "--output_dir", tmp_path / "o",
               "--num_workers", 1, "--num_shards", 1) == 0
    summary = capsys.readouterr().out
    for reason in ("empty file", "lines with invalid UTF-8 (bytes replaced)", "missing path"):
        assert reason in summary
    assert read_metadata(tmp_path / "o")["skipped"]["empty file"] == 1


def test_learns_a_vocabulary_when_none_is_given(corpus_folder, tmp_path):
    output = tmp_path / "o"
    assert run("--input", corpus_folder / "sentences.txt", "--vocab_size", 300, "--output_dir", output,
               "--num_workers", 1, "--num_shards", 1) == 0
    metadata = read_metadata(output)
    assert metadata["vocab_file"] == "vocab.txt"  # relative to the folder, which can move
    assert (output / "vocab.txt").read_text().splitlines()[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    (tmp_path / "elsewhere").mkdir()
    moved = output.rename(tmp_path / "elsewhere" / "o")
    assert metadata_vocab_file(moved, read_metadata(moved)) == str(moved / "vocab.txt")


def test_a_sentencepiece_build_keeps_its_model_and_a_wordpiece_rebuild_drops_it(corpus_folder, small_vocab,
                                                                                tmp_path, capsys):
    output = tmp_path / "o"
    assert run("--input", corpus_folder / "sentences.txt", "--vocab_size", 200, "--vocab_model", "sentencepiece",
               "--output_dir", output, "--num_workers", 1, "--num_shards", 1) == 0
    assert "SentencePiece, uncased" in capsys.readouterr().out
    assert read_metadata(output)["tokenizer"] == "sentencepiece" and (output / "spm.model").is_file()
    assert run("--input", corpus_folder / "sentences.txt", "--vocab_size", 300, "--output_dir", output,
               "--num_workers", 1, "--num_shards", 1, "--overwrite") == 0
    assert read_metadata(output)["tokenizer"] == "wordpiece" and not (output / "spm.model").exists()
    assert run("--input", corpus_folder / "sentences.txt", "--vocab", small_vocab, "--vocab_model", "sentencepiece",
               "--output_dir", tmp_path / "p") == 2
    assert "--vocab gives one" in capsys.readouterr().err


def test_embedded_wikipedia_sample_by_default(small_vocab, tmp_path, capsys):
    output = tmp_path / "wiki"
    assert run("--vocab", small_vocab, "--output_dir", output, "--num_workers", 1, "--num_shards", 2) == 0
    metadata = read_metadata(output)
    assert metadata["documents"] > 100 and metadata["examples"] > 3000
    assert "shortened.bz2" in metadata["inputs"][0]
    captured = capsys.readouterr()
    assert "MB/s" in captured.err and "padding fraction" in captured.out


def _interrupt_after(argv, marker: str, tmp_path):
    """Runs a command in its own process group, sends Ctrl-C's SIGINT to the whole group (as a
    terminal does) once `marker` shows in its stderr; returns (status, stderr, seconds to stop)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    # A terminal's command starts with SIGINT's default action. A suite started in the background
    # of a script (`pytest &`) inherits SIGINT ignored, and Python keeps an ignored SIGINT
    # ignored: the command is given the default back, as a terminal would.
    process = subprocess.Popen([sys.executable, "-m", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True, cwd=tmp_path,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen = ""
    while marker not in seen:
        line = process.stderr.readline()
        assert line, f"ended before {marker!r}: {seen[-2000:]}"
        seen += line
    started = time.monotonic()
    os.killpg(process.pid, signal.SIGINT)
    _, rest = process.communicate(timeout=120)
    seconds = time.monotonic() - started
    survivors = True  # every process of the group (workers, helpers) is gone within seconds
    for _ in range(50):
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            survivors = False
            break
        time.sleep(0.1)
    return process.returncode, seen + rest, seconds, survivors


@pytest.mark.slow  # a terminal's Ctrl-C; the builds' all-or-nothing swap is tested in the default suite
def test_ctrl_c_stops_build_data_and_build_vocab_in_seconds_with_one_line(corpus, small_vocab, tmp_path):
    """Before: worker tracebacks, then a hang of minutes at exit, then an atexit traceback."""
    text = corpus.write_prose_file(tmp_path / "big.txt", repeat=3000)
    status, stderr, seconds, survivors = _interrupt_after(
        ["electra_tf.build_data", "--input", str(text), "--vocab", str(small_vocab), "--output_dir", "out",
         "--num_workers", "2", "--max_seq_length", "32"], "documents read", tmp_path)
    assert status == 130 and seconds < 30 and not survivors, stderr[-3000:]
    assert "Traceback" not in stderr and stderr.strip().splitlines()[-1].startswith("Stopped by Ctrl-C: the output")
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())  # nothing partial kept

    status, stderr, seconds, _ = _interrupt_after(
        ["electra_tf.build_vocab", "--input", str(text), "--output", "vocab.txt"], "reading text", tmp_path)
    assert status == 130 and seconds < 30, stderr[-3000:]
    assert "Traceback" not in stderr and "Stopped by Ctrl-C: no vocabulary was written" in stderr
    assert not (tmp_path / "vocab.txt").exists()
