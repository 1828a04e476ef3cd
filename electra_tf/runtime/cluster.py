"""The cluster a process belongs to, and local multi-worker launches.

A multi-worker run is N copies of the same command, each with its own `TF_CONFIG`:
  {"cluster": {"worker": ["127.0.0.1:PORT0", "127.0.0.1:PORT1"]}, "task": {"type": "worker", "index": I}}
`MultiWorkerMirroredStrategy` reads it; `WorkerRole` is what the rest of the run needs from it
(which worker this is, how many there are, whether it is the chief that writes the run's files).

`launch_local` starts the copies on this machine (`python -m electra_tf.launch`): free ports on
127.0.0.1, one TF_CONFIG each, the CPU threads split between them, output prefixed by worker.
A worker that dies takes the job down: its peers would otherwise wait in the next collective
until the collective timeout, so the launcher stops them and says which worker failed and how.
Rerunning the same command resumes from the last checkpoint.

Where the cluster comes from (`find_cluster`, in this order; `use_cluster` writes the TF_CONFIG
of one found elsewhere, so the strategy and `WorkerRole` read one description):

1. `TF_CONFIG`, when set: written by hand, by `launch_local`, or by Ray Train's
   `TensorflowTrainer` for each of its workers.
2. Kubernetes, when `ELECTRA_TF_CLUSTER=kubernetes` (the manifest sets it): an Indexed Job's pod
   knows its index (`JOB_COMPLETION_INDEX`), `ELECTRA_TF_WORKERS` the worker count, and
   `ELECTRA_TF_WORKER_ADDRESS` every worker's address with `{index}` in it (the pods' names under
   the job's headless Service, e.g. `pretrain-{index}.pretrain:2222`; examples/kubernetes/).
3. SLURM, when `srun` started several tasks (`SLURM_PROCID`, `SLURM_STEP_NUM_TASKS` > 1, or
   `ELECTRA_TF_CLUSTER=slurm`): TensorFlow's `SlurmClusterResolver` reads the step's node list
   and tasks per node; ports from `ELECTRA_TF_PORT` (8888) up, one per task on a node.
4. Otherwise one process.

`ELECTRA_TF_CLUSTER=none` ignores SLURM's variables (a single-task job inside an allocation).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

from electra_tf.utils.errors import USAGE_ERROR, RunError

# How long a stopped job's remaining workers get to exit after SIGTERM before SIGKILL.
STOP_GRACE_SECONDS = 20.0
CLUSTER_VARIABLE, WORKERS_VARIABLE, ADDRESS_VARIABLE, PORT_VARIABLE = (
    "ELECTRA_TF_CLUSTER", "ELECTRA_TF_WORKERS", "ELECTRA_TF_WORKER_ADDRESS", "ELECTRA_TF_PORT")
SLURM_PORT_BASE = 8888  # TensorFlow's SlurmClusterResolver's default


@dataclasses.dataclass(frozen=True)
class Cluster:
    """Where a process's cluster was found and what it is: every worker's address in order and
    this process's index (one process: no workers)."""

    source: str  # "TF_CONFIG", "Kubernetes", "SLURM" or "none"
    workers: tuple = ()
    index: int = 0

    def tf_config(self) -> str:
        return json.dumps({"cluster": {"worker": list(self.workers)}, "task": {"type": "worker", "index": self.index}})

    def describe(self) -> str:
        if not self.workers:
            return "one process (no TF_CONFIG, no SLURM step of several tasks, no Kubernetes cluster asked for)"
        listed = ", ".join(f"{address}{' (this process)' if i == self.index else ''}"
                           for i, address in enumerate(self.workers))
        return f"{len(self.workers)} workers from {self.source}: {listed}"


def find_cluster(environ=None) -> Cluster:
    """The cluster this process belongs to, from the first source that describes one (module
    docstring); a RunError naming the variable when one is set but wrong."""
    environ = os.environ if environ is None else environ
    asked = environ.get(CLUSTER_VARIABLE, "").strip().lower()
    if asked not in ("", "none", "kubernetes", "slurm", "tf_config"):
        raise RunError(f"{CLUSTER_VARIABLE}={asked!r}: expected kubernetes, slurm, tf_config or none.")
    if environ.get("TF_CONFIG", "").strip():
        role = WorkerRole.from_environ(environ)
        cluster = json.loads(environ["TF_CONFIG"]).get("cluster", {})
        return Cluster("TF_CONFIG", tuple(cluster.get("chief", [])) + tuple(cluster.get("worker", [])), role.index)
    if asked == "kubernetes":
        return _kubernetes(environ)
    if asked == "slurm" or (asked == "" and _int(environ, "SLURM_STEP_NUM_TASKS", 1) > 1):
        return _slurm(environ)
    return Cluster("none")


