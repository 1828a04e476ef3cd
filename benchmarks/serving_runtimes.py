"""One classifier in every CPU runtime a user would serve it with, and the files each one reads:
what `serving_latency.py --runtimes` times side by side.

The function served is the same everywhere, the model's `encode_ids` endpoint (the numeric
function `serving/ids_exports.numeric_ids_function` makes for the openvino and onnx export formats):
ids in (token_ids, segment_ids, padding_mask, int32 [batch, length]), probabilities out, the
weights of one model:

- `SavedModel`: the export's `encode_ids` signature, as TF Serving runs it (TensorFlow's
  executor, the graph as exported).
- `SavedModel (XLA)`: the same function compiled by XLA (`jit_compile=True`), saved as a
  SavedModel of its own.
- `LiteRT`: the function converted with LiteRT's builtin ops (float32, and 8-bit weights:
  dynamic-range quantization).
- `ONNX Runtime`: converted as `export --format onnx` converts it (tf2onnx, opset 17); 8-bit
  weights by ONNX Runtime's `quantize_dynamic`.
- `OpenVINO`: converted as `export --format openvino` converts it, compiled in float32
  (`INFERENCE_PRECISION_HINT` f32) and with the CPU's default precision (bfloat16 where the CPU has
  it).

GELU is traced in the form each converter takes (`models/transformer.gelu_form`): LiteRT's the
one op its converter fuses, as `export --format litert` writes it; ONNX and OpenVINO through erf
(the exported graph's erfc has no ONNX kernel). The forms are 2.4e-7 apart.
"""

from __future__ import annotations

from pathlib import Path



