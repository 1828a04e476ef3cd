"""Exports of a model's ids signature for CPU runtimes faster than TensorFlow's executor at small
batches: OpenVINO and ONNX Runtime (`python -m electra_tf.export --format openvino|onnx`;
`pip install -e ".[runtimes]"`). On the CPUs measured each answers a 128-token request 2-2.8x
faster than the SavedModel in float32 at batch 1 and up to 1.4x at batch 32, faster again in
OpenVINO's bfloat16 or ONNX Runtime's 8-bit weights (docs/results.md, "Serving latency").

    EXPORT_DIR/NAME-openvino/    model.xml, model.bin (OpenVINO's IR)
    EXPORT_DIR/NAME-onnx/        model.onnx (opset 17, converted by tf2onnx)
        and in each: vocab.txt, tokenizer_config.json (spm.model)   the vocabulary the ids come from
                     export.json   inputs, outputs, max_seq_length, label names, what made it

Inputs: token_ids, segment_ids, padding_mask (int32 [batch, max_seq_length]); outputs: the
numeric outputs of the SavedModel's `encode_ids` (probabilities, score, tag_probabilities, ...)
but the ids it echoes. Ids in, not text: neither converter has kernels for the tokenizer's string
ops (with openvino-tokenizers 2026.4.1 the raw-text SavedModel's conversion stops at
`UnicodeTranscode`). The client packs `[CLS] text [SEP]` as the SavedModel does:
tensorflow-text's `FastBertNormalizer` and `FastWordpieceTokenizer` over vocab.txt give a
BERT_RULE vocabulary's ids exactly (docs/serving.md, "OpenVINO and ONNX Runtime"). String outputs
(`label`, `tags`) are left out (OpenVINO's CPU plugin compiles numbers only); the names are in
export.json.

GELU is traced through erf (`models/transformer.gelu_form("erf")`; ONNX has no Erfc). The files
are written to a temporary folder, run on real ids against the model's own answers (equal within
1e-4 in float32, or nothing is written), then the folder takes its name.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import tensorflow as tf

from electra_tf.models.preprocessing import pack_texts
from electra_tf.models.signatures import IDS_SIGNATURE
from electra_tf.models.transformer import gelu_form
from electra_tf.serving.exports import ExportFormat, ExportOptions, ExportSource, register_format
from electra_tf.serving.publish import in_float32
from electra_tf.utils.errors import ElectraError
from electra_tf.utils.files import atomic_folder

CHECK_TEXTS = ["The library opened in 1902 and still lends books.", "", "Café in Zürich, naïve!  北京大学 opened.",
               "river " * 300]
TOLERANCE = 1e-4
ID_NAMES = ("token_ids", "segment_ids", "padding_mask")


class IdsExportError(ElectraError):
    """An export a runtime cannot take or answers differently; nothing was written."""


def numeric_ids_function(model, tokenizer, length: int, gelu: str = "erf"):
    """The model's `encode_ids` endpoint as a tf.function of three int32 [batch, length] inputs
    returning its numeric outputs but the inputs it echoes (token_ids, padding_mask: the client
    has them), traced once with GELU in the form `gelu` (erf for these runtimes; the runtimes
    benchmark traces LiteRT's one op too)."""
    endpoint, _ = model.serving_endpoints(tokenizer, length)[IDS_SIGNATURE]
    spec = [tf.TensorSpec([None, length], tf.int32, name=name) for name in ID_NAMES]

    @tf.function(input_signature=spec, autograph=False)
    def numeric(token_ids, segment_ids, padding_mask):
        outputs = endpoint(token_ids, segment_ids, padding_mask)
        return {name: value for name, value in outputs.items() if value.dtype != tf.string and name not in ID_NAMES}

    with gelu_form(gelu):
        numeric.get_concrete_function()
    return numeric


class IdsExport(ExportFormat):
    """A format of the ids function for one runtime: `convert` writes its files into a folder,
    `answers` runs them; `write` does the rest (module docstring)."""

    runtime = ""  # the runtime's Python package, which the runtimes extra installs
    folder_suffix = ""

    def convert(self, function, folder: Path) -> None:
        raise NotImplementedError

    def answers(self, folder: Path, ids: dict) -> dict:
        raise NotImplementedError

    def refuses(self, source: ExportSource) -> str | None:
        if importlib.util.find_spec(self.runtime) is None:
            return f"{self.runtime} is not installed (pip install -e \".[runtimes]\")"
        model = source.served.model
        if IDS_SIGNATURE not in getattr(model, "serving_endpoints", lambda *_: {})(source.served.tokenizer, 8):
            return "its model serves no ids signature"
        return None

    def write(self, source: ExportSource, options: ExportOptions) -> tuple[Path, list[str]]:
        served = source.served
        folder = self.write_folder(served.model, served.tokenizer, served.config,
                                   options.export_dir / f"{options.name}-{self.folder_suffix}", options.overwrite)
        return folder, [f"Exported {source.describe()} for {self.name} (ids in, float32 weights): {folder.resolve()}",
                        f"  checked: its answers equal the model's within {TOLERANCE}; docs/serving.md, "
                        "\"OpenVINO and ONNX Runtime\""]

    def write_folder(self, model, tokenizer, config, folder: Path, overwrite: bool = False) -> Path:
        if folder.exists() and any(folder.iterdir()) and not overwrite:
            raise IdsExportError(f"{folder} exists; pass --overwrite to replace it, or another --export_dir or --name.")
        model = in_float32(model)
        length = config.max_seq_length
        function = numeric_ids_function(model, tokenizer, length)
        ids = {name: value.numpy() for name, value in pack_texts(tokenizer, length, CHECK_TEXTS).items()}
        expected = {name: value.numpy() for name, value in function(**ids).items()}
        with atomic_folder(folder) as write:
            self.convert(function, write.temporary)
            _check(self.name, self.answers(write.temporary, ids), expected)
            tokenizer.save(write.temporary / "vocab.txt")
            (write.temporary / "export.json").write_text(json.dumps({
                "inputs": {name: ["batch", length] for name in ids}, "outputs": sorted(expected),
                "max_seq_length": length, "label_names": list(getattr(model, "label_names", None) or []),
                "tokenizer": tokenizer.settings.describe(), "runtime": self.name}, indent=2) + "\n", encoding="utf-8")
        return folder


def _check(runtime: str, answers: dict, expected: dict) -> None:
    for name, value in expected.items():
        found = answers.get(name)
        if found is None or found.shape != value.shape:
            raise IdsExportError(f"{runtime} gives no {name} of shape {value.shape}; nothing was written.")
        if not np.allclose(found, value, atol=TOLERANCE):
            raise IdsExportError(f"{runtime} answers {name} up to {np.abs(found - value).max():.2g} away from the "
                                 "model; nothing was written.")


@register_format("openvino")
class OpenVINOFormat(IdsExport):
    help = "OpenVINO IR of the ids signature (model.xml, model.bin, the vocabulary), for Intel's CPU runtime"
    runtime, folder_suffix = "openvino", "openvino"

    def convert(self, function, folder: Path) -> None:
        import openvino

        openvino.save_model(openvino.convert_model(function.get_concrete_function()), str(folder / "model.xml"),
                            compress_to_fp16=False)

    def answers(self, folder: Path, ids: dict) -> dict:
        import openvino

        compiled = openvino.Core().compile_model(str(folder / "model.xml"), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        results = compiled.create_infer_request().infer({port.get_any_name(): ids[port.get_any_name()]
                                                        for port in compiled.inputs})
        return {port.get_any_name(): value for port, value in results.items()}


@register_format("onnx")
class ONNXFormat(IdsExport):
    help = "ONNX (opset 17) of the ids signature (model.onnx, the vocabulary), for ONNX Runtime"
    runtime, folder_suffix = "onnxruntime", "onnx"

    def refuses(self, source: ExportSource) -> str | None:
        if importlib.util.find_spec("tf2onnx") is None:
            return "tf2onnx is not installed (pip install -e \".[runtimes]\")"
        return super().refuses(source)

    def convert(self, function, folder: Path) -> None:
        import tf2onnx

        try:
            tf2onnx.convert.from_function(function, input_signature=function.input_signature, opset=17,
                                          output_path=str(folder / "model.onnx"))
        except ValueError as error:  # tf2onnx's graph import ("Failed to import metagraph")
            raise IdsExportError(f"tf2onnx could not convert the model ({error}); nothing was written. Export it "
                                 "--format openvino, or as a SavedModel.") from None

    def answers(self, folder: Path, ids: dict) -> dict:
        import onnxruntime

        runner = onnxruntime.InferenceSession(str(folder / "model.onnx"), providers=["CPUExecutionProvider"])
        names = [output.name for output in runner.get_outputs()]
        return dict(zip(names, runner.run(None, {i.name: ids[i.name] for i in runner.get_inputs()})))