def use_cluster(environ=None) -> Cluster:
    """`find_cluster`, and the TF_CONFIG of a cluster found elsewhere written into `environ`, where
    MultiWorkerMirroredStrategy and `WorkerRole` read it."""
    environ = os.environ if environ is None else environ
    cluster = find_cluster(environ)
    if cluster.source in ("Kubernetes", "SLURM") and len(cluster.workers) > 1:
        environ["TF_CONFIG"] = cluster.tf_config()
    return cluster


def _int(environ, name: str, default=None) -> int:
    raw = environ.get(name)
    if raw is None and default is not None:
        return default
    try:
        return int(str(raw).strip())
    except ValueError:
        raise RunError(f"{name}={raw!r}: expected a whole number.") from None


def _kubernetes(environ) -> Cluster:
    """An Indexed Job's pod: its index, the worker count and the address pattern the manifest sets."""
    missing = [name for name in ("JOB_COMPLETION_INDEX", WORKERS_VARIABLE, ADDRESS_VARIABLE) if not environ.get(name)]
    if missing:
        raise RunError(f"{CLUSTER_VARIABLE}=kubernetes, but {', '.join(missing)} unset: run it as an Indexed Job "
                       "(completionMode: Indexed sets JOB_COMPLETION_INDEX) with the env of "
                       "examples/kubernetes/pretrain.yaml.")
    index, count, pattern = (_int(environ, "JOB_COMPLETION_INDEX"), _int(environ, WORKERS_VARIABLE),
                             environ[ADDRESS_VARIABLE])
    if "{index}" not in pattern:
        raise RunError(f"{ADDRESS_VARIABLE}={pattern!r} must hold {{index}} (e.g. pretrain-{{index}}.pretrain:2222, "
                       "the pods' names under the job's headless Service).")
    if count < 1 or not 0 <= index < count:
        raise RunError(f"JOB_COMPLETION_INDEX={index} is not one of the {count} workers {WORKERS_VARIABLE} names: "
                       "make the Job's completions and parallelism equal to it.")
    return Cluster("Kubernetes", tuple(pattern.replace("{index}", str(i)) for i in range(count)), index)


def _slurm(environ) -> Cluster:
    """An `srun` step's tasks, through TensorFlow's SlurmClusterResolver (public API). It hands
    out GPUs per task and cannot describe a node without one: on such nodes it is told one slot a
    task and kept from setting CUDA_VISIBLE_DEVICES."""
    needed = ("SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_STEP_NODELIST", "SLURM_STEP_TASKS_PER_NODE")
    missing = [name for name in needed if not environ.get(name)]
    if missing:
        raise RunError(f"a SLURM cluster needs {', '.join(missing)}, which srun sets for each task: start the "
                       f"command with srun (examples/slurm/pretrain.sbatch), or set {CLUSTER_VARIABLE}=none to run "
                       "one process.")
    from electra_tf.utils.logs import import_tensorflow  # noqa: PLC0415  (this module serves the TF-free launcher)
    from electra_tf.utils.nvidia import driver_installed  # noqa: PLC0415

    tf = import_tensorflow()
    port = _int(environ, PORT_VARIABLE, SLURM_PORT_BASE)
    saved = {name: os.environ.get(name) for name in needed}
    os.environ.update({name: environ[name] for name in needed})  # the resolver reads os.environ
    try:
        gpus = {} if driver_installed() else {"gpus_per_node": _int(environ, "SLURM_STEP_NUM_TASKS"),
                                              "gpus_per_task": 1, "auto_set_gpu": False}
        resolver = tf.distribute.cluster_resolver.SlurmClusterResolver(port_base=port, **gpus)
        workers = resolver.cluster_spec().as_dict().get("worker", [])
    except (RuntimeError, ValueError) as error:
        raise RunError(f"SLURM's variables do not describe the step ({error}); srun sets them for each task.") from None
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return Cluster("SLURM", tuple(workers), resolver.task_id)


