"""`python -m electra_tf.build_vocab`: writes a vocabulary, refuses to overwrite or to be tiny."""

from electra_tf import build_vocab
from electra_tf.data.vocabulary_files import read_vocabulary


def test_writes_then_refuses_to_overwrite_unless_told(corpus, tmp_path, capsys):
    text = corpus.write_sentence_file(tmp_path / "corpus.txt", repeat=20)
    output = tmp_path / "vocab.txt"
    assert build_vocab.main(["--input", str(text), "--vocab_size", "300", "--output", str(output)]) == 0
    assert len(read_vocabulary(output)) > 100
    assert build_vocab.main(["--input", str(text), "--output", str(output)]) == 2
    assert "exists; pass --overwrite" in capsys.readouterr().err
    assert build_vocab.main(["--input", str(text), "--vocab_size", "300", "--output", str(output),
                             "--overwrite"]) == 0


def test_bad_input_is_exit_2_with_a_message(tmp_path, capsys):
    assert build_vocab.main(["--vocab_size", "50", "--output", str(tmp_path / "v.txt")]) == 2
    assert "--vocab_size must be at least 100" in capsys.readouterr().err
    assert build_vocab.main(["--input", str(tmp_path / "none*.txt"), "--output", str(tmp_path / "v.txt")]) == 2
    assert "no input files found" in capsys.readouterr().err


def test_a_vocabulary_far_smaller_than_asked_is_explained_and_has_no_bare_suffix_marker(corpus, tmp_path, capsys):
    """Before: 8192 asked, a few hundred written without a word, "##" among them."""
    text = corpus.write_sentence_file(tmp_path / "corpus.txt", repeat=20)
    output = tmp_path / "vocab.txt"
    assert build_vocab.main(["--input", str(text), "--vocab_size", "8192", "--output", str(output)]) == 0
    vocabulary = read_vocabulary(output)
    err = capsys.readouterr().err
    assert f"Wrote {len(vocabulary):,} tokens (asked for 8,192)" in err
    assert "far smaller than asked" in err and f"--vocab_size {len(vocabulary):,} or less" in err
    assert "--with_sample adds the bundled Wikipedia sample" in err
    assert "##" not in vocabulary and any(token.startswith("##") for token in vocabulary)



def test_the_bundled_sample_is_learned_from_beside_ones_own_text(corpus, tmp_path, monkeypatch):
    from electra_tf.data.corpus import embedded_sample_path

    learned = []
    monkeypatch.setattr(build_vocab, "build_vocabulary", lambda inputs, output, spec: learned.append(inputs))
    text = corpus.write_sentence_file(tmp_path / "corpus.txt")
    for argv in (["--input", str(text)], ["--input", str(text), "--with_sample"], []):
        assert build_vocab.main([*argv, "--output", str(tmp_path / "vocab.txt"), "--overwrite"]) == 0
    assert learned == [[str(text)], [str(text), str(embedded_sample_path())], [str(embedded_sample_path())]]


def test_cased_keeps_capitals_and_writes_its_casing_beside_the_vocabulary(corpus, tmp_path, capsys):
    import json

    text = corpus.write_sentence_file(tmp_path / "corpus.txt", repeat=20)
    output = tmp_path / "cased" / "vocab.txt"
    output.parent.mkdir()
    assert build_vocab.main(["--input", str(text), "--vocab_size", "300", "--output", str(output), "--cased"]) == 0
    assert "The" in read_vocabulary(output) and "cased WordPiece vocabulary" in capsys.readouterr().err
    assert json.loads((output.parent / "tokenizer_config.json").read_text())["do_lower_case"] is False
    # another vocabulary in the same folder would take over its casing file: refused unless told
    assert build_vocab.main(["--input", str(text), "--output", str(output.parent / "other.txt")]) == 2
    assert "tokenizer_config.json exists" in capsys.readouterr().err


def test_sentencepiece_writes_its_model_beside_the_pieces_and_refuses_to_overwrite_it(corpus, tmp_path, capsys):
    import json

    from electra_tf.data.tokenization import ElectraTokenizer

    text = corpus.write_sentence_file(tmp_path / "corpus.txt", corpus.DOCUMENTS + corpus.DOCUMENTS_ZH, repeat=20)
    output = tmp_path / "sp" / "vocab.txt"
    output.parent.mkdir()
    assert build_vocab.main(["--input", str(text), "--vocab_size", "250", "--output", str(output),
                             "--vocab_model", "sentencepiece-bpe"]) == 0
    assert "SentencePiece, uncased (bpe) vocabulary" in capsys.readouterr().err
    assert json.loads((output.parent / "tokenizer_config.json").read_text())["tokenizer_kind"] == "sentencepiece"
    assert ElectraTokenizer(output).vocabulary == read_vocabulary(output)  # spm.model's pieces, in id order
    for name in ("vocab.txt", "tokenizer_config.json"):  # only the model is left behind: still not overwritten
        (output.parent / name).unlink()
    assert build_vocab.main(["--input", str(text), "--output", str(output), "--vocab_model", "sentencepiece"]) == 2
    assert "spm.model exists; pass --overwrite" in capsys.readouterr().err
