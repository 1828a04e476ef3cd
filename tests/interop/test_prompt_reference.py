"""Prompt scores against an independent computation: transformers' `ElectraForPreTraining`, in a
process of its own, reads the same checkpoint (the random fixture of
tests/fixtures/make_reference.py), tokenizes each filled template whole with its own tokenizer,
finds the label word's pieces by their character offsets, and averages the replaced-token logits
there and over a class's words; every class score equals `ElectraPromptClassifier`'s within 1e-4,
single texts and pairs, one-piece, multi-piece and phrase words.

Needs torch and transformers (`pip install -e ".[reference]"`) in the Python that runs the
reference: this one, or the one ELECTRA_TF_REFERENCE_PYTHON names; skipped otherwise."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from electra_tf.finetuning.pretrained import load_pretrained
from electra_tf.finetuning.text.prompt_model import ElectraPromptClassifier
from electra_tf.finetuning.text.prompts import PromptPreprocessor
from electra_tf.interop.convert import import_huggingface

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "huggingface" / "discriminator"
PYTHON = os.environ.get("ELECTRA_TF_REFERENCE_PYTHON", sys.executable)


def reference_available() -> bool:
    found = subprocess.run([PYTHON, "-c", "import torch, transformers"], capture_output=True)
    return found.returncode == 0


pytestmark = pytest.mark.skipif(not reference_available(), reason="needs torch and transformers (the reference "
                                "extra) in this Python or in ELECTRA_TF_REFERENCE_PYTHON")

# The class scores of every (text, class) pair, computed by transformers alone.
REFERENCE = r'''
import json, sys
import torch
from transformers import AutoTokenizer, ElectraForPreTraining

job = json.loads(sys.argv[1])
tokenizer = AutoTokenizer.from_pretrained(job["model"])
model = ElectraForPreTraining.from_pretrained(job["model"]).eval()
scores = []
for row in job["rows"]:
    per_class = []
    for words in job["words"]:
        per_word = []
        for word in words:
            filled = job["template"].format(label=word, **row)
            start = job["template"].format(label="\0", **row).index("\0")
            encoded = tokenizer(filled, return_offsets_mapping=True, return_tensors="pt")
            offsets = encoded.pop("offset_mapping")[0].tolist()
            inside = [i for i, (a, b) in enumerate(offsets) if b > a and a >= start and b <= start + len(word)]
            with torch.no_grad():
                logits = model(**encoded).logits[0]
            per_word.append(float(logits[inside].mean()))
        per_class.append(sum(per_word) / len(per_word))
    scores.append(per_class)
print(json.dumps(scores))
'''

TEXTS = ["the river rises in northern hills", "farmers grow wheat and apples", "bees visit the orchard every morning",
         "music plays near the fountain", "people stay and talk in the square"]
PAIRS = ["the market is held on saturdays", "four thousand books", "when weather is warm", "bread and cheese",
         "three valleys"]
WORDS = {"water": ["river", "flows south"], "town": ["markets"], "weather": ["warm weather", "talked"]}


def spec(words: dict) -> str:
    return "; ".join(f"{name}={'|'.join(alternatives)}" for name, alternatives in words.items())


@pytest.mark.parametrize("template, pair", [("{text} the {label} is near .", False),
                                            ("{text_a} ? {label} , {text_b}", True)])
def test_class_scores_equal_transformers_electra_for_pre_training(tmp_path, template, pair):
    words = WORDS
    model_dir = tmp_path / "model"
    import_huggingface(FIXTURE, model_dir)
    backbone = load_pretrained(model_dir)
    preprocessor = PromptPreprocessor(backbone.tokenizer, 48, template=template, label_words=spec(words))
    assert {len(ids) for ids in preprocessor.layout.variants} == {1, 2}  # one-piece and multi-piece words
    model = ElectraPromptClassifier(backbone.discriminator, preprocessor)
    ours = -model.predict((TEXTS, PAIRS) if pair else TEXTS, verbose=0)

    rows = [{"text": a, "text_a": a, "text_b": b} for a, b in zip(TEXTS, PAIRS)]
    job = {"model": str(FIXTURE), "template": template.replace("{text}", "{text_a}"), "rows": rows,
           "words": list(words.values())}
    result = subprocess.run([PYTHON, "-c", REFERENCE, json.dumps(job)], capture_output=True, text=True, timeout=600,
                            env=dict(os.environ, TRANSFORMERS_OFFLINE="1", HF_HUB_OFFLINE="1"))
    assert result.returncode == 0, result.stderr[-3000:]
    theirs = np.array(json.loads(result.stdout.strip().splitlines()[-1]))
    assert np.ptp(theirs) > 0.01  # random weights still give classes different scores
    np.testing.assert_allclose(ours, theirs, atol=1e-4)
