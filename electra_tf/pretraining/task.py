"""`PretrainingTask`: ELECTRA pre-training (and the BERT-style MLM baseline, `objective: mlm`)
as a task of the one trainer (`training/trainer.py`).

Its inputs are the data (`data.py`), the config the run continues with (`phases.py` decides
it against the model_dir's saved config, and the chief writes it with the vocabulary), a
resumable stream of masked batches and a fixed set of evaluation batches. Its model is the
`ElectraPretrainer` with the official optimizer; its plan is resumable, to the config's last
step. When training is done it writes the discriminator as the run's backbone
(`MODEL_DIR/backbone/`, `models/backbone.py`), which fine-tuning and the exports start from.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
import time

import keras
import tensorflow as tf
from tensorboard.plugins.hparams import api as hparams

from electra_tf.data.shards import explain_read_error
from electra_tf.models.backbone import Backbone, BackboneConfig
from electra_tf.pretraining.config import ObjectiveConfig, PretrainingConfig
from electra_tf.pretraining.data import (DataSource, PretrainingData, check_same_vocabulary, evaluation_text,
                                         prepare_data)
from electra_tf.pretraining.evaluation import EvaluationText, HeldOutEvaluation, TrainingHealth, describe
from electra_tf.pretraining.input_pipeline import evaluation_dataset, pretraining_dataset, raw_text_dataset
from electra_tf.pretraining.phases import continue_run, position_note
from electra_tf.pretraining.pretrainer import ElectraPretrainer, pretraining_optimizer
from electra_tf.pretraining.restore import initialize_from, source_model_dir
from electra_tf.pretraining.samples import ReplacementSamples
from electra_tf.runtime.optimizer import optimizer_step
from electra_tf.training.checkpointing import latest_checkpoint_step
from electra_tf.training.resumable_input import ResumableInput
from electra_tf.training.task import (RunContext, ServedModel, Task, TaskCallbacks, TaskReport, TrainingData,
                                      TrainingPlan, register_task)
from electra_tf.training.workers import per_worker
from electra_tf.utils.errors import RunError
from electra_tf.utils.files import atomic_write_text
from electra_tf.utils.run_dir import ModelDir, read_provenance

FINAL_METRICS = ("masked_lm_accuracy", "masked_lm_loss", "sampled_masked_lm_accuracy", "disc_auc",
                 "disc_accuracy", "disc_precision", "disc_recall", "disc_loss", "loss")
CONSOLE_METRICS = ("loss", "masked_lm_accuracy", "disc_auc")


@dataclasses.dataclass
class PretrainingInputs:
    config: PretrainingConfig  # what this run trains with (its phase, the data's vocabulary size)
    data: PretrainingData
    train: ResumableInput
    eval_batches: list  # the evaluation's batches (eval_text says of what)
    eval_dataset: object  # the same, as a tf.data.Dataset placed for the run's workers
    eval_text: EvaluationText
    health: TrainingHealth  # reads the progress windows
    starting_phase: bool = False  # a new phase's first start: its input position is not restored
    context: RunContext | None = None


@register_task("pretraining")
@dataclasses.dataclass(frozen=True)
class PretrainingTask(Task):
    """ELECTRA pre-training (objective electra), or the BERT-style masked-LM baseline (objective
    mlm). `config`: what the command asks for (a rerun continues the model_dir's run: `phases`);
    `phase` None continues the model_dir's current phase; `init_from`: a model_dir or checkpoint
    whose weights a new run starts from."""

    config: PretrainingConfig
    source: DataSource = DataSource()
    phase: int | None = None
    init_from: str | None = None
    command = "pretrain"
    section = ObjectiveConfig
    default = True
    model_names = ("electra_tf>Discriminator",)

    def __post_init__(self):
        if self.phase is not None and self.phase < 1:
            raise RunError(f"--phase must be at least 1, got {self.phase}.")

    def model_width(self) -> int:
        return self.config.model.hidden_size

    # --- inputs -------------------------------------------------------------------------------
    def build_inputs(self, context: RunContext) -> PretrainingInputs:
        model_dir = ModelDir(context.run_dir)
        data = prepare_data(self.source, self.config.run.max_seq_length, model_dir, context.role)
        config, decision = self._run_config(model_dir, data.tokenizer, context.role)
        text = evaluation_text(self.source, data, config.run.max_seq_length)
        train, eval_batches, eval_dataset = _input(config, data, self.source, text, context)
        health = TrainingHealth(config.run.phase_start_step + config.optimizer.num_warmup_steps, config.run.phase_steps,
                                context.trainer.log_every)
        return PretrainingInputs(config, data, train, eval_batches, eval_dataset, text, health, decision.starts_phase,
                                 context)

    def _run_config(self, model_dir: ModelDir, tokenizer, role):
        """The config with the data's vocabulary size, continuing the model_dir's run if it holds
        one (`phases.continue_run`); the chief writes it, and the vocabulary, to the model_dir."""

        config = self.config
        if config.model.vocab_size != tokenizer.vocabulary_size:
            config = config.replace(vocab_size=tokenizer.vocabulary_size)
        saved = PretrainingConfig.load(str(model_dir.config)) if model_dir.config.is_file() else None
        latest = latest_checkpoint_step(model_dir.checkpoints)
        decision = continue_run(saved, config, self.phase, latest,
                                str(model_dir.path.resolve()) if saved else str(model_dir.path))
        if latest is not None and latest >= decision.config.run.num_train_steps:
            print(f"  {model_dir.path} holds a run finished at step {latest:,}: a larger --steps extends it; a new "
                  "--model_dir (or removing this one) starts a run afresh")
        for line in decision.messages:
            print(line)
        for line in decision.warnings:
            print(line, file=sys.stderr, flush=True)
        if role.is_chief:
            model_dir.path.mkdir(parents=True, exist_ok=True)
            if decision.change is not None:
                _record_change(model_dir, decision.change)
            decision.config.save(model_dir.config)
            if model_dir.vocab.exists():
                check_same_vocabulary(model_dir, tokenizer)
            else:
                tokenizer.save(model_dir.vocab)
        if decision.config.run.train_batch_size % role.count:
            raise RunError(f"train_batch_size {decision.config.run.train_batch_size} does not split evenly over "
                           f"{role.count} workers: choose a multiple of the number of workers.")
        return decision.config, decision

    def plan(self, inputs: PretrainingInputs) -> TrainingPlan:
        run = inputs.config.run
        data = TrainingData(stream=inputs.train, explain=lambda error: _read_error(inputs.data, error))
        return TrainingPlan(data, total_steps=run.num_train_steps, examples_per_step=run.effective_batch_size,
                            resumable=True, restore_input_position=not inputs.starting_phase,
                            console_metrics=CONSOLE_METRICS)

    # --- the model ----------------------------------------------------------------------------
    def build_model(self, inputs: PretrainingInputs, context: RunContext):
        config = inputs.config
        # Initial weights and every dropout seed generator follow the config's seed.
        keras.utils.set_random_seed(config.run.seed)
        with context.runtime.strategy.scope():
            pretrainer = ElectraPretrainer.from_pretraining_config(config)
            pretrainer.compile(optimizer=pretraining_optimizer(config), jit_compile=context.runtime.xla,
                               steps_per_execution=context.trainer.steps_per_loop,
                               gradient_accumulation_steps=config.run.gradient_accumulation_steps)
        # Before the restore: a resume then finds its compiled steps (`CompiledGradients.trace_steps`).
        pretrainer.trace_steps(inputs.train.spec, _batch_spec(inputs.eval_batches[0]))
        return pretrainer

    def initialize(self, model, inputs: PretrainingInputs, resumed_from: int | None) -> str | None:
        if not self.init_from:
            return None
        if resumed_from is not None:
            print(f"  --init_from {self.init_from} ignored: continuing this run's own checkpoints")
            return None

        found = initialize_from(model, self.init_from)
        if read_provenance(source_model_dir(self.init_from)[0]).get("generator_initialised"):
            print(f"  {self.init_from} holds no trained generator (a keras-hub preset has none): the generator "
                  "starts from random weights of the config's size")
        return found

    def callbacks(self, model, inputs: PretrainingInputs, context: RunContext, writer) -> TaskCallbacks:
        callbacks = TaskCallbacks(observers=[inputs.health.observe] if context.role.is_chief else [])
        if context.role.is_chief:
            self._write_run_description(writer, model, inputs, context)
        if model.discriminator is not None and context.role.is_chief:
            samples = ReplacementSamples(writer, inputs.eval_batches[0], inputs.data.tokenizer,
                                         inputs.config.evaluation.sample_every)
            callbacks.callbacks.append(samples)
            callbacks.pauses["replacement_samples"] = samples.pause
        return callbacks

    def _write_run_description(self, writer, model, inputs: PretrainingInputs, context: RunContext) -> None:
        """The run's data, runtime and config as TensorBoard text, and its hyper-parameters."""

        runtime = context.runtime
        text = "\n".join([
            f"data: {inputs.data.description}", f"runtime: {runtime.strategy_name}, {runtime.precision}, "
            f"XLA {'on' if runtime.xla else 'off'}", f"initial weights: {self.init_from or 'random'}", "",
            "```json", inputs.config.to_json(), "```"])
        with writer.as_default(step=optimizer_step(model)):
            tf.summary.text("run/config", text)
            hparams.hparams({key: (value if isinstance(value, (int, float, str, bool)) else str(value))
                             for key, value in inputs.config.flat().items()})
        writer.flush()

    # --- evaluation and the end ------------------------------------------------------------------
    def evaluate(self, model, inputs: PretrainingInputs, final: bool = False) -> tuple[dict, dict]:
        """During the run: the same batches, masking and generator samples every time. The final
        evaluation: the same batches and masking with the generator sampling on from the run's
        stream, as it always has."""

        evaluation = HeldOutEvaluation(model, inputs.eval_dataset, len(inputs.eval_batches),
                                       quiet=not inputs.context.role.is_chief)
        if final:
            return evaluation(progress_label="final evaluation", fixed_sampling=False), {}
        return evaluation(), {}

    def finish(self, model, inputs: PretrainingInputs, context: RunContext, evaluation) -> dict:
        """The discriminator as the run's backbone (the chief; the MLM baseline has none)."""
        served = self.served_model(model, inputs)
        if served is None or not context.role.is_chief:
            return {}

        folder = ModelDir(context.run_dir).backbone
        Backbone(served.model, served.tokenizer, served.config).save(
            folder, {"step": optimizer_step(model), "source": str(ModelDir(context.run_dir).path.resolve())})
        return {"backbone": str(folder)}

    def served_model(self, model, inputs: PretrainingInputs) -> ServedModel | None:
        if model.discriminator is None:
            return None
        config = inputs.config
        return ServedModel(model.standalone_discriminator(), inputs.data.tokenizer,
                           BackboneConfig(config.model, config.run.max_seq_length), kind=self.name)

    def report(self, inputs: PretrainingInputs) -> TaskReport:
        return PretrainingReport(inputs)


class PretrainingReport(TaskReport):
    """What a pre-training run prints and keeps in metrics.json: its size and data, the
    evaluation's metrics on the text they were computed on, what the run has seen."""

    def __init__(self, inputs: PretrainingInputs):
        self.inputs = inputs

    def header(self, model) -> list[str]:
        inputs = self.inputs
        config, tokenizer, role = inputs.config, inputs.data.tokenizer, inputs.context.role
        kept = model.discriminator or model.generator  # the MLM baseline keeps its generator
        lines = [f"ELECTRA pre-training: {ModelDir(inputs.context.run_dir).name}, {kept.count_params():,} parameters "
                 f"in the {'discriminator' if model.discriminator else 'encoder'} (the model kept after "
                 f"pre-training); {_describe_steps(config)} of {_describe_batch(config)}.",
                 f"  data: {inputs.data.description}; vocabulary {tokenizer.vocabulary_size:,} tokens"
                 + (f" ({tokenizer.settings.describe()})" if tokenizer.sentencepiece_model is not None else ""),
                 f"  evaluation {_every(inputs.context.trainer.eval_every)}at the end: "
                 f"{config.evaluation.eval_batches} batches of {inputs.eval_text.description}"]
        if role.is_multi_worker:
            lines.append(f"  this process: {role.describe()}, reading {config.run.effective_batch_size // role.count} of "
                         f"every step's {config.run.effective_batch_size} examples from its own shards")
        if inputs.data.kind != "records" and ModelDir(inputs.context.run_dir).checkpoints.is_dir():
            lines.append("  note: raw text input restarts from the beginning of the text on resume (shards from "
                         "build_data resume at the exact batch)")
        note = position_note(config)
        return lines + ([note] if note else [])

    def metrics_line(self, metrics: dict) -> str:
        return f"on {self.inputs.eval_text.description}: {describe(metrics)}"

    def summary(self, model, final: dict, evaluation) -> dict:
        inputs = self.inputs
        config = inputs.config
        # In a later phase, this phase's: the earlier phases' batches and lengths were their own.
        examples = (optimizer_step(model) - config.run.phase_start_step) * config.run.effective_batch_size
        return {"objective": config.objective.objective,
                "batch": {"examples_per_update": config.run.effective_batch_size,
                          "micro_batch": config.run.train_batch_size,
                          "gradient_accumulation_steps": config.run.gradient_accumulation_steps},
                "examples_seen": examples,
                "tokens_seen": examples * config.run.max_seq_length,  # sequence positions: packed, nearly all tokens
                "phase": {"phase": config.run.phase, "started_at_step": config.run.phase_start_step,
                          "max_seq_length": config.run.max_seq_length},
                "final_eval": final, "evaluated_on": inputs.eval_text.description,
                "evaluation_batches": config.evaluation.eval_batches,
                "evaluated_on_held_out_text": inputs.eval_text.held_out,
                "health_warnings": inputs.health.given, "data": inputs.data.description}


def _read_error(data: PretrainingData, error) -> RunError:
    """A DataLossError met while reading the training data, explained."""
    if data.kind == "records":
        return explain_read_error(error, data.location)
    return RunError(f"reading the raw text failed: {error}")


def _input(config: PretrainingConfig, data: PretrainingData, source: DataSource, text, context: RunContext):
    """(the resumable training stream, the evaluation's batches, the same as a dataset placed for
    the workers)."""

    role, runtime = context.role, context.runtime
    # Each worker reads its own share of every update: all its micro-batches at once, which the
    # step splits (runtime/accumulation.py); the evaluation's batches are micro-batches.
    worker_batch = config.run.train_batch_size // role.count
    input_context = (tf.distribute.InputContext(role.count, role.index, runtime.num_replicas)
                     if role.is_multi_worker else None)

    def make_dataset(seed, batch_size):
        if data.kind == "records":
            return pretraining_dataset(data.location, config, data.tokenizer, batch_size, seed=seed,
                                       input_context=input_context)
        return raw_text_dataset(data.location, config, data.tokenizer, batch_size, seed=seed,
                                text_field=source.text_field)

    # Raw text is read through a Python generator, whose position TensorFlow cannot save: a
    # resumed run then reads the text from the start again (build_data's shards resume exactly).
    resumable = context.closing.enter_context(contextlib.closing(ResumableInput(
        make_dataset(config.run.seed, worker_batch * config.run.gradient_accumulation_steps),
        checkpointable=data.kind == "records")))
    evaluation = (evaluation_dataset(text.files, config, data.tokenizer, worker_batch, seed=config.run.seed + 1,
                                     input_context=input_context)
                  if text.held_out else make_dataset(config.run.seed + 1, worker_batch))
    batches = [batch for batch in evaluation.take(config.evaluation.eval_batches)]
    stacked = tf.data.Dataset.from_tensor_slices({k: tf.stack([b[k] for b in batches]) for k in batches[0]})
    return resumable, batches, per_worker(runtime.strategy, role, stacked)


def _batch_spec(batch) -> dict:
    return {key: tf.TensorSpec.from_tensor(value) for key, value in batch.items()}


def _record_change(model_dir: ModelDir, change: dict) -> None:
    history = json.loads(model_dir.config_history.read_text()) if model_dir.config_history.is_file() else []
    history.append({"time": time.strftime("%Y-%m-%d %H:%M:%S %Z"), **change})
    atomic_write_text(model_dir.config_history, json.dumps(history, indent=2) + "\n")


def _every(eval_every: int | None) -> str:
    return f"every {eval_every:,} steps and " if eval_every else ""


def _describe_steps(config: PretrainingConfig) -> str:
    run = config.run
    if run.phase == 1:
        return f"{run.num_train_steps:,} steps"
    return (f"phase {run.phase}, steps {run.phase_start_step:,} to {run.num_train_steps:,} "
            f"({run.num_train_steps - run.phase_start_step:,} steps)")


def _describe_batch(config: PretrainingConfig) -> str:
    run = config.run
    if run.gradient_accumulation_steps == 1:
        return f"{run.train_batch_size} x {run.max_seq_length}"
    return (f"{run.effective_batch_size} x {run.max_seq_length} (each update sums "
            f"{run.gradient_accumulation_steps} micro-batches of {run.train_batch_size})")
