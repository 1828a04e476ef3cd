"""The TensorBoard replacement panels of a pre-training run."""

import keras
import tensorflow as tf

from electra_tf.pretraining.config import PretrainingConfig
from electra_tf.pretraining.pretrainer import ElectraPretrainer
from electra_tf.pretraining.samples import ReplacementSamples, render_replacements
from electra_tf.pretraining.synthetic import masked_batch


class FakeModel:
    def __init__(self):
        self.optimizer = keras.optimizers.SGD(learning_rate=0.5)


class TokenNames:
    def id_to_token(self, token_id):
        return f"t{token_id}"


def test_replacement_panels_start_after_the_first_step_traced_once(tmp_path):
    config = PretrainingConfig.load("electra_tiny", {"vocab_size": 100, "num_layers": 1, "max_seq_length": 16})
    pretrainer = ElectraPretrainer.from_pretraining_config(config)
    model = FakeModel()
    model.compute_pretraining_outputs = pretrainer.compute_pretraining_outputs
    panels = ReplacementSamples(tf.summary.create_file_writer(str(tmp_path)), masked_batch(config, 2, seed=3),
                                TokenNames(), every=2)
    panels.set_model(model)
    panels.on_train_begin()
    assert panels.pause.count == 0  # nothing before the first step: a rerun's first step waits for no panel
    model.optimizer.iterations.assign_add(1)
    panels.on_train_batch_end(0)
    assert panels.pause.count == 1 and panels._outputs_of.experimental_get_tracing_count() == 1  # at step 1
    for batch in range(1, 6):
        model.optimizer.iterations.assign_add(1)
        panels.on_train_batch_end(batch)
    assert panels.pause.count == 4  # steps 1, 2, 4, 6
    panels.on_train_begin()  # the next fit of the run (after float16 skips): no extra panel
    model.optimizer.iterations.assign_add(1)
    panels.on_train_batch_end(0)
    assert panels.pause.count == 4 and panels._outputs_of.experimental_get_tracing_count() == 1
    eager = render_replacements(pretrainer.compute_pretraining_outputs, panels.probe, TokenNames())
    assert "~~" in eager and render_replacements(panels._outputs_of, panels.probe, TokenNames()) == eager
