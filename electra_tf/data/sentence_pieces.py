"""Learning a SentencePiece vocabulary: `learn_sentencepiece`.

A model is learned with the `sentencepiece` library (Google's, the trainer keras-hub's
`compute_sentence_piece_proto` wraps; called directly because that wrapper cannot reserve ids
for special tokens). ELECTRA's special tokens take the model's first ids, in the order every
vocabulary here uses: [PAD]=0 (the pad piece), [UNK]=1 (the unknown piece), [CLS]=2, [SEP]=3,
[MASK]=4 (control symbols: ids the model knows but text never produces). No beginning- or
end-of-sentence pieces: [CLS] and [SEP] are added when examples are packed, as for WordPiece.

Example:
>>> sentences = ["the quick brown fox jumps over the lazy dog"] * 50 + ["a quick fox"] * 50
>>> from electra_tf.data.vocabulary_files import model_pieces
>>> model = learn_sentencepiece(sentences, 40, lowercase=True)
>>> model_pieces(model)[:6]
['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', '▁']
"""

from __future__ import annotations

import io

import sentencepiece

from electra_tf.data.vocabulary_files import SPECIAL_TOKENS, VocabularyError

MODEL_TYPES = ("unigram", "bpe")  # sentencepiece's subword algorithms offered by build_vocab / build_data
# Share of the text's characters the model must cover (sentencepiece's default, right for
# scripts with thousands of characters such as Chinese; rarer characters become [UNK]).
CHARACTER_COVERAGE = 0.9995
# Longest sentence (bytes) the trainer reads; its default of 4192 would drop long paragraphs.
MAX_SENTENCE_BYTES = 1 << 16


def learn_sentencepiece(sentences: list[str], vocabulary_size: int, lowercase: bool = True,
                        model_type: str = "unigram", num_threads: int = 2) -> bytes:
    """The serialized model (ModelProto bytes) learned from `sentences`, at most `vocabulary_size`
    pieces with ELECTRA's special tokens first. `lowercase`: the normaliser folds case
    (sentencepiece's nmt_nfkc_cf rule; nmt_nfkc otherwise)."""
    if model_type not in MODEL_TYPES:
        raise VocabularyError(f"SentencePiece model type {model_type!r}; expected one of {', '.join(MODEL_TYPES)}.")
    pad, unknown, *control = SPECIAL_TOKENS
    model = io.BytesIO()
    try:
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences), model_writer=model, vocab_size=vocabulary_size, model_type=model_type,
            pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, pad_piece=pad, unk_piece=unknown, control_symbols=control,
            normalization_rule_name="nmt_nfkc_cf" if lowercase else "nmt_nfkc", character_coverage=CHARACTER_COVERAGE,
            max_sentence_length=MAX_SENTENCE_BYTES, hard_vocab_limit=False, num_threads=num_threads, minloglevel=2)
    except RuntimeError as error:  # e.g. fewer pieces asked for than the text has characters
        raise VocabularyError(f"the SentencePiece trainer refused: {str(error).rstrip('.')}. With a vocabulary size too small for the "
                              "text's characters, ask for a larger --vocab_size.") from None
    return model.getvalue()
