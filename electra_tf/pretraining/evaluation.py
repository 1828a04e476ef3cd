"""Evaluation during and after a pre-training run, and the run's health warnings.

`HeldOutEvaluation` computes the pretrainer's metrics (the discriminator's AUC, accuracy,
precision and recall on replaced tokens; the generator's MLM accuracy and loss) on a fixed set
of batches: held-out text when the data has a held-out split (`build_data --held_out`) or
`--eval_data` names one, otherwise training text masked afresh, and says which. Evaluations
during the run use the same batches, masking and generator samples every time, so their
numbers are comparable over time, and leave the run's own sampling stream where it was, so
turning them on does not change training. The final evaluation reads the same batches and
masking with the generator sampling on from the run's stream, as it always has (the run is
over; its figures stay those of runs without evaluations during training).

`TrainingHealth` reads the progress windows' metrics and warns, once each, about the two ways
ELECTRA pre-training fails without a visible error: a discriminator that calls every token
original (recall on replaced tokens near zero after warm-up: google-research/electra #73), and
a generator so good that its samples are nearly always the original token, leaving the
discriminator little to learn from (google-research/electra #37).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import keras

from electra_tf.utils.progress import batch_progress

# The generator's sampling stream during an evaluation: a fixed state, so every evaluation of a
# run draws the same replacements for the same batches.
EVALUATION_SAMPLING_STATE = 20_200_604


@dataclass(frozen=True)
class EvaluationText:
    """What an evaluation reads: `description` says it in words, `held_out` whether it is text
    the run never trains on."""

    files: list[str] | None  # held-out example files; None: training text masked afresh
    description: str

    @property
    def held_out(self) -> bool:
        return self.files is not None


class HeldOutEvaluation:
    """The pretrainer's metrics on `batches` (a dataset of masked batches, already placed for
    the run's workers); the trainer writes them to TensorBoard and the progress output."""

    def __init__(self, pretrainer, batches, num_batches: int, quiet: bool = False):
        self.pretrainer, self.batches, self.num_batches, self.quiet = pretrainer, batches, num_batches, quiet

    def __call__(self, progress_label: str | None = None, fixed_sampling: bool = True) -> dict:
        model = self.pretrainer
        state = model.seed_generator.state
        saved_state = keras.ops.convert_to_numpy(state)
        saved_steps = model.steps_per_execution
        callbacks = ([batch_progress(progress_label, self.num_batches, "batches")]
                     if progress_label and not self.quiet else [])
        try:
            if fixed_sampling:
                state.assign(keras.ops.cast(keras.ops.full(saved_state.shape, EVALUATION_SAMPLING_STATE),
                                            state.dtype))
            model.steps_per_execution = 1  # read when the step is called: training's loop is unchanged
            metrics = model.evaluate(self.batches, steps=self.num_batches, return_dict=True, verbose=0,
                                     callbacks=callbacks)
        finally:
            if fixed_sampling:
                state.assign(saved_state)
            model.steps_per_execution = saved_steps
            for metric in model.metrics:  # training's next window starts from empty trackers
                metric.reset_state()
        return {key: float(value) for key, value in metrics.items()}


def describe(metrics: dict) -> str:
    parts = [f"MLM acc {metrics['masked_lm_accuracy']:.3f}", f"MLM loss {metrics['masked_lm_loss']:.3f}"]
    if "disc_auc" in metrics:
        parts += [f"replaced-token AUC {metrics['disc_auc']:.3f}", f"precision {metrics['disc_precision']:.3f}",
                  f"recall {metrics['disc_recall']:.3f}"]
    return ", ".join(parts)


# A discriminator is "calling everything original" while its recall on replaced tokens stays
# below this; a generator "runs away" while its samples equal the original token above this
# rate. The embedded default's recall dips to 0.002 just after warm-up and is above 0.01 within
# 100 steps (results.md#the-embedded-default): the span below is at least twice that.
RECALL_FLOOR = 0.01
SAMPLED_ACCURACY_CEILING = 0.75


class TrainingHealth:
    """Warns once, on stderr, when a failure mode holds for every progress window of a span
    after warm-up: `max(2 windows, a tenth of the phase's steps)`."""

    def __init__(self, warmup_end: int, phase_steps: int, log_every: int, stream=None):
        self.warmup_end, self.log_every = warmup_end, log_every
        self.span = max(2 * log_every, phase_steps // 10)
        self.stream = stream or sys.stderr
        self.windows: list[tuple[int, dict]] = []  # (last step, window metrics), windows after warm-up
        self.warned: set[str] = set()
        self.given: list[str] = []  # the warnings' texts, for the run's summary

    def observe(self, step: int, metrics: dict) -> list[str]:
        """Records the window that ended at `step`; returns the warnings given now."""
        if step - self.log_every < self.warmup_end:
            return []
        self.windows.append((step, {k: float(v) for k, v in metrics.items()}))
        if step - self.windows[0][0] + self.log_every < self.span:
            return []
        recent = [m for s, m in self.windows if s > step - self.span]
        given = []
        if ("recall" not in self.warned and all("disc_recall" in m for m in recent)
                and all(m["disc_recall"] < RECALL_FLOOR for m in recent)):
            given.append(("recall", f"warning: over the last {self.span:,} steps (after warm-up) the discriminator "
                          f"found fewer than {RECALL_FLOOR:.0%} of the replaced tokens (recall on replaced tokens "
                          f"{recent[-1]['disc_recall']:.3f}): it is calling almost every token original, the usual "
                          "way ELECTRA pre-training fails while the loss looks normal. What usually helps: a lower "
                          "learning_rate or a longer num_warmup_steps; a smaller generator "
                          "(generator_hidden_fraction, e.g. 0.25) whose replacements are easier to spot; a larger "
                          "disc_weight. Watch train/disc_recall in TensorBoard."))
        if ("generator" not in self.warned and all("sampled_masked_lm_accuracy" in m for m in recent)
                and all(m["sampled_masked_lm_accuracy"] > SAMPLED_ACCURACY_CEILING for m in recent)):
            given.append(("generator", f"warning: over the last {self.span:,} steps the generator's samples equalled "
                          f"the original token {recent[-1]['sampled_masked_lm_accuracy']:.0%} of the time: few "
                          "tokens are replaced, so the discriminator has little to learn from. What usually helps: "
                          "a smaller generator (generator_hidden_fraction, generator_layers_fraction), or a higher "
                          "sampling temperature. Watch train/sampled_masked_lm_accuracy in TensorBoard."))
        for key, text in given:
            self.warned.add(key)
            self.given.append(text)
            print(text, file=self.stream, flush=True)
        return [text for _, text in given]
