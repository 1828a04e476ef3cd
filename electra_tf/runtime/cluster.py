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
