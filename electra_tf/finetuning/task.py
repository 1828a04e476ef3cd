"""`FinetuningTask`: what every kind of fine-tuning shares, as a task of the one trainer.

Reads the task's files, loads the pre-trained backbone (or builds the same architecture with
fresh weights, the baseline), chooses the epochs, learning rate and layer-wise decay (given, or
by the model's size and the task), builds the task's model on the backbone with the official
fine-tuning optimizer, evaluates the task's official metrics after every epoch, and keeps the
best epoch (`best.keras`, and the files its evaluation leaves). The kinds fill in their data,
model and scores:

- `text.classification.ClassificationTask`: classes, sentence pairs, regression, GLUE;
- `text.tagging.TaggingTask`: a tag per word (entity tags scored by entity too);
- `question_answering.task.QuestionAnsweringTask`: extractive question answering (SQuAD 1.1 / 2.0).

The output folder's layout is `run_dir.FinetuneDir`. Fine-tuning does not resume: a run of
minutes starts again (`--overwrite`).
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from electra_tf.finetuning.config import FinetuningOptimizerConfig, FinetuningRunConfig, PretrainedSource, TaskFiles
from electra_tf.training.task import RunContext, ServedModel, Task, TrainingPlan
from electra_tf.utils.errors import RunError
from electra_tf.utils.run_dir import LOCK_FILE, FinetuneDir, task_export_name

if TYPE_CHECKING:
    from electra_tf.models.backbone import Backbone, BackboneConfig

# Defaults by model size (by the discriminator's hidden size): the official fine-tuning learning
# rates (the paper's 3e-4 for Small; 1e-4 Base; 5e-5 and layer decay 0.9 for Large) and, for the
# tiny preset, the best of 1e-4, 1e-3 and 3e-3 on BBC News (1e-4 left it at the majority class).
SIZE_DEFAULTS = (  # (largest hidden size, size name, learning rate, layer-wise decay)
    (128, "tiny", 3e-3, 0.8),
    (256, "small", 3e-4, 0.8),
    (768, "base", 1e-4, 0.8),
    (None, "large", 5e-5, 0.9),
)


def size_defaults(hidden_size: int) -> tuple[str, float, float]:
    """(size name, learning rate, layer-wise decay) for a discriminator of `hidden_size`.

    >>> size_defaults(256), size_defaults(1024)
    (('small', 0.0003, 0.8), ('large', 5e-05, 0.9))
    """
    for largest, name, learning_rate, decay in SIZE_DEFAULTS:
        if largest is None or hidden_size <= largest:
            return name, learning_rate, decay
    raise AssertionError("SIZE_DEFAULTS ends with a catch-all row")


def written(folder: Path) -> list[Path]:
    """What a folder holds besides a writer's lock file."""
    return [p for p in folder.iterdir() if p.name != LOCK_FILE] if folder.is_dir() else []


@dataclasses.dataclass(frozen=True)
class Settings:
    """The training settings chosen for this run, and the steps they make."""

    size: str
    learning_rate: float
    layerwise_lr_decay: float
    epochs: int
    steps_per_epoch: int

    @property
    def total_steps(self) -> int:
        return self.steps_per_epoch * self.epochs


@dataclasses.dataclass
class FinetuningInputs:
    backbone: Backbone  # the pre-trained discriminator (or fresh weights)
    config: BackboneConfig  # at the run's sequence length
    data: Any  # the kind's files and features (its `read_files`, then `prepare`)
    train: Any  # a tf.data.Dataset of (inputs, labels) batches, shuffled each epoch
    settings: Settings
    name: str  # the task's name: metrics.json's, and the export's
    output: FinetuneDir
    context: RunContext


