"""keras-hub's own ELECTRA presets read as this package's discriminator: the encoder's outputs are
keras-hub's but for the GELU form, the replaced-token head starts fresh, and what is not such a
preset is refused naming the file."""

import json

import keras_hub
import numpy as np
import pytest

from electra_tf.data.vocabulary_files import SPECIAL_TOKENS
from electra_tf.models.keras_hub_electra import ElectraBackbonePreset
from electra_tf.utils.errors import PretrainedError

VOCABULARY = [*SPECIAL_TOKENS, "the", "river", "hill", "##s", "rises"]


def preset(folder):
    keras_hub.models.ElectraBackbone(vocab_size=len(VOCABULARY), num_layers=1, num_heads=2, hidden_dim=8,
                                     embedding_dim=8, intermediate_dim=16, max_sequence_length=32).save_to_preset(
        str(folder))
    keras_hub.models.ElectraTokenizer(vocabulary=VOCABULARY, lowercase=True).save_to_preset(str(folder))
    return folder


def test_a_preset_becomes_a_discriminator_holding_its_encoder(tmp_path):
    folder = preset(tmp_path / "preset")
    discriminator, tokenizer, model = ElectraBackbonePreset(folder).as_discriminator()
    assert (model.hidden_size, model.max_position_embeddings, tokenizer.vocabulary) == (8, 32, VOCABULARY)
    theirs = keras_hub.models.ElectraBackbone.from_preset(str(folder))
    ids = np.array([[2, 5, 6, 3]])
    inputs = {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": np.ones_like(ids)}
    ours = discriminator(inputs)["sequence_output"]
    np.testing.assert_allclose(ours, theirs(inputs)["sequence_output"], atol=2e-3)  # exact GELU against tanh


@pytest.mark.parametrize("damage, message", [
    (lambda folder: (folder / "config.json").write_text(json.dumps({"registered_name": "keras_hub>BertBackbone"})),
     "registered_name is 'keras_hub>BertBackbone'.*another model's backbone"),
    (lambda folder: (folder / "model.weights.h5").unlink(), "has no model.weights.h5"),
    (lambda folder: (folder / "tokenizer.json").unlink(), "tokenizer.json is missing"),
    (lambda folder: (folder / "model.weights.h5").write_bytes(b"broken"), "model.weights.h5: cannot be loaded"),
])
def test_what_is_not_a_whole_electra_preset_is_refused_naming_the_file(tmp_path, damage, message):
    folder = preset(tmp_path / "preset")
    damage(folder)
    with pytest.raises(PretrainedError, match=message):
        ElectraBackbonePreset(folder).as_discriminator()
