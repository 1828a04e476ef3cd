"""The folders runs write and read: every file name of a model_dir, a fine-tuning output folder
and an export's metadata is spelled here once, and used by the writer and every reader.

A pre-training model_dir (`python -m electra_tf.pretrain --model_dir DIR`)::

    DIR/config.json         the resolved PretrainingConfig, by section (model, objective, optimizer, run,
                            evaluation, trainer, runtime) and the preset it started from
    DIR/config_history.json what later runs changed (a longer --steps, a new phase), and when
    DIR/vocab.txt           the vocabulary the run tokenizes with
    DIR/checkpoints/        ckpt-<step>.{index,data-*} and the `checkpoint` index
    DIR/backbone/           the discriminator on its own, a keras-hub-layout preset (models/backbone.py),
                            when the run finished
    DIR/logs/train/         TensorBoard events (step-keyed scalars, samples, run config)
    DIR/logs/profile/       profiler traces (--profile_steps)
    DIR/export/NAME/<n>/    the discriminator for TF Serving (NAME: the run's folder name)
    DIR/processes.json      each process that trained the run: its steps, time and evaluations
    DIR/metrics.json        the finished run: steps, examples seen, time, final metrics
    DIR/imported_from.json  a converted release only: its source and which parts it held
    DIR/.electra_tf.lock    while a run writes it (also in fine-tuning and data folders)

A fine-tuning output folder (`python -m electra_tf.finetune --output_dir DIR`)::

    DIR/metrics.json        the best epoch's metrics, every epoch, the settings, the test file's scores
    DIR/config.json         the run's FinetuningConfig (finetune --config reruns it), the model's architecture
                            included, which best.keras is read with
    DIR/best.keras          the best epoch's classifier, preprocessor included
    DIR/logs/train/         TensorBoard events
    DIR/processes.json      the process that trained it
    DIR/export/NAME/<n>/    the TF Serving SavedModel

An export version folder (`EXPORT_DIR/NAME/<n>/`) keeps beside the SavedModel, in the folder TF
Serving ignores (except for the warmup file), what it takes to fine-tune from it again::

    <n>/assets.extra/config.json, vocab.txt, task.json (classifiers), fingerprint (what it holds)

>>> run = ModelDir("runs/electra_tiny")
>>> str(run.checkpoints)
'runs/electra_tiny/checkpoints'
>>> ModelDir.default_for("electra_tiny").path.as_posix()
'runs/electra_tiny'
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

RUNS_ROOT = Path("runs")
DATA_CACHE = RUNS_ROOT / "data"  # data the default run builds once and reuses

CONFIG_FILE = "config.json"
VOCAB_FILE = "vocab.txt"
TASK_FILE = "task.json"
LOCK_FILE = ".electra_tf.lock"  # held by the one process writing the folder (locking.py)


class _Entry:
    """A file or folder at a fixed place inside a run folder: `ModelDir(path).config` is a Path."""

    def __init__(self, *parts: str):
        self.parts = parts

    def __get__(self, folder, owner=None):
        return self if folder is None else folder.path.joinpath(*self.parts)


@dataclass(frozen=True)
class _Folder:
    path: Path

    def __post_init__(self):
        object.__setattr__(self, "path", Path(self.path))

    @property
    def name(self) -> str:
        return self.path.name


class TrainingDir(_Folder):
    """What the trainer (training/trainer.py) writes in any run's folder."""

    checkpoints = _Entry("checkpoints")  # runs that resume
    logs = _Entry("logs")
    train_logs = _Entry("logs", "train")
    profile_logs = _Entry("logs", "profile")
    processes = _Entry("processes.json")  # training/history.py
    metrics = _Entry("metrics.json")  # written when a run finishes


class ModelDir(TrainingDir):
    """A pre-training run's folder."""

    config = _Entry(CONFIG_FILE)
    config_history = _Entry("config_history.json")
    vocab = _Entry(VOCAB_FILE)
    backbone = _Entry("backbone")
    exports = _Entry("export")  # as FinetuneDir's: each run keeps its own exports
    provenance = _Entry("imported_from.json")

    @classmethod
    def default_for(cls, config_name: str) -> "ModelDir":
        return cls(RUNS_ROOT / config_name)

    def has_checkpoints(self) -> bool:
        """Written by pre-training: a config and a checkpoint folder."""
        return self.config.is_file() and self.checkpoints.is_dir()


def read_provenance(model_dir: str | Path) -> dict:
    """What a converted model_dir's `imported_from.json` says ({} for a model_dir pre-training wrote)."""
    path = ModelDir(model_dir).provenance
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


class FinetuneDir(TrainingDir):
    """A fine-tuning run's output folder."""

    config = _Entry(CONFIG_FILE)  # the run's FinetuningConfig, its model and max_seq_length included
    vocab = _Entry(VOCAB_FILE)  # for task models that keep no preprocessor (question answering)
    best_model = _Entry("best.keras")
    exports = _Entry("export")


class ExportMetadata(_Folder):
    """The `assets.extra/` folder of one export version: `ExportMetadata.of(version_dir)`."""

    config = _Entry(CONFIG_FILE)
    vocab = _Entry(VOCAB_FILE)
    task = _Entry(TASK_FILE)
    warmup_requests = _Entry("tf_serving_warmup_requests")
    fingerprint = _Entry("fingerprint")

    @classmethod
    def of(cls, version_dir) -> "ExportMetadata":
        return cls(Path(version_dir) / "assets.extra")


def task_export_name(task_name: str) -> str:
    """The TF Serving model name of a fine-tuned task ("STS-B" -> "stsb"), as the fine-tuning
    run exports it and `export` re-exports its best.keras.

    >>> task_export_name("STS-B"), task_export_name("reviews")
    ('stsb', 'reviews')
    """
    return task_name.lower().replace("-", "")


def bundled_data_dir(max_seq_length: int) -> Path:
    """Where the default run builds (once) and reuses the bundled Wikipedia sample."""
    return DATA_CACHE / f"wiki_sample_seq{max_seq_length}"
