"""Worker roles from TF_CONFIG, the local launcher, and two real worker processes: the same
training as one worker, and a killed worker that stops the job and resumes exactly."""

import io
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from electra_tf.runtime import cluster
from electra_tf.runtime.cluster import WorkerRole, launch_local, local_tf_configs
from electra_tf.utils.errors import RunError
from tests.cli_runs import environment

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def tf_config(workers, task_type="worker", index=0, chief=0):
    cluster_spec = {"worker": [f"127.0.0.1:{2000 + i}" for i in range(workers)]}
    if chief:
        cluster_spec["chief"] = ["127.0.0.1:1999"]
    return {"TF_CONFIG": json.dumps({"cluster": cluster_spec, "task": {"type": task_type, "index": index}})}


def test_worker_roles_follow_tf_config():
    assert WorkerRole.from_environ({}) == WorkerRole(0, 1, True)
    assert WorkerRole.from_environ(tf_config(1)) == WorkerRole(0, 1, True)
    assert WorkerRole.from_environ(tf_config(2, index=0)) == WorkerRole(0, 2, True)
    assert WorkerRole.from_environ(tf_config(2, index=1)) == WorkerRole(1, 2, False)
    # A cluster that names a chief: the chief is worker 0, the workers follow it.
    assert WorkerRole.from_environ(tf_config(2, "chief", 0, chief=1)) == WorkerRole(0, 3, True)
    assert WorkerRole.from_environ(tf_config(2, "worker", 0, chief=1)) == WorkerRole(1, 3, False)


