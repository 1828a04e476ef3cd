"""The export formats' registry and what an export reads: each run's folder loads as the model it
serves, each format says which sources it takes, and a refusal names the formats that do."""

import argparse
import importlib.util
from pathlib import Path

import pytest

from electra_tf.serving.exports import (FORMATS, ExportError, ExportOptions, add_export_options, export, exporter,
                                        formats_for, load_source)

RUNS = Path(__file__).parents[1] / "fixtures" / "runs_before_one_config"
# onnx and openvino take these sources where their runtimes are installed (the runtimes extra), and
# say why not elsewhere
RUNTIMES = (["onnx"] if importlib.util.find_spec("onnxruntime") and importlib.util.find_spec("tf2onnx") else []) + (
    ["openvino"] if importlib.util.find_spec("openvino") else [])


def test_the_packages_formats_are_registered_each_with_its_help():
    assert FORMATS.names() == ["huggingface", "keras_hub", "litert", "onnx", "openvino", "saved_model"]
    assert all(cls.help for _, cls in FORMATS.items()) and FORMATS["keras_hub"].takes_target


def test_a_run_folder_of_any_kind_is_the_model_it_serves():
    pretraining = load_source(RUNS / "model")
    assert pretraining.kind == "pretraining" and pretraining.model_dir == RUNS / "model"
    assert type(pretraining.served.model).__name__ == "Discriminator" and pretraining.served.config.max_seq_length == 32
    assert formats_for(pretraining) == ["huggingface", "keras_hub", "litert", *RUNTIMES, "saved_model"]
    for path in (RUNS / "finetuned", RUNS / "finetuned" / "best.keras"):  # a fine-tuning folder means its best model
        tuned = load_source(path)
        assert tuned.kind == "classification" and tuned.served.name == "topics" and tuned.model_dir is None
        assert type(tuned.served.model).__name__ == "ElectraClassifier" and tuned.served.model.label_names
        assert formats_for(tuned) == ["keras_hub", "litert", *RUNTIMES, "saved_model"]
    assert load_source(RUNS / "model" / "backbone").model_dir is None  # an encoder alone: no generator to export


def test_a_format_that_does_not_take_a_source_names_those_that_do(tmp_path):
    tuned = load_source(RUNS / "finetuned")
    with pytest.raises(ExportError, match="--format huggingface does not take the classification run's ElectraClassifier "
                                          f".*This source exports as: keras_hub, litert, {''.join(f'{r}, ' for r in RUNTIMES)}"
                                          "saved_model"):
        export(tuned, "huggingface", ExportOptions(tmp_path, "topics"))
    assert not list(tmp_path.iterdir())


def test_the_export_after_a_run_takes_formats_by_name_and_refuses_an_unknown_one(tmp_path):
    parser = argparse.ArgumentParser()
    add_export_options(parser, "RUN/export")
    assert exporter(parser.parse_args(["--no-export"]), tmp_path, tmp_path / "export", "run") is None
    assert exporter(parser.parse_args([]), tmp_path, tmp_path / "export", "run", default_formats=[]) is None
    with pytest.raises(ExportError, match="--export torchscript: not an export format; formats: huggingface, keras_hub"):
        exporter(parser.parse_args(["--export", "saved_model", "torchscript"]), tmp_path, tmp_path, "run")
    export_run = exporter(parser.parse_args(["--export", "saved_model"]), tmp_path, tmp_path / "export", "run")
    assert export_run(None) == {"export": None, "exports": {}}  # the MLM baseline serves nothing
