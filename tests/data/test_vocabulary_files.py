"""Vocabulary files and their settings, without TensorFlow: what a vocabulary must hold, the
settings read beside it (and what a bad settings file says), the uncased default, fingerprints,
a cased vocabulary read uncased refused."""

import pytest

from electra_tf.data.tokenization import ElectraTokenizer
from electra_tf.data.vocabulary_files import (SPECIAL_TOKENS, TokenizerSettings, VocabularyError, read_tokenizer_settings,
                                              read_vocabulary, vocabulary_fingerprint)


def test_learned_vocabulary_starts_with_the_special_tokens(small_vocab):
    tokens = read_vocabulary(small_vocab)
    assert tuple(tokens[:5]) == SPECIAL_TOKENS
    assert all(token.strip() == token and token for token in tokens)
    assert "river" in tokens


@pytest.mark.parametrize("lines, message", [
    (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"], r"lacks \[MASK\]"),
    (["[PAD]", "[CLS]", "[SEP]", "[MASK]"], r"lacks \[UNK\]"),
    (["[PAD]", "[UNK]", "", "[CLS]", "[SEP]", "[MASK]"], "empty line at line 3"),
    (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "a"], "more than once"),
])
def test_bad_vocabularies_are_explained(tmp_path, lines, message):
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(VocabularyError, match=message) as error:
        read_vocabulary(path)
    assert "vocab.txt" in str(error.value)


def test_fingerprint_changes_with_the_vocabulary():
    assert vocabulary_fingerprint(["a", "b"]) != vocabulary_fingerprint(["b", "a"])


def test_a_vocabulary_without_settings_is_uncased_as_before(small_vocab):
    assert not (small_vocab.parent / "tokenizer_config.json").exists() or \
        read_tokenizer_settings(small_vocab) == TokenizerSettings()
    assert ElectraTokenizer(list(read_vocabulary(small_vocab))).settings == TokenizerSettings()


@pytest.mark.parametrize("content, message", [
    ("{not json", "tokenizer_config.json: not valid JSON"),
    ('["do_lower_case"]', "expected a JSON object"),
    ('{"do_lower_case": "no"}', "do_lower_case is 'no'; expected true or false"),
])
def test_bad_settings_files_are_explained(tmp_path, content, message):
    (tmp_path / "vocab.txt").write_text("\n".join(SPECIAL_TOKENS) + "\n")
    (tmp_path / "tokenizer_config.json").write_text(content)
    with pytest.raises(VocabularyError, match=message):
        ElectraTokenizer(tmp_path / "vocab.txt")


def test_a_cased_vocabulary_read_uncased_is_refused(tmp_path):
    tokens = list(SPECIAL_TOKENS) + ["Paris", "London", "the", "of", "New", "York"]
    (tmp_path / "vocab.txt").write_text("\n".join(tokens) + "\n")
    with pytest.raises(VocabularyError, match=r'holds 4 tokens with upper-case letters .*"do_lower_case": false'):
        ElectraTokenizer(tmp_path / "vocab.txt")