def xla_saved_model(classifier, length: int, path: Path) -> Path:
    """A SavedModel whose `serving_default` is the classifier's ids -> probabilities compiled by
    XLA (the endpoint itself does not compile: XLA has no kernel for its string outputs' gathers)."""
    import tensorflow as tf

    spec = [tf.TensorSpec([None, length], tf.int32, name=name) for name in ("token_ids", "segment_ids", "padding_mask")]

    @tf.function(input_signature=spec, jit_compile=True, autograph=False)
    def probabilities(token_ids, segment_ids, padding_mask):
        logits = classifier({"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask},
                            training=False)
        return {"probabilities": tf.nn.softmax(tf.cast(logits, tf.float32), axis=-1)}

    module = tf.Module()
    module.classifier, module.probabilities = classifier, probabilities
    tf.saved_model.save(module, str(path), signatures={"serving_default": probabilities})
    return path


def litert_files(function, classifier, folder: Path, name: str) -> dict:
    """{label: .tflite path}: float32 and 8-bit weights, LiteRT's builtin ops only. Converted from a
    SavedModel that tracks the backend's variables themselves, as `export --format litert` does
    (converted from the concrete function alone, the weights stay uninitialised: NaN outputs)."""
    import tensorflow as tf

    root = tf.train.Checkpoint()
    root.variables = [variable.value for variable in classifier.variables]
    tf.saved_model.save(root, str(folder / f"{name}-for-litert"),
                        signatures={"serving_default": function.get_concrete_function()})
    files = {}
    for label, optimize in (("LiteRT", []), ("LiteRT 8-bit", [tf.lite.Optimize.DEFAULT])):
        converter = tf.lite.TFLiteConverter.from_saved_model(str(folder / f"{name}-for-litert"))
        converter.optimizations = optimize
        path = folder / f"{name}-{'8bit' if optimize else 'f32'}.tflite"
        path.write_bytes(converter.convert())
        files[label] = path
    return files


def onnx_files(function, folder: Path) -> dict:
    """{label: .onnx path}: the onnx export format's conversion and ONNX Runtime's 8-bit weights of it."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from electra_tf.serving.exports import FORMATS

    folder.mkdir(parents=True, exist_ok=True)
    FORMATS["onnx"]().convert(function, folder)
    quantize_dynamic(str(folder / "model.onnx"), str(folder / "model-8bit.onnx"), weight_type=QuantType.QInt8)
    return {"ONNX Runtime": folder / "model.onnx", "ONNX Runtime 8-bit": folder / "model-8bit.onnx"}


def openvino_file(function, folder: Path) -> Path:
    """The openvino export format's IR (.xml beside its .bin) of the function."""
    from electra_tf.serving.exports import FORMATS

    folder.mkdir(parents=True, exist_ok=True)
    FORMATS["openvino"]().convert(function, folder)
    return folder / "model.xml"


# Runs in a process of its own per thread count (TensorFlow's pools are set before it starts):
# every runtime on the same ids, p50 and p99 over `calls` calls after warm-up, and the largest
# difference of each one's probabilities from the exported SavedModel's.
MEASURE = r'''
import json, sys, time
import numpy as np
request = json.loads(sys.stdin.read())
threads = request["threads"]
import tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(threads)
tf.config.threading.set_inter_op_parallelism_threads(threads)
import tensorflow_text  # noqa: F401
assert "electra_tf" not in sys.modules
IDS = ("token_ids", "segment_ids", "padding_mask")


def saved_model(path, signature):
    function = tf.saved_model.load(path).signatures[signature]
    return lambda ids: function(**{k: tf.constant(v) for k, v in ids.items()})["probabilities"].numpy()


def litert(path):
    from ai_edge_litert.interpreter import Interpreter
    interpreter = Interpreter(model_path=path, num_threads=threads)
    runner = interpreter.get_signature_runner()
    return lambda ids: runner(**ids)["probabilities"]


def onnx_runtime(path):
    import onnxruntime
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    runner = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    names = [i.name for i in runner.get_inputs()]
    return lambda ids: runner.run(None, {name: ids[name.split(":")[0]] for name in names})[0]


def openvino_runtime(path, precision):
    import openvino
    config = {"INFERENCE_NUM_THREADS": threads, **({"INFERENCE_PRECISION_HINT": precision} if precision else {})}
    compiled = openvino.Core().compile_model(path, "CPU", config)
    request_ = compiled.create_infer_request()
    names = [i.get_any_name() for i in compiled.inputs]
    return lambda ids: next(iter(request_.infer({name: ids[name.split(":")[0]] for name in names}).values()))


makers = {"saved_model": lambda f: saved_model(f["path"], f["signature"]), "litert": lambda f: litert(f["path"]),
          "onnx": lambda f: onnx_runtime(f["path"]), "openvino": lambda f: openvino_runtime(f["path"], f.get("precision"))}
if request.get("answers"):  # every runtime's probabilities for all the ids, in batches of 32
    model = request["models"][0]
    ids = {k: np.asarray(v, np.int32) for k, v in model["ids"].items()}
    answers = {}
    for runtime in model["runtimes"]:
        call = makers[runtime["kind"]](runtime)
        answers[runtime["label"]] = np.concatenate([np.asarray(call({k: v[i:i + 32] for k, v in ids.items()}))
                                                    for i in range(0, len(ids["token_ids"]), 32)]).tolist()
    print(json.dumps(answers))
    sys.exit(0)
rows = []
for model in request["models"]:
    batches = {b: {k: np.asarray(v, np.int32)[:b] for k, v in model["ids"].items()} for b in request["batches"]}
    reference = None
    for runtime in model["runtimes"]:
        call = makers[runtime["kind"]](runtime)
        for batch, ids in batches.items():
            for _ in range(request["warmup"]):
                out = call(ids)
            seconds = []
            for _ in range(request["calls"]):
                started = time.perf_counter()
                out = np.asarray(call(ids))
                seconds.append(time.perf_counter() - started)
            if runtime["label"] == "SavedModel":
                reference = {**(reference or {}), batch: out}
            rows.append({"model": model["name"], "runtime": runtime["label"], "threads": threads, "batch": batch,
                         "p50_ms": 1e3 * float(np.percentile(seconds, 50)),
                         "p99_ms": 1e3 * float(np.percentile(seconds, 99)),
                         "max_diff": float(np.abs(out - reference[batch]).max())})
print(json.dumps(rows))
'''


def runtime_files(classifier, tokenizer, config, folder: Path, name: str) -> list[dict]:
    """[{label, kind, path, ...}]: the classifier exported for every runtime, the SavedModel first."""
    from electra_tf.serving.ids_exports import numeric_ids_function
    from electra_tf.serving.publish import export_model

    length = config.max_seq_length
    export = export_model(classifier, tokenizer, config, folder / "exports", name)
    function = numeric_ids_function(classifier, tokenizer, length)  # what the openvino and onnx formats convert
    lite_function = numeric_ids_function(classifier, tokenizer, length, gelu="one_op")
    runtimes = [{"label": "SavedModel", "kind": "saved_model", "path": str(export), "signature": "encode_ids"},
                {"label": "SavedModel (XLA)", "kind": "saved_model", "signature": "serving_default",
                 "path": str(xla_saved_model(classifier, length, folder / f"{name}-xla"))}]
    runtimes += [{"label": label, "kind": "litert", "path": str(path)}
                 for label, path in litert_files(lite_function, classifier, folder, name).items()]
    runtimes += [{"label": label, "kind": "onnx", "path": str(path)}
                 for label, path in onnx_files(function, folder / f"{name}-onnx").items()]
    ir = str(openvino_file(function, folder / f"{name}-openvino"))
    runtimes += [{"label": "OpenVINO", "kind": "openvino", "path": ir, "precision": "f32"},
                 {"label": "OpenVINO (CPU default: bf16)", "kind": "openvino", "path": ir}]
    return runtimes
