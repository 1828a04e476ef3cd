"""The pre-training run end to end: subprocesses for kill/resume, event files for TensorBoard."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from electra_tf import pretrain
from electra_tf.pretraining.config import PretrainingConfig
from tests.cli_runs import alarming_lines, environment, scalars, texts, user_environment
from tests.conftest import built_once

STEPS = 160


@pytest.fixture(scope="module")
def data_dir(corpus, small_vocab, tmp_path_factory):
    # Shared by the test processes: the reference run below reads it too.
    folder = built_once(tmp_path_factory, "pretrain_data", lambda folder: corpus.build_test_shards(
        folder, small_vocab, 32, num_shards=2, repeat=40))
    return folder / "data"


def command(data_dir, model_dir, export_dir, *extra):
    return [sys.executable, "-m", "electra_tf.pretrain", "--data", str(data_dir), "--model_dir", str(model_dir),
            "--export_dir", str(export_dir), "--steps", str(STEPS), "--batch_size", "8",
            "--set", "num_layers=1", "--set", "max_seq_length=32", "--set", "dropout=0.1",
            "--checkpoint_every", "20", "--log_every", "5", "--sample_every", "20", "--eval_batches", "2",
            *extra]


@pytest.fixture(scope="module")
def reference_run(data_dir, tmp_path_factory):
    """An uninterrupted run: the yardstick for the resumed one. Built once for all test
    processes, so its tests only read it (or a copy)."""
    def run(root):
        # TensorFlow's logs as a user's shell has them: the run's terminal is checked below.
        result = subprocess.run(command(data_dir, root / "model", root / "exports"), env=user_environment(),
                                capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr[-3000:]
        (root / "stdout.txt").write_text(result.stdout)
        (root / "stderr.txt").write_text(result.stderr)

    root = built_once(tmp_path_factory, "reference_run", run)
    return root, (root / "stdout.txt").read_text()


def test_run_prints_progress_summary_and_exports(reference_run):
    root, stdout = reference_run
    assert f"step {STEPS}/{STEPS}" in stdout and "examples/s" in stdout and "ETA" in stdout
    assert f"tensorboard --logdir {root / 'model'}" in stdout
    assert (root / "exports" / "model" / "1" / "saved_model.pb").is_file()  # named after the model dir
    assert (root / "model" / "config.json").is_file() and "disc_auc" in stdout
    # A short run says what runs of its length were measured to buy, and how to compare on one's task.
    assert f"note: {STEPS} steps is a short run" in stdout and "--random_init" in stdout
    assert f"--pretrained {(root / 'model').resolve()}" in stdout
    # A clean run, start to export, prints nothing that looks like an error (TensorFlow's
    # banners and its iterator-finalizing errors used to).
    stderr = (root / "stderr.txt").read_text()
    assert not alarming_lines(stderr), stderr


def test_a_finished_run_writes_its_summary(reference_run):
    summary = json.loads((reference_run[0] / "model" / "metrics.json").read_text())
    assert summary["step"] == summary["steps_trained"] == summary["steps_this_process"] == STEPS
    assert summary["skipped_steps"] == 0 and [p["status"] for p in summary["processes"]] == ["finished"]
    assert summary["examples_seen"] == STEPS * 8 and summary["tokens_seen"] == STEPS * 8 * 32
    # It learned: the discriminator tells replaced tokens from originals far better than at its
    # first window, and the generator predicts masked tokens it could not.
    first = {tag: scalars(reference_run[0] / "model" / "logs" / "train", f"train/{tag}")[5]
             for tag in ("disc_auc", "masked_lm_accuracy")}
    final = summary["final_eval"]
    assert summary["objective"] == "electra" and final["disc_auc"] > max(0.7, first["disc_auc"] + 0.1), (first, final)
    assert final["masked_lm_accuracy"] > first["masked_lm_accuracy"] + 0.05, (first, final)
    # The first step (tracing) is counted apart from the steady steps after it.
    assert 0 < summary["first_step_seconds"] < summary["train_seconds"] <= summary["seconds"]
    assert 0 < summary["step_seconds"] * (STEPS - 1) <= summary["train_seconds"] - summary["first_step_seconds"] + 1e-3
    assert summary["runtime"].startswith("one_device") and summary["export"].endswith("1")
    # Every 20 steps a checkpoint and a sample panel (+ the first panel): their pauses are counted.
    pauses = summary["pauses"]
    assert pauses["checkpoint_writes"]["count"] == STEPS // 20 and pauses["replacement_samples"]["count"] == STEPS // 20 + 1
    assert 0 < pauses["checkpoint_writes"]["seconds"] < summary["train_seconds"]
    assert pauses["log_lines"]["count"] == STEPS // 5  # a progress line every 5 steps, each timed
    # The first pauses apart (a run's first saves and panels also trace), and the median of all.
    for pause in pauses.values():
        first = pause["first_seconds"]
        assert len(first) == min(3, pause["count"]) and sum(first) <= pause["seconds"] + 2e-3
        assert 0 < pause["median_seconds"] <= pause["seconds"]


def test_event_files_hold_scalars_and_the_sample_panel(reference_run):
    log_dir = reference_run[0] / "model" / "logs" / "train"
    for tag in ("train/loss", "train/masked_lm_loss", "train/masked_lm_accuracy",
                "train/sampled_masked_lm_accuracy", "train/disc_loss", "train/disc_accuracy",
                "train/disc_precision", "train/disc_recall", "train/disc_auc", "train/learning_rate",
                "speed/examples_per_second", "speed/tokens_per_second", "speed/step_time_seconds"):
        values = scalars(log_dir, tag)
        assert sorted(values) == list(range(5, STEPS + 1, 5)), tag
    learning_rates = scalars(log_dir, "train/learning_rate")
    assert learning_rates[5] < learning_rates[15]  # warmup
    panels = texts(log_dir, "samples/replaced_token_detection")
    assert len(panels) == STEPS // 20 + 1
    assert "~~" in panels[-1] and "**" in panels[-1] and "discriminator caught" in panels[-1]
    config_text = texts(log_dir, "run/config")[0]
    assert '"disc_weight": 50.0' in config_text


def test_sigkill_then_rerun_resumes_exactly(data_dir, reference_run, tmp_path):
    model_dir = tmp_path / "model"
    argv = command(data_dir, model_dir, tmp_path / "exports", "--no-export")
    process = subprocess.Popen(argv, env=environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    index = model_dir / "checkpoints" / "checkpoint"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        if index.is_file() and "ckpt-40" in index.read_text():
            break
        time.sleep(0.02)
    assert process.poll() is None, "the run ended before it could be killed"
    process.send_signal(signal.SIGKILL)
    process.wait()
    killed_at = max(scalars(model_dir / "logs" / "train", "train/loss"))
    assert killed_at < STEPS

    resumed = subprocess.run(argv, env=environment(), capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    resumed_from = int(resumed.stdout.split("resumed from step ")[1].split()[0])
    assert 40 <= resumed_from < STEPS and resumed_from % 20 == 0
    assert f"step {STEPS}/{STEPS}" in resumed.stdout

    # Every checkpoint the index lists loads, and the step counter continued to the end.
    state = tf.train.get_checkpoint_state(str(model_dir / "checkpoints"))
    assert state.model_checkpoint_path.endswith(f"ckpt-{STEPS}")
    for path in state.all_model_checkpoint_paths:
        reader = tf.train.load_checkpoint(path)
        assert reader.get_tensor("optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE") == int(path.rsplit("-", 1)[1])
        keys = reader.get_variable_to_shape_map()
        assert sum("model_variables" in key for key in keys) > 40  # weights and seed states

    # The loss continues where it was: after the resume point the resumed run logs the same
    # losses as the uninterrupted run (same weights, optimizer state, random state and batches).
    reference = scalars(reference_run[0] / "model" / "logs" / "train", "train/loss")
    after = scalars(model_dir / "logs" / "train", "train/loss", newest_file_only=True)
    assert min(after) == resumed_from + 5
    for step, value in after.items():
        np.testing.assert_allclose(value, reference[step], rtol=1e-4, err_msg=f"step {step}")
    assert after[STEPS] < reference[5] * 0.9  # and it is the trained loss, not a restart


@pytest.mark.slow  # the same steps in-process: tests/runtime/test_compiled_step.py, several steps a call
def test_several_steps_a_call_train_the_reference_runs_weights(data_dir, reference_run, tmp_path):
    """--steps_per_loop 3: the 160 steps as 53 calls of three and a last call of one (the run
    ends at its step, not past it), progress and checkpoints at the first call's end on or after
    each multiple of their period, and at the end the uninterrupted one-step-a-call run's weights."""
    model_dir = tmp_path / "model"
    result = subprocess.run(command(data_dir, model_dir, tmp_path / "exports", "--steps_per_loop", "3"),
                            env=environment(), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    shown = [int(step) for step in re.findall(rf"^step (\d+)/{STEPS} ", result.stdout, re.MULTILINE)]
    assert shown == sorted(set(shown)) and shown[0] == 6 and shown[-1] == STEPS  # 5 is passed at step 6
    state = tf.train.get_checkpoint_state(str(model_dir / "checkpoints"))
    assert [path.rsplit("-", 1)[1] for path in state.all_model_checkpoint_paths] == ["120", "141", str(STEPS)]
    expected = tf.train.load_checkpoint(str(reference_run[0] / "model" / "checkpoints" / f"ckpt-{STEPS}"))
    actual = tf.train.load_checkpoint(str(model_dir / "checkpoints" / f"ckpt-{STEPS}"))
    names = [name for name in expected.get_variable_to_shape_map() if name.startswith(("model_variables", "optimizer"))]
    assert len(names) > 40
    for name in names:
        np.testing.assert_allclose(actual.get_tensor(name), expected.get_tensor(name), rtol=1e-5, atol=1e-7,
                                   err_msg=name)


def test_several_steps_a_call_need_one_device(tmp_path, capsys):
    from electra_tf.training.config import TrainerConfig
    from electra_tf.utils.sections import ConfigError

    assert pretrain.main(["--model_dir", str(tmp_path / "model"), "--strategy", "mirrored",
                          "--steps_per_loop", "2"]) == 2
    assert "--steps_per_loop 2 needs one device" in capsys.readouterr().err and "strategy is mirrored"
    with pytest.raises(ConfigError, match="'steps_per_loop' = 0: must be at least 1"):
        TrainerConfig(steps_per_loop=0)
    assert not (tmp_path / "model").exists()  # refused before anything was written


def test_a_damaged_newest_checkpoint_is_set_aside_and_the_run_resumes(data_dir, reference_run, tmp_path, capsys):
    from electra_tf import export

    model_dir = tmp_path / "model"
    shutil.copytree(reference_run[0] / "model", model_dir)
    newest = tf.train.latest_checkpoint(str(model_dir / "checkpoints"))
    data_file = next(Path(newest).parent.glob(Path(newest).name + ".data-*"))
    data_file.write_bytes(data_file.read_bytes()[: data_file.stat().st_size // 2])  # an interrupted copy

    # The run's backbone holds its final weights whole: an export reads that, without the checkpoint.
    assert export.main(["--model_dir", str(model_dir), "--export_dir", str(tmp_path / "x")]) == 0
    assert str(model_dir / "backbone") in capsys.readouterr().out
    # Readers of the checkpoint itself name the damage and the intact alternatives.
    assert export.main(["--model_dir", str(model_dir), "--checkpoint", Path(newest).name, "--export_dir",
                        str(tmp_path / "y")]) == 2
    error = capsys.readouterr().err
    assert f"checkpoint {newest} is damaged" in error and "Intact: ckpt-" in error

    argv = command(data_dir, model_dir, tmp_path / "exports", "--no-export")[3:]
    assert pretrain.main(argv) == 0
    printed = capsys.readouterr()
    assert f"checkpoint {newest} is damaged" in printed.err and "trying the one before it" in printed.err
    assert "resumed from step 140" in printed.out and f"step {STEPS}/{STEPS}" in printed.out
    damaged = model_dir / "checkpoints" / "damaged"
    assert sorted(p.name for p in damaged.iterdir()) == sorted([f"ckpt-{STEPS}.index", data_file.name])
    assert tf.train.latest_checkpoint(str(model_dir / "checkpoints")).endswith(f"ckpt-{STEPS}")  # written anew


def test_no_intact_checkpoint_is_a_clear_error(data_dir, reference_run, tmp_path, capsys):
    model_dir = tmp_path / "model"
    shutil.copytree(reference_run[0] / "model", model_dir)
    for data_file in (model_dir / "checkpoints").glob("*.data-*"):
        data_file.write_bytes(b"")
    assert pretrain.main(command(data_dir, model_dir, tmp_path / "exports")[3:]) == 2
    assert "has no intact checkpoint" in capsys.readouterr().err


@pytest.mark.slow  # the extension policy: tests/pretraining/test_phases.py; runs extended by a rerun from their checkpoint: tests/test_compatibility.py
def test_a_larger_steps_extends_a_finished_run(data_dir, reference_run, tmp_path, capsys):
    model_dir = tmp_path / "model"
    shutil.copytree(reference_run[0] / "model", model_dir)
    argv = command(data_dir, model_dir, tmp_path / "exports", "--no-export")[3:]
    longer = [str(STEPS + 20) if a == str(STEPS) else a for a in argv]
    assert pretrain.main(longer) == 0
    captured = capsys.readouterr()
    printed = captured.out
    assert f"resumed from step {STEPS}" in printed and f"step {STEPS + 20}/{STEPS + 20}" in printed
    assert f"extending the run from {STEPS} to {STEPS + 20} steps" in printed and not captured.err
    history = json.loads((model_dir / "config_history.json").read_text())
    assert history[-1]["changed"] == {"num_train_steps": [STEPS, STEPS + 20]}
    saved = json.loads((model_dir / "config.json").read_text())["run"]
    assert saved["num_train_steps"] == STEPS + 20
    rates = scalars(model_dir / "logs" / "train", "train/learning_rate", newest_file_only=True)
    assert rates[STEPS + 20] == 0.0 and rates[STEPS + 5] > 0  # decays to 0 at the new end
    # metrics.json describes the whole run: both processes, their steps and time summed.
    summary = json.loads((model_dir / "metrics.json").read_text())
    assert summary["step"] == summary["steps_trained"] == STEPS + 20 and summary["steps_this_process"] == 20
    assert [p["steps"] for p in summary["processes"]] == [STEPS, 20]
    assert summary["train_seconds"] == pytest.approx(sum(p["train_seconds"] for p in summary["processes"]), abs=1e-3)
    # A warmup asked for with the extension: the run keeps its own, and says so and how to start
    # afresh (a trial in the default folder must not silently become the real run).
    again = [str(STEPS + 40) if a == str(STEPS) else a for a in argv] + ["--set", "num_warmup_steps=30"]
    assert pretrain.main(again) == 0
    captured = capsys.readouterr()
    assert (f"holds an earlier, shorter run, which this continues: it keeps that run's num_warmup_steps "
            f"{STEPS // 10}" in captured.err and "give a new --model_dir or remove" in captured.err)
    assert json.loads((model_dir / "config.json").read_text())["optimizer"]["num_warmup_steps"] == STEPS // 10
    # A rerun of the finished run keeps what metrics.json held, and adds its process.
    assert pretrain.main(argv[:argv.index("--steps")] + argv[argv.index("--steps") + 2:]) == 0
    assert "already trained to step 200" in capsys.readouterr().out
    rerun = json.loads((model_dir / "metrics.json").read_text())
    assert [p["steps"] for p in rerun["processes"]] == [STEPS, 20, 20, 0] and rerun["steps_trained"] == STEPS + 40
    assert rerun["train_seconds"] >= summary["train_seconds"] > 0
    shorter = [str(STEPS - 20) if a == str(STEPS) else a for a in argv]
    assert pretrain.main(shorter) == 2
    assert "--steps may only grow" in capsys.readouterr().err


def test_sigterm_during_the_final_evaluation_exits_143_with_the_checkpoint(data_dir, tmp_path, monkeypatch,
                                                                           capsys):
    from electra_tf.pretraining.pretrainer import ElectraPretrainer

    def evaluate_until_terminated(self, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)  # e.g. a preemption notice, mid-evaluation
        # The kernel may hand the signal to any of TensorFlow's threads, which does not wake a
        # sleep in this one; Python runs the handler in this thread at its next step.
        for _ in range(300):
            time.sleep(0.1)
        raise AssertionError("SIGTERM did not stop the evaluation")

    monkeypatch.setattr(ElectraPretrainer, "evaluate", evaluate_until_terminated)
    argv = [("20" if a == str(STEPS) else a) for a in command(data_dir, tmp_path / "model", tmp_path / "x")[3:]]
    assert pretrain.main(argv) == 128 + signal.SIGTERM
    assert "Stopped by signal 15 after step 20; checkpoint saved" in capsys.readouterr().out
    assert tf.train.latest_checkpoint(str(tmp_path / "model" / "checkpoints")).endswith("ckpt-20")
    assert not (tmp_path / "x").exists()  # no export of an unevaluated run
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # handlers restored


def test_a_checkpoint_write_error_stops_the_run_with_a_clear_message(data_dir, tmp_path, monkeypatch, capsys):
    saves = []
    real_save = tf.train.CheckpointManager.save

    def full_after_first(self, *args, **kwargs):
        saves.append(1)
        if len(saves) > 1:
            raise tf.errors.ResourceExhaustedError(None, None, "No space left on device")
        return real_save(self, *args, **kwargs)

    monkeypatch.setattr(tf.train.CheckpointManager, "save", full_after_first)
    argv = command(data_dir, tmp_path / "model", tmp_path / "x")[3:]
    assert pretrain.main(argv) == 2
    error = capsys.readouterr().err
    assert "could not write checkpoint ckpt-40" in error and "No space left on device" in error
    assert "last good checkpoint is" in error and error.count("ckpt-20") >= 1
    assert tf.train.latest_checkpoint(str(tmp_path / "model" / "checkpoints")).endswith("ckpt-20")


def stopped_by_sigterm(argv, model_dir, after_checkpoint: str) -> str:
    """Runs `argv` and sends it SIGTERM once `after_checkpoint` is in MODEL_DIR's checkpoint index;
    checks that it stopped saved (exit 143) and returns what it printed."""
    process = subprocess.Popen(argv, env=environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    index = Path(model_dir) / "checkpoints" / "checkpoint"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        if index.is_file() and after_checkpoint in index.read_text():
            break
        time.sleep(0.02)
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 128 + signal.SIGTERM, stderr[-3000:]
    return stdout


def assert_same_weights(expected_checkpoint, actual_checkpoint):
    """Every weight and optimizer variable of two checkpoints equal (to float32 rounding)."""
    expected = tf.train.load_checkpoint(str(expected_checkpoint))
    actual = tf.train.load_checkpoint(str(actual_checkpoint))
    names = [name for name in expected.get_variable_to_shape_map()
             if name.startswith(("model_variables", "optimizer"))]
    assert len(names) > 40
    for name in names:
        np.testing.assert_allclose(actual.get_tensor(name), expected.get_tensor(name), rtol=1e-5, atol=1e-7,
                                   err_msg=name)


# -m slow: three runs in processes of their own, 60-160 s of the suite. The default suite has exact
# resume after SIGKILL above, and float16's skipped steps with accumulation in every cell
# (tests/runtime/test_compiled_step.py).
@pytest.mark.slow
@pytest.mark.parametrize("sharing", ["shared", "gdes"])
def test_mixed_float16_with_accumulation_makes_every_step_and_resumes_exactly(data_dir, tmp_path, sharing):
    """Each update sums two micro-batches, and loss scaling skips the first updates (their
    float16 gradients overflow at the initial scale; decided once, on the summed gradient): a run
    of N steps still makes N updates, counts the skipped ones, shows no step twice, and a run
    stopped mid-way by SIGTERM and rerun ends with the weights of the uninterrupted run. The
    same with GDES embedding sharing (-m slow).
    Separate processes, as a user runs them: two runs in one process do not draw the same numbers."""
    steps = 16

    def argv(name):
        return [(str(steps) if a == str(STEPS) else a) for a in command(
            data_dir, tmp_path / name, tmp_path / f"{name}_x", "--mixed_precision", "mixed_float16",
            "--strategy", "one_device", "--checkpoint_every", "4", "--log_every", "4",
            "--gradient_accumulation_steps", "2", "--no-export", "--set", f"embedding_sharing={sharing}")]

    whole = subprocess.run(argv("whole"), env=environment(), capture_output=True, text=True, timeout=600)
    assert whole.returncode == 0, whole.stderr[-3000:]
    shown = re.findall(rf"^step (\d+)/{steps} ", whole.stdout, re.MULTILINE)
    assert shown == [str(step) for step in range(4, steps + 1, 4)]  # each once, whatever was skipped
    skipped = int(re.search(r"float16 loss scaling skipped (\d+) batch", whole.stdout).group(1))
    assert skipped >= 1 and f"at step {steps}." in whole.stdout
    assert "each update sums 2 micro-batches of 8" in whole.stdout
    assert "discriminator: not exported (--no-export" in whole.stdout and not (tmp_path / "whole_x").exists()
    assert json.loads((tmp_path / "whole" / "metrics.json").read_text())["examples_seen"] == steps * 16
    assert scalars(tmp_path / "whole" / "logs" / "train", "train/skipped_steps")[steps] == skipped

    stdout = stopped_by_sigterm(argv("stopped"), tmp_path / "stopped", "ckpt-8")  # a preemption, mid-run
    stopped_at = int(re.search(r"Stopped by signal 15 after step (\d+)", stdout).group(1))
    assert 8 <= stopped_at < steps

    resumed = subprocess.run(argv("stopped"), env=environment(), capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resumed from step {stopped_at}" in resumed.stdout
    assert f"float16 loss scaling skipped {skipped} batch" in resumed.stdout  # the count survived the stop
    assert_same_weights(tmp_path / "whole" / "checkpoints" / f"ckpt-{steps}",
                        tmp_path / "stopped" / "checkpoints" / f"ckpt-{steps}")


@pytest.mark.slow  # the compile cache across processes: tests/test_finetune.py (a rerun with XLA compiles nothing); reuse after a resume is checked only here
def test_a_resumed_and_extended_run_loads_its_compiled_steps_from_the_compile_cache(data_dir, tmp_path):
    """With XLA, the first run compiles its training and evaluation steps into the cache; resumed
    from an earlier checkpoint and extended (a larger --steps), it compiles nothing. It compiled
    again when the cache was turned on after TensorFlow had started, when the checkpoint restore
    came before the steps were traced (TensorFlow numbers function names in tracing order:
    CompiledGradients.trace_steps), and when the schedule's end was a constant of the training
    step (optimizer.WarmupLinearDecay). In float16, whose step calls functions of its own (the
    loss scale's `cond`), as a float32 step does not."""
    from electra_tf.training.checkpointing import write_checkpoint_index

    env = dict(environment(), ELECTRA_TF_COMPILE_CACHE=str(tmp_path / "cache"))
    argv = [("4" if a == str(STEPS) else a) for a in command(
        data_dir, tmp_path / "model", tmp_path / "exports", "--xla", "--strategy", "one_device",
        "--mixed_precision", "mixed_float16",
        "--checkpoint_every", "2", "--sample_every", "1000", "--eval_batches", "1", "--no-export")]

    def run(*extra):
        result = subprocess.run(argv + list(extra), env=env, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr[-3000:]
        summary = json.loads((tmp_path / "model" / "metrics.json").read_text())
        return result.stdout, summary["compile_cache"]

    _, cache = run()
    assert cache["folder"] == str(tmp_path / "cache") and cache["programs_added"] >= 2  # training, evaluation
    checkpoints = tmp_path / "model" / "checkpoints"
    write_checkpoint_index(checkpoints, [str(checkpoints / "ckpt-2")])  # as if stopped after step 2
    stdout, cache = run("--steps", "6")
    assert "resumed from step 2" in stdout and "step 6/6" in stdout
    # XLA found both programs it compiled in the first run.
    assert cache["programs_added"] == 0


@pytest.mark.slow  # raw-text runs resumed from their checkpoint: tests/test_compatibility.py
def test_raw_text_runs_checkpoint_and_resume(corpus, small_vocab, tmp_path, capsys):
    text = corpus.write_sentence_file(tmp_path / "corpus.txt", repeat=10)
    argv = ["--data", str(text), "--vocab", str(small_vocab), "--model_dir", str(tmp_path / "model"),
            "--export_dir", str(tmp_path / "x"), "--steps", "6", "--batch_size", "4", "--set", "num_layers=1",
            "--set", "max_seq_length=32", "--checkpoint_every", "3", "--log_every", "3", "--eval_batches", "1",
            "--no-export"]
    assert pretrain.main(argv) == 0
    assert tf.train.latest_checkpoint(str(tmp_path / "model" / "checkpoints")).endswith("ckpt-6")
    longer = [("9" if a == "6" else a) for a in argv]
    assert pretrain.main(longer) == 0
    printed = capsys.readouterr().out
    assert "resumed from step 6" in printed and "raw text input restarts from the beginning" in printed


def test_rerun_with_a_different_config_is_refused(data_dir, reference_run, tmp_path, capsys):
    root = tmp_path  # a copy: the reference run is shared with other test processes
    shutil.copytree(reference_run[0] / "model", root / "model")
    argv = command(data_dir, root / "model", root / "exports")[3:]
    code = pretrain.main(argv + ["--set", "learning_rate=0.1"])
    assert code == 2
    assert "different config (learning_rate" in capsys.readouterr().err


def test_divergence_stops_naming_the_step(data_dir, tmp_path):
    # Weights drawn with a huge initializer overflow within the first steps. In a process of its
    # own: run inside a test process after other tests, the same run took 23-86 s in the suite
    # (3.4 s alone); a fresh process takes the start-up's few seconds every time.
    argv = command(data_dir, tmp_path / "model", tmp_path / "exports", "--set", "initializer_range=1e30",
                   "--strategy", "one_device")
    result = subprocess.run(argv, env=environment(), capture_output=True, text=True, timeout=600)
    assert result.returncode == 3, result.stderr[-3000:]
    error = result.stderr
    step = int(re.search(r"non-finite at step (\d+) \(float32\)", error).group(1))
    assert 1 <= step < 20 and "last good checkpoint is intact: none yet" in error
    assert not (tmp_path / "model" / "checkpoints" / "checkpoint").exists()  # nothing saved after it
    assert not (tmp_path / "exports").exists()


def test_float16_overflowing_at_every_scale_stops_instead_of_looping(data_dir, tmp_path):
    # The same exploding weights under float16: every batch's gradients overflow, loss scaling
    # skips each (no update, the step never advances). The run stops after MAX_CONSECUTIVE_SKIPS
    # of them and says what to do, instead of retrying the same step for ever. In a process of its
    # own, as the divergence test above (in a test process after other tests it took 42-59 s).
    argv = command(data_dir, tmp_path / "model", tmp_path / "exports", "--set", "initializer_range=1e30",
                   "--mixed_precision", "mixed_float16", "--strategy", "one_device", "--no-xla")
    result = subprocess.run(argv, env=environment(), capture_output=True, text=True, timeout=600)
    assert result.returncode == 3, result.stderr[-3000:]
    error = result.stderr
    assert "float16 gradients overflowed on 40 batches in a row at step 0" in error
    assert "--mixed_precision mixed_bfloat16" in error and "last good checkpoint is intact: none yet" in error
    assert not (tmp_path / "exports").exists()


def test_help_documents_every_option(capsys):
    # In this process: the text `--help` prints is the parser's (tests/test_docs.py runs the commands' parsers).
    with pytest.raises(SystemExit):
        pretrain.main(["--help"])
    result = capsys.readouterr()
    for option in ("--config", "--set", "--data", "--model_dir", "--steps", "--batch_size", "--strategy",
                   "--mixed_precision", "--xla", "--no-xla", "--checkpoint_every", "--keep_checkpoints",
                   "--seed", "--export_dir", "--profile_steps", "--steps_per_loop"):
        assert option in result.out, option


def test_bad_config_value_is_reported_without_a_traceback(capsys):
    assert pretrain.main(["--set", "mask_prob=2"]) == 2
    assert "'mask_prob' = 2.0: must be in (0, 1)" in capsys.readouterr().err


@pytest.mark.slow  # stopping itself is tested with shards (SIGTERM, SIGKILL) and raw text (resume) above
def test_a_stopped_run_on_raw_text_prints_nothing_that_looks_like_an_error(corpus, tmp_path):
    """Raw text (a Python generator feeds it) ended TensorFlow's log with "Error occurred when
    finalizing GeneratorDataset iterator", and every command opened with TensorFlow's banners.
    A stopped run ends through the same path as a finished one (`run_pretraining` releases the
    generator's iterators either way), so it covers that message; a finished run's whole terminal,
    evaluation and export included: test_run_prints_progress_summary_and_exports."""
    text = corpus.write_sentence_file(tmp_path / "corpus.txt", repeat=20)
    argv = [sys.executable, "-m", "electra_tf.pretrain", "--data", str(text), "--batch_size", "4",
            "--set", "num_layers=1", "--set", "max_seq_length=32", "--eval_batches", "1", "--log_every", "1"]
    process = subprocess.Popen(argv + ["--model_dir", str(tmp_path / "stopped"), "--steps", "100000"],
                               env=user_environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in process.stdout:
        if line.startswith("step 2/"):
            process.send_signal(signal.SIGINT)
            break
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 128 + signal.SIGINT and "Stopped by signal 2" in stdout, stderr[-3000:]
    assert not alarming_lines(stderr), stderr


def test_a_finished_run_rerun_exports_into_its_own_folder_and_adds_no_version(pretrained_run, tmp_path, capsys):
    """Before: exports went to ./exports/<name>/ of the current directory, and every rerun of a
    finished run wrote another, identical version."""
    from tests.conftest import pretrained_run_argv

    root = tmp_path / "root"  # a copy: the run is shared with other test processes
    shutil.copytree(pretrained_run.parent, root)
    versions = root / "electra_tiny" / "export" / "electra_tiny"
    assert [p.name for p in versions.iterdir()] == ["1"]
    # In a process of its own: in a test process after other tests the same rerun took up to 90 s.
    result = subprocess.run([sys.executable, "-m", "electra_tf.pretrain", *pretrained_run_argv(root)],
                            env=environment(), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    printed = result.stdout
    assert "nothing left to train" in printed and "already holds this model" in printed
    assert f"discriminator: {versions.resolve() / '1'}" in printed  # absolute
    assert [p.name for p in versions.iterdir()] == ["1"]


@pytest.fixture(scope="module")
def held_out_data(corpus, small_vocab, tmp_path_factory):
    """The test corpus with a fifth of its documents held out (the evaluation's text)."""
    folder = built_once(tmp_path_factory, "pretrain_data_held_out", lambda folder: corpus.build_test_shards(
        folder, small_vocab, 32, num_shards=2, repeat=40, held_out=0.2))
    return folder / "data"


def test_evaluation_during_the_run_reads_held_out_text_and_leaves_training_unchanged(
        data_dir, held_out_data, reference_run, tmp_path):
    """--eval_every: the metrics on held-out text every 40 steps, to the console, TensorBoard
    (eval/) and the summary; the final metrics are on the same text, and said to be. Training is
    the reference run's, step for step: evaluating draws nothing from the run's random streams."""
    argv = command(data_dir, tmp_path / "model", tmp_path / "exports", "--no-export", "--eval_every", "40",
                   "--eval_data", str(held_out_data))
    result = subprocess.run(argv, env=environment(), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert re.findall(r"eval at step (\d+) on held-out text", result.stdout) == ["40", "80", "120", "160"]
    assert "Final metrics on 2 batches of held-out text" in result.stdout
    assert "Final metrics on 2 batches of training text masked afresh" in reference_run[1]
    log_dir = tmp_path / "model" / "logs" / "train"
    assert sorted(scalars(log_dir, "eval/disc_recall")) == [40, 80, 120, 160]
    reference = scalars(reference_run[0] / "model" / "logs" / "train", "train/loss")
    for step, value in scalars(log_dir, "train/loss").items():
        np.testing.assert_allclose(value, reference[step], rtol=1e-5, err_msg=f"step {step}")
    summary = json.loads((tmp_path / "model" / "metrics.json").read_text())
    assert summary["evaluated_on_held_out_text"] and summary["health_warnings"] == []
    during = summary["evaluations_during_run"]
    assert sorted(during, key=int) == ["40", "80", "120", "160"] and during["40"] != during["160"]
    # The final evaluation: the same batches and masking, the generator sampling on from the run's stream.
    assert summary["final_eval"]["masked_lm_accuracy"] == pytest.approx(during["160"]["masked_lm_accuracy"])
    assert summary["final_eval"]["disc_auc"] == pytest.approx(during["160"]["disc_auc"], abs=0.05)
    assert summary["peak_memory"]["bytes"] > 100e6 and "CPU" in summary["peak_memory"]["where"]
    assert sorted(scalars(log_dir, "memory/peak_gib")) == list(range(5, STEPS + 1, 5))


@pytest.fixture(scope="module")
def data_64(corpus, small_vocab, tmp_path_factory):
    folder = built_once(tmp_path_factory, "pretrain_data_64", lambda folder: corpus.build_test_shards(
        folder, small_vocab, 64, num_shards=2, repeat=40))
    return folder / "data"


PHASE_2_STEPS = 12


def phase_two_command(data_64, model_dir, export_dir, *extra):
    """The reference run's second phase: 64-token sequences for 20 more steps, 4 of warm-up."""
    argv = command(data_64, model_dir, export_dir, "--set", "num_warmup_steps=4", "--checkpoint_every", "4",
                   "--keep_checkpoints", "6", "--no-export", *extra)
    return [str(STEPS + PHASE_2_STEPS) if a == str(STEPS) else "max_seq_length=64" if a == "max_seq_length=32" else a
            for a in argv]


def test_a_second_phase_at_a_longer_length_continues_the_run_and_resumes_exactly(
        data_64, reference_run, tmp_path, capsys):
    """A run trained at 32 tokens goes on at 64 with --phase 2: weights, optimizer state and
    step count carry over, its learning rate warms up and decays over the phase's own steps.
    Without --phase the new length is refused, saying how. A phase 2 resumed from a checkpoint
    in its middle ends with the uninterrupted phase 2's weights. (The checkpoint index is rewound
    in a copy of the finished phase rather than a second run stopped: stopping by a signal is
    tested with the float16 run above and SIGKILL's, and a copy spares a process.)"""
    from electra_tf.training.checkpointing import write_checkpoint_index

    shutil.copytree(reference_run[0] / "model", tmp_path / "whole")
    assert pretrain.main(phase_two_command(data_64, tmp_path / "whole", tmp_path / "x")[3:]) == 2
    assert "add --phase 2" in capsys.readouterr().err

    whole = subprocess.run(phase_two_command(data_64, tmp_path / "whole", tmp_path / "x", "--phase", "2"),
                           env=environment(), capture_output=True, text=True, timeout=600)
    assert whole.returncode == 0, whole.stderr[-3000:]
    end = STEPS + PHASE_2_STEPS
    assert f"starting phase 2 at step {STEPS}: {PHASE_2_STEPS} steps at 64 tokens" in whole.stdout
    assert f"phase 2, steps {STEPS} to {end}" in whole.stdout and f"step {end}/{end}" in whole.stdout
    saved = PretrainingConfig.load(str(tmp_path / "whole" / "config.json"))
    assert (saved.run.phase, saved.run.phase_start_step, saved.run.max_seq_length) == (2, STEPS, 64)
    history = json.loads((tmp_path / "whole" / "config_history.json").read_text())
    assert history[-1]["rule"].startswith("phase 2 from step 160")
    rates = scalars(tmp_path / "whole" / "logs" / "train", "train/learning_rate", newest_file_only=True)
    peak = saved.optimizer.learning_rate
    np.testing.assert_allclose(rates[STEPS + 5], peak * (1 - 5 / PHASE_2_STEPS), rtol=1e-5)  # warmed up at 4
    assert rates[end] == 0.0
    losses = scalars(tmp_path / "whole" / "logs" / "train", "train/loss", newest_file_only=True)
    untrained = scalars(reference_run[0] / "model" / "logs" / "train", "train/loss")[5]
    assert losses[STEPS + 5] < 0.9 * untrained  # the trained weights, not a restart
    summary = json.loads((tmp_path / "whole" / "metrics.json").read_text())
    assert summary["phase"] == {"phase": 2, "started_at_step": STEPS, "max_seq_length": 64}
    assert summary["examples_seen"] == PHASE_2_STEPS * 8

    # The finished phase, as if it had stopped after step 168: its later checkpoints gone.
    shutil.copytree(tmp_path / "whole", tmp_path / "stopped")
    checkpoints = tmp_path / "stopped" / "checkpoints"
    middle = STEPS + 8
    for later in range(middle + 1, end + 1):
        for file in checkpoints.glob(f"ckpt-{later}.*"):
            file.unlink()
    write_checkpoint_index(checkpoints, [str(checkpoints / f"ckpt-{middle}")])
    resumed = subprocess.run(phase_two_command(data_64, tmp_path / "stopped", tmp_path / "y", "--phase", "2"),
                             env=environment(), capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resumed from step {middle}" in resumed.stdout and "starting phase" not in resumed.stdout
    assert_same_weights(tmp_path / "whole" / "checkpoints" / f"ckpt-{end}", checkpoints / f"ckpt-{end}")


@pytest.mark.slow  # its flat config.json read: tests/pretraining/test_config.py; earlier folders resumed, fine-tuned and exported: tests/test_compatibility.py
def test_a_model_dir_written_before_config_sections_resumes_fine_tunes_and_exports(corpus, tmp_path, capsys):
    """tests/fixtures/flat_config_model_dir: a run as electra_tf wrote them with a flat config.json
    (6 steps on the test corpus as raw text)."""
    from electra_tf import export, finetune

    model_dir = tmp_path / "model"
    shutil.copytree(Path(__file__).parent / "fixtures" / "flat_config_model_dir", model_dir)
    text = corpus.write_sentence_file(tmp_path / "corpus.txt", repeat=30)
    # Extended by two steps: the flat config is the base, so nothing else is asked to change.
    assert pretrain.main(["--data", str(text), "--model_dir", str(model_dir), "--steps", "8", "--batch_size", "2",
                          "--log_every", "2", "--eval_batches", "1", "--no-export"]) == 0
    printed = capsys.readouterr().out
    assert "resumed from step 6" in printed and "extending the run from 6 to 8 steps" in printed
    saved = json.loads((model_dir / "config.json").read_text())
    assert saved["model"]["hidden_size"] == 16 and saved["run"]["num_train_steps"] == 8  # written by section now
    summary = json.loads((model_dir / "metrics.json").read_text())
    assert [p["steps"] for p in summary["processes"]] == [6, 2]  # the earlier process, read from its metrics.json
    assert (model_dir / "backbone" / "model.weights.h5").is_file()

    rows = [(s, "nature" if i % 2 else "town") for i, s in enumerate(s for d in corpus.DOCUMENTS for s in d)]
    data = tmp_path / "topics.csv"
    data.write_text("text,label\n" + "".join(f'"{t}",{label}\n' for t, label in rows), encoding="utf-8")
    assert finetune.main(["--pretrained", str(model_dir), "--train", str(data), "--eval", str(data), "--output_dir",
                          str(tmp_path / "out"), "--epochs", "1", "--batch_size", "4"]) == 0
    assert export.main(["--model_dir", str(model_dir), "--export_dir", str(tmp_path / "exports")]) == 0
    assert (tmp_path / "exports" / "model" / "1" / "saved_model.pb").is_file()


def test_repeating_the_runs_own_preset_changes_nothing_the_run_set(tmp_path):
    """docs/pretraining.md's phase-2 recipe on the tiny preset: a run started with --set
    max_position_embeddings=512 records its preset, so a later command that repeats --config
    electra_tiny continues the run's own values; another preset is another base, refused."""
    from electra_tf.pretraining.phases import continue_run
    from electra_tf.utils.errors import RunError

    model_dir = tmp_path / "model"
    started = pretrain._run_settings(pretrain.build_parser().parse_args(
        ["--config", "electra_tiny", "--set", "max_position_embeddings=512", "--model_dir", str(model_dir),
         "--steps", "100", "--log_every", "10"]))[0].config
    assert started.preset == "electra_tiny" and started.model.max_position_embeddings == 512
    model_dir.mkdir()
    started.save(model_dir / "config.json")
    for repeated in ([], ["--config", "electra_tiny"]):
        phase_two = pretrain._run_settings(pretrain.build_parser().parse_args(
            [*repeated, "--model_dir", str(model_dir), "--phase", "2", "--set", "max_seq_length=512",
             "--set", "num_warmup_steps=2", "--steps", "120", "--batch_size", "4"]))[0]
        decision = continue_run(started, phase_two.config, phase=2, latest_step=100)
        assert decision.starts_phase and decision.config.model.max_position_embeddings == 512
        assert decision.config.trainer.log_every == 10  # the run's cadence, kept
    other = pretrain._run_settings(pretrain.build_parser().parse_args(
        ["--config", "electra_small", "--model_dir", str(model_dir), "--phase", "2", "--steps", "120"]))[0]
    with pytest.raises(RunError, match="a new phase keeps the run's model"):
        continue_run(started, other.config, phase=2, latest_step=100)


def test_text_too_small_to_learn_a_vocabulary_from_is_refused_naming_what_a_run_needs(tmp_path, capsys):
    """Before: a folder holding one word pre-trained (exit 0, a 13-token vocabulary)."""
    (tmp_path / "text").mkdir()
    (tmp_path / "text" / "words.txt").write_text("hello\n", encoding="utf-8")
    assert pretrain.main(["--data", str(tmp_path / "text"), "--model_dir", str(tmp_path / "model"), "--steps", "2",
                          "--no-export"]) == 2
    error = capsys.readouterr().err
    assert "holds too little text to pre-train on" in error and "a run needs at least 100" in error
    assert "--with_sample" in error and not (tmp_path / "model" / "vocab.txt").exists()
