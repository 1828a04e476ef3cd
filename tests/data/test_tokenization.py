"""ElectraTokenizer, the graph tokenizer: ids of BERT's basic tokenization and WordPiece, the BERT layout of
special tokens, tokenizing inside tf.data, settings that come with the vocabulary."""

import json
import re

import pytest
import tensorflow as tf
import tensorflow_text as tf_text

from electra_tf.data.tokenization import ASCII_WHITE_SPACE, UNICODE_WHITE_SPACE, ElectraTokenizer, whitespace_words
from electra_tf.data.vocabulary_files import SPECIAL_TOKENS, VocabularyError


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


def test_missing_vocabulary_file(tmp_path):
    with pytest.raises(VocabularyError, match="does not exist.*build_vocab"):
        ElectraTokenizer(tmp_path / "nope.txt")


def test_tokenizes_inside_tf_data(small_vocab):
    tokenizer = ElectraTokenizer(small_vocab)
    dataset = tf.data.Dataset.from_tensor_slices(["the river", "bees visit the orchard"]).batch(2)
    ragged = next(iter(dataset.map(tokenizer.tokenize)))
    assert isinstance(ragged, tf.RaggedTensor) and ragged.shape[0] == 2


def test_settings_travel_beside_the_vocabulary_file(tmp_path):
    from electra_tf.data.vocabulary_files import TokenizerSettings, read_tokenizer_settings, write_vocabulary

    tokens = list(SPECIAL_TOKENS) + ["Apple", "apple", "May", "may", "Café", "cafe"]
    write_vocabulary(tmp_path / "vocab.txt", tokens, TokenizerSettings.cased())
    assert json.loads((tmp_path / "tokenizer_config.json").read_text()) == {
        "do_lower_case": False, "strip_accents": None, "tokenize_chinese_chars": True, "basic_tokenization": "bert"}
    tokenizer = ElectraTokenizer(tmp_path / "vocab.txt")
    assert tokenizer.settings == TokenizerSettings.cased()
    ids = tokenizer.tokenize(["Apple apple May may Café"]).to_list()[0]
    assert [tokenizer.id_to_token(i) for i in ids] == ["Apple", "apple", "May", "may", "Café"]
    # saved again (as every run folder does), the settings come along
    tokenizer.save(tmp_path / "copy" / "vocab.txt")
    assert read_tokenizer_settings(tmp_path / "copy" / "vocab.txt") == TokenizerSettings.cased()
    # transformers' null strip_accents means "as do_lower_case"
    assert TokenizerSettings.from_huggingface({"do_lower_case": True, "strip_accents": None},
                                              rule="bert") == TokenizerSettings()
    assert TokenizerSettings.from_huggingface({"do_lower_case": True, "strip_accents": False}).describe() == (
        "do_lower_case=True, strip_accents=False, tokenize_chinese_chars=True, electra_tf_v1 word splitting")




def test_a_taggers_words_are_the_runs_between_unicode_spaces_with_their_bytes():
    # The characters tf-text's WhitespaceTokenizer (ICU's White_Space) splits at, over the BMP.
    characters = [chr(c) for c in range(0x10000) if not 0xD800 <= c < 0xE000]
    split = tf_text.WhitespaceTokenizer().tokenize(tf.constant([f"a{c}b" for c in characters])).row_lengths()
    assert {c for c, n in zip(characters, split.numpy()) if n != 1} == set(UNICODE_WHITE_SPACE)
    texts = ["10\u00a0000\u202fkm", " Paris\u3000\u3000Lyon\u2028", "x\u200by\x00z", "", "\t\u2009 ",
             "caf\u00e9\u2003!", "a\x1cb"]
    for white_space in (UNICODE_WHITE_SPACE, ASCII_WHITE_SPACE):
        words, starts, ends = whitespace_words(tf.constant(texts), white_space)
        for text, row, begin, end in zip(texts, words.to_list(), starts.to_list(), ends.to_list()):
            expected = [w for w in re.split(f"[{white_space}]+", text) if w]
            assert [w.decode() for w in row] == expected, (text, row)
            assert [text.encode()[b:e] for b, e in zip(begin, end)] == row
    assert whitespace_words(tf.constant(["10\u00a0000"]), ASCII_WHITE_SPACE)[0].to_list() == [["10\u00a0000".encode()]]
    # Bytes, not characters: invalid UTF-8 stays inside a word, and a text's bytes never join the next's.
    words, starts, ends = whitespace_words(tf.constant([b"ab\xe2\x80", b"\x80x y"]))
    assert words.to_list() == [[b"ab\xe2\x80"], [b"\x80x", b"y"]] and ends.to_list() == [[4], [2, 4]]
