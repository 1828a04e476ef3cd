"""One whole pre-training run as a library call: `run_pretraining(options) -> RunResult`.

Data (built once for the bundled sample, or read from a build_data folder, or packed on the fly
from raw text), the strategy and precision, the pretrainer and its optimizer, exact resume from
the model_dir's latest checkpoint, `fit` with the run's callbacks, a final evaluation on
held-out batches, and the discriminator's export for TF Serving. `python -m electra_tf.pretrain`
parses arguments into `PretrainingOptions` and maps the `RunResult` to an exit status.

Rerunning with the same model_dir continues from the last checkpoint (weights, optimizer, step,
random state and input position). SIGTERM/SIGINT save a checkpoint and stop the run.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from electra_tf.models.config import ElectraConfig
from electra_tf.utils.errors import RunError
from electra_tf.utils.run_dir import ModelDir, bundled_data_dir

FINAL_METRICS = ("masked_lm_accuracy", "masked_lm_loss", "sampled_masked_lm_accuracy", "disc_auc",
                 "disc_accuracy", "disc_precision", "disc_recall", "disc_loss", "loss")
BUNDLED_SAMPLE_SHARDS = 8


@dataclass(frozen=True)
class PretrainingOptions:
    config: ElectraConfig
    model_dir: Path
    data: list[str] | None = None  # None: the bundled Wikipedia sample
    vocab: str | None = None  # None: the data's vocabulary (or one learned from raw text)
    strategy: str = "auto"
    mixed_precision: str = "auto"
    xla: bool | None = None
    checkpoint_every: int = 200
    keep_checkpoints: int = 3
    log_every: int = 50
    sample_every: int = 200
    eval_batches: int = 20
    export_dir: Path | None = None  # None: MODEL_DIR/export
    export: bool = True  # False: no export at the end (e.g. a first phase; `python -m electra_tf.export` makes one later)
    profile_steps: tuple[int, int] | None = None
    init_from: str | None = None  # a model_dir or checkpoint whose weights a new run starts from
    # Steps per call of the compiled step (Keras' steps_per_execution; the official code's TPU
    # `iterations_per_loop`): the host reads a step's results once per call. One device only.
    steps_per_loop: int = 1
    # None: the model_dir's current phase; one more than it starts a new phase (a longer
    # sequence length, docs/pretraining.md#when-the-batch-does-not-fit).
    phase: int | None = None
    eval_data: str | None = None  # a build_data folder of held-out text (None: the data's held-out split)
    eval_every: int | None = None  # None: evaluate at the end only
    text_field: str = "text"  # the field of raw record inputs (JSON Lines, Parquet, Arrow) that holds the text

    def __post_init__(self):
        for name in ("checkpoint_every", "keep_checkpoints", "log_every", "sample_every", "eval_batches",
                     "steps_per_loop"):
            if getattr(self, name) < 1:
                raise RunError(f"{name} must be at least 1, got {getattr(self, name)}.")
        if self.steps_per_loop > 1 and self.strategy not in ("auto", "one_device"):
            raise RunError(steps_per_loop_needs_one_device(self.steps_per_loop, self.strategy))
        if self.eval_every is not None and (self.eval_every < 1 or self.eval_every % self.log_every):
            raise RunError(f"--eval_every {self.eval_every} must be a positive multiple of --log_every "
                           f"{self.log_every}: an evaluation runs between two progress windows.")
        if self.phase is not None and self.phase < 1:
            raise RunError(f"--phase must be at least 1, got {self.phase}.")
        if self.profile_steps is not None and not 0 <= self.profile_steps[0] < self.profile_steps[1]:
            raise RunError(f"profile_steps takes (START, STOP) with 0 <= START < STOP, got {self.profile_steps}.")


def steps_per_loop_needs_one_device(steps_per_loop: int, strategy: str) -> str:
    # Keras' several-steps loop fails under MirroredStrategy (keras-team/keras#19246).
    return (f"--steps_per_loop {steps_per_loop} needs one device (--strategy one_device, or auto on one GPU or "
            f"a CPU); this run's strategy is {strategy}: use --steps_per_loop 1.")


@dataclass
class RunResult:
    """What a run did. `status` is "finished", "diverged" (at step `diverged_at`) or "stopped"
    (by `signal`, after saving a checkpoint)."""

    status: str
    step: int
    model_dir: ModelDir
    latest_checkpoint: str | None
    seconds: float
    precision: str = "float32"
    metrics: dict = field(default_factory=dict)
    export_path: Path | None = None
    diverged_at: int | None = None
    overflowing: bool = False  # diverged as float16 gradients overflowing at every loss scale
    signal: int | None = None
    skipped_steps: int = 0  # batches float16 loss scaling skipped (no update), over the whole run
    is_chief: bool = True  # False: a multi-worker run's other worker (the chief writes the run's files)
    evaluated_on: str = ""  # what the final metrics were computed on, in words


def resolve_config(config: str, overrides: list[str] = (), steps: int | None = None,
                   batch_size: int | None = None, seed: int | None = None,
                   gradient_accumulation_steps: int | None = None) -> ElectraConfig:
    """A preset or JSON file, `key=value` overrides, then the run-length shortcuts. `steps`
    shortens warmup to at most a tenth of the run, so a short run still decays."""
    resolved = ElectraConfig.load(config).with_overrides(list(overrides))
    changes = {}
    if steps is not None:
        changes["num_train_steps"] = steps
        changes["num_warmup_steps"] = min(resolved.num_warmup_steps, steps // 10)
    if batch_size is not None:
        changes["train_batch_size"] = batch_size
    if seed is not None:
        changes["seed"] = seed
    if gradient_accumulation_steps is not None:
        changes["gradient_accumulation_steps"] = gradient_accumulation_steps
    return resolved.replace(**changes) if changes else resolved


@dataclass(frozen=True)
class _Data:
    kind: str  # "records" (a build_data folder) or "raw" (text packed on the fly)
    location: object  # the folder, or the list of raw inputs
    tokenizer: object
    description: str


def _prepare_data(options: PretrainingOptions, config: ElectraConfig, model_dir: ModelDir, role) -> _Data:
    from electra_tf.data.builder import build_shards
    from electra_tf.data.shards import metadata_vocab_file, read_metadata, resolve_data
    from electra_tf.data.tokenization import ElectraTokenizer

    if options.data is None:
        data_dir = bundled_data_dir(config.max_seq_length)
        if not role.is_chief:
            _wait_for_chief(data_dir / "metadata.json", "the bundled sample's shards")
        elif not (data_dir / "metadata.json").is_file():
            print(f"Preparing the bundled Wikipedia sample in {data_dir} (once; later runs reuse it) ...",
                  flush=True)
            build_shards(data_dir, max_seq_length=config.max_seq_length, num_shards=BUNDLED_SAMPLE_SHARDS,
                         num_workers=min(BUNDLED_SAMPLE_SHARDS, os.cpu_count() or 1), overwrite=True)
        kind, location = "records", str(data_dir)
    else:
        kind, paths = resolve_data(options.data[0])
        location = paths[0] if kind == "records" else list(options.data)
    if kind == "records":
        metadata = read_metadata(location)
        vocab = options.vocab or metadata_vocab_file(location, metadata)
        description = f"{location} ({metadata['examples']:,} packed examples)"
    else:
        if role.is_multi_worker:
            raise RunError("a multi-worker run reads build_data shards, which split between workers by file "
                           "and resume exactly: build them first (python -m electra_tf.build_data --input ... "
                           "--num_shards N, N at least the number of workers) and pass that folder to --data.")
        vocab = options.vocab or str(model_dir.vocab)
        if not Path(vocab).is_file():
            from electra_tf.data.vocabulary import DEFAULT_VOCAB_SIZE, build_vocabulary
            build_vocabulary(list(location), DEFAULT_VOCAB_SIZE, Path(vocab), text_field=options.text_field)
        description = f"raw text, packed on the fly: {' '.join(location)}"
    return _Data(kind, location, ElectraTokenizer(vocab), description)


def _check_same_vocabulary(model_dir: ModelDir, tokenizer) -> None:
    """A run continues with the vocabulary, and the casing, it started with."""
    from electra_tf.data.tokenization import read_tokenizer_settings, read_vocabulary

    settings = read_tokenizer_settings(model_dir.vocab)
    if read_vocabulary(model_dir.vocab) != tokenizer.vocabulary:
        raise RunError(f"{model_dir.vocab} is not the vocabulary of the data ({tokenizer.vocabulary_path}): the "
                       "run was started with other data. Use a new --model_dir, or the data it was started with.")
    if settings != tokenizer.settings:
        raise RunError(f"{model_dir.path} tokenizes {settings.describe()}, but the data's vocabulary "
                       f"({tokenizer.vocabulary_path}) is read {tokenizer.settings.describe()}. Use a new "
                       "--model_dir, or data built with the run's casing.")


def _wait_for_chief(path: Path, what: str, timeout: float = 1800.0) -> None:
    """A worker waits for a file the chief writes once (the job's shared data)."""
    deadline = time.monotonic() + timeout
    if not path.is_file():
        print(f"  waiting for the chief to prepare {what} ({path}) ...", flush=True)
    while not path.is_file():
        if time.monotonic() > deadline:
            raise RunError(f"the chief did not prepare {what} within {timeout / 60:.0f} minutes ({path} is "
                           "missing); check the chief's output.")
        time.sleep(1.0)


# What a new phase may change: the sequence length and batch, and the phase's own schedule.
PHASE_SETTINGS = ("max_seq_length", "train_batch_size", "gradient_accumulation_steps", "learning_rate",
                  "num_warmup_steps", "num_train_steps", "lr_decay_power")


def _continue_config(model_dir: ModelDir, config: ElectraConfig, phase: int | None = None,
                     record: bool = True) -> ElectraConfig:
    """The config to run with in a model_dir that may hold a run already.

    In the same phase only a longer run may differ from the saved config: more num_train_steps
    extends it, keeping its warmup. The learning rate then follows the official schedule
    computed for the new total, as the official code does when restarted with a larger
    num_train_steps: linear decay to 0 at the new end (at the extension point the rate steps up
    from where the old plan had it). `phase` one above the saved run's starts a new phase at
    its latest checkpoint (`_start_phase`)."""
    if not model_dir.config.is_file():
        if phase not in (None, 1):
            raise RunError(f"--phase {phase} continues a run, but {model_dir.path} holds none: give the "
                           "model_dir of the run's first phase.")
        return config
    saved = ElectraConfig.load(str(model_dir.config))
    phase = saved.phase if phase is None else phase
    if phase == saved.phase + 1:
        return _start_phase(model_dir, saved, config.replace(phase=phase), record)
    if phase != saved.phase:
        raise RunError(f"{model_dir.path} holds phase {saved.phase} of a run: --phase {phase} can only continue "
                       f"it (--phase {saved.phase}) or start phase {saved.phase + 1}.")
    config = config.replace(phase=saved.phase, phase_start_step=saved.phase_start_step)
    differing = _differing_keys(saved, config)
    if not differing:
        return config
    if set(differing) <= {"num_train_steps", "num_warmup_steps"} and config.num_train_steps > saved.num_train_steps:
        extended = config.replace(num_warmup_steps=saved.num_warmup_steps)
        if record:
            _record_change(model_dir, saved, extended, "linear decay to 0 at the new num_train_steps, warmup "
                           "unchanged")
        print(f"  extending the run from {saved.num_train_steps:,} to {extended.num_train_steps:,} steps: the "
              "learning rate decays linearly to 0 at the new end (official schedule for the new total)")
        if config.num_warmup_steps != saved.num_warmup_steps:
            # A short trial run in the default folder would otherwise silently become the run
            # this command asked for, with the trial's warmup.
            print(f"warning: {model_dir.path.resolve()} holds an earlier, shorter run, which this continues: it "
                  f"keeps that run's num_warmup_steps {saved.num_warmup_steps:,} (these settings alone would "
                  f"warm up over {config.num_warmup_steps:,}). To train these settings from the start, give a "
                  f"new --model_dir or remove {model_dir.path.resolve()}.", file=sys.stderr, flush=True)
        return extended
    details = _describe_changes(saved, config, differing)
    if "max_seq_length" in differing:
        raise RunError(f"{model_dir.path} holds a run at {saved.max_seq_length} tokens and this command trains at "
                       f"{config.max_seq_length} ({details}). To continue the run at the new length, keeping its "
                       f"weights, optimizer state and step count, start a new phase: add --phase {saved.phase + 1} "
                       "(docs/pretraining.md#when-the-batch-does-not-fit). Otherwise use a new --model_dir.")
    hint = (" (--steps may only grow: a larger value extends the run)" if "num_train_steps" in differing else "")
    raise RunError(f"{model_dir.path} holds a run with a different config ({details}){hint}. Rerun with the same "
                   "settings to continue it, choose a new --model_dir, or start a new run from its weights with "
                   "--init_from.")


def _start_phase(model_dir: ModelDir, saved: ElectraConfig, config: ElectraConfig, record: bool) -> ElectraConfig:
    """The config of a new phase, which starts at the run's latest checkpoint. NVIDIA's recipe
    starts its phase 2 from phase 1's checkpoint with a schedule of its own (new warmup and
    decay); here the step count goes on, and the schedule is offset to the phase's first step."""
    from electra_tf.pretraining.checkpointing import latest_checkpoint_step

    start = latest_checkpoint_step(model_dir.checkpoints)
    if start is None:
        raise RunError(f"phase {config.phase} starts from phase {saved.phase}'s latest checkpoint, but "
                       f"{model_dir.checkpoints} has none: train phase {saved.phase} first.")
    if config.num_train_steps <= start:
        raise RunError(f"phase {config.phase} starts at step {start:,}, and num_train_steps ({config.num_train_steps:,}) "
                       "is the step the run ends at, over all phases: give --steps larger than "
                       f"{start:,} (e.g. --steps {start + max(1, start // 10):,} for a phase a tenth as long).")
    config = config.replace(phase_start_step=start)
    fixed = [k for k in _differing_keys(saved, config) if k not in PHASE_SETTINGS + ("phase", "phase_start_step")]
    if fixed:
        raise RunError(f"a new phase keeps the run's model, objective and optimizer; this command changes "
                       f"{_describe_changes(saved, config, fixed)}. A phase may change only {', '.join(PHASE_SETTINGS)}.")
    length = config.num_train_steps - start
    if config.num_warmup_steps >= length:
        raise RunError(f"phase {config.phase} is {length:,} steps long, but its num_warmup_steps is "
                       f"{config.num_warmup_steps:,}: set num_warmup_steps below {length:,} (--set num_warmup_steps=N).")
    if record:
        _record_change(model_dir, saved, config, f"phase {config.phase} from step {start}: its own warmup and decay "
                       "over [phase_start_step, num_train_steps]; weights, optimizer state and step count kept")
    print(f"  starting phase {config.phase} at step {start:,}: {length:,} steps at {config.max_seq_length} tokens, "
          f"warming up over {config.num_warmup_steps:,}; weights, optimizer state and step count carry over")
    return config


def _differing_keys(saved: ElectraConfig, config: ElectraConfig) -> list[str]:
    return sorted(k for k in config.to_dict() if getattr(saved, k) != getattr(config, k))


def _describe_changes(saved: ElectraConfig, config: ElectraConfig, keys) -> str:
    return ", ".join(f"{k}: {getattr(saved, k)!r} -> {getattr(config, k)!r}" for k in keys)


def _record_change(model_dir: ModelDir, saved: ElectraConfig, new: ElectraConfig, rule: str) -> None:
    import json

    from electra_tf.utils.files import atomic_write_text

    history = json.loads(model_dir.config_history.read_text()) if model_dir.config_history.is_file() else []
    history.append({"time": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                    "changed": {k: [getattr(saved, k), getattr(new, k)] for k in _differing_keys(saved, new)},
                    "rule": rule})
    atomic_write_text(model_dir.config_history, json.dumps(history, indent=2) + "\n")


def run_pretraining(options: PretrainingOptions) -> RunResult:
    """The whole run, holding the model_dir's lock (one writer per folder)."""
    from electra_tf.runtime.cluster import WorkerRole
    from electra_tf.utils.locking import FolderLock

    role = WorkerRole.from_environ()
    lock = FolderLock(options.model_dir, "electra_tf.pretrain") if role.is_chief else contextlib.nullcontext()
    with lock:  # the chief holds the lock for the whole job
        with contextlib.ExitStack() as closing:
            result = _run(options, role, closing)
        # Input iterators fed by Python generators (raw text) must be finalised while Python
        # runs; left to the interpreter's exit, TensorFlow logs "Error occurred when finalizing
        # GeneratorDataset iterator". `closing` released ours; this collects their cycles.
        gc.collect()
        return result


@dataclass
class _Run:
    """What a run is made of, once prepared (`_prepare`)."""

    options: PretrainingOptions
    role: object  # cluster.WorkerRole
    runtime: object  # devices.Runtime, its strategy created
    config: ElectraConfig
    model_dir: ModelDir
    data: _Data
    resumable: object  # resumable_input.ResumableInput
    eval_batches: list  # the evaluation's batches (evaluation.EvaluationText says of what)
    eval_text: object  # evaluation.EvaluationText
    pretrainer: object
    checkpoint: object  # checkpointing.RunCheckpoint
    writer: object
    compile_cache: Path | None  # where this run's compiled steps are cached (XLA only)
    programs_before: int
    started: float
    resumed_from: int | None = None
    initialized_from: str | None = None
    evaluations: dict = field(default_factory=dict)  # step -> metrics of the evaluations during the run


def _run(options: PretrainingOptions, role, closing: contextlib.ExitStack) -> RunResult:
    started = time.monotonic()
    runtime, compile_cache = _choose_runtime(options, role)  # first: TensorFlow starts here
    run = _prepare(options, role, runtime, compile_cache, closing, started)
    _print_header(run)
    monitor, saver, samples, callbacks = _callbacks(run)
    _train(run, monitor, saver, callbacks)
    if monitor.diverged_at is not None:
        return _result(run, "diverged", diverged_at=monitor.diverged_at, overflowing=monitor.overflowing)
    if saver.received is not None:
        return _result(run, "stopped", signal=int(saver.received))
    if not saver.saved_paths or not saver.saved_paths[-1].endswith(f"-{run.checkpoint.step}"):
        run.checkpoint.save()
    return _finish(run, monitor, saver, samples)


def _choose_runtime(options: PretrainingOptions, role):
    """The runtime, its strategy created, with the compile cache's flags set first (TensorFlow
    reads them once, when it starts); returns (runtime, compile cache folder or None)."""
    from electra_tf.runtime.devices import create_strategy, resolve_runtime
    from electra_tf.runtime.xla import use_compile_cache
    from electra_tf.utils.logs import start_tensorflow

    compile_cache = use_compile_cache(xla=options.xla)
    start_tensorflow()
    # The strategy comes first: a MultiWorkerMirroredStrategy must configure its collectives
    # before TensorFlow runs anything (the tokenizer's tables included).
    runtime = resolve_runtime(options.strategy, options.mixed_precision, options.xla,
                              hidden_size=options.config.hidden_size)
    if role.is_multi_worker != (runtime.strategy_name == "multi_worker"):
        raise RunError(f"TF_CONFIG describes {role.count} worker(s) but the strategy is {runtime.strategy_name}: "
                       "use --strategy auto (or multi_worker with a TF_CONFIG of several workers, as "
                       "python -m electra_tf.launch sets).")
    if options.steps_per_loop > 1 and runtime.strategy_name != "one_device":  # `auto` chose several devices
        raise RunError(steps_per_loop_needs_one_device(options.steps_per_loop, runtime.strategy_name))
    create_strategy(runtime)
    return runtime, (compile_cache if runtime.xla else None)


def _prepare(options: PretrainingOptions, role, runtime, compile_cache, closing: contextlib.ExitStack,
             started: float) -> _Run:
    """Data, config, model_dir, input, the pretrainer and its optimizer, its steps traced, and the
    checkpoint restored (in that order: see `CompiledGradients.trace_steps`)."""
    import keras
    import tensorflow as tf

    from electra_tf.pretraining.checkpointing import RunCheckpoint, latest_checkpoint_step
    from electra_tf.pretraining.pretrainer import ElectraPretrainer
    from electra_tf.runtime.optimizer import create_optimizer
    from electra_tf.runtime.xla import cached_programs

    model_dir = ModelDir(options.model_dir)
    data = _prepare_data(options, options.config, model_dir, role)
    config = _run_config(options, model_dir, data.tokenizer, role)
    keras.config.set_dtype_policy(runtime.precision)
    resumable, eval_batches, eval_text = _input(options, config, data, role, runtime, closing)
    # Initial weights and every dropout seed generator follow the config's seed.
    keras.utils.set_random_seed(config.seed)
    with runtime.strategy.scope():
        pretrainer = ElectraPretrainer.from_electra_config(config)
        pretrainer.compile(optimizer=create_optimizer(config), jit_compile=runtime.xla,
                           steps_per_execution=options.steps_per_loop,
                           gradient_accumulation_steps=config.gradient_accumulation_steps)
    # Before the restore: a resume then finds its compiled steps.
    pretrainer.trace_steps(resumable.spec, _batch_spec(eval_batches[0]))
    checkpoint = RunCheckpoint(model_dir.checkpoints, pretrainer, resumable, options.keep_checkpoints,
                               worker_index=role.index, num_workers=role.count)
    # A new phase's first start restores weights and optimizer, not the input position (its data
    # differs); from its first checkpoint on, a resume restores everything.
    starting_phase = config.phase > 1 and latest_checkpoint_step(model_dir.checkpoints) == config.phase_start_step
    resumed_from = checkpoint.restore_latest(input_position=not starting_phase)
    initialized_from = None
    if options.init_from and resumed_from is None:
        from electra_tf.pretraining.restore import initialize_from
        initialized_from = initialize_from(pretrainer, options.init_from)
    # Only the chief writes the run's event files; the other workers report to it through the
    # (global) metrics every step already carries.
    writer = (tf.summary.create_file_writer(str(model_dir.train_logs)) if role.is_chief
              else tf.summary.create_noop_writer())
    run = _Run(options, role, runtime, config, model_dir, data, resumable, eval_batches, eval_text, pretrainer,
               checkpoint, writer, compile_cache, cached_programs(compile_cache), started, resumed_from, initialized_from)
    if role.is_chief:
        _write_run_description(run)
    return run


def _run_config(options: PretrainingOptions, model_dir: ModelDir, tokenizer, role) -> ElectraConfig:
    """The config with the data's vocabulary size, continuing the model_dir's run if it holds
    one; the chief writes it, and the vocabulary, to the model_dir."""
    config = options.config
    if config.vocab_size != tokenizer.vocabulary_size:
        config = config.replace(vocab_size=tokenizer.vocabulary_size)
    config = _continue_config(model_dir, config, options.phase, record=role.is_chief)
    if role.is_chief:
        model_dir.path.mkdir(parents=True, exist_ok=True)
        config.save(model_dir.config)
        if model_dir.vocab.exists():
            _check_same_vocabulary(model_dir, tokenizer)
        else:
            tokenizer.save(model_dir.vocab)
    if config.train_batch_size % role.count:
        raise RunError(f"train_batch_size {config.train_batch_size} does not split evenly over {role.count} "
                       "workers: choose a multiple of the number of workers.")
    return config


def _batch_spec(batch) -> dict:
    import tensorflow as tf

    return {key: tf.TensorSpec.from_tensor(value) for key, value in batch.items()}


def _input(options, config, data, role, runtime, closing):
    """(the resumable training input, the evaluation's batches, what they are of)."""
    import tensorflow as tf

    from electra_tf.pretraining.input_pipeline import evaluation_dataset, pretraining_dataset, raw_text_dataset
    from electra_tf.pretraining.resumable_input import ResumableInput

    # Each worker reads its own share of every update: all its micro-batches at once, which the
    # step splits (runtime/accumulation.py); the evaluation's batches are micro-batches.
    worker_batch = config.train_batch_size // role.count
    input_context = (tf.distribute.InputContext(role.count, role.index, runtime.num_replicas)
                     if role.is_multi_worker else None)

    def make_dataset(seed, batch_size):
        if data.kind == "records":
            return pretraining_dataset(data.location, config, data.tokenizer, batch_size, seed=seed,
                                       input_context=input_context)
        return raw_text_dataset(data.location, config, data.tokenizer, batch_size, seed=seed,
                                text_field=options.text_field)

    # Raw text is read through a Python generator, whose position TensorFlow cannot save: a
    # resumed run then reads the text from the start again (build_data's shards resume exactly).
    resumable = closing.enter_context(contextlib.closing(ResumableInput(
        make_dataset(config.seed, worker_batch * config.gradient_accumulation_steps),
        checkpointable=data.kind == "records")))
    text = _evaluation_text(options, config, data)
    evaluation = (evaluation_dataset(text.files, config, data.tokenizer, worker_batch, seed=config.seed + 1,
                                     input_context=input_context)
                  if text.held_out else make_dataset(config.seed + 1, worker_batch))
    return resumable, [batch for batch in evaluation.take(options.eval_batches)], text


def _evaluation_text(options, config, data):
    """What the run evaluates on: --eval_data's held-out split (or its shards), else the data's
    held-out split, else training text masked afresh (said so wherever the metrics are shown)."""
    from electra_tf.data.shards import check_shards, held_out_file, read_metadata, resolve_data
    from electra_tf.pretraining.evaluation import EvaluationText

    if options.eval_data:
        kind, paths = resolve_data(options.eval_data)
        if kind != "records":
            raise RunError(f"--eval_data {options.eval_data}: give a build_data folder (its held-out split, or its "
                           "shards, are the evaluation's text).")
        folder = paths[0]
        split = held_out_file(folder, data.tokenizer, config.max_seq_length)
        if split:
            return EvaluationText([split], f"held-out text ({split})")
        if data.kind == "records" and Path(folder).resolve() == Path(data.location).resolve():
            raise RunError(f"--eval_data {folder} is the training data, which has no held-out split: rebuild it "
                           "with build_data --held_out 0.01, or name a folder of other text.")
        shards = check_shards(folder, data.tokenizer, config.max_seq_length)
        return EvaluationText(shards, f"held-out text ({folder}, {read_metadata(folder)['examples']:,} examples)")
    if data.kind == "records":
        split = held_out_file(data.location, data.tokenizer, config.max_seq_length)
        if split:
            entry = read_metadata(data.location)["held_out"]
            documents = f"{entry['documents']:,} document{'s' if entry['documents'] != 1 else ''}"
            return EvaluationText([split], f"held-out text ({documents}, {entry['examples']:,} examples, never "
                                           "trained on)")
    return EvaluationText(None, "training text masked afresh (the data has no held-out split: build_data "
                                "--held_out 0.01 sets one aside)")


def _print_header(run: _Run) -> None:
    config, role, options = run.config, run.role, run.options
    kept = run.pretrainer.discriminator or run.pretrainer.generator  # the MLM baseline keeps its generator
    print(f"ELECTRA pre-training: {run.model_dir.name}, {kept.count_params():,} parameters in the "
          f"{'discriminator' if run.pretrainer.discriminator else 'encoder'} (the model kept after "
          f"pre-training); {_describe_steps(config)} of {_describe_batch(config)}.")
    tokenizer = run.data.tokenizer
    print(f"  data: {run.data.description}; vocabulary {tokenizer.vocabulary_size:,} tokens"
          + (f" ({tokenizer.settings.describe()})" if tokenizer.sentencepiece_model is not None else ""))
    every = f"every {options.eval_every:,} steps and " if options.eval_every else ""
    print(f"  evaluation {every}at the end: {options.eval_batches} batches of {run.eval_text.description}")
    print(f"  runtime: {run.runtime.describe()}")
    if run.compile_cache:
        print(f"  compiled steps cached in {run.compile_cache} (a rerun, resume or extension loads them)")
    if role.is_multi_worker:
        print(f"  this process: {role.describe()}, reading {config.effective_batch_size // role.count} of every "
              f"step's {config.effective_batch_size} examples from its own shards")
    if run.resumed_from is not None and run.data.kind != "records":
        print("  note: raw text input restarts from the beginning of the text on resume (shards from "
              "build_data resume at the exact batch)")
    print(f"  resumed from step {run.resumed_from} ({run.checkpoint.manager.latest_checkpoint})"
          if run.resumed_from is not None else
          f"  starting at step 0; checkpoints every {options.checkpoint_every} steps in {run.model_dir.checkpoints}")
    if run.initialized_from:
        print(f"  weights from {run.initialized_from} (fresh optimizer, schedule and step counter)")
    elif options.init_from:
        print(f"  --init_from {options.init_from} ignored: continuing this run's own checkpoints")
    print(f"  watch it: tensorboard --logdir {run.model_dir.path}", flush=True)


def _describe_steps(config) -> str:
    if config.phase == 1:
        return f"{config.num_train_steps:,} steps"
    return (f"phase {config.phase}, steps {config.phase_start_step:,} to {config.num_train_steps:,} "
            f"({config.num_train_steps - config.phase_start_step:,} steps)")


def _describe_batch(config) -> str:
    if config.gradient_accumulation_steps == 1:
        return f"{config.train_batch_size} x {config.max_seq_length}"
    return (f"{config.effective_batch_size} x {config.max_seq_length} (each update sums "
            f"{config.gradient_accumulation_steps} micro-batches of {config.train_batch_size})")


def _callbacks(run: _Run):
    """(monitor, saver, samples or None, every callback of the run's `fit`)."""
    from electra_tf.pretraining.callbacks import CheckpointSaver, ReplacementSamples, StepProfiler, TrainingMonitor
    from electra_tf.pretraining.evaluation import PeriodicEvaluation, TrainingHealth
    from electra_tf.pretraining.resumable_input import InputTracker

    options, role, config = run.options, run.role, run.config
    health = TrainingHealth(config.phase_start_step + config.num_warmup_steps,
                            config.num_train_steps - config.phase_start_step, options.log_every)
    # Tokens/s: this worker's tokens times the workers (their batches are alike in size).
    monitor = TrainingMonitor(run.writer, run.config.num_train_steps, run.config.effective_batch_size, run.resumable,
                              options.log_every, stop_on_nonfinite=run.runtime.precision != "mixed_float16",
                              token_scale=role.count, quiet=not role.is_chief,
                              skipped_steps=run.checkpoint.skipped_steps, health=health)
    saver = CheckpointSaver(run.checkpoint, options.checkpoint_every)
    callbacks = [InputTracker(run.resumable), monitor, saver]
    if options.eval_every:
        callbacks.append(PeriodicEvaluation(_evaluation(run), options.eval_every, results=run.evaluations))
    samples = None
    if run.pretrainer.discriminator is not None and role.is_chief:
        samples = ReplacementSamples(run.writer, run.eval_batches[0], run.data.tokenizer, options.sample_every)
        callbacks.append(samples)
    if options.profile_steps and role.is_chief:
        callbacks.append(StepProfiler(str(run.model_dir.profile_logs), *options.profile_steps))
    return monitor, saver, samples, callbacks


def _train(run: _Run, monitor, saver, callbacks) -> None:
    """`fit` until the run's steps are made, it diverges or a signal stops it. A run of N steps
    makes N optimizer updates: float16 loss scaling skips the batches whose gradients
    overflowed (no update, the step number stays), so `fit` then ends short of N and the loop
    trains the missing steps on the next batches (the compiled step is reused)."""
    import tensorflow as tf

    from electra_tf.data.shards import explain_read_error

    checkpoint, total = run.checkpoint, run.config.num_train_steps
    if checkpoint.step >= total:
        print(f"  already trained to step {checkpoint.step}: nothing left to train.")
    while checkpoint.step < total and monitor.diverged_at is None and saver.received is None:
        steps_per_epoch = _steps_this_fit(run.pretrainer, total - checkpoint.step, run.options.steps_per_loop)
        try:
            with _lost_workers_reported(run.role, checkpoint):
                run.pretrainer.fit(_per_worker(run.runtime.strategy, run.role, run.resumable.dataset()), epochs=1,
                                   shuffle=False, steps_per_epoch=steps_per_epoch, verbose=0, callbacks=callbacks)
        except tf.errors.DataLossError as error:
            if run.data.kind == "records":
                raise explain_read_error(error, run.data.location) from None
            raise RunError(f"reading the raw text failed: {error}") from None
        if run.resumable.steps_in_fit == 0:
            raise RunError(f"the input ended at step {checkpoint.step} of {total}: no batch was left to train on.")


def _result(run: _Run, status: str, **details) -> RunResult:
    return RunResult(status, run.checkpoint.step, run.model_dir, run.checkpoint.manager.latest_checkpoint,
                     time.monotonic() - run.started, run.runtime.precision, is_chief=run.role.is_chief,
                     skipped_steps=int(run.checkpoint.skipped_steps.numpy()),
                     evaluated_on=run.eval_text.description, **details)


def _finish(run: _Run, monitor, saver, samples) -> RunResult:
    """Training is saved: the final evaluation, the discriminator's export and the summary. A
    signal from here on stops the evaluation and export, not the run's state."""
    try:
        with _stop_on_signals() as received, _lost_workers_reported(run.role, run.checkpoint):
            metrics = _evaluate(run)
            export_path = _export(run)
    except _Stopped:
        return _result(run, "stopped", signal=received[0])
    if run.role.is_multi_worker:
        # The other workers wait for the chief's export before they exit: one that left while the
        # chief still exported would make the chief's coordination service report "tasks have
        # crashed" (it still can if the chief's own exit takes over its 10 s heartbeat; docs/scaling.md).
        with _lost_workers_reported(run.role, run.checkpoint):
            _barrier(run.runtime.strategy)
    finished = _result(run, "finished", metrics={k: float(v) for k, v in metrics.items()}, export_path=export_path)
    if run.role.is_chief:
        from electra_tf.runtime.xla import compile_cache_report

        # What held training up, apart from the steps.
        pauses = {"checkpoint_writes": saver.pause.summary(), "log_lines": monitor.pause.summary(),
                  **({"replacement_samples": samples.pause.summary()} if samples else {})}
        from electra_tf.runtime.devices import peak_memory

        _write_summary(finished, run.config, run.runtime, run.data.description, run.resumed_from or 0,
                       {**monitor.timings(), "pauses": pauses,
                        "compile_cache": compile_cache_report(run.compile_cache, run.programs_before)},
                       {"evaluated_on": run.eval_text.description, "held_out": run.eval_text.held_out,
                        "during_run": {str(step): metrics for step, metrics in run.evaluations.items()},
                        "health_warnings": monitor.health.given if monitor.health else [],
                        "peak_memory": peak_memory()})
    return finished


def _evaluation(run: _Run):
    """The run's `evaluation.HeldOutEvaluation` over its evaluation batches."""
    import tensorflow as tf

    from electra_tf.pretraining.evaluation import HeldOutEvaluation

    batches = run.eval_batches
    dataset = tf.data.Dataset.from_tensor_slices({k: tf.stack([b[k] for b in batches]) for k in batches[0]})
    return HeldOutEvaluation(run.pretrainer, _per_worker(run.runtime.strategy, run.role, dataset), len(batches),
                             run.eval_text, run.writer, quiet=not run.role.is_chief)


def _evaluate(run: _Run) -> dict:
    """The final metrics on the evaluation batches, also to TensorBoard (`final_eval/`)."""
    return _evaluation(run)(run.checkpoint.step, prefix="final_eval", progress_label="final evaluation",
                            fixed_sampling=False)


def _export(run: _Run) -> Path | None:
    """The discriminator for TensorFlow Serving (the chief; the MLM baseline has none; none with
    --no-export)."""
    if run.pretrainer.discriminator is None or not run.role.is_chief or not run.options.export:
        return None
    from electra_tf.serving.publish import export_discriminator
    from electra_tf.utils.progress import heartbeat

    print("exporting the discriminator for TensorFlow Serving (tracing both signatures) ...", flush=True)
    with heartbeat("export", stream=sys.stdout):
        return export_discriminator(run.pretrainer.discriminator, run.data.tokenizer, run.config,
                                    Path(run.options.export_dir or run.model_dir.exports), run.model_dir.name)


def _steps_this_fit(pretrainer, remaining: int, steps_per_loop: int) -> int:
    """The batches the next `fit` takes, `steps_per_loop` a call: the whole calls left, or the
    last part call on its own (Keras' epoch of S steps makes ceil(S / K) calls of K steps each,
    which would train past the run's end)."""
    from electra_tf.runtime.compiled_step import XlaStepLoop

    per_call = min(steps_per_loop, remaining)
    if per_call != pretrainer.steps_per_execution:
        pretrainer.steps_per_execution = per_call
        if pretrainer.train_function is not None and not isinstance(pretrainer.train_function, XlaStepLoop):
            # Keras' own loop (no XLA) holds the count as a constant of its trace: trace it again.
            pretrainer.make_train_function(force=True)
    return remaining - remaining % per_call


def _write_summary(result, config, runtime, data_description: str, started_at: int, timings: dict,
                   evaluation: dict) -> None:
    """MODEL_DIR/metrics.json: what the finished run did, for scripts and tables (examples/
    gpu_payoff.py reads its steps, time and final metrics). The timings are this process's: a
    resumed run counts from its resume."""
    import json

    import tensorflow as tf

    from electra_tf.utils.files import atomic_write_text
    from electra_tf.runtime.devices import gpu_names

    # In a later phase, this phase's: the earlier phases' batches and lengths were their own.
    examples = (result.step - config.phase_start_step) * config.effective_batch_size
    summary = {
        "objective": config.objective,
        "step": result.step,
        "batch": {"examples_per_update": config.effective_batch_size, "micro_batch": config.train_batch_size,
                  "gradient_accumulation_steps": config.gradient_accumulation_steps},
        "steps_this_run": result.step - started_at,
        "skipped_steps": result.skipped_steps,
        "examples_seen": examples,
        "tokens_seen": examples * config.max_seq_length,  # sequence positions: packed, nearly all tokens
        "phase": {"phase": config.phase, "started_at_step": config.phase_start_step,
                  "max_seq_length": config.max_seq_length},
        "final_eval": result.metrics,
        "evaluated_on": evaluation["evaluated_on"],
        "evaluated_on_held_out_text": evaluation["held_out"],
        "evaluations_during_run": evaluation["during_run"],
        "health_warnings": evaluation["health_warnings"],
        "peak_memory": {**evaluation["peak_memory"],
                        "gib": round(evaluation["peak_memory"]["bytes"] / 2**30, 3)},
        **timings,
        "seconds": round(result.seconds, 1),  # the whole process: data, training, evaluation, export
        "runtime": runtime.describe(),
        "devices": runtime.devices,
        "gpus": gpu_names(),
        "tensorflow": tf.__version__,
        "data": data_description,
        "export": str(result.export_path) if result.export_path else None,
    }
    atomic_write_text(result.model_dir.metrics, json.dumps(summary, indent=2) + "\n")


def _barrier(strategy) -> None:
    """Returns once every worker has reached it (one scalar all-reduce)."""
    import tensorflow as tf

    @tf.function(autograph=False)
    def all_reduce_one():
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.ones([])), axis=None)

    all_reduce_one()


