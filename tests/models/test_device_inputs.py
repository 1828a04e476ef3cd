"""A LiteRT file's inputs in dense ops: the tokenizer with LiteRT kernels gives the graph
tokenizer's ids on plain text, and packing a text or a pair gives what the SavedModel packs."""

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.data.tokenization import ElectraTokenizer
from electra_tf.data.vocabulary_files import V1_RULE, TokenizerSettings
from electra_tf.models.device_inputs import LiteRTError, LiteRTTokenizer, pack_pair, pack_text, pack_whitespace_words
from electra_tf.models.preprocessing import pack_texts

TEXTS = ["The river rises in the northern hills.", "", "Bees visit the orchard, every morning when it is warm."]
PAIRS = ["Honey is pale.", "A stone bridge still carries the old road across the valley river in spring.", "x"]


@pytest.fixture(scope="module")
def tokenizer(small_vocab):
    return ElectraTokenizer(small_vocab)


@pytest.mark.parametrize("length", [8, 16, 64])
def test_packing_in_dense_ops_equals_the_saved_models(tokenizer, length):
    lite = LiteRTTokenizer(tokenizer)
    assert lite.tokenize(tf.constant(TEXTS)).to_list() == tokenizer.tokenize(tf.constant(TEXTS)).to_list()
    for ours, theirs in ((pack_text(lite.tokenize(tf.constant(TEXTS)), tokenizer, length),
                          pack_texts(tokenizer, length, TEXTS)),
                         (pack_pair(lite.tokenize(tf.constant(TEXTS)), lite.tokenize(tf.constant(PAIRS)), tokenizer,
                                    length), pack_texts(tokenizer, length, TEXTS, PAIRS))):
        for key in ("token_ids", "segment_ids", "padding_mask"):
            np.testing.assert_array_equal(ours[key], theirs[key], err_msg=key)


def test_whitespace_words_keep_their_first_piece_and_bytes(tokenizer):
    inputs, positions, starts, ends = pack_whitespace_words(tf.constant(["The rivers rise", ""]),
                                                            LiteRTTokenizer(tokenizer), 16)
    assert positions.numpy()[0][:3].tolist()[0] == 1 and starts.numpy()[0][:3].tolist() == [0, 4, 11]
    assert ends.numpy()[0][:3].tolist() == [3, 10, 15] and (positions.numpy()[1] == -1).all()
    assert inputs["padding_mask"].numpy()[1].sum() == 2  # [CLS] [SEP] for the empty text


def test_a_vocabulary_no_litert_kernel_tokenizes_is_refused(tokenizer):
    odd = ElectraTokenizer(tokenizer.vocabulary, TokenizerSettings(lowercase=True, strip_accents=False, rule=V1_RULE))
    with pytest.raises(LiteRTError, match="has no LiteRT kernel"):
        LiteRTTokenizer(odd)
