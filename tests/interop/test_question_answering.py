"""transformers' ElectraForQuestionAnswering in and out: the imported model's start and end
logits equal transformers' (fixture made by tests/fixtures/make_reference.py), and the way
back writes every tensor unchanged. No torch."""

from pathlib import Path

import keras
import numpy as np
import pytest
from safetensors.numpy import load_file

from electra_tf import export
from electra_tf.finetuning.question_answering.model import ElectraQuestionAnswerer, answer_mask
from electra_tf.interop.convert import import_huggingface
from electra_tf.interop.huggingface import ConversionError
from electra_tf.interop.question_answering import QA_MODEL_FILE, export_question_answerer
from electra_tf.finetuning.pretrained import load_task_model
from electra_tf.utils.run_dir import read_provenance

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "huggingface"
REFERENCE = np.load(FIXTURE / "reference_outputs.npz")


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    output = tmp_path_factory.mktemp("hf_qa") / "model"
    import_huggingface(FIXTURE / "question_answering", output)
    return output


def test_imported_logits_equal_transformers(imported):
    assert read_provenance(imported)["question_answering_head"] is True
    model = keras.models.load_model(imported / QA_MODEL_FILE)
    assert isinstance(model, ElectraQuestionAnswerer) and model.head_type == "plain" and not model.answerable
    inputs = {"token_ids": REFERENCE["input_ids"].astype("int32"),
              "segment_ids": REFERENCE["token_type_ids"].astype("int32"),
              "padding_mask": REFERENCE["attention_mask"].astype("int32")}
    outputs = model(inputs, training=False)
    # Where an answer may start or end ([CLS] and the context): transformers' raw logits; the
    # question and padding carry the official mask's -1000 on top.
    allowed = answer_mask(inputs["segment_ids"], inputs["padding_mask"]).numpy() > 0
    np.testing.assert_allclose(outputs["start_logits"].numpy()[allowed], REFERENCE["qa_start_logits"][allowed], atol=1e-4)
    np.testing.assert_allclose(outputs["end_logits"].numpy()[allowed], REFERENCE["qa_end_logits"][allowed], atol=1e-4)
    assert allowed.sum() > 8


def test_export_back_writes_every_tensor_unchanged(imported, tmp_path):
    assert export.main(["--model_dir", str(imported / QA_MODEL_FILE), "--format", "huggingface",
                        "--export_dir", str(tmp_path), "--name", "qa"]) == 0
    written = load_file(str(tmp_path / "qa-huggingface" / "question_answerer" / "model.safetensors"))
    original = load_file(str(FIXTURE / "question_answering" / "model.safetensors"))
    assert set(written) == set(original)
    for key, value in original.items():
        np.testing.assert_array_equal(written[key], value, err_msg=key)


def test_the_official_head_is_refused_for_transformers(imported, tmp_path):
    _, tokenizer, config = load_task_model(imported / QA_MODEL_FILE)
    model = ElectraQuestionAnswerer(load_task_model(imported / QA_MODEL_FILE)[0].backbone, head="electra")
    with pytest.raises(ConversionError, match="--qa_head plain"):
        export_question_answerer(model, config, tokenizer, tmp_path / "out")
    assert not (tmp_path / "out").exists()
