"""`Trainer`: one run of any task (`task.py`), from the runtime's start to the run's summary.

What every run shares is here, once: the folder's lock, the runtime (strategy, precision, XLA
and its compile cache, chosen before the model exists), the checkpoint manager and exact
resume (tasks whose plan is resumable), SIGTERM/SIGINT, progress lines and TensorBoard, the
evaluations during training (and the best one's weights, where the task keeps the best), the
run's history across processes and its metrics.json, and a multi-worker run's folder (checked
to be one every worker sees, before anything is built) and lost peers.
What differs between tasks, the task says (`Task`). Exporting is not the trainer's: a command
passes `after_training`, which the chief runs on `task.served_model(...)` once training is
saved, inside the same signal and worker guards (`python -m electra_tf.pretrain` exports the
discriminator there).

    result = Trainer(task, TrainerConfig(), RuntimeConfig(), run_dir).run()
    result.status  # "finished", "stopped" (by `signal`, saved) or "diverged" (at `diverged_at`)
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import keras
import tensorflow as tf

from electra_tf.runtime.cluster import WorkerRole, use_cluster
from electra_tf.runtime.compiled_step import XlaStepLoop
from electra_tf.runtime.config import RuntimeConfig
from electra_tf.runtime.devices import create_strategy, gpu_names, peak_memory, resolve_runtime
from electra_tf.runtime.optimizer import optimizer_step
from electra_tf.runtime.xla import cached_programs, compile_cache_report, use_compile_cache
from electra_tf.training.callbacks import CheckpointSaver, ProgressPlan, StepProfiler, StopOnSignal, TrainingMonitor
from electra_tf.training.config import TrainerConfig, steps_per_loop_needs_one_device
from electra_tf.training.evaluation import PeriodicEvaluation, write_scalars
from electra_tf.training.history import RunHistory
from electra_tf.training.resumable_input import InputTracker
from electra_tf.training.task import RunContext, Task, TaskReport, TrainingPlan
from electra_tf.training.workers import barrier, check_shared_folder, lost_workers_reported, per_worker
from electra_tf.utils.errors import RunError
from electra_tf.utils.files import atomic_write_text
from electra_tf.utils.locking import FolderLock
from electra_tf.utils.logs import int64_notice_left_out, start_tensorflow
from electra_tf.utils.run_dir import TrainingDir

if TYPE_CHECKING:  # types of the fields below, without importing TensorFlow here
    import keras

    from electra_tf.training.callbacks import CheckpointSaver, StopOnSignal, TrainingMonitor
    from electra_tf.training.checkpointing import RunCheckpoint
    from electra_tf.training.evaluation import PeriodicEvaluation
    from electra_tf.training.history import RunHistory


@dataclasses.dataclass
class RunResult:
    """What a run did. `status` is "finished", "diverged" (at step `diverged_at`) or "stopped"
    (by `signal`, after saving a checkpoint where the task resumes). `summary` is what the
    chief wrote to metrics.json (finished runs)."""

    status: str
    step: int
    run_dir: Path
    seconds: float
    precision: str = "float32"
    metrics: dict = dataclasses.field(default_factory=dict)
    summary: dict = dataclasses.field(default_factory=dict)
    latest_checkpoint: str | None = None
    diverged_at: int | None = None
    overflowing: bool = False  # diverged as float16 gradients overflowing at every loss scale
    signal: int | None = None
    skipped_steps: int = 0  # batches float16 loss scaling skipped (no update), over the whole run
    is_chief: bool = True  # False: a multi-worker run's other worker (the chief writes the run's files)


def start_runtime(config: RuntimeConfig, role, width=lambda: None, steps_per_loop: int = 1):
    """The runtime, its strategy created and the dtype policy set, with the compile cache's
    flags set first (TensorFlow reads them once, when it starts); returns (runtime, compile
    cache folder or None). First thing in a run: TensorFlow starts here, quietly, before
    `width()` (the encoder's width, which the precision depends on) may import anything."""
    compile_cache = use_compile_cache(xla=config.xla)
    start_tensorflow()

    # The strategy comes first: a MultiWorkerMirroredStrategy must configure its collectives
    # before TensorFlow runs anything (a tokenizer's tables included).
    runtime = resolve_runtime(config.strategy, config.mixed_precision, config.xla, hidden_size=width())
    if role.is_multi_worker != (runtime.strategy_name == "multi_worker"):
        raise RunError(f"TF_CONFIG describes {role.count} worker(s) but the strategy is {runtime.strategy_name}: "
                       "use --strategy auto (or multi_worker with a TF_CONFIG of several workers, as "
                       "python -m electra_tf.launch sets).")
    if steps_per_loop > 1 and runtime.strategy_name != "one_device":  # `auto` chose several devices
        raise RunError(steps_per_loop_needs_one_device(steps_per_loop, runtime.strategy_name))
    create_strategy(runtime)
    int64_notice_left_out()
    keras.config.set_dtype_policy(runtime.precision)
    return runtime, (compile_cache if runtime.xla else None)


@dataclasses.dataclass
class _ProcessRun:
    """One process's run, once prepared: what the task built and what the trainer keeps."""

    context: RunContext
    inputs: Any  # what the task's build_inputs returned: each task its own, opaque here
    plan: TrainingPlan
    report: TaskReport
    model: keras.Model  # compiled
    writer: Any  # a tf.summary writer (a no-op one on workers that are not the chief)
    history: RunHistory
    checkpoint: RunCheckpoint | None  # for resumable plans
    resumed_from: int | None
    initialized_from: str | None
    compile_cache: Path | None
    programs_before: int
    started: float

    @property
    def step(self) -> int:
        return optimizer_step(self.model)

    def latest_checkpoint(self) -> str | None:
        return self.checkpoint.run_manager.latest_checkpoint if self.checkpoint else None


@dataclasses.dataclass
class _Loop:
    """The callbacks of the run's `fit`, and the ones the trainer reads after it."""

    monitor: TrainingMonitor
    stop: StopOnSignal
    saver: CheckpointSaver | None
    evaluation: PeriodicEvaluation | None
    callbacks: list
    pauses: dict


class Trainer:
    def __init__(self, task: Task, config: TrainerConfig, runtime: RuntimeConfig, run_dir: str | Path,
                 lock_name: str | None = None):
        self.task, self.config, self.runtime_config = task, config, runtime
        self.run_dir = Path(run_dir)
        self.folder = TrainingDir(run_dir)
        self.lock_name = lock_name or f"electra_tf.{task.name}"

    def run(self, after_training=None) -> RunResult:
        """The whole run, holding the folder's lock (one writer per folder; in a multi-worker
        run the chief holds it for the job). `after_training(served_model) -> dict` runs on the
        chief once training is saved; what it returns joins metrics.json. The cluster comes from
        TF_CONFIG, Kubernetes or SLURM (`runtime.cluster.use_cluster`)."""
        use_cluster()
        role = WorkerRole.from_environ()
        lock = FolderLock(self.run_dir, self.lock_name) if role.is_chief else contextlib.nullcontext()
        with lock:
            with contextlib.ExitStack() as closing:
                result = self._run(role, closing, after_training)
            # Input iterators fed by Python generators (raw text) must be finalised while Python
            # runs; left to the interpreter's exit, TensorFlow logs "Error occurred when finalizing
            # GeneratorDataset iterator". `closing` released ours; this collects their cycles.
            gc.collect()
            return result

    def evaluate(self, after_evaluation=None) -> RunResult:
        """An evaluation without a step of training: the task's inputs and model (a model that
        was fine-tuned, or one that needs no training), one evaluation, the task's `on_best`
        (the folder keeps the model it evaluated and the evaluation's files) and `finish` (a
        test file), and metrics.json as a run writes it. `after_evaluation(served_model)` is
        `run`'s `after_training` (an export). One process: no multi-worker evaluation."""
        use_cluster()
        role = WorkerRole.from_environ()
        if role.is_multi_worker:
            raise RunError("an evaluation-only run is one process: unset TF_CONFIG (or use --strategy mirrored).")
        with FolderLock(self.run_dir, self.lock_name), contextlib.ExitStack() as closing:
            started = time.monotonic()
            runtime, _ = start_runtime(self.runtime_config, role, self.task.model_width)
            context = RunContext(self.run_dir, role, runtime, self.config, closing)
            inputs = self.task.build_inputs(context)
            model = self.task.build_model(inputs, context)
            report = self.task.report(inputs)
            for line in report.header(model):
                print(line)
            print(f"  runtime: {runtime.describe()}\n  evaluating only: no training step", flush=True)
            metrics, files = self.task.evaluate(model, inputs, final=True)
            print(f"evaluation: {report.metrics_line(metrics)}", flush=True)
            self.task.on_best(model, inputs, context, files)
            extra = self.task.finish(model, inputs, context, None)
            if after_evaluation is not None:
                extra.update(after_evaluation(self.task.served_model(model, inputs)) or {})
            seconds = time.monotonic() - started
            summary = {**report.summary(model, metrics, None), "evaluation_only": True, "step": 0,
                       "seconds": round(seconds, 3), "runtime": runtime.describe(), **extra}
            _write_json(self.folder.metrics, summary)
        gc.collect()
        return RunResult("finished", 0, self.run_dir, seconds, runtime.precision, metrics=metrics, summary=summary)

    def _run(self, role, closing, after_training) -> RunResult:
        started = time.monotonic()
        runtime, cache = start_runtime(self.runtime_config, role, self.task.model_width, self.config.steps_per_loop)
        if role.is_multi_worker:
            with lost_workers_reported(role):
                check_shared_folder(runtime.strategy, role, self.run_dir)
        context = RunContext(self.run_dir, role, runtime, self.config, closing)
        inputs = self.task.build_inputs(context)
        plan = self.task.plan(inputs)
        model = self.task.build_model(inputs, context)
        run = self._prepare(context, inputs, plan, model, cache, cached_programs(cache), started)
        self._print_header(run)
        loop = self._callbacks(run)
        with loop.stop.listening():
            self._train(run, loop)
        if loop.monitor.diverged_at is not None:
            self._record(run, loop, "diverged")
            return self._result(run, "diverged", diverged_at=loop.monitor.diverged_at,
                                overflowing=loop.monitor.overflowing)
        if loop.stop.received is not None:
            self._record(run, loop, "stopped")
            return self._result(run, "stopped", signal=int(loop.stop.received))
        if loop.saver is not None and not (loop.saver.saved_paths and
                                           loop.saver.saved_paths[-1].endswith(f"-{run.step}")):
            loop.saver.save()
        return self._finish(run, loop, after_training)

    def _prepare(self, context, inputs, plan, model, cache, programs_before, started) -> _ProcessRun:
        """Checkpoint restore (resumable plans), starting weights, TensorBoard, the history."""
        checkpoint, resumed_from, role = None, None, context.role
        if plan.resumable:
            from electra_tf.training.checkpointing import RunCheckpoint

            checkpoint = RunCheckpoint(self.folder.checkpoints, model, plan.data.stream, self.config.keep_checkpoints,
                                       worker_index=role.index, num_workers=role.count)
            resumed_from = checkpoint.restore_latest(input_position=plan.restore_input_position)
        initialized_from = self.task.initialize(model, inputs, resumed_from)
        # Only the chief writes the run's event files; the other workers report to it through the
        # (global) metrics every step already carries.
        writer = (tf.summary.create_file_writer(str(self.folder.train_logs)) if role.is_chief
                  else tf.summary.create_noop_writer())
        history = RunHistory(self.folder.processes, writes=role.is_chief, summary_path=self.folder.metrics)
        run = _ProcessRun(context, inputs, plan, self.task.report(inputs), model, writer, history, checkpoint,
                          resumed_from, initialized_from, cache, programs_before, started)
        history.begin(resumed_from, run.step)
        return run

    def _print_header(self, run: _ProcessRun) -> None:
        for line in run.report.header(run.model):
            print(line)
        runtime = run.context.runtime
        print(f"  runtime: {runtime.describe()}")
        if run.compile_cache:
            print(f"  compiled steps cached in {run.compile_cache} (a rerun, resume or extension loads them)")
        if run.checkpoint is not None:
            print(f"  resumed from step {run.resumed_from} ({run.latest_checkpoint()})"
                  if run.resumed_from is not None else f"  starting at step 0; checkpoints every "
                  f"{self.config.checkpoint_every} steps in {run.checkpoint.run_directory}")
        if run.initialized_from:
            print(f"  weights from {run.initialized_from} (fresh optimizer, schedule and step counter)")
        print(f"  watch it: tensorboard --logdir {self.run_dir}", flush=True)

    def _callbacks(self, run: _ProcessRun) -> _Loop:
        plan, role, config = run.plan, run.context.role, self.config
        task_callbacks = self.task.callbacks(run.model, run.inputs, run.context, run.writer)
        stream = run.plan.data.stream
        monitor = TrainingMonitor(run.writer, ProgressPlan(
            plan.total_steps, plan.examples_per_step, config.log_every, plan.console_metrics,
            stop_on_nonfinite=run.context.runtime.precision != "mixed_float16", token_scale=role.count,
            quiet=not role.is_chief, window_metrics=plan.epochs is None),
            tokens_through=stream.tokens_through if stream else None,
            skipped_steps=run.checkpoint.skipped_steps if run.checkpoint else None,
            observers=task_callbacks.observers)
        stop = StopOnSignal()
        callbacks = ([InputTracker(stream)] if stream else []) + [monitor, stop]
        saver = None
        if run.checkpoint is not None:
            saver = CheckpointSaver(run.checkpoint, config.checkpoint_every, stop,
                                    on_save=lambda path: self._record(run, loop))
            callbacks.append(saver)
        evaluation = self._evaluation(run)
        callbacks += ([evaluation] if evaluation else []) + task_callbacks.callbacks
        if config.profile_range and role.is_chief:
            callbacks.append(StepProfiler(str(self.folder.profile_logs), *config.profile_range))
        pauses = {"log_lines": monitor.pause, **({"checkpoint_writes": saver.pause} if saver else {}),
                  **task_callbacks.pauses}
        loop = _Loop(monitor, stop, saver, evaluation, callbacks, pauses)
        return loop

    def _evaluation(self, run: _ProcessRun):
        plan = run.plan
        every = self.config.eval_every or plan.evaluate_every
        if every is None and plan.epochs is None:
            return None
        task, model, inputs, context = self.task, run.model, run.inputs, run.context
        evaluation = PeriodicEvaluation(
            lambda: task.evaluate(model, inputs), run.writer, run.report.metrics_line, every=every,
            keep_best=plan.keep_best, on_best=lambda record, files: task.on_best(model, inputs, context, files),
            quiet=not context.role.is_chief)
        evaluation.earlier = {int(step) for step in run.history.evaluations()}
        return evaluation

    def _train(self, run: _ProcessRun, loop: _Loop) -> None:
        """`fit` until the plan's steps are made, the loss diverges or a signal stops the run.
        A stream (resumable plans) is read until `total_steps` updates are made: float16 loss
        scaling skips the batches whose gradients overflowed (no update, the step number
        stays), so `fit` then ends short and the loop trains the missing steps on the next
        batches (the compiled step is reused). A plan of epochs reads its dataset that often."""
        plan, total, strategy = run.plan, run.plan.total_steps, run.context.runtime.strategy
        guard = lambda: lost_workers_reported(run.context.role, run.latest_checkpoint)  # noqa: E731
        try:
            if plan.epochs is not None:
                with guard():
                    run.model.fit(plan.data.dataset, epochs=plan.epochs, verbose=0, shuffle=False,
                                  callbacks=loop.callbacks)
                return
            if run.step >= total:
                print(f"  already trained to step {run.step}: nothing left to train.")
            stream = plan.data.stream
            while run.step < total and loop.monitor.diverged_at is None and loop.stop.received is None:
                steps = _steps_this_fit(run.model, total - run.step, self.config.steps_per_loop)
                with guard():
                    run.model.fit(per_worker(strategy, run.context.role, stream.dataset()), epochs=1,
                                  shuffle=False, steps_per_epoch=steps, verbose=0, callbacks=loop.callbacks)
                if stream.steps_in_fit == 0:
                    raise RunError(f"the input ended at step {run.step} of {total}: no batch was left to train on.")
        except tf.errors.DataLossError as error:
            raise plan.data.read_error(error) from None

    def _finish(self, run: _ProcessRun, loop: _Loop, after_training) -> RunResult:
        """Training is saved: the final metrics (the best evaluation's weights back, or a final
        evaluation), the task's artifacts, `after_training` and the summary. A signal from here
        on stops these, not the run's state."""
        role, task, model, inputs = run.context.role, self.task, run.model, run.inputs
        try:
            with _stop_on_signals() as received, lost_workers_reported(role, run.latest_checkpoint):
                if run.plan.keep_best and loop.evaluation is not None and loop.evaluation.best is not None:
                    loop.evaluation.restore_best()
                    metrics = {k: v for k, v in loop.evaluation.best.items() if k not in ("step", "epoch", "train_loss")}
                else:
                    metrics, _ = task.evaluate(model, inputs, final=True)
                    write_scalars(run.writer, run.step, "final_eval", metrics)
                extra = task.finish(model, inputs, run.context, loop.evaluation)
                if role.is_chief and after_training is not None:
                    extra.update(after_training(task.served_model(model, inputs)) or {})
        except _Stopped:
            self._record(run, loop, "stopped")
            return self._result(run, "stopped", signal=received[0])
        if role.is_multi_worker:
            # The other workers wait for the chief's export before they exit: one that left while the
            # chief still exported would make the chief's coordination service report "tasks have
            # crashed" (it still can if the chief's own exit takes over its 10 s heartbeat; docs/scaling.md).
            with lost_workers_reported(role, run.latest_checkpoint):
                barrier(run.context.runtime.strategy)
        self._record(run, loop, "finished")
        summary = self._write_summary(run, loop, metrics, extra) if role.is_chief else {}
        return self._result(run, "finished", metrics=metrics, summary=summary)

    def _record(self, run: _ProcessRun, loop: _Loop, status: str | None = None) -> None:
        """This process's entry in the run's history (at every save, and at the end)."""
        results = loop.evaluation.results if loop.evaluation is not None else {}
        run.history.update(run.step, loop.monitor.timings(), results, status)

    def _write_summary(self, run: _ProcessRun, loop: _Loop, metrics: dict, extra: dict) -> dict:
        """RUN_DIR/metrics.json: the whole run across its processes, for scripts and tables."""
        runtime, history = run.context.runtime, run.history
        memory = loop.monitor.peak_memory or peak_memory()
        summary = {
            **run.report.summary(run.model, metrics, loop.evaluation),
            "step": run.step,
            "skipped_steps": int(loop.monitor.skipped_steps.numpy()),
            **history.totals(),
            "steps_this_process": history.current["steps"],
            "processes": history.described(),
            "evaluations_during_run": history.evaluations(),
            "pauses": {name: pause.summary() for name, pause in loop.pauses.items()},
            "compile_cache": compile_cache_report(run.compile_cache, run.programs_before),
            "peak_memory": {**memory, "gib": round(memory["bytes"] / 2**30, 3)},
            "runtime": runtime.describe(), "devices": runtime.devices, "gpus": gpu_names(), "tensorflow": tf.__version__,
            **extra,
        }
        _write_json(self.folder.metrics, summary)
        return summary

    def _result(self, run: _ProcessRun, status: str, **details) -> RunResult:
        skipped = int(run.checkpoint.skipped_steps.numpy()) if run.checkpoint else 0
        return RunResult(status, run.step, self.run_dir, time.monotonic() - run.started,
                         run.context.runtime.precision, latest_checkpoint=run.latest_checkpoint(),
                         skipped_steps=skipped, is_chief=run.context.role.is_chief, **details)


def _write_json(path: Path, values: dict) -> None:
    atomic_write_text(path, json.dumps(values, indent=2, default=_jsonable) + "\n")


def _jsonable(value):
    """numpy scalars and the like in a summary, as JSON numbers."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


def _steps_this_fit(model, remaining: int, steps_per_loop: int) -> int:
    """The batches the next `fit` takes, `steps_per_loop` a call: the whole calls left, or the
    last part call on its own (Keras' epoch of S steps makes ceil(S / K) calls of K steps each,
    which would train past the run's end)."""
    per_call = min(steps_per_loop, remaining)
    if per_call != model.steps_per_execution:
        model.steps_per_execution = per_call
        if model.train_function is not None and not isinstance(model.train_function, XlaStepLoop):
            # Keras' own loop (no XLA) holds the count as a constant of its trace: trace it again.
            model.make_train_function(force=True)
    return remaining - remaining % per_call


class _Stopped(Exception):
    """SIGTERM/SIGINT arrived after training was saved."""


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

