"""The repository's scripts (examples/, benchmarks/) are files, not a package: tests load one
by its path."""

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def load_script(name: str, folder: str = "examples"):
    """REPO/folder/name.py as a module, its folder on the import path as when Python runs it (a
    script imports its neighbours, benchmarks/common.py)."""
    if str(REPO / folder) not in sys.path:
        sys.path.append(str(REPO / folder))
    spec = importlib.util.spec_from_file_location(name, REPO / folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
