"""The one tokenizer, in-graph: WordPiece (tf-text's FastWordpiece) or SentencePiece. Its
vocabulary files and settings are read and written by `vocabulary_files.py`, without TensorFlow.

Data building, pre-training, fine-tuning and the exported serving graph all tokenize with
`ElectraTokenizer`, so ids can never drift between stages. A vocabulary is one of two kinds,
and the kind travels with it (`tokenizer_config.json`'s `tokenizer_kind`):

- WordPiece (the default, and every official ELECTRA model's). The tokenizer splits text into
  words as BERT's basic tokenizer does, then cuts words into pieces with tf-text's WordPiece; and
  it knows the ids of the special tokens ELECTRA needs. How it splits words is the vocabulary's
  `basic_tokenization` (`TokenizerSettings.rule`):

  - "bert" (BERT_RULE), every vocabulary made now: tf-text's `FastBertNormalizer` and
    `FastWordpieceTokenizer` with its own BERT pre-tokenization, the two ops a LiteRT file runs
    too: every Unicode space (category Z) and ASCII whitespace separates words, format characters
    are dropped, every ASCII and Unicode punctuation character and CJK ideograph is a word of its
    own; uncased, accents are stripped. On real English, Chinese, Korean and French text it gives
    the ids of `tokenizers`' BertNormalizer + BertPreTokenizer + WordPiece (transformers' fast
    BERT tokenizer) but for these classes (tests/data/test_bert_tokenization.py; counts in
    docs/results.md, "The tokenizer inside"):
    uncased, case folding is Unicode's NFKC_Casefold, not `str.lower()`: compatibility
    characters become their plain forms ("…" three full stops, "ﬁ" "fi", full-width letters
    and punctuation ASCII, "①" "1", "ß" "ss"), which touches most Chinese and Japanese text
    (full-width punctuation); a control character (NUL, U+0085, ...) separates words where BERT
    drops it, and so does a format character (zero-width space, soft hyphen) in a cased
    vocabulary; private-use and unassigned code points and U+FFFD stay in their word.
  - "electra_tf_v1" (V1_RULE), what a vocabulary written without the key was trained with, and
    keeps: regular expressions (`pretokenize`, keras-hub's `WordPieceTokenizer`'s patterns and
    ids) that split on ASCII whitespace only (a word with a no-break, thin or ideographic space
    inside is one [UNK]), split at control and format characters, and case-fold each word
    after splitting. A vocabulary opts in to BERT_RULE by `"basic_tokenization": "bert"` in its
    tokenizer_config.json; its ids change on the texts above, so a model trained on V1_RULE ids
    wants pre-training data rebuilt and training continued (docs/data.md).

- SentencePiece (`vocab_model` sentencepiece: unigram or BPE, for languages that WordPiece over
  whitespace-split words serves poorly). The model file `spm.model` sits beside `vocab.txt`
  (its pieces, one per line, in id order) and runs through tf-text's `SentencepieceTokenizer`,
  whose op holds the model as a constant: an export stays self-contained. The special tokens
  are the model's first pieces ([PAD] [UNK] as pad and unknown, [CLS] [SEP] [MASK] as control
  symbols, which text never produces), so "[MASK]" typed in text is not the mask id, as with
  WordPiece. Normalisation is the model's own (NFKC; NFKC with case folding when uncased).
  `sentence_pieces.py` learns such models.

Any BERT-style `vocab.txt` works (one token per line, e.g. the standard 30522-entry uncased
vocabulary), as long as it holds [PAD] [UNK] [CLS] [SEP] [MASK]; `learn_vocabulary` makes one
from text with keras-hub's WordPiece trainer.

How text is normalised before WordPiece (`TokenizerSettings`: lower-casing, accent stripping,
CJK splitting) belongs to the vocabulary, so it travels with it: beside every `vocab.txt`
this package writes a `tokenizer_config.json` with transformers' keys (`do_lower_case`,
`strip_accents`, `tokenize_chinese_chars`, and `basic_tokenization`), which is also what a
HuggingFace folder holds. A `vocab.txt` without one is uncased and read with V1_RULE, as this
package wrote such files before; put `{"basic_tokenization": "bert"}` beside an official
BERT or ELECTRA `vocab.txt` to read it as BERT does (`convert` writes that for the models it
converts).

Both rules read a NUL byte as a control character: tf-text's `regex_split` ends a text at its
first NUL, so V1_RULE makes it a space first (`normalize`).
"""