@contextlib.contextmanager
def _lost_workers_reported(role, checkpoint):
    """In a multi-worker run, a collective that fails because a peer died (connection reset,
    the collective timeout, the coordination service's heartbeat) becomes a RunError that says
    so, instead of TensorFlow's traceback from inside the step."""
    import tensorflow as tf

    try:
        yield
    except (tf.errors.UnavailableError, tf.errors.DeadlineExceededError, tf.errors.CancelledError,
            tf.errors.AbortedError, tf.errors.InternalError) as error:
        if not role.is_multi_worker:
            raise
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        first_line = next((line for line in lines if not line.startswith(("Graph execution error", "Detected at"))),
                          type(error).__name__)[:200]
        raise RunError(f"{role.describe()}: a collective with the other workers failed ({type(error).__name__}: "
                       f"{first_line}); a worker has died or become unreachable, and the job cannot go on "
                       f"without it. The last checkpoint is {checkpoint.run_manager.latest_checkpoint or 'none yet'}: "
                       "rerun the same command on every worker (or the same python -m electra_tf.launch "
                       "command) to resume from it.") from None


def _per_worker(strategy, role, dataset):
    """What fit and evaluate read. One worker: the dataset (Keras splits each batch over the
    replicas). Several: each worker's own batches, split over its replicas, through
    `distribute_datasets_from_function` (the worker's batch is its share of the global one)."""
    if not role.is_multi_worker:
        return dataset
    replicas_per_worker = strategy.num_replicas_in_sync // role.count

    def worker_dataset(context):
        if replicas_per_worker == 1:
            return dataset
        batch = next(iter(dataset.element_spec.values())).shape[0]
        return dataset.rebatch(batch // replicas_per_worker)

    return strategy.distribute_datasets_from_function(worker_dataset)


class _Stopped(Exception):
    """SIGTERM/SIGINT arrived after the final checkpoint."""


@contextlib.contextmanager
def _stop_on_signals(signals=(signal.SIGTERM, signal.SIGINT)):
    """Turns SIGTERM/SIGINT into `_Stopped` (the caller reports "stopped", exit 128+N); the
    number is left in the yielded list."""
    received: list[int] = []

    def handler(number, frame):
        received.append(number)
        raise _Stopped()

    previous = {number: signal.signal(number, handler) for number in signals}
    try:
        yield received
    finally:
        for number, old in previous.items():
            signal.signal(number, old)


def _write_run_description(run: _Run) -> None:
    import tensorflow as tf
    from tensorboard.plugins.hparams import api as hparams

    runtime = run.runtime
    text = "\n".join([
        f"data: {run.data.description}", f"runtime: {runtime.strategy_name}, {runtime.precision}, "
        f"XLA {'on' if runtime.xla else 'off'}", f"initial weights: {run.initialized_from or 'random'}", "",
        "```json", run.config.to_json(), "```"])
    with run.writer.as_default(step=run.checkpoint.step):
        tf.summary.text("run/config", text)
        hparams.hparams({key: (value if isinstance(value, (int, float, str, bool)) else str(value))
                         for key, value in run.config.to_dict().items()})
    run.writer.flush()
