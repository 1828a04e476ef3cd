"""One writer per run folder: `FolderLock(folder, command)`.

`pretrain` (its model_dir), `finetune` (its output_dir) and `build_data` (its output_dir) hold
a lock file while they write (`run_dir.LOCK_FILE`, holding the holder's host, PID, start time
and command). A second writer is refused at once with a message naming the holder. A lock left
by a process that died (its PID is gone, on this host) is taken over, with a note. Readers
(`export`, TensorBoard, `finetune --pretrained`) take no lock.

The file is created with O_CREAT | O_EXCL, which the filesystem makes atomic: of two writers
starting together exactly one gets it.

>>> import tempfile
>>> folder = tempfile.mkdtemp()
>>> with FolderLock(folder, "demo"):
...     FolderLock(folder, "second").acquire()
Traceback (most recent call last):
...
electra_tf.utils.locking.FolderBusyError: ... is in use by demo (PID ...
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path

from electra_tf.utils.errors import RunError
from electra_tf.utils.run_dir import LOCK_FILE


# A lock file without its record yet may be a writer between creating and filling it.
FRESH_SECONDS = 10.0


class FolderBusyError(RunError):
    """Another process is writing to the folder."""


class FolderLock:
    def __init__(self, folder, command: str):
        self.folder = Path(folder)
        self.path = self.folder / LOCK_FILE
        self.command = command
        self.held = False
        self.created_folder = False

    def acquire(self) -> "FolderLock":
        self.created_folder = not self.folder.exists()
        self.folder.mkdir(parents=True, exist_ok=True)
        record = {"host": socket.gethostname(), "pid": os.getpid(), "command": self.command,
                  "started": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
        for _ in range(2):  # a second try after taking over a dead holder's lock
            try:
                handle = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                holder = self._holder()
                if holder is None and _age_seconds(self.path) < FRESH_SECONDS:
                    holder = {"command": "a process that is starting", "pid": "?", "host": "?", "started": "now"}
                if holder is not None and not _is_dead(holder):
                    raise FolderBusyError(
                        f"{self.folder} is in use by {holder.get('command', '?')} (PID {holder.get('pid')} on "
                        f"{holder.get('host')}, since {holder.get('started')}). Wait for it to finish or choose "
                        f"another folder; if that process is gone from its machine, delete {self.path}.") from None
                print(f"note: taking over {self.path}, left by "
                      + (f"PID {holder.get('pid')} (no longer running)" if holder else "an unreadable lock file"),
                      file=sys.stderr)
                self.path.unlink(missing_ok=True)
                continue
            with os.fdopen(handle, "w", encoding="utf-8") as file:
                json.dump(record, file)
            self.held = True
            return self
        raise FolderBusyError(f"{self.folder}: another process took the lock while this one took over a stale one.")

    def release(self) -> None:
        if self.held:
            holder = self._holder()
            if holder is not None and holder.get("pid") == os.getpid():
                self.path.unlink(missing_ok=True)
            self.held = False
            if self.created_folder and not any(self.folder.iterdir()):
                self.folder.rmdir()  # a run that wrote nothing leaves no empty folder behind

    def _holder(self) -> dict | None:
        try:
            return json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def __enter__(self) -> "FolderLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _age_seconds(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return float("inf")


def _is_dead(holder: dict) -> bool:
    """True only when the holder ran on this host and its PID no longer exists."""
    if holder.get("host") != socket.gethostname():
        return False  # another machine's process: we cannot tell, so it is alive
    try:
        os.kill(int(holder["pid"]), 0)
    except ProcessLookupError:
        return True
    except (PermissionError, KeyError, ValueError, TypeError):
        return False
    return False
