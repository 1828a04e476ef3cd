"""The discriminator's served signatures, text in and ids in: the same outputs for the same
input, padding zeroed, ids outside the vocabulary refused by name."""

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.data.tokenization import ElectraTokenizer
from electra_tf.models.config import ModelConfig
from electra_tf.models.encoders import build_discriminator
from electra_tf.models.preprocessing import pack_texts
from electra_tf.models.signatures import IDS_SIGNATURE, TEXT_SIGNATURE


@pytest.fixture(scope="module")
def served(small_vocab):
    tokenizer = ElectraTokenizer(small_vocab)
    model = build_discriminator(ModelConfig(vocab_size=tokenizer.vocabulary_size, hidden_size=16, num_layers=1,
                                            num_heads=2, intermediate_size=32, embedding_size=16))
    return model.serving_endpoints(tokenizer, 12), tokenizer


def test_text_and_ids_give_the_same_outputs_with_padding_zeroed(served):
    endpoints, tokenizer = served
    (text, _), (ids, inputs) = endpoints[TEXT_SIGNATURE], endpoints[IDS_SIGNATURE]
    assert [name for name, _, _ in inputs] == ["token_ids", "segment_ids", "padding_mask"]
    by_text = text(tf.constant(["The river rises.", ""]))
    packed = pack_texts(tokenizer, 12, ["The river rises.", ""])
    by_ids = ids(packed["token_ids"], packed["segment_ids"], packed["padding_mask"])
    np.testing.assert_array_equal(by_text["replaced_probability"], by_ids["replaced_probability"])
    assert (by_text["replaced_probability"].numpy()[1][2:] == 0).all()
    assert by_text["tokens"].numpy()[1].tolist()[:3] == [b"[CLS]", b"[SEP]", b""]
    assert tuple(by_text["hidden_states"].shape) == (2, 12, 16)


def test_ids_outside_the_vocabulary_are_refused_naming_the_range(served):
    endpoints, tokenizer = served
    ids = endpoints[IDS_SIGNATURE][0]
    ones = tf.ones([1, 4], tf.int32)
    with pytest.raises(tf.errors.InvalidArgumentError, match=f"token_ids must be in \\[0, {tokenizer.vocabulary_size}\\)"):
        ids(ones * tokenizer.vocabulary_size, ones * 0, ones)
    longer = ids(tf.ones([1, 30], tf.int32) * 5, tf.zeros([1, 30], tf.int32), tf.ones([1, 30], tf.int32))
    assert tuple(longer["token_ids"].shape) == (1, 12)  # cut to the model's length
