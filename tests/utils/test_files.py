import hashlib
import os

import pytest

from electra_tf.utils import files


def test_atomic_write_replaces_whole_files_with_a_normal_mode(tmp_path):
    path = tmp_path / "sub" / "config.json"
    files.atomic_write_text(path, "first")
    files.atomic_write_text(path, "second")
    assert path.read_text() == "second"
    assert oct(path.stat().st_mode & 0o777) != oct(0o600)  # not mkstemp's private mode
    assert [p.name for p in path.parent.iterdir()] == ["config.json"]  # no temp file left


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path, monkeypatch):
    path = tmp_path / "metrics.json"
    files.atomic_write_text(path, "good")

    def failing_replace(source, target):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        files.atomic_write_text(path, "half")
    assert path.read_text() == "good"
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]


def test_file_sha256(tmp_path):
    path = tmp_path / "shard"
    path.write_bytes(b"x" * (3 << 20))
    assert files.file_sha256(path) == hashlib.sha256(b"x" * (3 << 20)).hexdigest()
