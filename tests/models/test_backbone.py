"""The backbone artifact: a keras-hub-layout preset folder that reads back whole (weights, the
dropout random-number states, tokenizer, sequence length) in whatever precision the reader runs,
that keras-hub's own loader reads, and the earlier versions' folders still read."""

import json
import shutil
from pathlib import Path

import keras
import keras_hub
import numpy as np
import pytest

from electra_tf.data.tokenization import ElectraTokenizer
from electra_tf.data.vocabulary_files import SPECIAL_TOKENS
from electra_tf.models.backbone import Backbone, BackboneConfig, backbone_hidden_size, backbone_step, is_backbone_folder
from electra_tf.models.config import ModelConfig
from electra_tf.models.encoders import model_weights
from electra_tf.utils.errors import PretrainedError

CONFIG = BackboneConfig(ModelConfig(vocab_size=9, hidden_size=8, num_layers=1, num_heads=2, intermediate_size=16,
                                    embedding_size=8), max_seq_length=16)
LEGACY = Path(__file__).parents[1] / "fixtures" / "runs_before_one_config" / "model" / "backbone"
BATCH = {"token_ids": np.array([[2, 5, 6, 3]]), "segment_ids": np.zeros((1, 4), "int32"),
         "padding_mask": np.ones((1, 4), "int32")}


@pytest.fixture
def backbone(tmp_path):
    (tmp_path / "vocab.txt").write_text("\n".join([*SPECIAL_TOKENS, "river", "hill", "##s", "sea"]) + "\n")
    return Backbone.build(CONFIG, ElectraTokenizer(tmp_path / "vocab.txt"))


def seeds(model):
    return [v.numpy().tolist() for v in model.variables if "seed_generator" in v.path]


def test_a_backbone_folder_reads_back_whole(backbone, tmp_path):
    for variable in [v for v in backbone.discriminator.variables if "seed_generator" in v.path]:
        variable.assign(np.array([7, 0], variable.dtype))  # states a fine-tuning run continues from
    path = backbone.save(tmp_path / "backbone", {"step": 12, "source": "a run"})
    assert sorted(p.name for p in path.iterdir()) == ["assets", "config.json", "metadata.json", "model.weights.h5",
                                                      "tokenizer.json"]
    again = Backbone.load(path)
    assert again.config == CONFIG and again.tokenizer.vocabulary == backbone.tokenizer.vocabulary
    assert seeds(again.discriminator) == [[7, 0]] * len(seeds(backbone.discriminator))
    np.testing.assert_array_equal(again.discriminator(BATCH)["logits"], backbone.discriminator(BATCH)["logits"])
    assert again.metadata()["step"] == backbone_step(path) == 12 and is_backbone_folder(path)
    assert backbone_hidden_size(path) == 8
    # keras-hub's own loader reads it, once electra_tf.models.backbone is imported.
    by_keras_hub = keras_hub.models.Backbone.from_preset(str(path))
    np.testing.assert_array_equal(by_keras_hub(BATCH)["logits"], backbone.discriminator(BATCH)["logits"])
    # Saving again replaces the folder whole.
    assert backbone.save(path).is_dir() and backbone_step(path) is None


def test_a_backbone_saved_in_mixed_precision_reads_in_the_readers_precision(backbone, tmp_path):
    keras.config.set_dtype_policy("mixed_bfloat16")
    mixed = Backbone.build(CONFIG, backbone.tokenizer)
    path = mixed.save(tmp_path / "mixed")
    keras.config.set_dtype_policy("float32")
    read = Backbone.load(path)
    assert read.discriminator.dtype_policy.compute_dtype == "float32"
    assert "dtype" not in json.dumps(json.loads((path / "config.json").read_text()))


def test_the_earlier_versions_folders_read_and_bad_ones_are_named(tmp_path):
    legacy = Backbone.load(LEGACY)  # config.json, model.safetensors, vocab.txt
    assert legacy.config.model.hidden_size == 16 and backbone_step(LEGACY) == 6 and backbone_hidden_size(LEGACY) == 16
    assert [w.path for w in model_weights(legacy.discriminator)][0] == "embeddings/word_embeddings/embeddings"
    broken = tmp_path / "broken"
    shutil.copytree(LEGACY, broken)
    (broken / "model.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(PretrainedError, match="model.safetensors: not a readable safetensors file"):
        Backbone.load(broken)
    (broken / "vocab.txt").unlink()
    with pytest.raises(PretrainedError, match="not a whole backbone folder: vocab.txt is missing"):
        Backbone.load(broken)
