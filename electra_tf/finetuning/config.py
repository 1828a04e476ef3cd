"""A fine-tuning run's configuration: `FinetuningConfig`, by what each part configures.

    kind       the kind of run (`training/task.KINDS`: classification, tagging, question_answering,
               and any a user registers)
    task       the kind's own section (its `section`: columns, heads, windows, ...)
    source     PretrainedSource   the model it starts from (--pretrained, --checkpoint, --random_init)
    files      TaskFiles          the labelled files (--train, --eval, --test)
    optimizer  FinetuningOptimizerConfig   the official fine-tuning optimizer's settings
    run        FinetuningRunConfig         epochs, batch, sequence length, seed, evaluation only
    trainer    training.config.TrainerConfig   progress lines
    runtime    runtime.config.RuntimeConfig    strategy, precision, XLA
    model      the pre-trained model's architecture (written by the run, for reading best.keras;
               not a setting: the model is --pretrained's)

A run's config.json holds all of it, and `finetune --config RUN/config.json` reruns the run.
Every field is a `--set` key (flat, or `section.key`); the fields declared with `option` are
flags too (`add_finetuning_options`). Defaults are the official ELECTRA fine-tuning values; a
learning rate, layer-wise decay or epoch count left None is chosen by the model's size and the
task (`finetuning/task.py`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any, Mapping

from electra_tf.models.config import ModelConfig, read_json_object
from electra_tf.runtime.config import LAYER_DECAY_SCHEDULES, RuntimeConfig
from electra_tf.training.config import TrainerConfig
from electra_tf.training.task import KINDS, default_kind, kind_for_task_name, kinds
from electra_tf.utils.sections import ConfigError, Section, SectionedConfig, Sections, add_options, given_options, option

COMMAND = "finetune"
KIND_KEY, MODEL_KEY = "kind", "model"


@dataclasses.dataclass(frozen=True)
class PretrainedSource(Section):
    pretrained: str | None = option(
        None, "what it starts from: a pre-training model_dir (or its backbone/ folder), a keras-hub preset, a .keras "
        "file or an export; with --eval_only, a fine-tuning run's folder or its best.keras")
    checkpoint: str | None = option(None, "with a model_dir: e.g. ckpt-2000 (default: its backbone, else the latest)")
    random_init: bool = option(False, "the same architecture with fresh weights (the no-pre-training baseline)")


@dataclasses.dataclass(frozen=True)
class TaskFiles(Section):
    train: str | None = option(None, "training file (.csv, .tsv, .jsonl, GLUE .tsv, CoNLL, SQuAD .json)")
    eval: str | None = option(None, "evaluation file, the same layout: the best epoch is chosen on it")
    test: str | None = option(None, "a third file, scored once with the best epoch (metrics.json's test)")


@dataclasses.dataclass(frozen=True)
class FinetuningOptimizerConfig(Section):
    learning_rate: float | None = option(
        None, "default: by the model's size (tiny 3e-3, small 3e-4, base 1e-4, large 5e-5)")
    layerwise_lr_decay: float | None = option(
        None, "per-layer factor, embeddings lowest (1 = off; default by the model's size: 0.8, large 0.9)")
    layer_decay_schedule: str = option(
        "official", "official: the top layer gets decay^2 as in google-research/electra; corrected: decay^1 "
        "(see electra_tf/runtime/optimizer.py)", choices=LAYER_DECAY_SCHEDULES)
    warmup_proportion: float = option(0.1, "the share of the steps the learning rate warms up over")
    weight_decay: float = option(0.01, "AdamW's weight decay (not on biases and LayerNorm)")
    adam_epsilon: float = option(1e-6, "Adam's epsilon (the official fine-tuning value)")
    clip_global_norm: float = option(1.0, "the global norm the gradients are clipped to")

    def check(self) -> None:
        self.require(self.learning_rate is None or self.learning_rate > 0, "learning_rate", "must be positive.")
        self.require(self.layerwise_lr_decay is None or 0 < self.layerwise_lr_decay <= 1, "layerwise_lr_decay",
                     "must be in (0, 1].")
        self.require(self.layer_decay_schedule in LAYER_DECAY_SCHEDULES, "layer_decay_schedule",
                     f"must be one of {LAYER_DECAY_SCHEDULES}.")
        self.require(0 <= self.warmup_proportion < 1, "warmup_proportion", "must be in [0, 1).")
        self.require(0 <= self.weight_decay < 1, "weight_decay", "must be in [0, 1).")
        self.require(self.adam_epsilon > 0, "adam_epsilon", "must be positive.")
        self.require(self.clip_global_norm > 0, "clip_global_norm", "must be positive.")


@dataclasses.dataclass(frozen=True)
class FinetuningRunConfig(Section):
    epochs: int | None = option(None, "default: 3 (official), 10 for RTE, STS-B and files under 6,000 examples, "
                                      "the kind's own otherwise (2 for SQuAD)")
    batch_size: int = option(32, "examples of one forward and backward pass")
    # Each update sums the gradients of this many batches of batch_size (runtime/accumulation.py).
    gradient_accumulation_steps: int = option(1, "make each update from K batches of --batch_size", metavar="K")
    max_seq_length: int | None = option(None, "default: the length the model was pre-trained at")
    seed: int = option(1, "the data's order and the task head's initial weights")
    eval_only: bool = option(False, "evaluate a fine-tuned model (--pretrained names its run folder or best.keras) "
                                    "on --eval (and --test) without training")

    def check(self) -> None:
        self.at_least_one("epochs", "batch_size", "gradient_accumulation_steps", "max_seq_length")

    @property
    def update_batch_size(self) -> int:
        """The examples of one update: batch_size x gradient_accumulation_steps."""
        return self.batch_size * self.gradient_accumulation_steps


COMMON_SECTIONS = {"source": PretrainedSource, "files": TaskFiles, "optimizer": FinetuningOptimizerConfig,
                   "run": FinetuningRunConfig, "trainer": TrainerConfig, "runtime": RuntimeConfig}


@dataclasses.dataclass(frozen=True)
class FinetuningConfig(SectionedConfig):
    """A fine-tuning run's config (module docstring)."""

    kind: str
    task: Section
    source: PretrainedSource = PretrainedSource()
    files: TaskFiles = TaskFiles()
    optimizer: FinetuningOptimizerConfig = FinetuningOptimizerConfig()
    run: FinetuningRunConfig = FinetuningRunConfig()
    trainer: TrainerConfig = TrainerConfig(log_every=20)
    runtime: RuntimeConfig = RuntimeConfig()
    model: ModelConfig | None = None

    def section_map(self) -> Sections:
        return Sections({"task": type(self.task), **COMMON_SECTIONS})

    @classmethod
    def for_kind(cls, kind: str) -> "FinetuningConfig":
        """The defaults of a kind of run."""
        return cls(kind, KINDS[kind].section())

    def to_dict(self) -> dict[str, Any]:
        model = {MODEL_KEY: self.model.to_dict()} if self.model is not None else {}
        return {KIND_KEY: self.kind, **super().to_dict(), **model}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], source: str = "config") -> "FinetuningConfig":
        kind = values.get(KIND_KEY)
        if kind not in KINDS:
            raise ConfigError(f"{source}: {KIND_KEY!r} = {kind!r}: not a kind of fine-tuning run; known: "
                              f"{', '.join(kinds(COMMAND))}.")
        base = cls.for_kind(kind)
        model = values.get(MODEL_KEY)
        grouped = base.section_map().split({k: v for k, v in values.items() if k not in (KIND_KEY, MODEL_KEY)}, source)
        config = base.with_sections(grouped, source)
        return dataclasses.replace(config, model=ModelConfig.from_dict(model, source) if model is not None else None)

    @classmethod
    def load(cls, path: str | Path) -> "FinetuningConfig":
        values = read_json_object(path)
        if KIND_KEY not in values:
            raise ConfigError(f"{path}: not a fine-tuning run's config.json (it has no {KIND_KEY!r}); a run of this "
                              "version writes one in its output folder.")
        return cls.from_dict(values, str(path))


