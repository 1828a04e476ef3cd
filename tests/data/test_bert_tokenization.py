"""The tokenizer against BERT's, on real text in several scripts (tests/tokenization_corpus.py):
BERT_RULE gives `tokenizers`' BertNormalizer + BertPreTokenizer + WordPiece ids on every text but
those holding a character of a documented class (docs/data.md, "How text becomes ids"); V1_RULE,
what vocabularies written before BERT_RULE keep, gives keras-hub's WordPieceTokenizer's ids."""

import collections
import unicodedata

import keras_hub
import pytest
import tensorflow as tf

from electra_tf.data.tokenization import ElectraTokenizer
from electra_tf.data.vocabulary_files import SPECIAL_TOKENS, V1_RULE, TokenizerSettings
from tests.tokenization_corpus import multi_script_corpus

tokenizers = pytest.importorskip("tokenizers", reason="the reference: pip install -e \".[test]\" (tokenizers)")


def folded_differently(character: str) -> bool:
    """Uncased BERT_RULE folds case with Unicode's NFKC_Casefold where BERT lower-cases: the
    characters whose compatibility form or case folding differs from their lower case."""
    return unicodedata.normalize("NFKC", character) != character or character.casefold() != character.lower()


def split_not_dropped(character: str, cased: bool) -> bool:
    """BERT drops control characters (and format characters); BERT_RULE's normaliser makes a
    control character, and when cased a format character, a space. Private-use and unassigned
    code points and U+FFFD stay in their word."""
    category = unicodedata.category(character)
    return (category == "Cc" and character not in "\t\n\r") or (cased and category == "Cf") or (
        category in ("Co", "Cn")) or character == "\ufffd"


def explained(text: str, cased: bool) -> bool:
    return any(split_not_dropped(c, cased) or (not cased and folded_differently(c)) for c in text)


@pytest.fixture(scope="module")
def corpus():
    return multi_script_corpus()


@pytest.fixture(scope="module")
def vocabulary(corpus):
    """The corpus' 3,000 most frequent words as BERT's uncased reading splits them, and every
    character they hold, alone and as a continuation: a vocabulary where a word splits into
    pieces only where the two readings split it differently (a learned one would take seconds and
    compare the same splitting)."""
    from tokenizers import normalizers, pre_tokenizers

    normalizer, splitter = normalizers.BertNormalizer(lowercase=True), pre_tokenizers.BertPreTokenizer()
    words = collections.Counter(word for part in corpus.values() for text in part
                                for word, _ in splitter.pre_tokenize_str(normalizer.normalize_str(text)))
    characters = sorted({c for word in words for c in word})
    frequent = [word for word, _ in words.most_common(3000) if len(word) > 1]
    return list(dict.fromkeys([*SPECIAL_TOKENS, *characters, *(f"##{c}" for c in characters), *frequent,
                               "\u2026", "\uff0c", "\u00df"]))


def reference(vocabulary: list[str], cased: bool):
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    tokenizer = Tokenizer(models.WordPiece({t: i for i, t in enumerate(vocabulary)}, unk_token="[UNK]",
                                           max_input_chars_per_word=100))
    tokenizer.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                      strip_accents=not cased, lowercase=not cased)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tokenizer


@pytest.mark.parametrize("cased", [False, True], ids=["uncased", "cased"])
def test_bert_rule_gives_berts_ids_but_for_the_documented_classes(corpus, vocabulary, cased):
    ours = ElectraTokenizer(vocabulary, TokenizerSettings.cased() if cased else TokenizerSettings())
    theirs = reference(vocabulary, cased)
    counts = {}
    for part, texts in corpus.items():
        expected = [encoding.ids for encoding in theirs.encode_batch(texts)]
        got = ours.tokenize(texts).to_list()
        differing = [text for text, a, b in zip(texts, expected, got) if a != b]
        unexplained = [text for text in differing if not explained(text, cased)]
        assert not unexplained, f"{part}: {len(unexplained)} texts differ from BERT's ids outside the documented " \
                                f"classes, e.g. {unexplained[:3]}"
        counts[part] = (len(differing), len(texts))
    english = counts["english (Wikipedia)"]
    assert english[1] >= 300 and english[0] <= english[1] // 50, counts
    print(f"\n{'cased' if cased else 'uncased'}: texts differing from BERT's ids:", counts)


def test_the_characters_that_lost_words_are_split_as_bert_splits(vocabulary):
    ours = ElectraTokenizer(vocabulary)
    theirs = reference(vocabulary, cased=False)
    texts = ["great\u00a0!", "10\u00a0000", "10\u202fkm", "a\u2009b", "Hello\u3000world", "x\u200by",
             "Worked great.\x00 No side effects at all.", "soft\u00adhyphen", "\ufeffmark"]
    expected = [encoding.ids for encoding in theirs.encode_batch(texts)]
    got = ours.tokenize(texts).to_list()
    for text, a, b in zip(texts, expected, got):
        if "\x00" in text:  # BERT drops the NUL ("great." "no" either way); nothing after it is lost
            assert [ours.id_to_token(i) for i in b][-3:] == [ours.id_to_token(i) for i in a][-3:], text
            continue
        assert a == b, (text, [ours.id_to_token(i) for i in b])


def test_v1_rule_is_keras_hubs_word_piece_tokenizer(corpus, vocabulary):
    ours = ElectraTokenizer(vocabulary, TokenizerSettings(rule=V1_RULE))
    theirs = keras_hub.tokenizers.WordPieceTokenizer(vocabulary=vocabulary, lowercase=True, strip_accents=True,
                                                     split_on_cjk=True, dtype="int32")
    texts = [t for part in corpus.values() for t in part]
    expected, got = list(theirs.tokenize(tf.constant(texts))), ours.tokenize(texts).to_list()
    expected = [list(row.numpy()) if hasattr(row, "numpy") else list(row) for row in expected]
    assert [text for text, a, b in zip(texts, expected, got) if a != b] == []
