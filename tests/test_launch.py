"""`python -m electra_tf.launch`: a real two-worker pre-training run, a worker killed with
SIGKILL mid-run (the job stops with a message, no hang), and the same command resuming exactly."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from electra_tf import launch
from tests.cli_runs import alarming_lines, environment, scalars, user_environment

REPO = Path(__file__).resolve().parents[1]
STEPS = 60


@pytest.fixture(scope="module")
def data_dir(corpus, small_vocab, tmp_path_factory):
    return corpus.build_test_shards(tmp_path_factory.mktemp("launch_data"), small_vocab, 32, num_shards=4, repeat=40)


def command(data_dir, model_dir, export_dir):
    return [sys.executable, "-m", "electra_tf.launch", "--workers", "2", "--",
            "--data", str(data_dir), "--model_dir", str(model_dir), "--export_dir", str(export_dir),
            "--steps", str(STEPS), "--batch_size", "8", "--set", "num_layers=1", "--set", "max_seq_length=32",
            "--checkpoint_every", "20", "--log_every", "5", "--eval_batches", "2"]


def losses(model_dir, newest_file_only=False):
    return scalars(Path(model_dir) / "logs" / "train", "train/loss", newest_file_only)


def weights(checkpoint_path):
    reader = tf.train.load_checkpoint(str(checkpoint_path))
    return {key: reader.get_tensor(key) for key in reader.get_variable_to_shape_map()
            if key.startswith("model_variables/")}


def worker_pid(launcher_pid, index):
    """The pid of the launcher's worker `index` (its TF_CONFIG names the task)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            environ = (entry / "environ").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if parent == launcher_pid and f'"index": {index}}}'.encode() in environ:
            return int(entry.name)
    return None