from __future__ import annotations

import functools
from pathlib import Path

import keras_hub
import tensorflow as tf
import tensorflow_text as tf_text

from electra_tf.data.vocabulary_files import (BERT_RULE, SENTENCEPIECE, SPECIAL_TOKENS, SUFFIX_INDICATOR, WORD_START,
                                              TokenizerSettings, VocabularyError, check_casing, check_model_pieces,
                                              read_sentencepiece_model, read_tokenizer_settings, read_vocabulary,
                                              vocabulary_fingerprint, write_vocabulary)

# V1_RULE, BERT's basic tokenizer as regular expressions (RE2, as tf-text reads them):
# ASCII whitespace (RE2's `\s`) and control/format characters separate words and are dropped;
# ASCII and Unicode punctuation and CJK ideographs are words of their own. Other Unicode spaces
# (no-break, thin, ideographic) stay inside words.
WHITESPACE_PATTERN = r"\s|\p{Cc}|\p{Cf}"
PUNCTUATION_PATTERN = r"[!-/]|[:-@]|[\[-`]|[{-~]|[\p{P}]"
CJK_PATTERN = (r"[\x{4E00}-\x{9FFF}]|[\x{3400}-\x{4DBF}]|[\x{20000}-\x{2A6DF}]|[\x{2A700}-\x{2B73F}]"
               r"|[\x{2B740}-\x{2B81F}]|[\x{2B820}-\x{2CEAF}]|[\x{F900}-\x{FAFF}]|[\x{2F800}-\x{2FA1F}]")
# tf-text's regex_split ends a text at its first NUL byte; V1_RULE splits words at a NUL (a
# control character), which a space before splitting does without that.
NUL_PATTERN = r"\x00"

# A tagger's words: runs between the characters of Unicode's White_Space property under
# BERT_RULE (where its tokenizer splits too), between ASCII whitespace under V1_RULE.
UNICODE_WHITE_SPACE = ("\t\n\v\f\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B)))
                       + "\u2028\u2029\u202f\u205f\u3000")
ASCII_WHITE_SPACE = "\t\n\v\f\r "


def whitespace_words(text, white_space: str = UNICODE_WHITE_SPACE):
    """A batch of strings -> (words, starts, ends), ragged [batch, (words)]: the runs of
    characters other than `white_space` and their byte offsets in the text, found over the texts'
    bytes with ops LiteRT has kernels for, so the SavedModel and the LiteRT file find the same
    words (tf-text's WhitespaceTokenizer ends a word before a multi-byte space at that space's
    last byte, and `regex_split` ends a text at a NUL). Invalid UTF-8 bytes are word bytes."""
    splitter = tf_text.ByteSplitter()
    split = splitter.split(text)  # ragged uint8 [batch, (bytes)]
    values, rows = tf.cast(split.flat_values, tf.int32), tf.cast(split.value_rowids(), tf.int32)
    count = tf.shape(values)[0]

    def ahead(flat, by: int, fill):  # flat[i + by], `fill` past the end
        return tf.concat([flat, tf.fill([by], fill)], 0)[by:] if by else flat

    def behind(flat, by: int, fill):  # flat[i - by], `fill` before the start
        return tf.concat([tf.fill([by], fill), flat], 0)[:count]

    # [position of a character's j-th byte] in the same text: 3 bytes cover every space here.
    nexts = [tf.where(ahead(rows, j, -1) == rows, ahead(values, j, -1), -1) for j in range(3)]
    space = tf.zeros_like(values, tf.bool)
    for character in white_space:
        encoded = character.encode("utf-8")
        starts_here = functools.reduce(tf.logical_and, [nexts[j] == byte for j, byte in enumerate(encoded)])
        for j in range(len(encoded)):  # the character's every byte is space
            space |= behind(starts_here, j, False)
    word = ~space
    starts = word & (behind(space, 1, True) | (behind(rows, 1, -1) != rows))
    ends = word & (ahead(space, 1, True) | (ahead(rows, 1, -1) != rows))  # a word's last byte
    row_starts = tf.gather(tf.cast(split.row_splits, tf.int32), rows)
    word_splits = tf.gather(tf.concat([[0], tf.cumsum(tf.cast(starts, tf.int32))], 0), split.row_splits)

    def offsets(flags, plus: int):
        positions = tf.cast(tf.where(flags)[:, 0], tf.int32)
        relative = positions - tf.gather(row_starts, positions) + plus
        return tf.RaggedTensor.from_row_splits(relative, tf.cast(word_splits, tf.int64), validate=False)

    word_starts, word_ends = offsets(starts, 0), offsets(ends, 1)
    return splitter.split_by_offsets(text, word_starts, word_ends), word_starts, word_ends


