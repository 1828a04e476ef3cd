"""Writing files and folders so that a reader never sees half of one: a temporary name, then a
rename (`atomic_write_text`, `atomic_write_bytes`, `atomic_folder`)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Iterator


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temp_name, 0o666 & ~umask)  # mkstemp makes 0600; give a normal file's mode
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise


def file_sha256(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class FolderWrite:
    """What `atomic_folder` yields: `temporary`, the folder to write into; `path`, where it went
    (set when the block is done)."""

    def __init__(self, temporary: Path):
        self.temporary = temporary
        self.path: Path | None = None


@contextlib.contextmanager
def atomic_folder(target: str | os.PathLike | Callable[[], Path], replace: bool = True) -> Iterator[FolderWrite]:
    """A folder written whole: the block writes into `write.temporary` (beside the target), which
    then takes the target's name, so a reader never sees half of it and an error leaves nothing
    behind. `replace`: an earlier folder of that name is moved aside, then removed; otherwise it
    is an error (FileExistsError). `target` may be a function called when the block is done (the
    next version number): when another writer took that name meanwhile, it is asked again.

    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> with atomic_folder(root / "model") as write:
    ...     _ = (write.temporary / "weights").write_text("w")
    >>> write.path == root / "model", sorted(p.name for p in root.iterdir())
    (True, ['model'])
    """
    first = Path(target()) if callable(target) else Path(target)
    first.parent.mkdir(parents=True, exist_ok=True)
    write = FolderWrite(first.parent / f".{first.name}.tmp-{os.getpid()}")
    shutil.rmtree(write.temporary, ignore_errors=True)
    write.temporary.mkdir()
    try:
        yield write
        write.path = _commit(write.temporary, target, replace)
    finally:
        shutil.rmtree(write.temporary, ignore_errors=True)


def _commit(temporary: Path, target, replace: bool) -> Path:
    while True:
        destination = Path(target()) if callable(target) else Path(target)
        old = destination.parent / f".{destination.name}.old-{os.getpid()}"
        if destination.exists() and replace:
            os.replace(destination, old)
        elif destination.exists() and not callable(target):
            raise FileExistsError(f"{destination} exists")
        try:
            os.rename(temporary, destination)  # fails when another writer took the name meanwhile
        except OSError:
            if callable(target) and destination.exists():
                continue
            raise
        if old.is_dir():
            shutil.rmtree(old)
        return destination