@pytest.fixture(scope="module")
def reference_run(data_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("two_workers")
    # As a user's shell runs it (no TF_CPP_MIN_LOG_LEVEL), so the output check below means something.
    result = subprocess.run(command(data_dir, root / "model", root / "exports"), env=user_environment(),
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:]
    return root, result.stdout


@pytest.mark.slow
def test_two_workers_run_to_the_end_with_only_the_chief_writing(reference_run):
    root, stdout = reference_run
    assert "[worker 0]   this process: worker 0 of 2 (chief), reading 4 of every step's 8 examples" in stdout
    assert "[worker 1]   this process: worker 1 of 2, reading 4" in stdout
    assert f"[worker 0] step {STEPS}/{STEPS}" in stdout and "[worker 1] step" not in stdout
    assert "[worker 1] Done at step 60 (the chief reports the run)." in stdout
    checkpoints = root / "model" / "checkpoints"
    assert (checkpoints / f"ckpt-{STEPS}.index").is_file()
    # Worker 1 keeps only its input position, under the chief's checkpoint numbers.
    assert (checkpoints / "worker-1" / f"ckpt-{STEPS}.index").is_file()
    saved = tf.train.load_checkpoint(str(checkpoints / "worker-1" / f"ckpt-{STEPS}")).get_variable_to_shape_map()
    assert not any(key.startswith(("model_variables/", "optimizer/")) for key in saved)
    assert [p.name for p in (root / "exports" / "model").iterdir()] == ["1"]
    assert len(list((root / "model" / "logs" / "train").glob("events.out.tfevents.*"))) == 1
    # Nothing that looks like an error until a worker is done: each prints its "Done" line after
    # the run's final barrier. After that, as the processes exit, TensorFlow's coordination
    # service may say farewell (docs/scaling.md): the chief names the worker that left as
    # unhealthy, or the worker fails to reach the chief that left first (worker 1's line can come
    # before its own "Done" line); the same lines before then would be a real failure, so they
    # are allowed only after the first "Done".
    done = min(stdout.index("[worker 0] Done in"), stdout.index("[worker 1] Done at step 60"))
    during, after = stdout[:done], stdout[done:]
    assert not alarming_lines(during) and "/job:worker/replica" not in during, during[-3000:]
    farewell = r"StartAbort|unhealthy|have crashed|Failed to connect to remote host|/job:worker/replica"
    alarming = [line for line in alarming_lines(after) if not re.search(farewell, line)]
    assert not alarming, "\n".join(alarming)


@pytest.mark.slow
def test_a_killed_worker_stops_the_job_and_the_same_command_resumes_exactly(data_dir, reference_run, tmp_path):
    model_dir = tmp_path / "model"
    argv = command(data_dir, model_dir, tmp_path / "exports")
    launcher = subprocess.Popen(argv, env=environment(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and launcher.poll() is None:
        if (model_dir / "checkpoints" / "worker-1" / "ckpt-20.index").is_file():
            break
        time.sleep(0.05)
    pid = worker_pid(launcher.pid, 1)
    assert launcher.poll() is None and pid, "the run ended before a worker could be killed"
    os.kill(pid, signal.SIGKILL)
    killed_at = time.monotonic()
    stdout, _ = launcher.communicate(timeout=120)  # no hang: the job stops
    assert time.monotonic() - killed_at < 60
    assert launcher.returncode != 0
    assert "launch: worker 1 was killed by signal 9" in stdout

    resumed = subprocess.run(argv, env=environment(), capture_output=True, text=True, timeout=900)
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    resumed_from = int(resumed.stdout.split("[worker 0]   resumed from step ")[1].split()[0])
    assert 20 <= resumed_from < STEPS and resumed_from % 20 == 0
    assert f"[worker 1]   resumed from step {resumed_from}" in resumed.stdout

    # Same losses after the resume point as the uninterrupted run, and the same final weights:
    # both workers went on from their own input positions.
    reference_dir = reference_run[0] / "model"
    reference = losses(reference_dir)
    after = losses(model_dir, newest_file_only=True)
    assert min(after) == resumed_from + 5 and max(after) == STEPS
    for step, value in after.items():
        np.testing.assert_allclose(value, reference[step], rtol=1e-5, err_msg=f"step {step}")
    final, expected = weights(model_dir / "checkpoints" / f"ckpt-{STEPS}"), weights(
        reference_dir / "checkpoints" / f"ckpt-{STEPS}")
    assert final.keys() == expected.keys()
    for key in expected:
        np.testing.assert_allclose(final[key], expected[key], rtol=1e-5, atol=1e-7, err_msg=key)


def test_arguments_after_the_separator_go_to_every_worker(monkeypatch):
    seen = {}
    monkeypatch.setattr("electra_tf.runtime.cluster.launch_local",
                        lambda command, workers, threads: seen.update(command=command, workers=workers) or 0)
    assert launch.main(["--workers", "3", "--", "--steps", "10", "--model_dir", "runs/x"]) == 0
    assert seen == {"command": [sys.executable, "-m", "electra_tf.pretrain", "--steps", "10", "--model_dir", "runs/x"],
                    "workers": 3}


def test_zero_workers_is_a_clear_error(capsys):
    assert launch.main(["--workers", "0", "--", "--steps", "1"]) == 2
    assert "--workers must be at least 1" in capsys.readouterr().err


def free_port_pair() -> int:
    """A port ending in 0 whose next port is free too: SLURM's resolver numbers a node's tasks
    from a base port, and a Kubernetes address pattern can then put {index} in the last digit."""
    import random
    import socket

    for _ in range(200):
        base = random.randrange(20000, 60000, 10)
        try:
            with socket.socket() as first, socket.socket() as second:
                first.bind(("127.0.0.1", base))
                second.bind(("127.0.0.1", base + 1))
            return base
        except OSError:
            continue
    raise AssertionError("no two free ports")


def run_cluster(argvs, engine):
    """One process per command line, each with the environment srun gives a task (`slurm`) or a
    Kubernetes Indexed Job's pod, the peers' names mapped to local ports (`kubernetes`), and no
    TF_CONFIG; (the processes, their outputs) once all have ended."""
    base = free_port_pair()
    workers = []
    for index, argv in enumerate(argvs):
        env = {key: value for key, value in environment().items() if key != "TF_CONFIG"}
        env.update(CUDA_VISIBLE_DEVICES="-1", TF_NUM_INTRAOP_THREADS="1", TF_NUM_INTEROP_THREADS="1",
                   OMP_NUM_THREADS="1")
        if engine == "slurm":
            env.update(SLURM_PROCID=str(index), SLURM_STEP_NUM_TASKS=str(len(argvs)),
                       SLURM_STEP_NODELIST="127.0.0.1", SLURM_STEP_TASKS_PER_NODE=str(len(argvs)),
                       ELECTRA_TF_PORT=str(base))
        else:
            env.update(ELECTRA_TF_CLUSTER="kubernetes", JOB_COMPLETION_INDEX=str(index),
                       ELECTRA_TF_WORKERS=str(len(argvs)), ELECTRA_TF_WORKER_ADDRESS=f"127.0.0.1:{base // 10}{{index}}")
        workers.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    return workers, [worker.communicate(timeout=900)[0] for worker in workers]


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["slurm", "kubernetes"])
def test_two_processes_given_slurms_or_a_pods_environment_train_as_the_launcher_does(engine, data_dir,
                                                                                    reference_run, tmp_path):
    """Two `pretrain` commands with the environment srun gives each task (or a Kubernetes Indexed
    Job's pod, the peers' names mapped to local ports) and no TF_CONFIG: the package finds the
    cluster, and the run ends with the launcher's two-worker weights."""
    argv = command(data_dir, tmp_path / "model", tmp_path / "exports")
    argv = [sys.executable, "-m", "electra_tf.pretrain", *argv[argv.index("--") + 1:]]
    workers, outputs = run_cluster([argv, argv], engine)
    assert [worker.returncode for worker in workers] == [0, 0], outputs[0][-3000:] + outputs[1][-3000:]
    assert "this process: worker 0 of 2 (chief)" in outputs[0] and "this process: worker 1 of 2" in outputs[1]
    final = weights(tmp_path / "model" / "checkpoints" / f"ckpt-{STEPS}")
    expected = weights(reference_run[0] / "model" / "checkpoints" / f"ckpt-{STEPS}")
    assert final.keys() == expected.keys()
    for key in expected:
        np.testing.assert_allclose(final[key], expected[key], rtol=1e-5, atol=1e-7, err_msg=key)


@pytest.mark.slow
def test_a_run_folder_one_worker_cannot_see_stops_every_worker_before_training(data_dir, reference_run, tmp_path):
    """Worker 1 given its own folder (as a model_dir on each machine's local disk would be): both
    workers stop before training with an error naming worker 1 and the folder, the chief's folder
    keeps nothing a rerun trips on, and the rerun on one folder ends with the two-worker weights."""
    argv = command(data_dir, tmp_path / "model", tmp_path / "exports")
    argv = [sys.executable, "-m", "electra_tf.pretrain", *argv[argv.index("--") + 1:]]
    local = list(argv)
    local[local.index("--model_dir") + 1] = str(tmp_path / "worker_1_local_disk")
    workers, outputs = run_cluster([argv, local], "kubernetes")
    assert [worker.returncode for worker in workers] != [0, 0]
    for output in outputs:
        assert "worker 1 of 2 cannot read" in output and "shared storage" in output, output[-3000:]
        assert "step 1" not in output.lower()
    assert not (tmp_path / "model" / "checkpoints").exists()
    assert not (tmp_path / "model" / ".workers-see-this").exists()

    workers, outputs = run_cluster([argv, argv], "kubernetes")
    assert [worker.returncode for worker in workers] == [0, 0], outputs[0][-3000:] + outputs[1][-3000:]
    final = weights(tmp_path / "model" / "checkpoints" / f"ckpt-{STEPS}")
    expected = weights(reference_run[0] / "model" / "checkpoints" / f"ckpt-{STEPS}")
    for key in expected:
        np.testing.assert_allclose(final[key], expected[key], rtol=1e-5, atol=1e-7, err_msg=key)
