"""Evaluations during training: on schedule or every epoch, the best one's weights kept."""

import io

import keras
import numpy as np
import tensorflow as tf

from electra_tf.finetuning.text.metrics import compute
from electra_tf.training.evaluation import PeriodicEvaluation, numbers


class ScriptedModel(keras.Model):
    """Its evaluations score the next scripted output; its weights are one scalar we can watch."""

    def __init__(self, outputs):
        super().__init__()
        self.outputs_by_epoch = list(outputs)
        self.value = self.add_weight(shape=(), initializer="zeros", name="value")
        self.optimizer = keras.optimizers.SGD()


def test_every_epoch_keeping_the_best_epoch_and_reporting_it():
    labels = np.array([0, 1, 1, 0])
    good = np.array([[2.0, 0.0], [0.0, 2.0], [0.0, 2.0], [2.0, 0.0]])
    bad = np.array([[0.0, 2.0], [2.0, 0.0], [0.0, 2.0], [2.0, 0.0]])
    model = ScriptedModel([bad, good, bad])
    best_epochs, stream = [], io.StringIO()
    evaluation = PeriodicEvaluation(lambda: (compute(("accuracy",), model.outputs_by_epoch.pop(0), labels, 2), {}),
                                    tf.summary.create_noop_writer(), numbers, keep_best=True,
                                    on_best=lambda record, files: best_epochs.append(record["epoch"]), stream=stream)
    evaluation.set_model(model)
    for epoch in range(3):
        model.value.assign(float(epoch))
        evaluation.on_epoch_end(epoch, {"loss": 1.0})
    assert best_epochs == [1, 2] and evaluation.best["accuracy"] == 1.0
    assert [round(r["accuracy"], 2) for r in evaluation.history] == [0.5, 1.0, 0.5]
    evaluation.restore_best()
    assert float(model.value) == 1.0  # the weights of epoch 2
    assert "epoch 2: eval accuracy 1.0000 | score 1.0000 (best so far)" in stream.getvalue()


def test_on_schedule_a_step_an_earlier_process_evaluated_is_not_evaluated_again(tmp_path):
    model = ScriptedModel([])
    calls = []
    evaluation = PeriodicEvaluation(lambda: (calls.append(1) or {"auc": 0.5}, {}),
                                    tf.summary.create_file_writer(str(tmp_path)), numbers, every=2, stream=io.StringIO())
    evaluation.earlier = {2}
    evaluation.set_model(model)
    for step in range(1, 7):
        model.optimizer.iterations.assign(step)
        evaluation.on_train_batch_end(step - 1, {"loss": 1.0})
    assert sorted(evaluation.results) == [4, 6] and len(calls) == 2 and evaluation.best is None