def split_patterns(split_cjk: bool) -> tuple[str, str]:
    """(delimiters, delimiters kept as words) for `tensorflow_text.regex_split` (V1_RULE)."""
    if split_cjk:
        return (f"{WHITESPACE_PATTERN}|{PUNCTUATION_PATTERN}|{CJK_PATTERN}",
                f"{PUNCTUATION_PATTERN}|{CJK_PATTERN}")
    return f"{WHITESPACE_PATTERN}|{PUNCTUATION_PATTERN}", PUNCTUATION_PATTERN


def normalize(texts, settings: "TokenizerSettings"):
    """What V1_RULE does to text before splitting: a NUL made a space, CJK ideographs padded with
    spaces, then NFD and accent marks (Unicode Mn) removed, as `settings` say."""
    texts = tf.strings.regex_replace(texts, NUL_PATTERN, " ")
    if settings.split_cjk:
        texts = tf.strings.regex_replace(texts, CJK_PATTERN, r" \0 ")
    if settings.strip_accents:
        texts = tf.strings.regex_replace(tf_text.normalize_utf8(texts, "NFD"), r"\p{Mn}", "")
    return texts


def pretokenize(texts, settings: "TokenizerSettings"):
    """V1_RULE: a batch of strings -> ragged words [batch, words]: normalised, split, case folded."""
    split, keep = split_patterns(settings.split_cjk)
    words = tf_text.regex_split(normalize(texts, settings), split, keep)
    return tf_text.case_fold_utf8(words) if settings.lowercase else words


def bert_wordpiece(vocabulary: list[str], settings: "TokenizerSettings"):
    """BERT_RULE's kernels over `vocabulary`: (FastBertNormalizer, FastWordpieceTokenizer with
    its own BERT word splitting), raw text to pieces in two ops, the same ops a LiteRT file runs.
    A token holding whitespace (a learned vocabulary can have "## ") is never produced where words
    are split on whitespace first; the tokenizer's own splitting would match it across a space,
    so such a token keeps its id under a name no text has."""
    normalizer = tf_text.FastBertNormalizer(lower_case_nfd_strip_accents=settings.lowercase)
    reachable = [f"[unreachable {i}]" if any(c.isspace() for c in token) else token
                 for i, token in enumerate(vocabulary)]
    wordpiece = tf_text.FastWordpieceTokenizer(
        vocab=reachable, token_out_type=tf.int32, suffix_indicator=SUFFIX_INDICATOR, unknown_token="[UNK]",
        no_pretokenization=False, support_detokenization=False)
    return normalizer, wordpiece


def rows_to_values(row_values, ragged):
    """Each value of the ragged tensor `ragged` paired with its row's entry of `row_values` (one
    per row), flat: what `row_values[:, tf.newaxis]` broadcast against `ragged` holds. Gathered
    on flat values because broadcasting a dense tensor against a ragged one traces shape checks
    at every op, which were most of the tokenization and packing graphs (smaller graphs trace
    faster in every tf.data pipeline and serving signature).

    >>> import tensorflow as tf
    >>> rows_to_values(tf.constant([10, 20]), tf.ragged.constant([[1, 2, 3], [4]])).numpy().tolist()
    [10, 10, 10, 20]
    """
    return tf.gather(row_values, ragged.value_rowids())


