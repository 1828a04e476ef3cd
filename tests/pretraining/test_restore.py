"""A run's networks read back from its checkpoints: the model_dir or a checkpoint inside it,
--init_from by variable name with every mismatch named, and what cannot be restored refused."""

import shutil
from pathlib import Path

import pytest

from electra_tf.pretraining.config import PretrainingConfig
from electra_tf.pretraining.pretrainer import ElectraPretrainer
from electra_tf.pretraining.restore import initialize_from, restore_pretrainer, source_model_dir
from electra_tf.utils.errors import PretrainedError

MODEL_DIR = Path(__file__).parents[1] / "fixtures" / "runs_before_one_config" / "model"


def test_a_model_dir_or_a_checkpoint_inside_it_is_a_source(tmp_path):
    assert source_model_dir(MODEL_DIR) == (MODEL_DIR, None)
    assert source_model_dir(MODEL_DIR / "checkpoints" / "ckpt-6") == (MODEL_DIR, str(MODEL_DIR / "checkpoints" / "ckpt-6"))
    with pytest.raises(PretrainedError, match="neither a model_dir .* nor a checkpoint"):
        source_model_dir(tmp_path / "ckpt-3")
    pretrainer, tokenizer, config, found = restore_pretrainer(MODEL_DIR)
    assert found.endswith("ckpt-6") and config.model.hidden_size == 16 and tokenizer.vocabulary_size == 204
    with pytest.raises(PretrainedError, match="checkpoint .*ckpt-9 does not exist"):
        restore_pretrainer(MODEL_DIR, "ckpt-9")


def test_init_from_copies_matching_weights_and_names_what_does_not_match(tmp_path):
    config = PretrainingConfig.load(str(MODEL_DIR / "config.json"))
    same = ElectraPretrainer.from_pretraining_config(config)
    assert initialize_from(same, MODEL_DIR).endswith("ckpt-6")
    wider = ElectraPretrainer.from_pretraining_config(config.replace(intermediate_size=48))
    with pytest.raises(PretrainedError, match="the sizes do not match this run's config \\(shape differs: .*"
                                              "intermediate_dense"):
        initialize_from(wider, MODEL_DIR)
    empty = tmp_path / "model"
    shutil.copytree(MODEL_DIR, empty, ignore=shutil.ignore_patterns("ckpt-*", "checkpoint"))
    with pytest.raises(PretrainedError, match="holds no checkpoint"):
        restore_pretrainer(empty)
