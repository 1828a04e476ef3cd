"""`FinetuningTask`: what every kind of fine-tuning shares, as a task of the one trainer.

Reads the task's files, loads the pre-trained backbone (or builds the same architecture with
fresh weights, the baseline), chooses the epochs, learning rate and layer-wise decay (given, or
by the model's size and the task), builds the task's model on the backbone with the official
fine-tuning optimizer, evaluates the task's official metrics after every epoch, keeps the best
epoch (`best.keras`, and the files its evaluation leaves) and scores a test file with it. With
`run.eval_only` it trains nothing: the fine-tuned model `source.pretrained` names is read and
evaluated (`Trainer.evaluate`).

A kind (registered with `training.task.register_task`, its config section its `section`)
fills in its data, model and scores:

    read_files(labels)                   its data from the files (labels: the model's, evaluating only)
    prepare(data, tokenizer, length, seed)   (the training dataset, data with its evaluation part)
    evaluation_part(path, data, tokenizer, length)   another file read as the eval file is (--test)
    score(model, data, part)             (metrics with `score`, files) on an evaluation part
    labels_of(model)                     a fine-tuned model's labels, as read_files takes them
    counts, default_epochs, metric_names, build_task_model
    describe_data, data_summary          its lines before training, its fields of metrics.json

The package's kinds: `text.classification` (classes, pairs, regression, GLUE), `text.tagging`
(a tag per word, entities), `question_answering.task` (SQuAD 1.1 / 2.0). The output folder's
layout is `run_dir.FinetuneDir`. Fine-tuning does not resume: a run of minutes starts again
(`--overwrite`).
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
from pathlib import Path
from typing import Any

import keras

from electra_tf.finetuning.config import (COMMAND, FinetuningConfig, TaskFiles, check_complete, config_from_command,
                                          requested_kind)
from electra_tf.finetuning.pretrained import load_pretrained, load_task_model, pretrained_hidden_size, saved_model_class
from electra_tf.models.backbone import Backbone, BackboneConfig
from electra_tf.models.encoders import build_discriminator
from electra_tf.runtime.optimizer import LayerwiseDecay, create_finetuning_optimizer
from electra_tf.training.evaluation import numbers
from electra_tf.training.task import (KINDS, RunContext, ServedModel, Task, TaskReport, TrainingData, TrainingPlan,
                                      kind_of_model)
from electra_tf.utils.errors import RunError
from electra_tf.utils.files import atomic_write_text
from electra_tf.utils.sections import ConfigError
from electra_tf.utils.run_dir import LOCK_FILE, FinetuneDir, task_export_name

# Defaults by model size (by the discriminator's hidden size): the official fine-tuning learning
# rates (the paper's 3e-4 for Small; 1e-4 Base; 5e-5 and layer decay 0.9 for Large) and, for the
# tiny preset, the best of 1e-4, 1e-3 and 3e-3 on BBC News (1e-4 left it at the majority class).
SIZE_DEFAULTS = (  # (largest hidden size, size name, learning rate, layer-wise decay)
    (128, "tiny", 3e-3, 0.8),
    (256, "small", 3e-4, 0.8),
    (768, "base", 1e-4, 0.8),
    (None, "large", 5e-5, 0.9),
)
TEST_PREFIX = "test_"  # the test file's predictions files: test_predictions.conll, ...


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
    backbone: Backbone  # the pre-trained discriminator (or a fine-tuned model's, evaluating only)
    config: BackboneConfig  # at the run's sequence length
    data: Any  # the kind's files and features (its `read_files`, then `prepare`)
    train: Any  # a tf.data.Dataset of (inputs, labels) batches, shuffled each epoch (None evaluating only)
    settings: Settings | None  # None evaluating only
    name: str  # the task's name: metrics.json's, and the export's
    output: FinetuneDir
    finetuned: Any = None  # the fine-tuned model an evaluation-only run reads


@dataclasses.dataclass(frozen=True)
class FinetuningTask(Task):
    config: FinetuningConfig
    overwrite: bool = False  # empty a non-empty output folder (--overwrite)
    command = "finetune"
    # What the counts of the data count, named in the log and in metrics.json.
    train_unit = eval_unit = "examples"
    # The task's model reads the pre-trained replaced-token head (a masked-LM run has none).
    uses_replaced_token_head = False

    # --- what a kind gives ----------------------------------------------------------------------
    def read_files(self, labels=None):
        """The kind's data, read from `config.files` (errors name the file and line). `labels`:
        a fine-tuned model's (`labels_of`), when evaluating only: the eval file is read with
        them and no training file is read."""
        raise NotImplementedError

    def prepare(self, data, tokenizer, max_seq_length: int, seed: int):
        """(the training dataset of (inputs, labels) batches of `self.config.run.update_batch_size`,
        or None evaluating only; `data` with its evaluation part added)."""
        raise NotImplementedError

    def evaluation_part(self, path: str, data, tokenizer, max_seq_length: int):
        """Another file (--test) read and prepared as the eval file is, with the training labels."""
        raise NotImplementedError

    def score(self, model, data, part) -> tuple[dict, dict]:
        """(metrics with `score`, files) of `model` on an evaluation part."""
        raise NotImplementedError

    def labels_of(self, model):
        """A fine-tuned model's labels, as `read_files` takes them (None: the kind has none)."""
        return None

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

    # --- the trainer's calls ----------------------------------------------------------------------
    def model_width(self) -> int | None:
        return pretrained_hidden_size(self.config.source.pretrained)

    def build_inputs(self, context: RunContext) -> FinetuningInputs:
        run = self.config.run
        finetuned = None
        if run.eval_only and self.evaluates_finetuned_model():
            with context.runtime.strategy.scope():
                finetuned, tokenizer, config = load_task_model(self.config.source.pretrained)
            backbone = Backbone(finetuned.backbone, tokenizer, config, self.config.source.pretrained)
            data = self.read_files(self.labels_of(finetuned))
        else:  # training, or evaluating a model that needs none (`evaluates_finetuned_model`)
            data = self.read_files()
            backbone = self._backbone(context)
        config = self._sequence_length(backbone)
        keras.utils.set_random_seed(run.seed)  # the data's order and the task head's initial weights
        train, data = self.prepare(data, backbone.tokenizer, config.max_seq_length, run.seed)
        output = self._output_folder(context.run_dir, backbone, config)  # after every check of the input
        settings = None if run.eval_only else self._settings(data, config)
        name = getattr(data, "name", "") or output.path.resolve().name  # files named only train/dev
        return FinetuningInputs(backbone, config, data, train, settings, name, output, finetuned)

    def evaluates_finetuned_model(self) -> bool:
        """Whether an evaluation-only run reads a fine-tuned model (--pretrained names its run or
        best.keras); a kind whose model needs no training (prompting) says False when it is given
        a pre-trained discriminator."""
        return True

    def _backbone(self, context: RunContext) -> Backbone:
        with context.runtime.strategy.scope():  # the model's variables are created (or restored) here
            return load_pretrained(self.config.source.pretrained, self.config.source.checkpoint,
                                   encoder_only=not self.uses_replaced_token_head)

    def _sequence_length(self, backbone: Backbone) -> BackboneConfig:
        """The backbone's config at the run's sequence length; the recorded model, if any, checked."""
        recorded = self.config.model
        if recorded is not None and recorded != backbone.config.model:
            differing = [k for k, v in recorded.to_dict().items() if backbone.config.model.to_dict()[k] != v]
            raise RunError(f"the config's model section describes another model than {backbone.source} holds "
                           f"(differing: {', '.join(differing)}): give the --pretrained its run started from.")
        positions = backbone.config.model.max_position_embeddings
        max_seq_length = self.config.run.max_seq_length or backbone.config.max_seq_length
        if not 3 <= max_seq_length <= positions:
            raise RunError(f"--max_seq_length must be in [3, {positions}] (the model's max_position_embeddings).")
        return backbone.config.replace(max_seq_length=max_seq_length)

    def _output_folder(self, folder: Path, backbone, config) -> FinetuneDir:
        """Emptied (with --overwrite), holding the run's config and the vocabulary, so best.keras
        reads alone."""
        output = FinetuneDir(folder)
        if written(output.path) and not self.overwrite:  # filled while we waited to lock
            raise RunError(f"{output.path} is not empty; choose a new --output_dir or pass --overwrite.")
        for old in written(output.path):  # keep our lock file
            shutil.rmtree(old) if old.is_dir() else old.unlink()
        output.path.mkdir(parents=True, exist_ok=True)
        run = self.config.run.replace(max_seq_length=config.max_seq_length)
        dataclasses.replace(self.config, run=run, model=config.model).save(output.config)
        backbone.tokenizer.save(output.vocab)
        return output

    def _settings(self, data, config) -> Settings:
        """Epochs, learning rate and layer-wise decay (given, or the defaults for the model's size
        and the task), and the steps they make; printed."""
        size, size_learning_rate, size_decay = size_defaults(config.model.hidden_size)
        train_examples = self.counts(data)[0]
        optimizer, run = self.config.optimizer, self.config.run
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
        return TrainingPlan(TrainingData(dataset=inputs.train), total_steps=settings.total_steps,
                            examples_per_step=self.config.run.update_batch_size, epochs=settings.epochs,
                            keep_best=True)

    def build_model(self, inputs: FinetuningInputs, context: RunContext):
        """The task's model on the pre-trained discriminator (or a fresh one), compiled with the
        official fine-tuning optimizer; evaluating only, the fine-tuned model as it was read."""
        if inputs.finetuned is not None:
            return inputs.finetuned
        settings, config, optimizer = inputs.settings, inputs.config, self.config.optimizer
        with context.runtime.strategy.scope():
            backbone = (build_discriminator(config.model) if self.config.source.random_init
                        else inputs.backbone.discriminator)
            model = self.build_task_model(backbone, inputs.data, config)
            if settings is None:  # evaluating a model that needs no training
                model.compile(jit_compile=context.runtime.xla)
                return model
            model.compile(optimizer=create_finetuning_optimizer(
                settings.learning_rate, settings.total_steps,
                LayerwiseDecay(settings.layerwise_lr_decay, config.model.num_layers, optimizer.layer_decay_schedule),
                optimizer.warmup_proportion, optimizer.weight_decay, optimizer.adam_epsilon, optimizer.clip_global_norm),
                jit_compile=context.runtime.xla, gradient_accumulation_steps=self.config.run.gradient_accumulation_steps)
        return model

    def evaluate(self, model, inputs: FinetuningInputs, final: bool = False):
        return self.score(model, inputs.data, inputs.data.evaluation)

    def on_best(self, model, inputs: FinetuningInputs, context: RunContext, files: dict) -> None:
        """The best epoch so far: its files (e.g. predictions.json) and best.keras, each whole."""
        for name, text in files.items():
            atomic_write_text(inputs.output.path / name, text)
        temporary = inputs.output.path / ".best.tmp.keras"
        model.save(temporary)
        os.replace(temporary, inputs.output.best_model)

    def finish(self, model, inputs: FinetuningInputs, context: RunContext, evaluation) -> dict:
        """The test file, if any, scored with the best epoch (restored by the trainer)."""
        if not self.config.files.test:
            return {}
        part = self.evaluation_part(self.config.files.test, inputs.data, inputs.backbone.tokenizer,
                                    inputs.config.max_seq_length)
        values, files = self.score(model, inputs.data, part)
        for name, text in files.items():
            atomic_write_text(inputs.output.path / f"{TEST_PREFIX}{name}", text)
        which = f"epoch {evaluation.best['epoch']}" if evaluation is not None else "the model evaluated"
        print(f"test ({which}): {numbers(values)}", flush=True)
        return {"test": {name: values[name] for name in (*self.metric_names(inputs.data), "score")},
                "test_file": self.config.files.test}

    def served_model(self, model, inputs: FinetuningInputs) -> ServedModel:
        return ServedModel(model, inputs.backbone.tokenizer, inputs.config, task_export_name(inputs.name), self.name)

    def report(self, inputs: FinetuningInputs) -> TaskReport:
        return FinetuningReport(self, inputs)


