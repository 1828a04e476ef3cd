import io

import keras
import numpy as np
import tensorflow as tf

from electra_tf.finetuning.callbacks import EpochEvaluator, FinetuningProgress, predicted_metrics


class ScriptedModel(keras.Model):
    """predict() returns the next scripted output; weights are one scalar we can watch."""

    def __init__(self, outputs):
        super().__init__()
        self.outputs_by_epoch = list(outputs)
        self.value = self.add_weight(shape=(), initializer="zeros", name="value")
        self.optimizer = keras.optimizers.SGD()

    def predict(self, inputs, verbose=0):
        return self.outputs_by_epoch.pop(0)


def test_epoch_evaluator_keeps_the_best_epoch_and_reports_it(tmp_path):
    labels = np.array([0, 1, 1, 0])
    good = np.array([[2.0, 0.0], [0.0, 2.0], [0.0, 2.0], [2.0, 0.0]])
    bad = np.array([[0.0, 2.0], [2.0, 0.0], [0.0, 2.0], [2.0, 0.0]])
    model = ScriptedModel([bad, good, bad])
    best_epochs = []
    stream = io.StringIO()
    evaluator = EpochEvaluator(tf.summary.create_noop_writer(), predicted_metrics(None, labels, ("accuracy",), 2),
                               on_best=lambda record, files: best_epochs.append(record["epoch"]), stream=stream)
    evaluator.set_model(model)
    for epoch in range(3):
        model.value.assign(float(epoch))
        evaluator.on_epoch_end(epoch, {"loss": 1.0})
    assert best_epochs == [1, 2] and evaluator.best["accuracy"] == 1.0
    assert [round(r["accuracy"], 2) for r in evaluator.history] == [0.5, 1.0, 0.5]
    evaluator.restore_best()
    assert float(model.value) == 1.0  # the weights of epoch 2
    assert "epoch 2: eval accuracy 1.0000 | score 1.0000 (best so far)" in stream.getvalue()


def test_progress_logs_every_n_steps_and_the_last(tmp_path):
    stream = io.StringIO()
    progress = FinetuningProgress(tf.summary.create_noop_writer(), total_steps=5, batch_size=4, log_every=2,
                                  stream=stream)
    model = ScriptedModel([])
    progress.set_model(model)
    for step in range(1, 6):
        model.optimizer.iterations.assign(step)
        progress.on_train_batch_end(step - 1, {"loss": 0.5})
    lines = stream.getvalue().splitlines()
    assert [line.split("| ")[-2].strip() for line in lines] == ["step 2/5", "step 4/5", "step 5/5"]
    assert all("examples/s" in line for line in lines)