class ElectraTokenizer:
    """Text -> WordPiece or SentencePiece ids, in graph (tf.data, tf.function, SavedModel) or eagerly.

    A vocabulary file brings its settings (`tokenizer_config.json` beside it; uncased WordPiece
    without one) and, for SentencePiece, its model (`spm.model` beside it); a list of tokens is
    uncased WordPiece unless `settings` says otherwise (SentencePiece also needs
    `sentencepiece_model`, the serialized model whose pieces the list is). `wordpiece` is the
    tf-text `FastWordpieceTokenizer` over the vocabulary (pretokenized words in, pieces out),
    None for SentencePiece, whose tf-text op `sentencepiece_op()` makes inside each graph.

    Example:
    >>> tokenizer = ElectraTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    ...                               "the", "qu", "##ick", "fox", "The"])
    >>> tokenizer.tokenize(["The QUICK fox!"]).to_list()
    [[5, 6, 7, 8, 1]]
    >>> cased = ElectraTokenizer(tokenizer.vocabulary, TokenizerSettings.cased())
    >>> cased.tokenize(["The QUICK fox!"]).to_list()
    [[9, 1, 8, 1]]
    >>> tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id
    (2, 3, 4)
    >>> tokenizer.word_continuations[5:8]  # "the", "qu", "##ick"
    [False, False, True]
    """

    def __init__(self, vocabulary: list[str] | str | Path, settings: TokenizerSettings | None = None,
                 sentencepiece_model: bytes | None = None):
        if isinstance(vocabulary, (str, Path)):
            self.vocabulary_path = str(vocabulary)
            settings = settings or read_tokenizer_settings(vocabulary)
            if settings.kind == SENTENCEPIECE and sentencepiece_model is None:
                sentencepiece_model = read_sentencepiece_model(vocabulary)
            vocabulary = read_vocabulary(vocabulary)
            check_casing(vocabulary, settings, f"vocabulary {self.vocabulary_path}")
        else:
            self.vocabulary_path = None
            missing = [token for token in SPECIAL_TOKENS if token not in vocabulary]
            if missing:
                raise VocabularyError(f"vocabulary lacks {', '.join(missing)}.")
        self.settings = settings or TokenizerSettings()
        self.vocabulary = list(vocabulary)
        self.fingerprint = vocabulary_fingerprint(self.vocabulary)
        index = {token: i for i, token in enumerate(self.vocabulary)}
        self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (
            index[token] for token in SPECIAL_TOKENS)
        self.special_token_ids = tuple(sorted(
            i for token, i in index.items() if token.startswith("[") and token.endswith("]")))

        self.wordpiece = self.sentencepiece_model = self.normalizer = None
        # SentencePiece's bare word start "▁", a piece of its own before text not separated by a
        # space (`tokenize_words` drops it from pre-split words); None for WordPiece.
        self.bare_word_start_id = index.get(WORD_START) if self.settings.kind == SENTENCEPIECE else None
        if self.settings.kind == SENTENCEPIECE:
            if sentencepiece_model is None:
                raise VocabularyError("a SentencePiece tokenizer needs its model (sentencepiece_model).")
            check_model_pieces(sentencepiece_model, self.vocabulary, self.vocabulary_path or "the vocabulary")
            self.sentencepiece_model = bytes(sentencepiece_model)
        elif self.settings.rule == BERT_RULE:
            self.normalizer, self.wordpiece = bert_wordpiece(self.vocabulary, self.settings)
        else:
            self.wordpiece = tf_text.FastWordpieceTokenizer(
                vocab=self.vocabulary, token_out_type=tf.int32, suffix_indicator=SUFFIX_INDICATOR,
                unknown_token="[UNK]", no_pretokenization=True, support_detokenization=True)
        self._tokenize = tf.function(self._tokenize_in_graph, input_signature=[tf.TensorSpec([None], tf.string)],
                                     autograph=False)

    @property
    def vocabulary_size(self) -> int:
        return len(self.vocabulary)

    @property
    def word_white_space(self) -> str:
        """The characters between a tagger's words in served text (`whitespace_words`): every
        Unicode space under BERT_RULE, where its tokenizer splits too; ASCII whitespace for
        V1_RULE and SentencePiece vocabularies, as their served taggers always split."""
        return UNICODE_WHITE_SPACE if self.normalizer is not None else ASCII_WHITE_SPACE

    def sentencepiece_op(self):
        """tf-text's `SentencepieceTokenizer` over this vocabulary's model, made in the graph being
        traced (tf.data's map, a tf.function, a serving signature). Its op keeps the model in a
        resource owned by the op's kernel: made eagerly, that resource lives in the eager
        context, where tf.data functions and a reconfigured runtime lose it ("Resource
        _0_SentencepieceOp does not exist"); made in the graph, it lives with the graph's
        function, and an export holds it without tracking anything."""
        if tf.executing_eagerly():
            raise RuntimeError("sentencepiece_op() is for graphs: call it inside a tf.function.")
        return tf_text.SentencepieceTokenizer(model=self.sentencepiece_model, out_type=tf.int32)

    @property
    def kind(self) -> str:
        """"wordpiece" or "sentencepiece"."""
        return self.settings.kind

    def _tokenize_in_graph(self, texts):
        if self.sentencepiece_model is not None:
            return self.sentencepiece_op().tokenize(texts)
        if self.normalizer is not None:
            return self.wordpiece.tokenize(self.normalizer.normalize(texts))
        return self.wordpiece.tokenize(pretokenize(texts, self.settings)).merge_dims(-2, -1)

    def tokenize(self, texts):
        """A batch of strings -> a ragged int32 [batch, None] tensor of ids (no [CLS]/[SEP])."""
        return self._tokenize(tf.convert_to_tensor(texts, tf.string))

    def tokenize_words(self, words):
        """Pre-split words (string [n]) -> ragged int32 [n, None] pieces, each word tokenized on its
        own. SentencePiece starts a lone word with its word start; where running text would not
        (a Chinese word, which no space precedes) that is a bare "▁" piece, dropped here, so a
        word's first piece has text and its pieces are those of running text."""
        pieces = tf.cast(self.tokenize(words), tf.int32)
        if self.bare_word_start_id is None:
            return pieces
        lengths = pieces.row_lengths()
        first = tf.equal(tf.ragged.range(lengths).flat_values, 0)
        bare = first & tf.equal(pieces.flat_values, self.bare_word_start_id) & rows_to_values(lengths > 1, pieces)
        return tf.ragged.boolean_mask(pieces, pieces.with_flat_values(~bare))

    @property
    def word_continuations(self) -> list[bool]:
        """Per vocabulary entry, whether it continues the word before it: what whole-word
        masking groups pieces into words by. WordPiece: a "##" piece. SentencePiece: a piece
        without the word-start marker "▁" (special tokens start words). SentencePiece's words are
        runs between spaces, so in text written without spaces a word is a whole clause."""
        if self.kind == SENTENCEPIECE:
            special = set(self.special_token_ids)
            return [not token.startswith(WORD_START) and i not in special for i, token in enumerate(self.vocabulary)]
        return [token.startswith(SUFFIX_INDICATOR) for token in self.vocabulary]

    def id_to_token(self, token_id: int) -> str:
        return self.vocabulary[token_id]

    def save(self, vocab_path: str | Path) -> None:
        """Writes `vocab.txt` and, beside it, the settings it is read with (and the SentencePiece
        model, for that kind)."""
        write_vocabulary(vocab_path, self.vocabulary, self.settings, self.sentencepiece_model)


