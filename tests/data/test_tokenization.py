import json

import pytest
import tensorflow as tf

from electra_tf.data.tokenization import (
    SPECIAL_TOKENS,
    ElectraTokenizer,
    VocabularyError,
    read_vocabulary,
    vocabulary_fingerprint,
)


def test_learned_vocabulary_starts_with_the_special_tokens(small_vocab):
    tokens = read_vocabulary(small_vocab)
    assert tuple(tokens[:5]) == SPECIAL_TOKENS
    assert all(token.strip() == token and token for token in tokens)
    assert "river" in tokens


def test_uncased_wordpiece_with_accents_stripped(small_vocab):
    tokenizer = ElectraTokenizer(small_vocab)
    ids = tokenizer.tokenize(["The RIVER rises", "thé river"]).to_list()
    assert [tokenizer.id_to_token(i) for i in ids[0]] == ["the", "river", "rises"]
    assert ids[1] == ids[0][:2]
    unknown = tokenizer.tokenize(["ζζζ"]).to_list()[0]
    assert set(unknown) == {tokenizer.unk_id}


def test_bert_layout_vocabulary_works(tmp_path):
    # The standard BERT layout: [PAD] at 0, [unused*], [UNK] [CLS] [SEP] [MASK] at 100-103.
    tokens = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]",
                                                                 "hello", "world", "##s"]
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(tokens) + "\n")
    tokenizer = ElectraTokenizer(path)
    assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id) == (
        0, 100, 101, 102, 103)
    assert tokenizer.tokenize(["Hello worlds"]).to_list() == [[104, 105, 106]]
    assert {0, 100, 101, 102, 103, 50} <= set(tokenizer.special_token_ids)


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


def test_missing_vocabulary_file(tmp_path):
    with pytest.raises(VocabularyError, match="does not exist.*build_vocab"):
        ElectraTokenizer(tmp_path / "nope.txt")


def test_tokenizes_inside_tf_data(small_vocab):
    tokenizer = ElectraTokenizer(small_vocab)
    dataset = tf.data.Dataset.from_tensor_slices(["the river", "bees visit the orchard"]).batch(2)
    ragged = next(iter(dataset.map(tokenizer.tokenize)))
    assert isinstance(ragged, tf.RaggedTensor) and ragged.shape[0] == 2


def test_fingerprint_changes_with_the_vocabulary():
    assert vocabulary_fingerprint(["a", "b"]) != vocabulary_fingerprint(["b", "a"])


def test_settings_travel_beside_the_vocabulary_file(tmp_path):
    from electra_tf.data.tokenization import TokenizerSettings, read_tokenizer_settings, write_vocabulary

    tokens = list(SPECIAL_TOKENS) + ["Apple", "apple", "May", "may", "Café", "cafe"]
    write_vocabulary(tmp_path / "vocab.txt", tokens, TokenizerSettings.cased())
    assert json.loads((tmp_path / "tokenizer_config.json").read_text()) == {
        "do_lower_case": False, "strip_accents": None, "tokenize_chinese_chars": True}
    tokenizer = ElectraTokenizer(tmp_path / "vocab.txt")
    assert tokenizer.settings == TokenizerSettings.cased()
    ids = tokenizer.tokenize(["Apple apple May may Café"]).to_list()[0]
    assert [tokenizer.id_to_token(i) for i in ids] == ["Apple", "apple", "May", "may", "Café"]
    # saved again (as every run folder does), the settings come along
    tokenizer.save(tmp_path / "copy" / "vocab.txt")
    assert read_tokenizer_settings(tmp_path / "copy" / "vocab.txt") == TokenizerSettings.cased()
    # transformers' null strip_accents means "as do_lower_case"
    assert TokenizerSettings.from_huggingface({"do_lower_case": True, "strip_accents": None}) == TokenizerSettings()
    assert TokenizerSettings.from_huggingface({"do_lower_case": True, "strip_accents": False}).describe() == (
        "do_lower_case=True, strip_accents=False, tokenize_chinese_chars=True")


def test_a_vocabulary_without_settings_is_uncased_as_before(small_vocab):
    from electra_tf.data.tokenization import TokenizerSettings, read_tokenizer_settings

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
