"""electra_tf: ELECTRA pre-training, fine-tuning and serving in TensorFlow/Keras 3.

The package reads as the pipeline:

    data/         text -> vocabulary and pre-training shards
    models/       embeddings, Discriminator and Generator, heads, preprocessing layers
    pretraining/  masking, input pipeline, the ELECTRA losses, the training step, resume
    finetuning/   task files, classifiers, metrics, the fine-tuning run
    serving/      SavedModel signatures and publishing for TF Serving, a client
    interop/      released checkpoints (HuggingFace, Google TF1) in and out

and the commands are `python -m electra_tf.<command>` (`python -m electra_tf` lists them).
The names below are the public API; they load on first use, so `import electra_tf` does not
start TensorFlow.

>>> import electra_tf
>>> electra_tf.ElectraConfig.load("electra_small").hidden_size
256
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"  # setup.py reads it from here

_PUBLIC = {
    "ElectraConfig": "electra_tf.models.config",
    "ElectraError": "electra_tf.utils.errors",
    "ModelDir": "electra_tf.utils.run_dir",
    "ElectraTokenizer": "electra_tf.data.tokenization",
    "build_vocabulary": "electra_tf.data.vocabulary",
    "build_shards": "electra_tf.data.builder",
    "ElectraEmbeddings": "electra_tf.models.embeddings",
    "Discriminator": "electra_tf.models.encoders",
    "Generator": "electra_tf.models.encoders",
    "ElectraTextPreprocessor": "electra_tf.models.preprocessing",
    "ElectraWordPreprocessor": "electra_tf.models.preprocessing",
    "mask_tokens": "electra_tf.pretraining.masking",
    "pretraining_dataset": "electra_tf.pretraining.input_pipeline",
    "ElectraPretrainer": "electra_tf.pretraining.pretrainer",
    "PretrainingOptions": "electra_tf.pretraining.run",
    "RunResult": "electra_tf.pretraining.run",
    "run_pretraining": "electra_tf.pretraining.run",
    "create_optimizer": "electra_tf.runtime.optimizer",
    "create_finetuning_optimizer": "electra_tf.runtime.optimizer",
    "load_pretrained": "electra_tf.finetuning.pretrained",
    "ElectraClassifier": "electra_tf.finetuning.text.classifiers",
    "ElectraTokenClassifier": "electra_tf.finetuning.text.classifiers",
    "FinetuningOptions": "electra_tf.finetuning.run",
    "run_finetuning": "electra_tf.finetuning.run",
    "export_discriminator": "electra_tf.serving.publish",
    "export_task_model": "electra_tf.serving.publish",
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
