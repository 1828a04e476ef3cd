"""SentencePiece vocabularies: learned with ELECTRA's special tokens, the kind travelling with the
folder, the same ids as the sentencepiece library in every graph (tf.data, tf.function, eager),
character offsets, whole words, and clear errors for a folder missing its model."""

import shutil
import unicodedata

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.data.sentence_pieces import learn_sentencepiece
from electra_tf.data.token_offsets import tokenize_with_offsets
from electra_tf.data.tokenization import ElectraTokenizer
from electra_tf.data.vocabulary_files import SENTENCEPIECE, SPECIAL_TOKENS, TokenizerSettings, VocabularyError, model_pieces

MIXED = ["河流发源于北部山区，向南流经三个山谷。", "강은 북쪽 언덕에서 시작한다.", "The river rises in the hills.",
         "The library opened in 1902 [MASK] [CLS]", "", "  spaces   between\twords ", "ﬁne Straße", "图书馆 library 도서관"]


@pytest.fixture(scope="module")
def tokenizer(sentencepiece_vocab):
    return ElectraTokenizer(sentencepiece_vocab)


@pytest.mark.parametrize("model_type", ["unigram", "bpe"])
def test_a_learned_model_starts_with_electras_tokens_which_text_never_produces(corpus, model_type):
    sentences = [s for d in corpus.DOCUMENTS + corpus.DOCUMENTS_ZH for s in d] * 10
    model = learn_sentencepiece(sentences, 200, lowercase=False, model_type=model_type)
    pieces = model_pieces(model)
    assert pieces[:5] == list(SPECIAL_TOKENS) and len(pieces) <= 200
    tokenizer = ElectraTokenizer(pieces, TokenizerSettings.sentencepiece(lowercase=False), model)
    ids = tokenizer.tokenize(["[MASK] [CLS] [SEP] The river"]).to_list()[0]
    assert not {tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id} & set(ids)  # typed text is not a control id
    assert "T" in "".join(tokenizer.id_to_token(i) for i in ids)  # cased: "The" keeps its capital


def test_the_kind_travels_with_the_folder_and_ids_equal_the_sentencepiece_library(tokenizer, sentencepiece_vocab):
    import sentencepiece

    assert tokenizer.kind == SENTENCEPIECE and tokenizer.settings.describe() == "SentencePiece, uncased"
    assert {p.name for p in sentencepiece_vocab.parent.iterdir()} >= {"vocab.txt", "spm.model", "tokenizer_config.json"}
    library = sentencepiece.SentencePieceProcessor(model_file=str(sentencepiece_vocab.with_name("spm.model")))
    expected = [library.encode(text) for text in MIXED]
    assert tokenizer.tokenize(MIXED).to_list() == expected
    assert "▁the" in tokenizer.vocabulary and "▁The" not in tokenizer.vocabulary  # uncased: case folded

    # Inside tf.data's map and a tf.function, after other tokenizers came and went (the op's
    # model resource must live with the graph that uses it, not with the eager context).
    ElectraTokenizer(sentencepiece_vocab).tokenize(["x"])
    dataset = tf.data.Dataset.from_tensor_slices(MIXED).batch(4).map(lambda t: tokenizer.tokenize(t).to_tensor())

    @tf.function
    def first(iterator):
        return next(iterator)

    assert first(iter(dataset)).numpy().tolist()[0][:len(expected[0])] == expected[0]
    assert [row for batch in dataset for row in batch.numpy().tolist()][4:] == [
        e + [0] * (len(max(expected[4:], key=len)) - len(e)) for e in expected[4:]]


def test_offsets_cut_each_piece_from_the_original_text(tokenizer):
    ids, starts, ends = (v.to_list() for v in tokenize_with_offsets(tokenizer, MIXED + [b"the \xff river"]))
    texts = MIXED + ["the \ufffd river"]
    assert ids == tokenizer.tokenize(texts).to_list()
    for text, row_ids, row_starts, row_ends in zip(texts, ids, starts, ends):
        assert row_starts == sorted(row_starts) and all(0 <= s <= e <= len(text) for s, e in zip(row_starts, row_ends))
        for i, s, e in zip(row_ids, row_starts, row_ends):
            piece = tokenizer.id_to_token(i).lstrip("▁")
            if piece and i != tokenizer.unk_id and e > s:  # a piece's text, normalised as the model does, holds the piece
                assert piece in unicodedata.normalize("NFKC", text[s:e]).casefold(), (text, piece, text[s:e])
                assert not text[s:e][:1].isspace()
    zh = [MIXED[0][s:e] for s, e in zip(starts[0], ends[0]) if e > s]
    assert "".join(zh) == MIXED[0]  # every character of the Chinese text in exactly one piece