def add_finetuning_options(parser) -> None:
    """The flags of every section: the common ones, then each kind's own, in its group (a flag
    that several kinds' sections share is added once, by the first)."""
    defined: set[str] = set()
    for title, section in (("the pre-trained model", PretrainedSource), ("files", TaskFiles),
                           ("training (official ELECTRA fine-tuning values by default)", FinetuningRunConfig),
                           ("the optimizer", FinetuningOptimizerConfig), ("the trainer", TrainerConfig),
                           ("where it runs", RuntimeConfig)):
        add_options(parser.add_argument_group(title), section, defined)
    for name, kind in kinds(COMMAND).items():
        group = parser.add_argument_group(f"{name} (--kind {name}{', or ' + kind.flag if kind.flag else ''})",
                                          kind.__doc__.strip().splitlines()[0] if kind.__doc__ else None)
        if kind.flag:
            group.add_argument(kind.flag, dest="kind", action="store_const", const=name, default=argparse.SUPPRESS,
                               help=f"the same as --kind {name}")
        add_options(group, kind.section, defined)


def requested_kind(args, base: FinetuningConfig | None, model_kind: str | None = None) -> str:
    """The kind a command line asks for: --kind (or a kind's flag), else the kind that runs
    --task, else the base config's (--config), else the saved model's (`model_kind`), else the
    command's default kind. Two that disagree are an error."""
    named = getattr(args, "kind", None)
    if named is not None and named not in kinds(COMMAND):
        raise ConfigError(f"--kind {named}: not a kind of fine-tuning run; kinds: {', '.join(kinds(COMMAND))} (a kind "
                          "of your own: --import MODULE).")
    by_task = None
    if getattr(args, "task", None):
        found = kind_for_task_name(COMMAND, args.task)
        if found is None:
            names = sorted({n for kind in kinds(COMMAND).values() for n in kind.task_names}, key=str.lower)
            raise ConfigError(f"--task {args.task!r} is not a task any kind runs; known: {', '.join(names)}.")
        by_task = found.name
    if named and by_task and named != by_task:
        raise ConfigError(f"--task {args.task} is a {by_task} task, and the command also asks for --kind {named}: "
                          "give one.")
    asked = named or by_task
    if base is not None and asked and asked != base.kind:
        raise ConfigError(f"--config holds a {base.kind} run; this command asks for {asked}: drop one.")
    return asked or (base.kind if base else None) or model_kind or default_kind(COMMAND).name


