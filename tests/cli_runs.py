"""Helpers for tests that run the package's commands as processes: their environment, what in
their stderr would alarm a person, and the TensorBoard events they wrote."""

from __future__ import annotations

import glob
import os
import re
from pathlib import Path

import tensorflow as tf

REPO = Path(__file__).resolve().parents[1]


def environment():
    """This checkout importable, TensorFlow's C++ logs off."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    return env


def user_environment():
    """This checkout importable, TensorFlow's logs as a user's shell has them (not silenced)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    for name in ("TF_CPP_MIN_LOG_LEVEL", "ELECTRA_TF_TF_LOGS"):
        env.pop(name, None)
    return env


def alarming_lines(stderr: str) -> list[str]:
    """Lines that look like an error or warning to a person reading the terminal."""
    return [line for line in stderr.splitlines()
            if re.match(r"^[IWEF]\d{4} |^WARNING|^Traceback", line) or re.search(r"Error|Warning|error:", line)]


def _event_files(log_dir):
    return sorted(glob.glob(str(Path(log_dir) / "events.out.tfevents.*")), key=os.path.getmtime)


def scalars(log_dir, tag, newest_file_only=False):
    """{step: value} for a scalar tag in the TensorBoard event files under log_dir."""
    files = _event_files(log_dir)
    if newest_file_only:
        files = files[-1:]
    values = {}
    for path in files:
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.tag == tag:
                    values[event.step] = float(tf.make_ndarray(value.tensor))
    return values


def texts(log_dir, tag):
    """The text summaries for a tag under log_dir, oldest file first."""
    found = []
    for path in _event_files(log_dir):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.tag == tag:
                    found.append(tf.make_ndarray(value.tensor).item().decode())
    return found
