"""OpenVINO files of a model's ids signature, for Intel's CPU runtime (`python -m electra_tf.export
--format openvino`; `pip install -e ".[runtimes]"`). On the CPUs measured it answers a 128-token
request 2-2.6x faster than the SavedModel in float32 at batch 1 and 1.1-1.4x at batch 32, and
faster again in its default bfloat16 where the CPU has it (docs/results.md, "Serving latency").

    EXPORT_DIR/NAME-openvino/
        model.xml, model.bin     OpenVINO's IR: token_ids, segment_ids, padding_mask (int32 [batch,
                                 max_seq_length]) in; the numeric outputs of the SavedModel's
                                 `encode_ids` (probabilities, score, tag_probabilities, ...) out,
                                 but the ids it echoes
        vocab.txt, tokenizer_config.json (spm.model)   the vocabulary the ids come from
        export.json              inputs, outputs, max_seq_length, label names, what made it

Ids in, not text: OpenVINO's converter has no kernels for the tokenizer's string ops (with
openvino-tokenizers 2026.4.1 the raw-text SavedModel's conversion stops at `UnicodeTranscode`).
The client packs `[CLS] text [SEP]` as the SavedModel does: tensorflow-text's `FastBertNormalizer`
and `FastWordpieceTokenizer` over vocab.txt give a BERT_RULE vocabulary's ids exactly
(docs/serving.md, "OpenVINO"). String outputs (`label`, `tags`) are left out (OpenVINO's CPU
plugin compiles numbers only); the names are in export.json.

GELU is traced through erf (`models/transformer.gelu_form("erf")`), which OpenVINO has; the file is
written to a temporary folder, compiled and run on real ids against the model's own answers
(equal within 1e-4 in float32, or nothing is written), then renamed.
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


class OpenVINOError(ElectraError):
    """An export OpenVINO cannot take or answers differently; nothing was written."""


def numeric_ids_function(model, tokenizer, length: int):
    """The model's `encode_ids` endpoint as a tf.function of three int32 [batch, length] inputs
    returning its numeric outputs but the inputs it echoes (token_ids, padding_mask: the client
    has them), traced once, GELU through erf."""
    endpoint, _ = model.serving_endpoints(tokenizer, length)[IDS_SIGNATURE]
    spec = [tf.TensorSpec([None, length], tf.int32, name=name) for name in ("token_ids", "segment_ids", "padding_mask")]

    @tf.function(input_signature=spec, autograph=False)
    def numeric(token_ids, segment_ids, padding_mask):
        outputs = endpoint(token_ids, segment_ids, padding_mask)
        return {name: value for name, value in outputs.items()
                if value.dtype != tf.string and name not in ("token_ids", "segment_ids", "padding_mask")}

    with gelu_form("erf"):
        numeric.get_concrete_function()
    return numeric


def write_openvino(model, tokenizer, config, folder: Path, overwrite: bool = False) -> Path:
    """Writes the folder (module docstring) and checks its answers against `model`'s."""
    import openvino

    if folder.exists() and any(folder.iterdir()) and not overwrite:
        raise OpenVINOError(f"{folder} exists; pass --overwrite to replace it, or another --export_dir or --name.")
    model = in_float32(model)
    length = config.max_seq_length
    function = numeric_ids_function(model, tokenizer, length)
    ids = {name: value.numpy() for name, value in pack_texts(tokenizer, length, CHECK_TEXTS).items()}
    expected = {name: value.numpy() for name, value in function(**ids).items()}
    with atomic_folder(folder) as write:
        converted = openvino.convert_model(function.get_concrete_function())
        openvino.save_model(converted, str(write.temporary / "model.xml"), compress_to_fp16=False)
        _check(write.temporary / "model.xml", ids, expected)
        tokenizer.save(write.temporary / "vocab.txt")
        (write.temporary / "export.json").write_text(json.dumps({
            "inputs": {name: ["batch", length] for name in ids}, "outputs": sorted(expected),
            "max_seq_length": length, "label_names": list(getattr(model, "label_names", None) or []),
            "tokenizer": tokenizer.settings.describe(), "openvino": openvino.__version__}, indent=2) + "\n",
            encoding="utf-8")
    return folder


def _check(path: Path, ids: dict, expected: dict) -> None:
    import openvino

    compiled = openvino.Core().compile_model(str(path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    results = compiled.create_infer_request().infer({port.get_any_name(): ids[port.get_any_name()]
                                                    for port in compiled.inputs})
    answers = {port.get_any_name(): value for port, value in results.items()}
    for name, value in expected.items():
        found = answers.get(name)
        if found is None or found.shape != value.shape:
            raise OpenVINOError(f"OpenVINO gives no {name} of shape {value.shape}; nothing was written.")
        if not np.allclose(found, value, atol=TOLERANCE):
            raise OpenVINOError(f"OpenVINO answers {name} up to {np.abs(found - value).max():.2g} away from the "
                                "model; nothing was written.")


@register_format("openvino")
class OpenVINOFormat(ExportFormat):
    help = "OpenVINO IR of the ids signature (model.xml, model.bin, the vocabulary), for Intel's CPU runtime"

    def refuses(self, source: ExportSource) -> str | None:
        if importlib.util.find_spec("openvino") is None:
            return "OpenVINO is not installed (pip install -e \".[runtimes]\")"
        model = source.served.model
        if IDS_SIGNATURE not in getattr(model, "serving_endpoints", lambda *_: {})(source.served.tokenizer, 8):
            return "its model serves no ids signature"
        return None

    def write(self, source: ExportSource, options: ExportOptions) -> tuple[Path, list[str]]:
        served = source.served
        folder = options.export_dir / f"{options.name}-openvino"
        write_openvino(served.model, served.tokenizer, served.config, folder, options.overwrite)
        return folder, [f"Exported {source.describe()} for OpenVINO (ids in, float32 weights): {folder.resolve()}",
                        f"  checked: its answers equal the model's within {TOLERANCE}; docs/serving.md, \"OpenVINO\""]