def config_from_command(args, base: FinetuningConfig | None, kind: str) -> FinetuningConfig:
    """The run's config: `base` (--config) or the kind's defaults, then `--set`, then the
    flags given; paths made absolute, so the saved config reruns from any folder."""
    _refuse_other_kinds_options(args, kind)
    config = base if base is not None else FinetuningConfig.for_kind(kind)
    config = config.with_overrides(getattr(args, "set", None) or [])
    grouped = {name: given_options(args, section) for name, section in config.section_map().sections.items()}
    if getattr(args, "task", None):
        grouped["task"] = {**KINDS[kind].task_values(args.task), **grouped["task"]}
    config = config.with_sections({name: values for name, values in grouped.items() if values}, "command line")
    return dataclasses.replace(config, source=_absolute(config.source, ("pretrained",)),
                               files=_absolute(config.files, ("train", "eval", "test")))


def _refuse_other_kinds_options(args, kind: str) -> None:
    """A flag of another kind's section that the chosen kind does not have is an error, not
    silently ignored (`--tagging --regression`)."""
    own = set(KINDS[kind].section.field_types())
    for name, other in kinds(COMMAND).items():
        for field in other.section.field_types():
            if field in vars(args) and field not in own:
                raise ConfigError(f"--{field} is an option of {name} runs; this is a {kind} run, which does not "
                                  "combine with it.")


def _absolute(section: Section, keys) -> Section:
    return section.replace(**{k: str(Path(getattr(section, k)).resolve()) for k in keys if getattr(section, k)})


def check_complete(config: FinetuningConfig) -> None:
    """What a run cannot start without, named as the flags that give it."""
    missing = [flag for flag, value in (("--pretrained", config.source.pretrained), ("--eval", config.files.eval),
                                        ("--train", config.files.train or config.run.eval_only)) if not value]
    if missing:
        raise ConfigError(f"give {', '.join(missing)} (or --config of a run whose config.json has them).")
    config.task.check_complete()