@pytest.mark.parametrize("raw, message", [
    ("{not json", "TF_CONFIG is not a valid cluster description"),
    (json.dumps({"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 5}}),
     "not one of the cluster's workers"),
    (json.dumps({"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "ps", "index": 0}}),
     "not one of the cluster's workers"),
])
def test_a_bad_tf_config_is_a_clear_error(raw, message):
    with pytest.raises(RunError, match=message):
        WorkerRole.from_environ({"TF_CONFIG": raw})


def test_local_tf_configs_name_every_worker_on_distinct_ports():
    configs = [json.loads(c) for c in local_tf_configs(3)]
    addresses = configs[0]["cluster"]["worker"]
    assert len(set(addresses)) == 3 and all(a.startswith("127.0.0.1:") for a in addresses)
    assert [c["task"] for c in configs] == [{"type": "worker", "index": i} for i in range(3)]
    assert all(c["cluster"] == configs[0]["cluster"] for c in configs)


def test_launcher_runs_every_worker_with_its_tf_config_and_prefixes_output():
    code = ("import json, os; c = json.loads(os.environ['TF_CONFIG']); "
            "print('index', c['task']['index'], 'of', len(c['cluster']['worker']), 'threads', "
            "os.environ['TF_NUM_INTRAOP_THREADS'], 'cuda', os.environ['CUDA_VISIBLE_DEVICES'])")
    out = io.StringIO()
    assert launch_local([sys.executable, "-c", code], workers=2, threads_per_worker=1, stream=out) == 0
    lines = sorted(out.getvalue().splitlines())
    assert lines == ["[worker 0] index 0 of 2 threads 1 cuda -1", "[worker 1] index 1 of 2 threads 1 cuda -1"]


def test_a_dead_worker_stops_the_job_with_a_message_instead_of_a_hang(monkeypatch):
    monkeypatch.setattr(cluster, "STOP_GRACE_SECONDS", 1.0)
    # Worker 1 dies by SIGKILL; worker 0 would wait forever and even ignores SIGTERM, as a
    # worker blocked inside a collective does.
    code = ("import json, os, signal, time; i = json.loads(os.environ['TF_CONFIG'])['task']['index']\n"
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "time.sleep(0.5)\n"
            "os.kill(os.getpid(), signal.SIGKILL) if i == 1 else time.sleep(600)")
    out = io.StringIO()
    started = time.monotonic()
    status = launch_local([sys.executable, "-c", code], workers=2, stream=out)
    assert status == 128 + 9
    assert time.monotonic() - started < 60
    assert "worker 1 was killed by signal 9; stopping worker(s) 0" in out.getvalue()
    assert "Rerun the same command to resume" in out.getvalue()


def test_a_failing_worker_s_exit_status_is_the_job_s():
    code = "import json, os, sys; sys.exit(3 if json.loads(os.environ['TF_CONFIG'])['task']['index'] else 0)"
    out = io.StringIO()
    assert launch_local([sys.executable, "-c", code], workers=2, stream=out) == 3
    assert "worker 1 exited with status 3" in out.getvalue()


@pytest.mark.slow
def test_two_workers_train_exactly_as_one_worker_on_the_same_global_batch(tmp_path):
    """Losses of every step within 1e-5 and the weights after the steps: MultiWorkerMirroredStrategy
    over two processes through Keras fit, against one process on the whole batch."""
    script = str(FIXTURES / "multi_worker_fit.py")
    results = {}
    for workers in (1, 2):
        output = tmp_path / f"workers_{workers}.npz"
        out = io.StringIO()
        status = launch_local([sys.executable, script, str(output), "4"], workers=workers, stream=out,
                              env=environment())
        assert status == 0, out.getvalue()[-3000:]
        results[workers] = np.load(output)
    one, two = results[1], results[2]
    logs = [key for key in one.files if key.startswith("log_")]
    assert {"log_loss", "log_masked_lm_loss", "log_disc_loss", "log_disc_auc"} <= set(logs)
    for key in logs:
        assert one[key].shape == (4,)
        np.testing.assert_allclose(two[key], one[key], rtol=1e-5, err_msg=key)
    weights = [key for key in one.files if key.startswith("weight_")]
    assert len(weights) > 40
    for key in weights:
        np.testing.assert_allclose(two[key], one[key], rtol=1e-5, atol=1e-6, err_msg=key)
    assert not np.allclose(one["log_loss"][0], one["log_loss"][-1])  # the steps did train


def test_a_worker_s_usage_error_is_not_met_with_rerun_to_resume():
    """Status 2 (bad arguments, config or data) fails again on a rerun: say to fix it instead."""
    code = "import json, os, sys; sys.exit(2 if json.loads(os.environ['TF_CONFIG'])['task']['index'] else 0)"
    out = io.StringIO()
    assert launch_local([sys.executable, "-c", code], workers=2, stream=out) == 2
    assert "Fix what its error above says" in out.getvalue() and "resume" not in out.getvalue()


SLURM_STEP = {"SLURM_PROCID": "3", "SLURM_STEP_NUM_TASKS": "4", "SLURM_STEP_NODELIST": "gpu[07-08]",
              "SLURM_STEP_TASKS_PER_NODE": "2(x2)"}
POD = {"ELECTRA_TF_CLUSTER": "kubernetes", "JOB_COMPLETION_INDEX": "1", "ELECTRA_TF_WORKERS": "3",
       "ELECTRA_TF_WORKER_ADDRESS": "pretrain-{index}.pretrain:2222"}


def test_the_cluster_is_found_in_tf_config_then_kubernetes_then_slurm(monkeypatch, tmp_path):
    assert cluster.find_cluster({}) == cluster.Cluster("none")
    found = cluster.find_cluster(POD)
    assert found == cluster.Cluster("Kubernetes", ("pretrain-0.pretrain:2222", "pretrain-1.pretrain:2222",
                                                   "pretrain-2.pretrain:2222"), 1)
    described = found.describe()
    assert "3 workers from Kubernetes" in described and "pretrain-1.pretrain:2222 (this process)" in described
    # A compressed node list with no scontrol on the PATH: TensorFlow's resolver expands it itself.
    monkeypatch.setenv("PATH", str(tmp_path))
    assert shutil.which("scontrol") is None
    slurm = cluster.find_cluster({**SLURM_STEP, "ELECTRA_TF_PORT": "12345"})
    assert slurm == cluster.Cluster("SLURM", ("gpu07:12345", "gpu07:12346", "gpu08:12345", "gpu08:12346"), 3)
    # An explicit TF_CONFIG comes first (Ray Train and the local launcher write one); then Kubernetes, asked for.
    assert cluster.find_cluster({**SLURM_STEP, **POD, **tf_config(2, index=1)}).source == "TF_CONFIG"
    assert cluster.find_cluster({**SLURM_STEP, **POD}).source == "Kubernetes"
    # A single-task step, or ELECTRA_TF_CLUSTER=none, is one process.
    assert cluster.find_cluster({**SLURM_STEP, "SLURM_STEP_NUM_TASKS": "1"}).source == "none"
    assert cluster.find_cluster({**SLURM_STEP, "ELECTRA_TF_CLUSTER": "none"}).source == "none"


def test_a_cluster_found_elsewhere_becomes_the_tf_config_every_part_reads():
    environ = dict(POD)
    assert cluster.use_cluster(environ).source == "Kubernetes"
    assert WorkerRole.from_environ(environ) == WorkerRole(1, 3, False)
    assert json.loads(environ["TF_CONFIG"])["cluster"]["worker"][2] == "pretrain-2.pretrain:2222"
    assert cluster.find_cluster(environ).source == "TF_CONFIG"  # written once, read back as it is


@pytest.mark.parametrize("environ, message", [
    ({**POD, "JOB_COMPLETION_INDEX": "3"}, "JOB_COMPLETION_INDEX=3 is not one of the 3 workers"),
    ({**POD, "ELECTRA_TF_WORKER_ADDRESS": "pretrain.pretrain:2222"}, r"must hold \{index\}"),
    ({key: value for key, value in POD.items() if key != "JOB_COMPLETION_INDEX"}, "JOB_COMPLETION_INDEX unset"),
    ({**POD, "ELECTRA_TF_WORKERS": "three"}, "ELECTRA_TF_WORKERS='three': expected a whole number"),
    ({"SLURM_PROCID": "1", "SLURM_STEP_NUM_TASKS": "2"}, "needs SLURM_STEP_NODELIST, SLURM_STEP_TASKS_PER_NODE"),
    ({**SLURM_STEP, "SLURM_STEP_TASKS_PER_NODE": "2"}, "do not describe the step"),
    ({"ELECTRA_TF_CLUSTER": "ray"}, "expected kubernetes, slurm, tf_config or none"),
])
def test_a_cluster_described_wrong_is_refused_naming_the_variable(environ, message):
    with pytest.raises(RunError, match=message):
        cluster.find_cluster(environ)


def test_the_example_manifest_and_batch_script_set_what_the_package_reads():
    examples = Path(__file__).resolve().parents[2] / "examples"
    manifest = (examples / "kubernetes" / "pretrain.yaml").read_text()
    for name in (cluster.CLUSTER_VARIABLE, cluster.WORKERS_VARIABLE, cluster.ADDRESS_VARIABLE):
        assert f"name: {name}" in manifest
    assert "completionMode: Indexed" in manifest and "clusterIP: None" in manifest
    assert 'value: "pretrain-{index}.pretrain:2222"' in manifest and "subdomain: pretrain" in manifest
    script = (examples / "slurm" / "pretrain.sbatch").read_text()
    assert f"export {cluster.PORT_VARIABLE}=" in script and "srun " in script and "electra_tf.pretrain" in script
