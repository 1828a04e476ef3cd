"""An exported keras-hub preset on Keras' other backends: under `KERAS_BACKEND=jax` and `torch` it
loads, tokenizes and gives the TensorFlow backend's hidden states to float32 rounding, and the
JAX fine-tuning example of docs/interop.md runs. Needs the optional `.[keras-backends]` extra
(jax, torch); each backend's test is skipped where its package is not installed."""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from electra_tf import export
from tests.keras_hub_only import run_keras_hub_only

REPO = Path(__file__).resolve().parents[2]
TEXTS = ["The river rises in the northern hills and flows south.", "Bees visit the orchard every morning.", ""]


def needs(backend: str):
    if importlib.util.find_spec(backend) is None:
        pytest.skip(f"needs {backend}: pip install -e \".[keras-backends]\"")


@pytest.fixture(scope="module")
def preset(pretrained_run, tmp_path_factory):
    folder = tmp_path_factory.mktemp("backends") / "presets" / "electra_tiny"
    assert export.main(["--model_dir", str(pretrained_run), "--format", "keras_hub", "--export_dir", str(folder)]) == 0
    return folder


@pytest.fixture(scope="module")
def on_tensorflow(preset):
    return run_keras_hub_only({"tiny": preset}, TEXTS, preset.parent / "tensorflow")["tiny"]


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_the_preset_gives_the_same_outputs_on_every_backend(preset, on_tensorflow, backend):
    needs(backend)
    theirs = run_keras_hub_only({"tiny": preset}, TEXTS, preset.parent / backend, backend)["tiny"]
    np.testing.assert_array_equal(theirs["ids"], on_tensorflow["ids"])
    real = on_tensorflow["mask"].astype(bool)
    np.testing.assert_allclose(theirs["sequence_output"][real], on_tensorflow["sequence_output"][real], atol=1e-5)
    np.testing.assert_allclose(theirs["pooled_output"], on_tensorflow["pooled_output"], atol=1e-5)


def jax_example() -> str:
    """The Python block of docs/interop.md that fine-tunes a preset on the JAX backend."""
    text = (REPO / "docs" / "interop.md").read_text(encoding="utf-8")
    blocks = [block for block in re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
              if 'KERAS_BACKEND"] = "jax"' in block]
    assert len(blocks) == 1, "docs/interop.md should hold one JAX example"
    return blocks[0]


def test_the_docs_jax_example_fine_tunes_the_preset(preset):
    needs("jax")
    result = subprocess.run([sys.executable, "-c", jax_example()], cwd=preset.parent.parent, capture_output=True,
                            text=True, timeout=600, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "backend: jax" in result.stdout
    losses = [float(x) for x in re.search(r"loss by epoch: \[(.*)\]", result.stdout).group(1).split(",")]
    predicted, labels = re.search(r"predicted: (\[.*\]) labels: (\[.*\])", result.stdout).groups()
    assert losses[-1] < losses[0] and predicted == labels, result.stdout