class FinetuningReport(TaskReport):
    """What a fine-tuning run prints and keeps in metrics.json: the counts and settings, the
    kind's own lines and fields (`describe_data`, `data_summary`), every epoch and the best."""

    def __init__(self, task: FinetuningTask, inputs: FinetuningInputs):
        self.task, self.inputs = task, inputs

    def header(self, model) -> list[str]:
        task, inputs = self.task, self.inputs
        train_examples, eval_examples = task.counts(inputs.data)
        source = task.config.source
        origin = "random initialisation" if source.random_init else inputs.backbone.source
        if inputs.settings is None:
            first = (f"Evaluating {inputs.name} with {origin}: {eval_examples:,} eval {task.eval_unit}, max_seq_length "
                     f"{inputs.config.max_seq_length}")
        else:
            settings = inputs.settings
            first = (f"Fine-tuning {inputs.name} from {origin}: {train_examples:,} training {task.train_unit} / "
                     f"{eval_examples:,} eval {task.eval_unit}, {settings.epochs} epoch(s) x "
                     f"{settings.steps_per_epoch} steps, max_seq_length {inputs.config.max_seq_length}")
        return [first, *(f"{inputs.name}: {line}" for line in task.describe_data(inputs.data))]

    def summary(self, model, final: dict, evaluation) -> dict:
        """The best epoch's metrics (or the one evaluation's), every epoch, the settings."""
        task, inputs = self.task, self.inputs
        best = evaluation.best if evaluation is not None else {**final, "epoch": None}
        train_examples, eval_examples = task.counts(inputs.data)
        config = task.config
        chosen = {} if inputs.settings is None else {
            "epochs": inputs.settings.epochs, "learning_rate": inputs.settings.learning_rate,
            "layerwise_lr_decay": inputs.settings.layerwise_lr_decay, "size_defaults": inputs.settings.size}
        return {"task": inputs.name, "kind": task.name,
                "eval": {name: best[name] for name in (*task.metric_names(inputs.data), "score")},
                "best_epoch": best["epoch"], "epochs": evaluation.history if evaluation is not None else [],
                "pretrained": config.source.pretrained, "random_init": config.source.random_init,
                "train_examples": train_examples, "train_unit": task.train_unit, "eval_examples": eval_examples,
                "eval_unit": task.eval_unit, **task.data_summary(inputs.data),
                "settings": {**config.run.to_dict(), **config.optimizer.to_dict(),
                             "max_seq_length": inputs.config.max_seq_length, **chosen},
                "config": str(inputs.output.config), "checkpoint": str(inputs.output.best_model)}


