"""A preset used as a keras-hub user uses it: in a fresh process that has keras-hub but refuses
to import electra_tf, under any Keras backend (`run_keras_hub_only`)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from tests.without_electra_tf import REFUSE_ELECTRA_TF

LENGTH = 48  # the packed length of every row

# Runs in a fresh process that has keras-hub but refuses to import electra_tf: loads each
# preset with keras-hub's own classes, tokenizes, packs [CLS] ids [SEP] and runs the backbone.
KERAS_HUB_ONLY = REFUSE_ELECTRA_TF + r'''import os, numpy as np, keras, keras_hub

job = json.loads(sys.argv[1])
for name, preset in job["presets"].items():
    backbone = keras_hub.models.ElectraBackbone.from_preset(preset)
    kind = json.load(open(preset + "/tokenizer.json"))["registered_name"]
    if kind == "keras_hub>SentencePieceTokenizer":  # from_preset builds only the backbone's own tokenizer class
        tokenizer = keras_hub.tokenizers.SentencePieceTokenizer(proto=preset + "/assets/tokenizer/vocabulary.spm")
    else:
        tokenizer = keras_hub.models.ElectraTokenizer.from_preset(preset)
    rows = tokenizer(job["texts"])
    rows = rows.to_list() if hasattr(rows, "to_list") else [[int(i) for i in row] for row in rows]
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    ids = np.full((len(rows), job["length"]), tokenizer.token_to_id("[PAD]"), "int32")
    mask = np.zeros_like(ids)
    for i, row in enumerate(rows):
        packed = [cls] + row[: job["length"] - 2] + [sep]
        ids[i, : len(packed)], mask[i, : len(packed)] = packed, 1
    outputs = backbone({"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": mask})
    head = {}  # the replaced-token head a preset of electra_tf keeps beside the backbone, as docs/interop.md uses it
    if os.path.isfile(preset + "/replaced_token_head.keras"):
        rtd = keras.saving.load_model(preset + "/replaced_token_head.keras")
        head["replaced_logits"] = keras.ops.convert_to_numpy(rtd(outputs["sequence_output"]))[..., 0]
    np.savez(job["output"] + f"/{name}.npz", ids=ids, mask=mask,
             sequence_output=keras.ops.convert_to_numpy(outputs["sequence_output"]),
             pooled_output=keras.ops.convert_to_numpy(outputs["pooled_output"]), **head)
print(json.dumps({"backend": keras.config.backend(), "electra_tf": "electra_tf" in sys.modules}))
'''


def run_keras_hub_only(presets: dict, texts: list, output: Path, backend: str = "tensorflow") -> dict:
    """Runs KERAS_HUB_ONLY on `presets` ({name: folder}) under `backend`; {name: npz arrays}."""
    output.mkdir(parents=True, exist_ok=True)
    job = {"presets": {k: str(v) for k, v in presets.items()}, "texts": texts, "length": LENGTH, "output": str(output)}
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, "-c", KERAS_HUB_ONLY, json.dumps(job)], env=env, capture_output=True,
                            text=True, timeout=300, cwd=output)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {"backend": backend, "electra_tf": False}
    return {name: dict(np.load(output / f"{name}.npz")) for name in presets}