@dataclasses.dataclass(frozen=True)
class WorkerRole:
    index: int = 0  # among the workers (the chief, if the cluster names one, is index 0)
    count: int = 1
    is_chief: bool = True

    @property
    def is_multi_worker(self) -> bool:
        return self.count > 1

    @classmethod
    def from_environ(cls, environ=None) -> "WorkerRole":
        """This process's place in the TF_CONFIG cluster; one chief worker without one."""
        environ = os.environ if environ is None else environ
        raw = environ.get("TF_CONFIG", "")
        if not raw.strip():
            return cls()
        try:
            tf_config = json.loads(raw)
            cluster = tf_config.get("cluster", {})
            task = tf_config.get("task", {})
            chiefs, workers = list(cluster.get("chief", [])), list(cluster.get("worker", []))
            task_type, task_index = task.get("type", "worker"), int(task.get("index", 0))
        except (json.JSONDecodeError, AttributeError, TypeError, ValueError) as error:
            raise RunError(f"TF_CONFIG is not a valid cluster description ({error}); expected "
                           '{"cluster": {"worker": ["host:port", ...]}, "task": {"type": "worker", '
                           '"index": 0}}.') from None
        count = len(chiefs) + len(workers)
        if count <= 1:
            return cls()
        if task_type == "chief":
            return cls(0, count, True)
        if task_type != "worker" or not 0 <= task_index < len(workers):
            raise RunError(f"TF_CONFIG's task {task!r} is not one of the cluster's workers "
                           f"({len(workers)} worker(s){', 1 chief' if chiefs else ''}).")
        index = task_index + len(chiefs)
        return cls(index, count, is_chief=index == 0)

    def describe(self) -> str:
        return f"worker {self.index} of {self.count}{' (chief)' if self.is_chief else ''}"


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """Ports nothing listens on now (the OS picks them; held together so they differ)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind((host, 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def local_tf_configs(count: int, host: str = "127.0.0.1") -> list[str]:
    addresses = [f"{host}:{port}" for port in free_ports(count, host)]
    return [json.dumps({"cluster": {"worker": addresses}, "task": {"type": "worker", "index": index}})
            for index in range(count)]


def launch_local(command: list[str], workers: int, threads_per_worker: int | None = None,
                 env: dict | None = None, stream=None) -> int:
    """Runs `command` as `workers` local worker processes; returns the job's exit status.

    0 when every worker exits 0. Otherwise the first failure's status (a worker killed by a
    signal counts as 128 + the signal number, as a shell reports it) after the others are
    stopped. SIGINT/SIGTERM to the launcher are passed on to every worker.
    """
    if workers < 1:
        raise RunError(f"--workers must be at least 1, got {workers}.")
    stream = stream or sys.stdout
    threads = threads_per_worker or max(1, (os.cpu_count() or 1) // workers)
    base_env = dict(os.environ if env is None else env)
    # One CPU device per worker process: no GPU is shared between local workers.
    base_env.update(CUDA_VISIBLE_DEVICES="-1", TF_NUM_INTRAOP_THREADS=str(threads),
                    TF_NUM_INTEROP_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
                    PYTHONUNBUFFERED="1")
    configs = local_tf_configs(workers) if workers > 1 else [None]
    processes = []
    print_lock = threading.Lock()

    def relay(index, pipe):
        for line in iter(pipe.readline, ""):
            with print_lock:
                stream.write(f"[worker {index}] {line}" if workers > 1 else line)
                stream.flush()
        pipe.close()

    relays = []
    for index, tf_config in enumerate(configs):
        worker_env = dict(base_env)
        if tf_config is not None:
            worker_env["TF_CONFIG"] = tf_config
        process = subprocess.Popen(command, env=worker_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True, bufsize=1)
        processes.append(process)
        thread = threading.Thread(target=relay, args=(index, process.stdout), daemon=True)
        thread.start()
        relays.append(thread)

    def forward(number, frame):
        for process in processes:
            if process.poll() is None:
                process.send_signal(number)

    previous = {number: signal.signal(number, forward) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        status = _wait(processes, stream, print_lock)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        for thread in relays:
            thread.join(timeout=5)
    return status


def _wait(processes, stream, print_lock) -> int:
    while True:
        statuses = [process.poll() for process in processes]
        failed = [(index, code) for index, code in enumerate(statuses) if code not in (None, 0)]
        if failed:
            index, code = failed[0]
            how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
            running = [i for i, s in enumerate(statuses) if s is None]
            # Status 2 is the commands' "bad arguments, config or data": rerunning cannot help.
            then = ("Fix what its error above says, then run the command again." if code == USAGE_ERROR else
                    "Rerun the same command to resume from the last checkpoint.")
            with print_lock:
                stream.write(f"launch: worker {index} {how}; stopping "
                             f"{'worker(s) ' + ', '.join(map(str, running)) if running else 'the job'} "
                             f"(its peers cannot go on without it). {then}\n")
                stream.flush()
            _stop(processes)
            return 128 - code if code < 0 else code
        if all(code == 0 for code in statuses):
            return 0
        time.sleep(0.2)


def _stop(processes) -> None:
    for process in processes:
        if process.poll() is None:
            process.terminate()
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    for process in processes:
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
