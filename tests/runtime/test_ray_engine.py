"""`python -m electra_tf.launch --engine ray`: a job the cluster cannot place is refused before
anything starts; under -m slow (with the `.[ray]` extra) a two-worker Ray Train job on a local Ray
cluster, given relative folders, one worker's actor process killed with SIGKILL mid-run, restarts
the group and ends with the weights of the launcher's uninterrupted two-worker run."""

import importlib.util
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from electra_tf import launch
from electra_tf.runtime.ray_engine import check_resources
from electra_tf.utils.errors import RunError
from tests.cli_runs import environment
from tests.test_launch import STEPS, command, data_dir, reference_run, weights  # noqa: F401  (fixtures)


@pytest.mark.parametrize("total, free, message", [
    ({"CPU": 2.0}, {"CPU": 2.0}, "need 4 CPU\\(s\\); the Ray cluster has 2 in all"),
    ({"CPU": 8.0}, {"CPU": 1.0}, "1 are free now"),
    ({"CPU": 8.0, "GPU": 1.0}, {"CPU": 8.0, "GPU": 1.0}, "need 2 GPU\\(s\\); the Ray cluster has 1 in all"),
])
def test_a_job_the_cluster_cannot_place_is_refused(total, free, message):
    gpus = 1.0 if "GPU" in total else 0.0
    with pytest.raises(RunError, match=message):
        check_resources(total, free, 2, 2.0 if total["CPU"] == 2.0 else 1.0, gpus)


def test_without_ray_the_engine_names_the_extra(monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    assert launch.main(["--engine", "ray", "--workers", "2", "--", "--steps", "1"]) == 2
    assert 'pip install -e ".[ray]"' in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs Ray Train: pip install -e \".[ray]\"")
def test_a_killed_worker_makes_ray_restart_the_group_and_the_run_ends_as_an_uninterrupted_one(
        data_dir, reference_run, tmp_path):  # noqa: F811
    model_dir = tmp_path / "model"
    # Relative folders, started in tmp_path: each worker's command runs where launch was started.
    argv = command(data_dir, Path("model"), Path("exports"))
    argv = [sys.executable, "-m", "electra_tf.launch", "--engine", "ray", "--workers", "2", "--max_failures", "1",
            "--storage", str(tmp_path / "ray"), *argv[argv.index("--"):]]
    env = {key: value for key, value in environment().items() if key not in ("RAY_ADDRESS", "TF_CONFIG")}
    job = subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(job.stdout), daemon=True)
    reader.start()
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline and job.poll() is None:
        if (model_dir / "checkpoints" / "worker-1" / "ckpt-20.index").is_file():
            break
        time.sleep(0.1)
    started = [re.search(r"pid=(\d+)\) world_rank=1\b", line) for line in list(lines)]
    pids = [int(found.group(1)) for found in started if found]
    assert job.poll() is None and pids, "".join(lines)[-3000:]
    os.kill(pids[0], signal.SIGKILL)  # worker 1's Ray actor; its command dies with it
    job.wait(timeout=900)
    reader.join(timeout=10)
    output = "".join(lines)
    assert job.returncode == 0, output[-4000:]
    assert len(re.findall(r"world_rank=1\b", output)) >= 2  # Ray started the group again
    assert re.search(r"resumed from step (20|40)", output)
    final = weights(model_dir / "checkpoints" / f"ckpt-{STEPS}")
    expected = weights(reference_run[0] / "model" / "checkpoints" / f"ckpt-{STEPS}")
    assert final.keys() == expected.keys()
    for key in expected:
        np.testing.assert_allclose(final[key], expected[key], rtol=1e-5, atol=1e-7, err_msg=key)