def learn_vocabulary(texts, vocabulary_size: int, settings: TokenizerSettings | None = None) -> list[str]:
    """Learns a WordPiece vocabulary (keras-hub's trainer) with the special tokens first,
    normalising the text as `settings` say (uncased by default).

    `texts` is a `tf.data.Dataset` of strings (one sentence or paragraph each).
    """
    settings = settings or TokenizerSettings()
    lowercase, strip_accents = settings.lowercase, settings.strip_accents
    if settings.rule == BERT_RULE:  # the trainer sees words as BERT_RULE's normaliser leaves them
        normalizer = tf_text.FastBertNormalizer(lower_case_nfd_strip_accents=settings.lowercase)
        texts = texts.map(lambda text: tf.reshape(tf.strings.regex_replace(  # any shape of element
            normalizer.normalize(tf.reshape(text, [-1])), r"\p{Z}", " "), tf.shape(text)))
        lowercase = strip_accents = False
    vocabulary = keras_hub.tokenizers.compute_word_piece_vocabulary(
        texts, vocabulary_size, lowercase=lowercase, strip_accents=strip_accents,
        split_on_cjk=settings.split_cjk, reserved_tokens=list(SPECIAL_TOKENS))
    # The trainer can emit whitespace as a token; the tokenizer splits on whitespace, so such
    # a token is never produced, and it would be a blank line in vocab.txt. It also emits the
    # bare suffix marker "##", which no word piece tokenizes to and TensorFlow's WordPiece warns
    # about when a model is exported.
    return [token for token in vocabulary if token.strip() and token != "##"]
