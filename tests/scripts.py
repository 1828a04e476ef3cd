"""The repository's scripts (examples/, benchmarks/) are files, not a package: tests load one
by its path."""

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def load_script(name: str, folder: str = "examples"):
    """REPO/folder/name.py as a module."""
    spec = importlib.util.spec_from_file_location(name, REPO / folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