@dataclasses.dataclass(frozen=True)
class FinetuningTask(Task):
    source: PretrainedSource
    files: TaskFiles
    optimizer: FinetuningOptimizerConfig = FinetuningOptimizerConfig()
    run: FinetuningRunConfig = FinetuningRunConfig()
    overwrite: bool = False
    # What the counts of the data count, named in the log and in metrics.json.
    train_unit = eval_unit = "examples"

    # --- what a kind gives ----------------------------------------------------------------------
    def read_files(self):
        """The kind's data, read from `files` (errors name the file and line)."""
        raise NotImplementedError

    def prepare(self, data, tokenizer, max_seq_length: int, seed: int):
        """(the training dataset of (inputs, labels) examples, unbatched or batched by
        `self.run.update_batch_size`; `data` with its eval features added)."""
        raise NotImplementedError

    def default_epochs(self, data) -> int:
        raise NotImplementedError

    def counts(self, data) -> tuple[int, int]:
        """(training examples one epoch goes through, eval examples)."""
        raise NotImplementedError

    def metric_names(self, data) -> tuple:
        raise NotImplementedError

    def build_task_model(self, backbone, data, config):
        """The task model on `backbone` (inside the strategy's scope)."""
        raise NotImplementedError

    def describe_data(self, data) -> list[str]:
        """Lines printed before training, beyond the counts every task prints."""
        return []

    def data_summary(self, data) -> dict:
        """Fields metrics.json adds for this kind."""
        return {}

    def test(self, model, inputs: FinetuningInputs) -> tuple[dict, dict] | None:
        """Scores on `files.test` with the best epoch, and its files (kinds that support it)."""
        return None

    # --- the trainer's calls ----------------------------------------------------------------------
    def model_width(self) -> int | None:
        from electra_tf.finetuning.pretrained import pretrained_hidden_size

        return pretrained_hidden_size(self.source.pretrained)

    def build_inputs(self, context: RunContext) -> FinetuningInputs:
        import keras

        data = self.read_files()
        backbone, config = self._backbone(context)
        output = self._output_folder(context.run_dir, backbone, config)
        keras.utils.set_random_seed(self.run.seed)  # the data's order and the task head's initial weights
        train, data = self.prepare(data, backbone.tokenizer, config.max_seq_length, self.run.seed)
        settings = self._settings(data, config)
        name = getattr(data, "name", "") or output.path.resolve().name  # files named only train/dev
        return FinetuningInputs(backbone, config, data, train, settings, name, output, context)

    def _backbone(self, context: RunContext):
        """(the pre-trained backbone, its config at the run's sequence length)."""
        from electra_tf.finetuning.pretrained import load_pretrained

        with context.runtime.strategy.scope():  # the model's variables are created (or restored) here
            backbone = load_pretrained(self.source.pretrained, self.source.checkpoint, encoder_only=True)
        positions = backbone.config.model.max_position_embeddings
        max_seq_length = self.run.max_seq_length or backbone.config.max_seq_length
        if not 3 <= max_seq_length <= positions:
            raise RunError(f"--max_seq_length must be in [3, {positions}] (the model's max_position_embeddings).")
        return backbone, backbone.config.replace(max_seq_length=max_seq_length)

    def _output_folder(self, folder: Path, backbone, config) -> FinetuneDir:
        """Emptied (with --overwrite), holding the config and vocabulary, so best.keras reads alone."""
        output = FinetuneDir(folder)
        if written(output.path) and not self.overwrite:  # filled while we waited to lock
            raise RunError(f"{output.path} is not empty; choose a new --output_dir or pass --overwrite.")
        for old in written(output.path):  # keep our lock file
            shutil.rmtree(old) if old.is_dir() else old.unlink()
        output.path.mkdir(parents=True, exist_ok=True)
        config.save(output.config)
        backbone.tokenizer.save(output.vocab)
        return output

    def _settings(self, data, config) -> Settings:
        """Epochs, learning rate and layer-wise decay (given, or the defaults for the model's size
        and the task), and the steps they make; printed."""
        size, size_learning_rate, size_decay = size_defaults(config.model.hidden_size)
        train_examples = self.counts(data)[0]
        optimizer, run = self.optimizer, self.run
        settings = Settings(size, optimizer.learning_rate or size_learning_rate,
                            optimizer.layerwise_lr_decay or size_decay, run.epochs or self.default_epochs(data),
                            math.ceil(train_examples / run.update_batch_size))
        chosen = [f"{settings.epochs} epoch(s)" + (" (given)" if run.epochs else
                                                   f" for {train_examples:,} training {self.train_unit}"),
                  f"learning rate {settings.learning_rate:g}" + (" (given)" if optimizer.learning_rate else ""),
                  f"layer-wise decay {settings.layerwise_lr_decay:g}" + (" (given)" if optimizer.layerwise_lr_decay
                                                                         else "")]
        print(f"Settings: {', '.join(chosen)}; defaults for a {size} model (hidden size {config.model.hidden_size}).",
              flush=True)
        return settings

    def plan(self, inputs: FinetuningInputs) -> TrainingPlan:
        settings = inputs.settings
        return TrainingPlan(total_steps=settings.total_steps, examples_per_step=self.run.update_batch_size,
                            epochs=settings.epochs, keep_best=True)

    def build_model(self, inputs: FinetuningInputs, context: RunContext):
        """The task's model on the pre-trained discriminator (or a fresh one), compiled with the
        official fine-tuning optimizer."""
        from electra_tf.models.encoders import build_discriminator
        from electra_tf.runtime.optimizer import LayerwiseDecay, create_finetuning_optimizer

        settings, config, optimizer = inputs.settings, inputs.config, self.optimizer
        with context.runtime.strategy.scope():
            backbone = build_discriminator(config.model) if self.source.random_init else inputs.backbone.discriminator
            model = self.build_task_model(backbone, inputs.data, config)
            model.compile(optimizer=create_finetuning_optimizer(
                settings.learning_rate, settings.total_steps,
                LayerwiseDecay(settings.layerwise_lr_decay, config.model.num_layers, optimizer.layer_decay_schedule),
                optimizer.warmup_proportion, optimizer.weight_decay, optimizer.adam_epsilon, optimizer.clip_global_norm),
                jit_compile=context.runtime.xla, gradient_accumulation_steps=self.run.gradient_accumulation_steps)
        return model

    def describe(self, model, inputs: FinetuningInputs) -> list[str]:
        train_examples, eval_examples = self.counts(inputs.data)
        origin = "random initialisation" if self.source.random_init else inputs.backbone.source
        settings = inputs.settings
        return [f"Fine-tuning {inputs.name} from {origin}: {train_examples:,} training {self.train_unit} / "
                f"{eval_examples:,} eval {self.eval_unit}, {settings.epochs} epoch(s) x {settings.steps_per_epoch} "
                f"steps, max_seq_length {inputs.config.max_seq_length}",
                *(f"{inputs.name}: {line}" for line in self.describe_data(inputs.data))]

    def on_best(self, model, inputs: FinetuningInputs, context: RunContext, files: dict) -> None:
        """The best epoch so far: its files (e.g. predictions.json) and best.keras, each whole."""
        from electra_tf.utils.files import atomic_write_text

        for name, text in files.items():
            atomic_write_text(inputs.output.path / name, text)
        temporary = inputs.output.path / ".best.tmp.keras"
        model.save(temporary)
        os.replace(temporary, inputs.output.best_model)

    def finish(self, model, inputs: FinetuningInputs, context: RunContext, evaluation) -> dict:
        """The test file, if any, scored with the best epoch (restored by the trainer)."""
        from electra_tf.training.evaluation import numbers
        from electra_tf.utils.files import atomic_write_text

        if not self.files.test:
            return {}
        values, files = self.test(model, inputs)
        for name, text in files.items():
            atomic_write_text(inputs.output.path / name, text)
        print(f"test (epoch {evaluation.best['epoch']}): {numbers(values)}", flush=True)
        return {"test": {name: values[name] for name in (*self.metric_names(inputs.data), "score")}}

    def summary(self, model, inputs: FinetuningInputs, final: dict, evaluation) -> dict:
        """The best epoch's metrics, every epoch, the settings."""
        best = evaluation.best
        train_examples, eval_examples = self.counts(inputs.data)
        settings = inputs.settings
        return {"task": inputs.name, "eval": {name: best[name] for name in (*self.metric_names(inputs.data), "score")},
                "best_epoch": best["epoch"], "epochs": evaluation.history, "pretrained": str(self.source.pretrained),
                "random_init": self.source.random_init, "train_examples": train_examples, "train_unit": self.train_unit,
                "eval_examples": eval_examples, "eval_unit": self.eval_unit, **self.data_summary(inputs.data),
                "settings": {**dataclasses.asdict(self.run), **dataclasses.asdict(self.optimizer),
                             "epochs": settings.epochs, "max_seq_length": inputs.config.max_seq_length,
                             "learning_rate": settings.learning_rate,
                             "layerwise_lr_decay": settings.layerwise_lr_decay, "size_defaults": settings.size},
                "checkpoint": str(inputs.output.best_model)}

    def served_model(self, model, inputs: FinetuningInputs) -> ServedModel:
        return ServedModel(model, inputs.backbone.tokenizer, inputs.config, task_export_name(inputs.name))
