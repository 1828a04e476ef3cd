import pytest

from electra_tf.data.corpus import InputError, Skips
from electra_tf.data.tokenization import SPECIAL_TOKENS, ElectraTokenizer, read_vocabulary
from electra_tf.data.vocabulary import build_vocabulary, collect_sentences


def test_learns_a_vocabulary_that_tokenizes_its_corpus(corpus, tmp_path):
    text = corpus.write_sentence_file(tmp_path / "corpus.txt", repeat=20)
    output = tmp_path / "out" / "vocab.txt"
    vocabulary = build_vocabulary([str(text)], 300, output)
    assert read_vocabulary(output) == vocabulary
    assert tuple(vocabulary[:len(SPECIAL_TOKENS)]) == SPECIAL_TOKENS and len(vocabulary) <= 300
    tokenizer = ElectraTokenizer(output)
    ids = tokenizer.tokenize(["the river rises"])
    assert tokenizer.unk_id not in list(ids[0].numpy())


def test_max_documents_and_no_text(corpus, tmp_path):
    text = corpus.write_sentence_file(tmp_path / "corpus.txt")
    first = collect_sentences([str(text)], Skips(), max_documents=1)
    everything = collect_sentences([str(text)], Skips())
    assert first[0] == corpus.DOCUMENTS[0][0] and first == everything[:len(first)]
    assert corpus.DOCUMENTS[1][0] not in first and corpus.DOCUMENTS[1][0] in everything
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(InputError, match="no text found"):
        build_vocabulary([str(tmp_path / "empty.txt")], 300, tmp_path / "v.txt")
    with pytest.raises(InputError, match="no input files"):
        build_vocabulary([str(tmp_path / "missing*.txt")], 300, tmp_path / "v.txt")
    assert not (tmp_path / "v.txt").exists()
