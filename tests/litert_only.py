"""A `.tflite` used as a device app uses it: in a fresh process that has LiteRT's interpreter
(`ai_edge_litert`) and tensorflow-text's kernels but refuses to import electra_tf, one text (or
pair) a call at batch 1 (`run_litert_only`)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from tests.without_electra_tf import REFUSE_ELECTRA_TF

LITERT_ONLY = REFUSE_ELECTRA_TF + r'''import numpy as np
import tensorflow_text
from ai_edge_litert.interpreter import InterpreterWithCustomOps

job = json.loads(sys.argv[1])
interpreter = InterpreterWithCustomOps(model_path=job["model"],
                                       custom_op_registerers=tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS)
runner = interpreter.get_signature_runner("serving_default")
rows = []
for inputs in job["inputs"]:
    rows.append(runner(**{name: np.array([value]) for name, value in inputs.items()}))
outputs = {}
for name in rows[0]:
    values = [row[name] for row in rows]
    outputs[name] = values[0] if values[0].dtype.kind in "SUO" else np.concatenate(values)
np.savez(job["output"], **{k: (v.astype(str) if v.dtype.kind in "SO" else v) for k, v in outputs.items()})
print(json.dumps({"inputs": sorted(runner.get_input_details()), "electra_tf": "electra_tf" in sys.modules}))
'''


def run_litert_only(model: Path, inputs: list[dict], output: Path) -> dict:
    """Runs LITERT_ONLY: `inputs` a list of {input name: string}, one call each; returns the
    outputs (per-call outputs concatenated on the batch axis; constant string outputs once)."""
    job = {"model": str(model), "inputs": inputs, "output": str(output)}
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, "-c", LITERT_ONLY, json.dumps(job)], env=env, capture_output=True,
                            text=True, timeout=300, cwd=output.parent)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["electra_tf"] is False and summary["inputs"] == sorted(inputs[0])
    return dict(np.load(output))
