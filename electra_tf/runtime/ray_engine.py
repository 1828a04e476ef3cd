"""A command as a Ray Train job: `python -m electra_tf.launch --engine ray --workers N -- <arguments>`.

Ray Train's `TensorflowTrainer` (ray.train.tensorflow, beta) starts N worker actors on the Ray
cluster `ray.init` finds (`RAY_ADDRESS`, or a local one), each with the resources asked
(`--cpus_per_worker`, `--gpus_per_worker`), and writes each one's TF_CONFIG. Each worker runs the
command (`python -m electra_tf.pretrain <arguments>`) as a process of its own, which dies with
the worker (Linux's parent-death signal): the command installs signal handlers, which only a
process's main thread can, and its exit status is the worker's. The cluster is then the ordinary
TF_CONFIG one (`runtime/cluster.py`).

`--max_failures K` is Ray's `FailureConfig(max_failures=K)`: when a worker dies (its actor's
process killed, its node lost) or its command fails, Ray stops the group and starts it again,
and the same command resumes from the newest checkpoint every worker saved, so a restart loses at
most the steps since it. The model_dir must be on storage every Ray node sees; Ray's own
results go to `--storage` (default: Ray's, ~/ray_results). Each command runs in the folder
`launch` was started in, where the worker's node has it (relative paths then mean what they
mean to the user); on a cluster of several nodes give absolute paths on shared storage.

A cluster with fewer CPUs or GPUs than asked is refused before anything starts: Ray's placement
would otherwise wait for them for ever.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import signal
import subprocess
import sys

from electra_tf.utils.errors import RunError

PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent dies


def launch_ray(module: str, arguments: list[str], workers: int, cpus_per_worker: float = 1.0,
               gpus_per_worker: float = 0.0, max_failures: int = 0, storage: str | None = None,
               name: str = "electra_tf") -> int:
    """Runs `python -m MODULE ARGUMENTS` on `workers` Ray Train workers; returns 0 when the job
    finished, 1 when it failed after its restarts (Ray prints why)."""
    if importlib.util.find_spec("ray") is None:
        raise RunError("--engine ray needs Ray Train: pip install -e \".[ray]\".")
    if workers < 1 or cpus_per_worker <= 0 or gpus_per_worker < 0 or max_failures < 0:
        raise RunError("--workers and --cpus_per_worker must be positive, --gpus_per_worker and --max_failures at "
                       "least 0.")
    import ray  # noqa: PLC0415  (an optional extra)
    from ray.train import FailureConfig, RunConfig, ScalingConfig  # noqa: PLC0415
    from ray.train.tensorflow import TensorflowTrainer  # noqa: PLC0415

    ray.init(address=os.environ.get("RAY_ADDRESS") or None, include_dashboard=False, log_to_driver=True)
    check_resources(ray.cluster_resources(), ray.available_resources(), workers, cpus_per_worker, gpus_per_worker)
    per_worker = {"CPU": cpus_per_worker, **({"GPU": gpus_per_worker} if gpus_per_worker else {})}
    trainer = TensorflowTrainer(
        run_command, train_loop_config={"command": [sys.executable, "-m", module, *arguments],
                                        "threads": max(1, int(cpus_per_worker)), "directory": os.getcwd()},
        scaling_config=ScalingConfig(num_workers=workers, use_gpu=gpus_per_worker > 0,
                                     resources_per_worker=per_worker),
        run_config=RunConfig(name=name, storage_path=storage, failure_config=FailureConfig(max_failures=max_failures)))
    result = trainer.fit()
    return 0 if result.error is None else 1


def check_resources(total: dict, free: dict, workers: int, cpus: float, gpus: float) -> None:
    """Refuses a job the cluster cannot place (never, or not now), naming what it has.

    >>> check_resources({"CPU": 2.0}, {"CPU": 2.0}, 2, 1.0, 0.0)
    >>> check_resources({"CPU": 2.0}, {"CPU": 2.0}, 2, 2.0, 0.0)
    Traceback (most recent call last):
    ...
    electra_tf.utils.errors.RunError: 2 workers x 2 CPU(s) need 4 CPU(s); the Ray cluster has 2 in all. Lower --workers or --cpus_per_worker, or add nodes (Ray's placement would wait for them for ever).
    """
    for resource, each in (("CPU", cpus), ("GPU", gpus)):
        needed = workers * each
        if needed and total.get(resource, 0) < needed:
            raise RunError(f"{workers} workers x {each:g} {resource}(s) need {needed:g} {resource}(s); the Ray cluster "
                           f"has {total.get(resource, 0):g} in all. Lower --workers or --{resource.lower()}s_per_worker, "
                           "or add nodes (Ray's placement would wait for them for ever).")
        if needed and free.get(resource, 0) < needed:
            raise RunError(f"{workers} workers x {each:g} {resource}(s) need {needed:g} {resource}(s); "
                           f"{free.get(resource, 0):g} are free now (other jobs hold the rest). Wait for them, or "
                           "ask for fewer.")


def run_command(config: dict) -> None:
    """A Ray Train worker's loop: the command in a process of its own, with the TF_CONFIG Ray
    wrote and the worker's CPU share as its threads; raises when it fails (Ray then restarts the
    group, as its FailureConfig allows)."""
    env = dict(os.environ)
    env.pop("TF_USE_LEGACY_KERAS", None)  # Ray sets it for tf.keras; this package uses Keras 3
    threads = str(config["threads"])
    env.update(TF_NUM_INTRAOP_THREADS=threads, TF_NUM_INTEROP_THREADS=threads, OMP_NUM_THREADS=threads,
               PYTHONUNBUFFERED="1")
    # Ray starts its workers in a folder of its own; the command's relative paths (--model_dir
    # runs/x, the bundled sample's runs/data) mean the launching folder, where a node has it.
    directory = config["directory"] if os.path.isdir(config["directory"]) else None
    status = subprocess.run(config["command"], env=env, cwd=directory, preexec_fn=_die_with_parent).returncode
    if status != 0:
        raise RuntimeError(f"{' '.join(config['command'][1:3])} exited with status {status}")


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the Ray worker that started it dies, so a killed
    worker leaves no command running to hold its ports and files."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
