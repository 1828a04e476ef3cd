"""`ReplacementSamples`: a TensorBoard text panel of one sentence with the generator's
replacements and the discriminator's verdicts, every `every` steps of a pre-training run."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from electra_tf.runtime.optimizer import optimizer_step
from electra_tf.training.callbacks import Pause, passed_a_multiple


class ReplacementSamples(keras.callbacks.Callback):
    """A TensorBoard text panel: one example with replacements and the discriminator's verdicts."""

    def __init__(self, writer, probe_batch, tokenizer, every: int = 200):
        """Shows the first example of `probe_batch`, and runs the networks on that one alone
        (a whole batch would pause the run every `every` steps for seconds on a CPU).

        The first panel is written when the run's first call of the step has ended, not before
        it (it would add to the first step, which a rerun waits for). The networks run through a
        `tf.function` traced at that first panel, whose window the first step's tracing and
        compiling slow anyway; every later panel is one graph call (run eagerly, a panel
        dispatches the networks' ops one by one, a pause comparable to a GPU's whole window)."""
        super().__init__()
        self.writer = writer
        self.probe = {key: tf.constant(value[:1]) for key, value in probe_batch.items()}
        self.tokenizer = tokenizer
        self.every = every
        self.pause = Pause()
        self._outputs_of = None  # the networks as a tf.function, traced at the first panel
        self._last = None  # the step of the last panel, across the run's fits

    def on_train_batch_end(self, batch, logs=None):
        step = optimizer_step(self.model)
        if self._last is None or passed_a_multiple(self._last, step, self.every):
            self._last = step
            self._write(step)

    def _write(self, step):
        with self.pause:
            if self._outputs_of is None:
                self._outputs_of = tf.function(self.model.compute_pretraining_outputs, autograph=False)
            text = render_replacements(self._outputs_of, self.probe, self.tokenizer)
            with self.writer.as_default(step=step):
                tf.summary.text("samples/replaced_token_detection", text)
            self.writer.flush()


def render_replacements(outputs_of, batch, tokenizer, row: int = 0) -> str:
    """Markdown for one example: ~~original~~ **sample** for replaced tokens, and a verdict
    mark after every token the discriminator calls replaced (p > 0.5). `outputs_of`: the
    pre-trainer's `compute_pretraining_outputs`, eager or traced."""
    outputs = outputs_of(batch, tf.constant([7, 7], tf.int64))
    length = int(np.sum(batch["padding_mask"][row]))
    original = np.array(batch["token_ids"][row])
    positions = np.array(batch["mask_positions"][row])[np.array(batch["mask_weights"][row]) > 0]
    original[positions] = np.array(batch["mask_ids"][row])[: len(positions)]
    corrupted = np.array(outputs["corrupted_ids"][row])
    labels = np.array(outputs["replaced_token_labels"][row])
    probabilities = 1.0 / (1.0 + np.exp(-np.array(outputs["disc_logits"][row])))
    words, hits, misses, false_alarms = [], 0, 0, 0
    for t in range(length):
        token = tokenizer.id_to_token(int(corrupted[t]))
        if labels[t]:
            token = f"~~{tokenizer.id_to_token(int(original[t]))}~~ **{token}**"
        flagged = probabilities[t] > 0.5
        if flagged:
            token += " ⚑" if labels[t] else " ⚐"
        hits += int(flagged and labels[t])
        misses += int(labels[t] and not flagged)
        false_alarms += int(flagged and not labels[t])
        words.append(token)
    header = (f"{int(labels.sum())} of {len(positions)} masked tokens replaced by the generator; "
              f"discriminator caught {hits}, missed {misses}, false alarms {false_alarms}.")
    legend = ("~~original~~ **generator sample** = replaced token; ⚑ discriminator says replaced "
              "(correct); ⚐ discriminator says replaced (wrong).")
    return f"{header}\n\n{' '.join(words)}\n\n{legend}"
