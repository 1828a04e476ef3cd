"""electra_tf: ELECTRA pre-training, fine-tuning and serving in TensorFlow/Keras 3.

The package reads as the pipeline:

    data/         text -> vocabulary and pre-training shards
    models/       the model config, embeddings, Discriminator and Generator, heads, the backbone
    runtime/      strategy, precision, XLA, the compiled step, the optimizer
    training/     the one trainer every run goes through, and what a task gives it
    pretraining/  the ELECTRA objective as a task: masking, losses, the training step
    finetuning/   labelled tasks: their files, models, metrics
    serving/      the export formats' registry, SavedModels for TF Serving, LiteRT files, a client
    interop/      released checkpoints (HuggingFace, Google TF1) and keras-hub presets, in and out

and the commands are `python -m electra_tf.<command>` (`python -m electra_tf` lists them).
The names below are the public API; they load on first use, so `import electra_tf` does not
start TensorFlow.

>>> import electra_tf
>>> electra_tf.PretrainingConfig.load("electra_small").model.hidden_size
256
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"  # setup.py reads it from here

_PUBLIC = {
    "ModelConfig": "electra_tf.models.config",
    "PretrainingConfig": "electra_tf.pretraining.config",
    "ElectraError": "electra_tf.utils.errors",
    "ModelDir": "electra_tf.utils.run_dir",
    "ElectraTokenizer": "electra_tf.data.tokenization",
    "build_vocabulary": "electra_tf.data.vocabulary",
    "build_shards": "electra_tf.data.builder",
    "ElectraEmbeddings": "electra_tf.models.embeddings",
    "Discriminator": "electra_tf.models.encoders",
    "Generator": "electra_tf.models.encoders",
    "Backbone": "electra_tf.models.backbone",
    "ElectraTextPreprocessor": "electra_tf.models.preprocessing",
    "ElectraWordPreprocessor": "electra_tf.models.preprocessing",
    "mask_tokens": "electra_tf.pretraining.masking",
    "pretraining_dataset": "electra_tf.pretraining.input_pipeline",
    "ElectraPretrainer": "electra_tf.pretraining.pretrainer",
    "RuntimeConfig": "electra_tf.runtime.config",
    "create_optimizer": "electra_tf.runtime.optimizer",
    "create_finetuning_optimizer": "electra_tf.runtime.optimizer",
    "Trainer": "electra_tf.training.trainer",
    "TrainerConfig": "electra_tf.training.config",
    "RunResult": "electra_tf.training.trainer",
    "PretrainingTask": "electra_tf.pretraining.task",
    "ClassificationTask": "electra_tf.finetuning.text.classification",
    "TaggingTask": "electra_tf.finetuning.text.tagging",
    "QuestionAnsweringTask": "electra_tf.finetuning.question_answering.task",
    "load_pretrained": "electra_tf.finetuning.pretrained",
    "ElectraClassifier": "electra_tf.finetuning.text.models",
    "ElectraTokenClassifier": "electra_tf.finetuning.text.models",
    "export_model": "electra_tf.serving.publish",
    "load_source": "electra_tf.serving.exports",
    "register_task": "electra_tf.training.task",
    "register_format": "electra_tf.serving.exports",
    "FinetuningConfig": "electra_tf.finetuning.config",
    "FinetuningTask": "electra_tf.finetuning.task",
    "ElectraTaskModel": "electra_tf.finetuning.text.models",
    "import_huggingface": "electra_tf.interop.convert",
    "import_google": "electra_tf.interop.convert",
    "export_huggingface": "electra_tf.interop.convert",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'electra_tf' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_PUBLIC))
