import collections

import pytest

from electra_tf.data.corpus import InputError, Skips
from electra_tf.data.tokenization import ElectraTokenizer
from electra_tf.data.vocabulary_files import SPECIAL_TOKENS, read_vocabulary
from electra_tf.data.vocabulary import VocabularySpec, build_vocabulary, collect_sentences


def test_learns_a_vocabulary_that_tokenizes_its_corpus(corpus, tmp_path):
    text = corpus.write_sentence_file(tmp_path / "corpus.txt", repeat=20)
    output = tmp_path / "out" / "vocab.txt"
    vocabulary = build_vocabulary([str(text)], output, VocabularySpec(size=300))
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
        build_vocabulary([str(tmp_path / "empty.txt")], tmp_path / "v.txt", VocabularySpec(size=300))
    with pytest.raises(InputError, match="no input files"):
        build_vocabulary([str(tmp_path / "missing*.txt")], tmp_path / "v.txt", VocabularySpec(size=300))
    assert not (tmp_path / "v.txt").exists()


def test_a_vocabulary_sample_is_uniform_seeded_and_bounded(corpus, tmp_path):
    from electra_tf.data.corpus import Skips
    from electra_tf.data.vocabulary import collect_sentences

    text = corpus.write_sentence_file(tmp_path / "c.txt", repeat=3)
    everything = collect_sentences([str(text)], Skips())
    sample = {}
    chosen = collect_sentences([str(text)], Skips(), sample_sentences=6, seed=1, sample=sample)
    assert len(chosen) == 6 and set(chosen) <= set(everything)
    assert sample == {"sentences": 6, "of": len(everything), "seed": 1}
    assert collect_sentences([str(text)], Skips(), sample_sentences=6, seed=1) == chosen  # seeded
    assert collect_sentences([str(text)], Skips(), sample_sentences=10 ** 6) == everything  # below the size: all
    # Uniform: over many seeds each sentence is kept about k x (its copies) / n times (algorithm R).
    kept = collections.Counter()
    for seed in range(300):
        kept.update(collect_sentences([str(text)], Skips(), sample_sentences=6, seed=seed))
    for sentence, copies in collections.Counter(everything).items():
        expected = 300 * 6 * copies / len(everything)
        assert 0.5 * expected < kept[sentence] < 1.6 * expected, (sentence, kept[sentence], expected)