def test_whole_words_start_at_the_word_start_marker(tokenizer):
    from electra_tf.pretraining.masking import mask_tokens

    continues = np.array(tokenizer.word_continuations)
    assert not continues[list(tokenizer.special_token_ids)].any()
    assert all(c == (not t.startswith("▁")) for t, c in zip(tokenizer.vocabulary[5:], continues[5:]))
    ids = tokenizer.tokenize(["the river rises in the northern hills and flows south through three valleys"] * 8)
    row = [tokenizer.cls_id, *ids.to_list()[0], tokenizer.sep_id]
    token_ids = tf.constant([row] * 8)
    out = mask_tokens(token_ids, tf.ones_like(token_ids), seed=[1, 2], mask_prob=0.3, max_predictions=8,
                      mask_token_id=tokenizer.mask_id, special_token_ids=tokenizer.special_token_ids,
                      word_continuations=tf.constant(tokenizer.word_continuations))
    word = np.cumsum(~continues[row])  # a piece's word number
    for positions, weights in zip(out["mask_positions"].numpy(), out["mask_weights"].numpy()):
        chosen = set(positions[weights > 0].tolist())
        assert chosen
        for p in chosen:
            assert {q for q in range(1, len(row) - 1) if word[q] == word[p]} <= chosen


def test_a_preprocessor_keeps_its_model_through_its_config(tokenizer):
    from electra_tf.models.preprocessing import ElectraTextPreprocessor

    preprocessor = ElectraTextPreprocessor(tokenizer, max_seq_length=24)
    again = ElectraTextPreprocessor.from_config(preprocessor.get_config())
    assert again.tokenizer.kind == SENTENCEPIECE
    first, second = preprocessor((MIXED[:2], MIXED[2:4])), again((MIXED[:2], MIXED[2:4]))
    assert first["token_ids"].numpy().tolist() == second["token_ids"].numpy().tolist()
    assert first["token_ids"].numpy()[0, 0] == tokenizer.cls_id


def test_a_folder_without_its_model_or_with_another_models_pieces_is_refused(sentencepiece_vocab, tmp_path):
    folder = tmp_path / "copy"
    shutil.copytree(sentencepiece_vocab.parent, folder)
    (folder / "spm.model").unlink()
    with pytest.raises(VocabularyError, match=r"spm.model is missing.*Copy the vocabulary's whole folder"):
        ElectraTokenizer(folder / "vocab.txt")
    shutil.copy(sentencepiece_vocab.with_name("spm.model"), folder / "spm.model")
    tokens = (folder / "vocab.txt").read_text(encoding="utf-8").splitlines()
    (folder / "vocab.txt").write_text("\n".join(tokens[:-1]) + "\n", encoding="utf-8")
    with pytest.raises(VocabularyError, match="pieces are not the vocabulary's"):
        ElectraTokenizer(folder / "vocab.txt")


def test_too_small_a_vocabulary_for_the_characters_is_a_clear_error():
    sentences = ["".join(chr(0x4E00 + i) for i in range(start, start + 30)) for start in range(0, 600, 30)] * 5
    with pytest.raises(VocabularyError, match="ask for a larger --vocab_size"):
        learn_sentencepiece(sentences, 100)


def test_pre_split_words_carry_their_tags_on_a_piece_with_text(tokenizer):
    """A Chinese word tokenized alone starts with a bare "▁" (running text has no space before it):
    it is dropped, so each word's tag sits on its first piece with text."""
    from electra_tf.models.preprocessing import pack_words

    words = tf.ragged.constant([["河流", "发源", "于", "北部", "山区"]])
    assert tokenizer.tokenize(["河流"]).to_list()[0][0] == tokenizer.bare_word_start_id  # alone: "▁" first
    inputs, labels = pack_words(tokenizer, 24, words, tf.ragged.constant([[0, 1, 2, 3, 4]]))
    ids, labels = inputs["token_ids"].numpy()[0], labels.numpy()[0]
    assert tokenizer.bare_word_start_id not in ids.tolist()
    tagged = [tokenizer.id_to_token(i) for i, label in zip(ids, labels) if label >= 0]
    assert len(tagged) == 5 and all(piece and piece != "▁" for piece in tagged)
    assert "".join(tokenizer.id_to_token(i) for i in ids if i > 4) == "河流发源于北部山区"
