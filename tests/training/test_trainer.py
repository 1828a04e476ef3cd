"""The trainer runs any task: here two kinds defined in this file alone (a new kind of task is
one module), one read for epochs keeping its best evaluation, one a resumable stream."""

import dataclasses
import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from electra_tf.runtime.config import RuntimeConfig
from electra_tf.training.config import TrainerConfig
from electra_tf.training.task import KINDS, ServedModel, Task, TaskReport, TrainingData, TrainingPlan, register_task
from electra_tf.utils.registry import RegistryError
from electra_tf.training.trainer import Trainer


def dense_model(context):
    keras.utils.set_random_seed(0)
    with context.runtime.strategy.scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
        model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    return model


@dataclasses.dataclass
class LineInputs:
    train: object
    features: np.ndarray
    targets: np.ndarray


@register_task("line_fit_for_tests")
@dataclasses.dataclass(frozen=True)
class LineFit(Task):
    """y = x . w, read for `epochs`; an evaluation after each, the best kept."""

    epochs: int = 3

    def build_inputs(self, context):
        rng = np.random.default_rng(0)
        features = rng.normal(size=(64, 4)).astype("float32")
        targets = features @ np.array([1.0, -2.0, 0.5, 3.0], "float32")
        return LineInputs(tf.data.Dataset.from_tensor_slices((features, targets)).batch(8), features, targets)

    def plan(self, inputs):
        return TrainingPlan(TrainingData(dataset=inputs.train), total_steps=8 * self.epochs, examples_per_step=8,
                            epochs=self.epochs, keep_best=True)

    def build_model(self, inputs, context):
        return dense_model(context)

    def evaluate(self, model, inputs, final=False):
        error = float(np.mean((model.predict(inputs.features, verbose=0)[:, 0] - inputs.targets) ** 2))
        return {"mse": error, "score": -error}, {}

    def served_model(self, model, inputs):
        return ServedModel(model, None, None, "line")

    def report(self, inputs):
        return LineReport()


class LineReport(TaskReport):
    def summary(self, model, final, evaluation):
        if evaluation is None:  # evaluating only
            return {"mse": final["mse"]}
        return {"best_epoch": evaluation.best["epoch"], "mse_by_epoch": [e["mse"] for e in evaluation.history]}


@dataclasses.dataclass
class StreamInputs:
    train: object
    features: np.ndarray


@register_task("stream_fit_for_tests")
@dataclasses.dataclass(frozen=True)
class StreamFit(Task):
    """The same line, as an endless stream trained to `steps`: checkpointed and resumed."""

    steps: int = 12

    def build_inputs(self, context):
        from electra_tf.training.resumable_input import ResumableInput

        rng = np.random.default_rng(1)
        features = rng.normal(size=(64, 4)).astype("float32")
        data = tf.data.Dataset.from_tensor_slices({"x": features, "padding_mask": np.ones((64, 1), "int32")})
        return StreamInputs(ResumableInput(data.repeat().batch(8, drop_remainder=True)), features)

    def plan(self, inputs):
        return TrainingPlan(TrainingData(stream=inputs.train), total_steps=self.steps, examples_per_step=8,
                            evaluate_every=4, resumable=True)

    def build_model(self, inputs, context):
        keras.utils.set_random_seed(0)
        with context.runtime.strategy.scope():
            model = PullTowardsZero()
            model.compile(optimizer=keras.optimizers.SGD(0.1))
        return model

    def evaluate(self, model, inputs, final=False):
        return {"norm": float(np.linalg.norm(model.weight.numpy())), "score": 0.0}, {}


class PullTowardsZero(keras.Model):
    """A one-weight model whose train step pulls its weight towards 0 (a dict batch, no labels)."""

    def __init__(self):
        super().__init__()
        self.weight = self.add_weight(shape=(4,), initializer="ones", name="weight")
        self.built = True

    def train_step(self, data):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(tf.linalg.matvec(data["x"], self.weight)))
        self.optimizer.apply(tape.gradient(loss, [self.weight]), [self.weight])
        return {"loss": loss}


def test_a_task_of_epochs_keeps_its_best_evaluation_and_reports_the_whole_run(tmp_path, capsys):
    served = []
    result = Trainer(LineFit(), TrainerConfig(log_every=4), RuntimeConfig(), tmp_path / "run").run(
        after_training=lambda model: served.append(model.name) or {"export": "nowhere"})
    assert result.status == "finished" and result.step == 24
    printed = capsys.readouterr().out
    assert "epoch 3: eval mse" in printed and "step 24/24 (100.0%)" in printed
    summary = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert len(summary["mse_by_epoch"]) == 3 and summary["export"] == "nowhere" and served == ["line"]
    assert summary["steps_trained"] == 24 and len(summary["processes"]) == 1
    # The run ends with the best epoch's weights, and reports that epoch's metrics.
    assert result.metrics["mse"] == min(summary["mse_by_epoch"]) < summary["mse_by_epoch"][0]
    assert KINDS["line_fit_for_tests"] is LineFit


def test_a_resumable_stream_checkpoints_resumes_and_sums_its_processes(tmp_path, capsys):
    config = TrainerConfig(log_every=4, checkpoint_every=4)
    first = Trainer(StreamFit(steps=8), config, RuntimeConfig(), tmp_path / "run").run()
    assert first.status == "finished" and first.latest_checkpoint.endswith("ckpt-8")
    longer = Trainer(StreamFit(steps=12), config, RuntimeConfig(), tmp_path / "run").run()
    printed = capsys.readouterr().out
    assert "resumed from step 8" in printed and longer.step == 12
    summary = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert [p["steps"] for p in summary["processes"]] == [8, 4] and summary["steps_trained"] == 12
    # Evaluations from both processes, each step once.
    assert sorted(summary["evaluations_during_run"], key=int) == ["4", "8", "12"]
    norms = [summary["evaluations_during_run"][s]["norm"] for s in ("4", "8", "12")]
    assert norms[0] > norms[1] > norms[2]  # the weight went on shrinking where it was saved


def test_a_task_kind_is_registered_once():
    with pytest.raises(RegistryError, match="registered twice"):
        register_task("line_fit_for_tests")(type("Other", (Task,), {}))


def test_evaluation_only_trains_no_step_and_writes_the_run_summary(tmp_path, capsys):
    served = []
    result = Trainer(LineFit(), TrainerConfig(log_every=4), RuntimeConfig(), tmp_path / "eval").evaluate(
        after_evaluation=lambda model: served.append(model.name) or {"export": "somewhere"})
    assert result.status == "finished" and result.step == 0 and served == ["line"]
    printed = capsys.readouterr().out
    assert "evaluating only: no training step" in printed and "step " not in printed.split("evaluating only")[1]
    summary = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    assert summary["evaluation_only"] and summary["export"] == "somewhere" and summary["step"] == 0
    assert summary["mse"] == result.metrics["mse"] > 0  # an untrained line, evaluated as it is
    assert not (tmp_path / "eval" / "checkpoints").exists()
