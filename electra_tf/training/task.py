"""What a kind of training run gives the one trainer: `Task`, and the objects they exchange.

A task is a small object that holds its settings and nothing else. The trainer (`trainer.py`)
asks it, in this order, for what only it knows:

    model_width()                          the encoder's width, before TensorFlow starts (precision)
    build_inputs(context) -> inputs        its data read and checked; `inputs.train` is what fit reads
    plan(inputs) -> TrainingPlan           how many steps, which schedule of evaluations, resumable or not
    build_model(inputs, context) -> model  compiled, inside the strategy's scope
    initialize(model, inputs, resumed)     starting weights from elsewhere (e.g. --init_from)
    describe(model, inputs) -> lines       the run's header, after what every run prints
    callbacks(model, inputs, context)      its own callbacks and progress observers
    evaluate(model, inputs, final)         (metrics with `score`, files) on its evaluation data
    finish(model, inputs, context, ...)    after training: artifacts (the backbone), test scores
    summary(model, inputs, final, ...)     its fields of metrics.json
    served_model(model, inputs)            what an export of the run serves

Everything it builds it returns; the trainer hands it back (`inputs`, `model`), so a task
keeps no state between calls. Kinds register by name (`register_task`), so a new kind is one
module with its `Task` subclass. Modelled on TF Model Garden's `base_task.Task` and keras-hub's
task classes, with Keras' `fit` as the loop.
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import Any, Callable

TASKS: dict[str, type] = {}


def register_task(kind: str):
    """Class decorator: the task class of `kind` (`TASKS[kind]`)."""
    def register(cls):
        if TASKS.get(kind, cls) is not cls:
            raise ValueError(f"task kind {kind!r} is registered twice ({TASKS[kind].__name__}, {cls.__name__}).")
        cls.kind = kind
        TASKS[kind] = cls
        return cls
    return register


@dataclasses.dataclass(frozen=True)
class TrainingPlan:
    """How the trainer runs a task. `epochs`: `fit` reads the finite training dataset that
    many times (fine-tuning); None: it reads a stream until `total_steps` (pre-training).
    `evaluate_every`: steps between evaluations during training (None: after every epoch when
    there are epochs, else none). `keep_best`: the evaluations choose the weights the run ends
    with (fine-tuning's best epoch). `resumable`: checkpoints, exact resume after any stop;
    `restore_input_position` False when a resume must not put back the input's position (a new
    phase's first start reads other data)."""

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
    backbone config (architecture and sequence length) its metadata keeps, and the name it is
    served under by default ("" : the run folder's)."""

    model: Any
    tokenizer: Any
    config: Any  # models.backbone.BackboneConfig
    name: str = ""


class Task:
    """Base of every kind of run (module docstring). Subclasses set `config`."""

    kind = "task"

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

    def describe(self, model, inputs) -> list[str]:
        return []

    def callbacks(self, model, inputs, context: RunContext, writer) -> TaskCallbacks:
        return TaskCallbacks()

    def evaluate(self, model, inputs, final: bool = False) -> tuple[dict, dict]:
        raise NotImplementedError

    def describe_metrics(self, metrics: dict, inputs) -> str:
        """An evaluation's metrics for its console line."""
        from electra_tf.training.evaluation import numbers

        return numbers(metrics)

    def on_best(self, model, inputs, context: RunContext, files: dict) -> None:
        """A better evaluation than any before (plans with `keep_best`): keep what it needs."""

    def read_error(self, inputs, error):
        """An ElectraError for a tf.errors.DataLossError met while reading the training data."""
        from electra_tf.utils.errors import RunError

        return RunError(f"reading the training data failed: {error}")

    def finish(self, model, inputs, context: RunContext, evaluation) -> dict:
        """After training (the chief and every worker; `evaluation` the run's
        `PeriodicEvaluation` or None): final artifacts; returns metrics.json fields."""
        return {}

    def summary(self, model, inputs, final: dict, evaluation) -> dict:
        """Its fields of metrics.json: `final` the run's final metrics, `evaluation` the
        `PeriodicEvaluation` of the run (its history and best; None without one)."""
        return {}

    def served_model(self, model, inputs) -> ServedModel | None:
        return None
