"""The HuggingFace export format: which sources it takes (a pre-training run, whose checkpoint
holds the generator, or a plain-head question answerer), and folders written whole."""

from pathlib import Path

import pytest

from electra_tf.interop.convert import HuggingFaceFormat, export_huggingface
from electra_tf.interop.huggingface import ConversionError
from electra_tf.serving.exports import load_source

RUNS = Path(__file__).parents[1] / "fixtures" / "runs_before_one_config"


def test_a_pre_training_run_is_taken_and_a_classifier_refused():
    assert HuggingFaceFormat().refuses(load_source(RUNS / "model")) is None
    assert "pre-training model_dir" in HuggingFaceFormat().refuses(load_source(RUNS / "finetuned"))


def test_the_folders_are_written_whole_and_never_over_an_existing_one(tmp_path):
    folders = export_huggingface(RUNS / "model", tmp_path / "hf")
    assert [f.name for f in folders] == ["discriminator", "generator"]
    assert all((f / "model.safetensors").is_file() and (f / "config.json").is_file() for f in folders)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"]  # no temporary folder left
    with pytest.raises(ConversionError, match="exists; choose another output folder"):
        export_huggingface(RUNS / "model", tmp_path / "hf")
