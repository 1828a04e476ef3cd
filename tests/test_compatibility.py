"""Run folders written by an earlier version (tests/fixtures/runs_before_one_config: a
pre-training model_dir whose backbone folder is of the earlier layout, and a fine-tuning folder
whose config.json held only the model) still resume, fine-tune, evaluate and export, and their
exports answer as the earlier version's did."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401

from electra_tf import export, finetune, pretrain

FIXTURE = Path(__file__).parent / "fixtures" / "runs_before_one_config"
EXPECTED = json.loads((FIXTURE / "expected_outputs.json").read_text())


@pytest.fixture
def runs(tmp_path):
    shutil.copytree(FIXTURE, tmp_path / "runs")
    return tmp_path / "runs"


def served(version_dir: Path, texts: list, key: str) -> np.ndarray:
    signature = tf.saved_model.load(str(version_dir)).signatures["serving_default"]
    return signature(text=tf.constant(texts))[key].numpy()


def test_the_earlier_exports_answers_are_kept_to_the_last_digit(runs):
    discriminator, classifier = EXPECTED["discriminator"], EXPECTED["classifier"]
    assert export.main(["--model_dir", str(runs / "model"), "--export_dir", str(runs / "x")]) == 0
    np.testing.assert_array_equal(served(runs / "x" / "model" / "1", discriminator["texts"], "replaced_probability"),
                                  np.array(discriminator["replaced_probability"], np.float32))
    # The fine-tuning folder means its best model (named after its task, as its run exported it).
    assert export.main(["--model_dir", str(runs / "finetuned"), "--export_dir", str(runs / "y")]) == 0
    np.testing.assert_array_equal(served(runs / "y" / "topics" / "1", classifier["texts"], "probabilities"),
                                  np.array(classifier["probabilities"], np.float32))


def test_an_earlier_fine_tuned_model_is_evaluated_without_training(runs, capsys):
    assert finetune.main(["--eval_only", "--pretrained", str(runs / "finetuned"), "--eval", str(runs / "topics.csv"),
                          "--output_dir", str(runs / "evaluated")]) == 0
    summary = json.loads((runs / "evaluated" / "metrics.json").read_text())
    earlier = json.loads((runs / "finetuned" / "metrics.json").read_text())
    assert summary["evaluation_only"] and summary["kind"] == "classification"  # found from the model's class
    assert summary["eval"] == pytest.approx(earlier["eval"], abs=1e-6)  # the same model on the same file
    assert "evaluating only: no training step" in capsys.readouterr().out


def test_an_earlier_model_dir_resumes_and_writes_a_backbone_of_this_version(runs, corpus, tmp_path):
    """(Its earlier backbone reads as it was written: the export above computes from it.)"""
    text = corpus.write_sentence_file(tmp_path / "corpus.txt", repeat=30)
    assert pretrain.main(["--data", str(text), "--model_dir", str(runs / "model"), "--steps", "8", "--log_every", "2",
                          "--eval_batches", "1", "--no-export"]) == 0
    config = json.loads((runs / "model" / "config.json").read_text())
    assert config["run"]["num_train_steps"] == 8 and config["trainer"]["log_every"] == 2
    assert json.loads((runs / "model" / "backbone" / "config.json").read_text())["registered_name"] == \
        "electra_tf>DiscriminatorBackbone"  # the backbone the extended run wrote is of this version's layout
