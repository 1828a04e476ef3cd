from pathlib import Path

from electra_tf.data.corpus import (
    MAX_LINE_CHARS,
    Skips,
    embedded_sample_path,
    expand_inputs,
    iter_raw_documents,
    to_sentences,
)


def documents_of(path, skips=None):
    skips = Skips() if skips is None else skips
    return [to_sentences(d, skips) for d in iter_raw_documents(Path(path), skips)], skips


def test_sentence_per_line_files_keep_documents_and_sentences(corpus, tmp_path):
    docs, skips = documents_of(corpus.write_sentence_file(tmp_path / "a.txt"))
    assert len(docs) == len(corpus.DOCUMENTS)
    assert docs[0][0] == corpus.DOCUMENTS[0][0]
    assert not skips


def test_prose_paragraphs_are_split_into_sentences(corpus, tmp_path):
    docs, _ = documents_of(corpus.write_prose_file(tmp_path / "p.txt"))
    # "In spring the water is cold and fast. In late summer ..." is two sentences.
    assert docs[0][2:4] == ["In spring the water is cold and fast.", "In late summer it slows and warms."]


def test_wiki_dump_articles_only_and_markup_removed(corpus, tmp_path):
    dump = corpus.write_wiki_dump(tmp_path / "wiki.xml.bz2", [
        ("River", 0, corpus.ARTICLE, False),
        ("Old name", 0, "#REDIRECT [[River]]", True),
        ("Talk:River", 1, "Some talk.", False),
        ("Empty", 0, corpus.ONLY_MARKUP, False),
    ])
    docs, skips = documents_of(dump)
    text = " ".join(docs[0])
    assert "The river rises in the northern hills and flows south." in docs[0]
    assert "Farmers along its banks grow wheat, barley and apples." in docs[0]
    for residue in ("Infobox", "thumb", "200px", "caption", "Course", "cell", "Category", "A source", "[[", "{{"):
        assert residue not in text
    assert docs[1] == []
    assert skips["wiki pages that are not articles (redirects, talk, ...)"] == 2
    assert skips["wiki pages with no prose after markup removal"] == 1


def test_missing_paths_and_empty_globs_are_counted(corpus, tmp_path):
    good = corpus.write_sentence_file(tmp_path / "good.txt")
    skips = Skips()
    files = expand_inputs([str(good), str(tmp_path / "missing.txt"), str(tmp_path / "*.none"), str(good)], skips)
    assert files == [good]
    assert skips[f"missing path ({tmp_path / 'missing.txt'})"] == 1
    assert skips[f"glob matched nothing ({tmp_path / '*.none'})"] == 1


def test_empty_and_binary_files_are_skipped(tmp_path):
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "blob.bin").write_bytes(bytes(range(256)) * 100)
    skips = Skips()
    assert documents_of(tmp_path / "empty.txt", skips)[0] == []
    assert documents_of(tmp_path / "blob.bin", skips)[0] == []
    assert skips == {"empty file": 1, "binary file": 1}


def test_invalid_utf8_bytes_are_replaced_and_counted(tmp_path):
    path = tmp_path / "mixed.txt"
    path.write_bytes(b"Good text here.\nBad \xff\xfe bytes in this line.\nMore good text.\n")
    docs, skips = documents_of(path)
    assert docs[0][0] == "Good text here." and docs[0][2] == "More good text."
    assert "\ufffd" in docs[0][1]
    assert skips == {"lines with invalid UTF-8 (bytes replaced)": 1}


def test_a_50_mb_line_is_skipped_without_losing_the_rest(tmp_path):
    path = tmp_path / "huge.txt"
    with open(path, "w") as file:
        file.write("A normal first line.\n")
        file.write("word " * (10 * 1024 * 1024) + "\n")  # 50 MiB on one line
        file.write("A normal last line.\n")
    docs, skips = documents_of(path)
    assert docs == [["A normal first line.", "A normal last line."]]
    assert skips == {f"line over {MAX_LINE_CHARS:,} characters": 1}


def test_embedded_sample_is_a_real_wikipedia_dump():
    path = embedded_sample_path()
    skips = Skips()
    first = next(iter_raw_documents(path, skips))
    assert first.kind == "wiki" and first.offset > 0
