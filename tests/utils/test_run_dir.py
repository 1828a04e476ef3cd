"""The run folders' layout is defined once: writers and readers use the same names."""

import json

import pytest

from electra_tf.pretraining.config import PretrainingConfig
from electra_tf.data.tokenization import ElectraTokenizer
from electra_tf.finetuning.pretrained import load_pretrained
from electra_tf.utils.run_dir import ExportMetadata, FinetuneDir, ModelDir, bundled_data_dir
from electra_tf.serving.publish import write_export_metadata


def test_model_dir_layout(tmp_path):
    run = ModelDir(tmp_path / "run")
    assert run.config == tmp_path / "run" / "config.json" and run.vocab == tmp_path / "run" / "vocab.txt"
    assert run.train_logs.parent == run.logs and run.profile_logs.parent == run.logs
    assert not run.has_checkpoints()
    run.checkpoints.mkdir(parents=True)
    run.config.write_text("{}")
    assert run.has_checkpoints()
    assert ModelDir(str(tmp_path / "run")) == run  # strings and paths name the same folder


def test_finetune_dir_and_data_cache(tmp_path):
    out = FinetuneDir(tmp_path)
    assert (out.metrics.name, out.best_model.name, out.logs.name, out.exports.name) == \
        ("metrics.json", "best.keras", "logs", "export")
    assert bundled_data_dir(128).name == "wiki_sample_seq128"


def test_export_metadata_written_and_read_through_one_layout(tmp_path, small_vocab):
    config = PretrainingConfig.load("electra_tiny", {"vocab_size": 400})
    version = tmp_path / "model" / "1"
    write_export_metadata(version, config, ElectraTokenizer(small_vocab), {"text_pair": False})
    metadata = ExportMetadata.of(version)
    assert metadata.path == version / "assets.extra"
    assert PretrainingConfig.load(str(metadata.config)) == config
    assert metadata.vocab.read_text() == small_vocab.read_text()
    assert json.loads(metadata.task.read_text()) == {"text_pair": False}


def test_a_model_dir_without_checkpoints_is_explained(tmp_path):
    run = ModelDir(tmp_path / "run")
    run.path.mkdir()
    run.config.write_text("{}")
    from electra_tf.utils.errors import PretrainedError
    with pytest.raises(PretrainedError, match="no checkpoints/ folder"):
        load_pretrained(run.path)
