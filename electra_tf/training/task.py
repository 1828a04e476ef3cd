"""What a kind of run gives the one trainer: `Task`, the objects they exchange, and the registry
every command finds kinds in.

A task holds its settings and nothing else. The trainer (`trainer.py`) asks it, in this order,
for what only it knows (its training protocol):

    model_width()                          the encoder's width, before TensorFlow starts (precision)
    build_inputs(context) -> inputs        its data read and checked (the trainer only hands it back)
    plan(inputs) -> TrainingPlan           what fit reads (`TrainingData`), how many steps, which
                                           evaluations, resumable or not
    build_model(inputs, context) -> model  compiled, inside the strategy's scope
    initialize(model, inputs, resumed)     starting weights from elsewhere (e.g. --init_from)
    callbacks(model, inputs, context)      its own callbacks and progress observers
    evaluate(model, inputs, final)         (metrics with `score`, files) on its evaluation data
    on_best(model, inputs, context, files) a better evaluation than any before (plans that keep the best)
    finish(model, inputs, context, ...)    after training: artifacts (the backbone), test scores
    served_model(model, inputs)            what an export of the run serves

and, apart from training, `report(inputs) -> TaskReport`: what the run prints and what its
metrics.json holds. An evaluation-only run (`Trainer.evaluate`) asks for the inputs, the model,
one evaluation, `finish` and the report: no plan, no step.

Everything a task builds it returns; the trainer hands it back (`inputs`, `model`), so a task
keeps no state between calls. Modelled on TF Model Garden's `base_task.Task` and keras-hub's
task classes, with Keras' `fit` as the loop.

Kinds register by name (`register_task`) and declare, as class attributes, what a command needs
to run them without naming them: the command that runs them, their config section (its
fields are the kind's flags and its `--set` keys), the flag or `--task` names that choose them,
and the saved models they make. The package's own kinds are entry points of the group
`electra_tf.tasks` (setup.py), as a plugin's are; `--import MODULE` adds a module of one's own
(`utils/registry.py`; docs/finetuning.md, "Write your own kind of task").
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import Any, Callable

from electra_tf.utils.errors import ElectraError, RunError
from electra_tf.utils.registry import Registry, RegistryError

KINDS = Registry("kind of run", "electra_tf.tasks")


def register_task(name: str):
    """Class decorator: registers a `Task` subclass as the kind `name`."""
    return KINDS.register(name)


def kinds(command: str) -> dict[str, type]:
    """The kinds a command runs, by name."""
    return {name: cls for name, cls in KINDS.items() if cls.command == command}


def default_kind(command: str) -> type:
    chosen = [cls for cls in kinds(command).values() if cls.default]
    if len(chosen) != 1:
        raise RegistryError(f"{len(chosen)} kinds declare themselves the default of {command}: "
                            f"{', '.join(c.name for c in chosen) or 'none'}.")
    return chosen[0]


def kind_for_task_name(command: str, task_name: str) -> type | None:
    """The kind that runs the named task (`--task NAME`), or None."""
    matches = [cls for cls in kinds(command).values() if cls.runs_task(task_name)]
    return matches[0] if matches else None


def kind_of_model(command: str, registered_name: str) -> type | None:
    """The kind whose runs make a saved model of this registered Keras name, or None."""
    matches = [cls for cls in kinds(command).values() if registered_name in cls.model_names]
    return matches[0] if matches else None


@dataclasses.dataclass(frozen=True)
class TrainingData:
    """What `fit` reads: a finite `dataset` read once an epoch, or a resumable `stream`
    (`resumable_input.ResumableInput`) read to the plan's last step. `explain(error)` turns a
    `tf.errors.DataLossError` met while reading it into an ElectraError saying what to do."""

    dataset: Any = None
    stream: Any = None
    explain: Callable[[Exception], ElectraError] | None = None

    def read_error(self, error) -> ElectraError:
        return self.explain(error) if self.explain else RunError(f"reading the training data failed: {error}")


@dataclasses.dataclass(frozen=True)
class TrainingPlan:
    """How the trainer runs a task. `data`: what fit reads. `epochs`: `fit` reads the finite
    dataset that many times (fine-tuning); None: it reads the stream until `total_steps`
    (pre-training). `evaluate_every`: steps between evaluations during training (None: after
    every epoch when there are epochs, else none). `keep_best`: the evaluations choose the
    weights the run ends with (fine-tuning's best epoch). `resumable`: checkpoints, exact resume
    after any stop; `restore_input_position` False when a resume must not put back the input's
    position (a new phase's first start reads other data)."""

    data: TrainingData
    total_steps: int
    examples_per_step: int
    epochs: int | None = None
    evaluate_every: int | None = None
    keep_best: bool = False
    resumable: bool = False
    restore_input_position: bool = True
    console_metrics: tuple = ("loss",)


@dataclasses.dataclass
class RunContext:
    """Where the run happens: its folder, this process's role among the workers, the runtime
    (strategy created), the trainer's settings, and a stack that closes what the run opens."""

    run_dir: Path
    role: Any  # runtime.cluster.WorkerRole
    runtime: Any  # runtime.devices.Runtime
    trainer: Any  # training.config.TrainerConfig
    closing: contextlib.ExitStack


@dataclasses.dataclass
class TaskCallbacks:
    """A task's own callbacks; `observers(step, window metrics)` see every progress window;
    `pauses`: callbacks' `Pause` counters by name, summed in metrics.json."""

    callbacks: list = dataclasses.field(default_factory=list)
    observers: list[Callable] = dataclasses.field(default_factory=list)
    pauses: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class ServedModel:
    """What an export of a run serves: the model, the tokenizer its signatures run, the
    backbone config (architecture and sequence length) its metadata keeps, the name it is
    served under by default ("" : the run folder's), and the kind of run that made it."""

    model: Any
    tokenizer: Any
    config: Any  # models.backbone.BackboneConfig
    name: str = ""
    kind: str = ""


class TaskReport:
    """What a run prints and what its metrics.json holds, for one task's inputs: the header
    before training, an evaluation's console line, the task's fields of metrics.json."""

    def header(self, model) -> list[str]:
        return []

    def metrics_line(self, metrics: dict) -> str:
        return ", ".join(f"{name} {value:.4f}" for name, value in metrics.items() if isinstance(value, (int, float)))

    def summary(self, model, final: dict, evaluation) -> dict:
        """`final`: the run's final metrics; `evaluation`: its `PeriodicEvaluation` (its history
        and best; None without one)."""
        return {}


class Task:
    """Base of every kind of run (module docstring). Subclasses set their settings as fields."""

    name = "task"  # set by register_task
    command: str | None = None  # the command that runs the kind: "pretrain" or "finetune"
    section: type | None = None  # its own config section (utils/sections.Section)
    default = False  # the kind its command runs when none is named
    flag: str | None = None  # a flag that chooses it (`--tagging`)
    task_names: tuple = ()  # the named tasks (`--task NAME`) it runs
    model_names: tuple = ()  # registered Keras names of the models its runs save

    @classmethod
    def runs_task(cls, task_name: str) -> bool:
        """Whether it runs the named task (`--task NAME`, any case)."""
        return task_name.lower() in (name.lower() for name in cls.task_names)

    @classmethod
    def task_values(cls, task_name: str) -> dict:
        """Its section's values for a named task (`--task NAME`)."""
        return {}

    def model_width(self) -> int | None:
        return None

    def build_inputs(self, context: RunContext):
        raise NotImplementedError

    def plan(self, inputs) -> TrainingPlan:
        raise NotImplementedError

    def build_model(self, inputs, context: RunContext):
        raise NotImplementedError

    def initialize(self, model, inputs, resumed_from: int | None) -> str | None:
        """Weights from elsewhere for a run that did not resume; returns where from (or None)."""
        return None

    def callbacks(self, model, inputs, context: RunContext, writer) -> TaskCallbacks:
        return TaskCallbacks()

    def evaluate(self, model, inputs, final: bool = False) -> tuple[dict, dict]:
        raise NotImplementedError

    def on_best(self, model, inputs, context: RunContext, files: dict) -> None:
        """A better evaluation than any before (plans with `keep_best`): keep what it needs."""

    def finish(self, model, inputs, context: RunContext, evaluation) -> dict:
        """After training (the chief and every worker; `evaluation` the run's
        `PeriodicEvaluation` or None): final artifacts; returns metrics.json fields."""
        return {}

    def served_model(self, model, inputs) -> ServedModel | None:
        return None

    def report(self, inputs) -> TaskReport:
        return TaskReport()
