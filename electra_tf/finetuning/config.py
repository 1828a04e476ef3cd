"""A fine-tuning run's configuration, by what each part configures.

Every kind of task has the same four parts, and one of its own:

    PretrainedSource   the model it starts from (`--pretrained`, `--checkpoint`, `--random_init`)
    TaskFiles          the labelled files (`--train`, `--eval`, `--test`)
    FinetuningOptimizerConfig   the official fine-tuning optimizer's settings
    FinetuningRunConfig         epochs, batch, sequence length, seed

and `ClassificationConfig`, `TaggingConfig` or `QuestionAnsweringConfig` (what only that kind
reads). Defaults are the official ELECTRA fine-tuning values; a learning rate, layer-wise decay
or epoch count left None is chosen by the model's size and the task (`finetuning/task.py`).
"""

from __future__ import annotations

import dataclasses

from electra_tf.runtime.config import LAYER_DECAY_SCHEDULES
from electra_tf.utils.errors import RunError
from electra_tf.utils.sections import Section

QA_HEADS = ("electra", "plain")


def _at_least_one(section, *names):
    for name in names:
        value = getattr(section, name)
        if value is not None and value < 1:
            raise RunError(f"--{name} must be at least 1.")


@dataclasses.dataclass(frozen=True)
class PretrainedSource:
    """`pretrained`: a pre-training model_dir (or its backbone/ folder), a `.keras` file or an
    export; `checkpoint`: with a model_dir, e.g. ckpt-2000 (default: its backbone, else the
    latest checkpoint); `random_init`: the same architecture with fresh weights (the baseline)."""

    pretrained: str
    checkpoint: str | None = None
    random_init: bool = False


@dataclasses.dataclass(frozen=True)
class TaskFiles:
    train: str
    eval: str
    test: str | None = None  # a third file, scored once with the best epoch (tagging)


@dataclasses.dataclass(frozen=True)
class FinetuningOptimizerConfig(Section):
    learning_rate: float | None = None  # None: by model size (finetuning/task.py, SIZE_DEFAULTS)
    layerwise_lr_decay: float | None = None  # None: by model size; 1: off
    layer_decay_schedule: str = "official"  # runtime/optimizer.py: the top layer gets decay^2, as upstream
    warmup_proportion: float = 0.1
    weight_decay: float = 0.01
    adam_epsilon: float = 1e-6  # the official fine-tuning value
    clip_global_norm: float = 1.0

    def check(self) -> None:
        if self.layerwise_lr_decay is not None and not 0 < self.layerwise_lr_decay <= 1:
            raise RunError("--layerwise_lr_decay must be in (0, 1].")
        if not 0 <= self.warmup_proportion < 1:
            raise RunError("--warmup_proportion must be in [0, 1).")
        if self.learning_rate is not None and self.learning_rate <= 0:
            raise RunError("--learning_rate must be positive.")
        self.require(self.layer_decay_schedule in LAYER_DECAY_SCHEDULES, "layer_decay_schedule",
                     f"must be one of {LAYER_DECAY_SCHEDULES}.")


@dataclasses.dataclass(frozen=True)
class FinetuningRunConfig(Section):
    epochs: int | None = None  # None: by task and training-set size
    batch_size: int = 32
    # Each update sums the gradients of this many batches of batch_size (runtime/accumulation.py).
    gradient_accumulation_steps: int = 1
    max_seq_length: int | None = None  # None: the length the backbone was pre-trained at
    seed: int = 1

    def check(self) -> None:
        _at_least_one(self, "epochs", "batch_size", "gradient_accumulation_steps")

    @property
    def update_batch_size(self) -> int:
        """The examples of one update: batch_size x gradient_accumulation_steps."""
        return self.batch_size * self.gradient_accumulation_steps


@dataclasses.dataclass(frozen=True)
class Columns:
    """The columns (fields) of your own files."""

    text: str = "text"
    text_pair: str | None = None
    label: str = "label"


@dataclasses.dataclass(frozen=True)
class ClassificationConfig:
    """Classes, sentence pairs (`columns.text_pair`) or a score (`regression`); `glue` reads a
    GLUE task's TSV layout and reports its official metrics instead of `columns`."""

    columns: Columns = Columns()
    regression: bool = False
    glue: str | None = None


@dataclasses.dataclass(frozen=True)
class TaggingConfig:
    """A tag per word. `columns` None: the file's defaults (CoNLL columns; JSON Lines `tokens`
    and `tags`); `entity_task` (conll2003) names the task and scores entities; entity tags are
    scored by conlleval's chunk rules, or seqeval's strict ones (`strict_entities`)."""

    columns: Columns | None = None
    entity_task: str | None = None
    strict_entities: bool = False


@dataclasses.dataclass(frozen=True)
class QuestionAnsweringConfig:
    """Extractive question answering (SQuAD 1.1 / 2.0 files): the official windowing and
    answer settings, and the head (`electra`: the official one; `plain`: transformers')."""

    doc_stride: int | None = None  # None: squad.default_doc_stride(max_seq_length)
    max_query_length: int = 64
    max_answer_length: int = 30
    head: str = "electra"

    def __post_init__(self):
        _at_least_one(self, "doc_stride", "max_query_length", "max_answer_length")
        if self.head not in QA_HEADS:
            raise RunError("--qa_head must be electra (the official head) or plain (transformers' qa_outputs).")
