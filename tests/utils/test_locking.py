"""One writer per folder: a second writer is refused naming the holder; a dead holder's lock is
taken over; pretrain, finetune and build_data all take it."""

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from electra_tf import build_data, finetune, pretrain
from electra_tf.utils.locking import FolderBusyError, FolderLock
from electra_tf.utils.run_dir import LOCK_FILE


def write_lock(folder, pid, host=None, age=0.0):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_FILE
    path.write_text(json.dumps({"host": host or socket.gethostname(), "pid": pid, "command": "electra_tf.pretrain",
                                "started": "2026-11-22 10:00:00 UTC"}))
    if age:
        os.utime(path, (time.time() - age, time.time() - age))
    return path


@pytest.fixture
def live_pid():
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield process.pid
    process.kill()
    process.wait()


def dead_pid():
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()  # reaped: the PID is gone
    return process.pid


def test_second_writer_is_refused_naming_the_holder(tmp_path):
    with FolderLock(tmp_path, "electra_tf.pretrain"):
        with pytest.raises(FolderBusyError, match=f"in use by electra_tf.pretrain \\(PID {os.getpid()} on "):
            FolderLock(tmp_path, "electra_tf.pretrain").acquire()
    assert not (tmp_path / LOCK_FILE).exists()  # released
    with FolderLock(tmp_path, "again"):
        pass


def test_a_dead_holders_lock_is_taken_over_with_a_note(tmp_path, capsys):
    write_lock(tmp_path, dead_pid(), age=60)
    with FolderLock(tmp_path, "electra_tf.finetune") as lock:
        assert json.loads(lock.path.read_text())["pid"] == os.getpid()
    note = capsys.readouterr().err
    assert "taking over" in note and "no longer running" in note


def test_another_hosts_holder_and_a_fresh_empty_file_count_as_alive(tmp_path):
    write_lock(tmp_path, 1, host="some-other-machine")
    with pytest.raises(FolderBusyError, match="some-other-machine"):
        FolderLock(tmp_path, "x").acquire()
    (tmp_path / LOCK_FILE).write_text("")  # a writer between creating and filling it
    with pytest.raises(FolderBusyError, match="starting"):
        FolderLock(tmp_path, "x").acquire()
    os.utime(tmp_path / LOCK_FILE, (time.time() - 60, time.time() - 60))
    with FolderLock(tmp_path, "x"):  # an old empty file: left by a crash, taken over
        pass


def test_commands_refuse_a_folder_another_process_writes(tmp_path, live_pid, capsys):
    for folder in ("model", "tuned", "data"):
        write_lock(tmp_path / folder, live_pid)
    started = time.monotonic()
    assert pretrain.main(["--model_dir", str(tmp_path / "model"), "--data", str(tmp_path / "none")]) == 2
    assert f"in use by electra_tf.pretrain (PID {live_pid}" in capsys.readouterr().err
    csv = tmp_path / "t.csv"
    csv.write_text("text,label\na,b\n")
    assert finetune.main(["--pretrained", str(tmp_path), "--train", str(csv), "--eval", str(csv),
                          "--output_dir", str(tmp_path / "tuned")]) == 2
    assert f"PID {live_pid}" in capsys.readouterr().err
    assert build_data.main(["--output_dir", str(tmp_path / "data"), "--input", str(csv)]) == 2
    assert f"PID {live_pid}" in capsys.readouterr().err
    assert time.monotonic() - started < 30  # refused at once, not after preparing data
