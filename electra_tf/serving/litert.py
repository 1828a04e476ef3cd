"""LiteRT (TensorFlow Lite) files that take raw text: one `.tflite` with the tokenizer inside, for
a phone or an edge box (`write_litert`; `python -m electra_tf.export --format litert`).

What a file holds, by the model it comes from (inputs: string [batch]; a batch of one is what a
device runs, a larger one works after `resize_tensor_input`):

    classifier     text (and text_pair)  -> probabilities [b, classes], label_names [classes]
    regression     text (and text_pair)  -> score [b]
    tagger         text                  -> tag_probabilities [b, words, tags], word_start and
                                            word_end [b, words] (byte offsets of the words,
                                            split at spaces as the SavedModel splits them,
                                            -1 past the last word kept), tag_names [tags]
    discriminator  text                  -> replaced_probability, token_ids, padding_mask
                                            [b, length], cls_hidden_state [b, hidden]

Every file also returns `no_text` (bool [b]), true where the text (either text of a pair) gave
no word piece, as the SavedModel's (`models/signatures.no_text`). Input of another dtype or rank
is refused by the interpreter: a 2-D string array fails with "Input values shape must be rank 1:
[ 1 2 ]Node number 0 (FastBertNormalize) failed to prepare." (an app passes a 1-D array of
strings, one per text). Output names are the SavedModel's (`serving_default`); the label and tag
names travel inside the file as constant outputs. The string outputs the SavedModel computes per row (`label`, `tokens`,
`words`, `tags`, entities) are left out: LiteRT has no kernels for those string ops, and an app
indexes the names it already has. The tagger has `words` slots for max_seq_length - 2 words.

What a model serves there it says itself (`litert_endpoint`; the discriminator's in
`models/signatures.py`, the classifier's and tagger's in `finetuning/text/serving.py`). The
tokenizer inside uses tensorflow-text ops that have LiteRT kernels (`models/device_inputs.py`),
so a file needs no Select TF ops (Flex) runtime, only tensorflow-text's custom-op kernels
(`tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS` in Python; the same kernels, registered by
the registrar's `Add...` functions, in an app). Invalid UTF-8 is not repaired first, as the
SavedModel repairs it, nor is a text cut to MAX_CHARACTERS_PER_POSITION per position (LiteRT has
no kernel for either): docs/serving.md says what each gives. The tagger finds words over the
text's bytes as its SavedModel does (`data/tokenization.whitespace_words`). The transformer's GELU
is traced as the one op LiteRT has a kernel for (`models/transformer.gelu_form("one_op")`).

`quantize="dynamic"`: 8-bit weights, float activations (dynamic-range quantization, no calibration
data). A model without a `litert_endpoint` (question answering: its windows over a long context
and the answer's text do not fit one fixed-shape graph without Flex) is refused, naming the
formats it exports as.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from pathlib import Path

import numpy as np
import tensorflow as tf
import tensorflow_text

from electra_tf.models.device_inputs import LiteRTError, LiteRTTokenizer
from electra_tf.models.transformer import gelu_form
from electra_tf.serving.exports import ExportFormat, ExportOptions, ExportSource, register_format
from electra_tf.serving.publish import in_float32
from electra_tf.utils.logs import litert_notes_left_out

QUANTIZATIONS = ("none", "dynamic")


def litert_endpoint(model, lite_tokenizer, length: int):
    """(function of the text input(s) -> outputs, input names): what the model serves on a device
    (its `litert_endpoint`); a LiteRTError for a model that serves nothing there."""
    if not hasattr(model, "litert_endpoint"):
        why = getattr(model, "litert_refusal", "it gives no litert_endpoint")
        raise LiteRTError(f"a {type(model).__name__} has no LiteRT export ({why}); serve it with the SavedModel "
                          "export.")
    return model.litert_endpoint(lite_tokenizer, length)


@register_format("litert")
class LiteRTFormat(ExportFormat):
    """EXPORT_DIR/NAME.tflite (NAME-int8.tflite with --quantize dynamic): one file that takes text."""

    help = "one .tflite file that takes text, for phones and edge devices (--quantize dynamic: 8-bit weights)"

    def refuses(self, source: ExportSource) -> str | None:
        model = source.served.model
        if not hasattr(model, "litert_endpoint"):
            return f"it has no LiteRT endpoint ({getattr(model, 'litert_refusal', 'it gives none')})"
        return None

    def write(self, source: ExportSource, options: ExportOptions) -> tuple[Path, list[str]]:
        served = source.served
        output = options.target or options.export_dir / litert_file_name(options.name, options.quantize)
        path = write_litert(served.model, served.tokenizer, served.config.max_seq_length, output, options.quantize,
                            options.overwrite)
        checked = ("checked: it runs" if importlib.util.find_spec("ai_edge_litert") is not None
                   else "not run here: pip install -e \".[litert]\" to check it")
        weights = "8-bit weights" if options.quantize == "dynamic" else "float32"
        return path, [f"Exported {source.describe()} as LiteRT ({weights}, {path.stat().st_size / 2**20:.1f} MiB): "
                      f"{path.resolve()}",
                      f"  LiteRT's interpreter with tensorflow-text's kernels ({checked}); docs/serving.md, \"On a "
                      "device\""]


def litert_file_name(name: str, quantize: str) -> str:
    """NAME.tflite (float32 weights) or NAME-int8.tflite (`quantize="dynamic"`)."""
    return f"{name}-int8.tflite" if quantize == "dynamic" else f"{name}.tflite"


def write_litert(model, tokenizer, max_seq_length: int, output: str | Path, quantize: str = "none",
                 overwrite: bool = False) -> Path:
    """Converts `model` (with the tokenizer inside) into the LiteRT file `output`, written to a
    temporary file beside it and renamed; refused, with nothing written, when it cannot be."""

    output = Path(output)
    if quantize not in QUANTIZATIONS:
        raise LiteRTError(f"--quantize {quantize!r}: choose one of {', '.join(QUANTIZATIONS)}.")
    if output.exists() and not overwrite:
        raise LiteRTError(f"{output} exists; pass --overwrite to replace it, or another --export_dir or --name.")
    lite_tokenizer = LiteRTTokenizer(tokenizer)
    model = in_float32(model)
    endpoint, inputs = litert_endpoint(model, lite_tokenizer, max_seq_length)
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=output.parent, prefix=f".{output.name}.") as work:
        root = tf.train.Checkpoint()
        # The backend's tf.Variables themselves (`keras.Variable.value`): tracked so, the
        # converter finds each captured variable in the SavedModel and folds it into a constant;
        # tracked as Keras variables, they stayed uninitialised resource variables (NaN outputs).
        root.variables = [variable.value for variable in model.variables]
        signature = tf.function(endpoint, autograph=False, input_signature=[
            tf.TensorSpec([None], tf.string, name=name) for name in inputs])
        with gelu_form("one_op"):
            concrete = signature.get_concrete_function()
        tf.saved_model.save(root, f"{work}/saved_model", signatures={"serving_default": concrete})
        temporary = Path(work) / output.name
        with litert_notes_left_out():
            temporary.write_bytes(_convert(f"{work}/saved_model", quantize))
            check_runs(temporary)  # every op has a kernel, before the file takes its name
        os.replace(temporary, output)
    return output


def _convert(saved_model: str, quantize: str) -> bytes:
    """The converter's flatbuffer: builtin ops and tensorflow-text's custom ops only (no Flex)."""

    converter = tf.lite.TFLiteConverter.from_saved_model(saved_model, signature_keys=["serving_default"])
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    converter.allow_custom_ops = True  # tensorflow-text's ops, which its registrar gives kernels
    if quantize == "dynamic":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    try:
        return converter.convert()
    except Exception as error:  # the converter raises ConverterError and others, with its diagnostics
        message = " ".join(str(error).split())[-1500:]
        raise LiteRTError(f"the LiteRT converter failed ({type(error).__name__}): {message}. Nothing was written. "
                          "Try --quantize none, or the SavedModel export; an op the message names has no LiteRT "
                          "kernel.") from None


def check_runs(path: str | Path) -> dict | None:
    """Loads the file in LiteRT's interpreter with tensorflow-text's kernels and answers an empty
    string: every op has a kernel. Returns the signature's outputs, or None when the `ai_edge_litert`
    runtime is not installed (`pip install -e ".[litert]"`)."""

    if importlib.util.find_spec("ai_edge_litert") is None:
        return None
    from ai_edge_litert.interpreter import InterpreterWithCustomOps

    interpreter = InterpreterWithCustomOps(model_path=str(path),
                                           custom_op_registerers=tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS)
    runner = interpreter.get_signature_runner("serving_default")
    try:
        return runner(**{name: np.array([""]) for name in runner.get_input_details()})
    except RuntimeError as error:
        raise LiteRTError(f"{path} was written but does not run in LiteRT's interpreter ({error}).") from None
