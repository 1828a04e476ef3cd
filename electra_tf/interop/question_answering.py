"""transformers' `ElectraForQuestionAnswering` in and out: its `qa_outputs` layer is our
`ElectraQuestionAnswerer(head="plain")`.

- In: `convert --from huggingface --input FOLDER` on a question-answering folder writes the
  model_dir as for any ELECTRA folder and, beside its config.json and vocab.txt,
  `question_answerer.keras`, the whole model with the head, which `export` serves and
  `finetune --task squad --pretrained` continues from (as an encoder).
- Out: `export --format huggingface --model_dir best.keras` on a plain-head question answerer
  writes EXPORT_DIR/NAME-huggingface/question_answerer, a folder
  `ElectraForQuestionAnswering.from_pretrained` loads.

`qa_outputs` is torch's Linear(hidden, 2): weight [2, hidden], bias [2], start logits first;
ours is a Keras Dense(2): kernel [hidden, 2]. The official ELECTRA head (end conditioned on
the start, answerability) has no transformers counterpart and is refused with a message.
"""

from __future__ import annotations

import os
from pathlib import Path

from electra_tf.finetuning.pretrained import load_pretrained
from electra_tf.finetuning.question_answering.model import ElectraQuestionAnswerer
from electra_tf.interop.huggingface import ConversionError, tensors_for, write_folder
from electra_tf.models.weight_names import DISCRIMINATOR, weight_table
from electra_tf.utils.files import atomic_folder

QA_WEIGHT, QA_BIAS = "qa_outputs.weight", "qa_outputs.bias"
QA_MODEL_FILE = "question_answerer.keras"
QA_CLASS = "ElectraForQuestionAnswering"


def has_qa_head(folder) -> bool:
    return QA_WEIGHT in folder.tensors


def write_question_answerer(model_dir, folder) -> Path:
    """MODEL_DIR/question_answerer.keras from a converted model_dir and the folder's qa_outputs."""
    pretrained = load_pretrained(model_dir.path, encoder_only=True)
    weight, bias = folder.tensor(QA_WEIGHT), folder.tensor(QA_BIAS)
    hidden = pretrained.config.model.hidden_size
    if weight.shape != (2, hidden) or bias.shape != (2,):
        raise ConversionError(f"{folder.path}: {QA_WEIGHT} has shape {weight.shape} and {QA_BIAS} {bias.shape}; "
                              f"a question-answering head of hidden size {hidden} has (2, {hidden}) and (2,).")
    # The official 64-piece question limit, or half the window for short models (the fixture's 64).
    model = ElectraQuestionAnswerer(pretrained.discriminator, head="plain", answerable=False,
                                    max_query_length=min(64, pretrained.config.max_seq_length // 2))
    model.qa_outputs.kernel.assign(weight.T)
    model.qa_outputs.bias.assign(bias)
    target = model_dir.path / QA_MODEL_FILE
    temporary = model_dir.path / f".{QA_MODEL_FILE}.tmp-{os.getpid()}.keras"
    model.save(temporary)
    os.replace(temporary, target)
    return target


def export_question_answerer(model, config, tokenizer, output: Path) -> list[Path]:
    """OUTPUT/question_answerer: a plain-head `ElectraQuestionAnswerer` as transformers saves
    an `ElectraForQuestionAnswering`, written to a temporary folder and renamed."""
    if model.head_type != "plain":
        raise ConversionError("this question answerer has the official ELECTRA head (end conditioned on the start, "
                              "answerability), which transformers has no class for; fine-tune with --qa_head plain "
                              "to get a model ElectraForQuestionAnswering loads, or serve it with the SavedModel "
                              "export.")
    names = weight_table(config.model, rtd_head=False)
    values = {variable.path: variable.numpy() for variable in model.backbone.weights}  # the pre-trainer's paths
    missing = [name.ours for name in names if name.model == DISCRIMINATOR and name.ours not in values]
    if missing:
        raise ConversionError(f"the question answerer's encoder lacks {missing[:3]}; it was not built by electra_tf.")
    tensors = tensors_for(names, DISCRIMINATOR, values)
    tensors[QA_WEIGHT] = model.qa_outputs.kernel.numpy().T
    tensors[QA_BIAS] = model.qa_outputs.bias.numpy()
    output = Path(output)
    if output.exists():
        raise ConversionError(f"{output} exists; choose another output folder (nothing was written).")
    with atomic_folder(output, replace=False) as write:
        write_folder(write.temporary / "question_answerer", QA_CLASS, config.model, tensors, tokenizer)
    return [output / "question_answerer"]