def task_from_command(args, output: Path) -> FinetuningTask:
    """The task a command line asks for: the kind (`requested_kind`), its config (`--config`, or
    evaluating only, the fine-tuned run's own settings; then `--set` and the flags), checked, the
    output folder refused when it is not empty (unless `--overwrite`)."""
    base = FinetuningConfig.load(args.config) if args.config else None
    pretrained = getattr(args, "pretrained", None) or (base.source.pretrained if base else None)
    evaluating = getattr(args, "eval_only", None) or (base is not None and base.run.eval_only)
    model_kind = None
    if evaluating and pretrained and base is None:
        base = _finetuned_run_config(Path(pretrained))
        found = kind_of_model(COMMAND, saved_model_class(pretrained) or "")
        model_kind = found.name if found else None
    kind = requested_kind(args, base, model_kind)
    config = config_from_command(args, base, kind)
    check_complete(config)
    if written(output) and not args.overwrite:
        raise RunError(f"{output} is not empty; choose a new --output_dir or pass --overwrite.")
    return KINDS[kind](config, overwrite=args.overwrite)


def _finetuned_run_config(path: Path) -> FinetuningConfig | None:
    """A fine-tuning run's own config.json (beside its best.keras), as the base of an evaluation
    of its model: its kind and settings, not its files."""
    folder = FinetuneDir(path if path.is_dir() else path.parent)
    try:
        config = FinetuningConfig.load(folder.config)
    except (ConfigError, OSError):
        return None  # a run of an earlier version (config.json held the model only), or none
    return dataclasses.replace(config, files=TaskFiles(), run=config.run.replace(eval_only=True))
