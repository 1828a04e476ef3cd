"""Registries of named extensions (kinds of run, export formats), filled by the modules that
define them: the package's own and any a user adds, in one of two ways.

- An entry point of the registry's group in an installed package's metadata (setup.py's
  `entry_points={"electra_tf.tasks": ["name = package.module"]}`): the module is imported the
  first time the registry is read. The package declares its own kinds and formats so too.
- `--import MODULE` on a command (`import_modules`): a module name on `sys.path` (the current
  folder is on it under `python -m`) or a `.py` file's path, imported before the command
  reads its arguments.

Either way the module registers its classes with the registry's decorator. Importing a module
that fails is an error naming the entry point (or the module) and what it raised.

>>> shapes = Registry("shape", "electra_tf.tests_shapes")
>>> @shapes.register("square")
... class Square:
...     pass
>>> shapes["square"].name, shapes.names()
('square', ['square'])
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import sys
from pathlib import Path

from electra_tf.utils.errors import ElectraError


class RegistryError(ElectraError):
    """An unknown name, a name registered twice, or an extension module that failed to import."""


class Registry:
    """Classes by name; `register(name)` is the decorator (it sets the class's `name`)."""

    def __init__(self, what: str, group: str):
        self.what, self.group = what, group
        self.classes: dict[str, type] = {}
        self._loaded = False

    def register(self, name: str):
        def register(cls):
            if self.classes.get(name, cls) is not cls:
                raise RegistryError(f"{self.what} {name!r} is registered twice ({self.classes[name].__qualname__}, "
                                    f"{cls.__qualname__}); choose another name.")
            cls.name = name
            self.classes[name] = cls
            return cls
        return register

    def load(self) -> None:
        """Imports the modules of the group's entry points, once."""
        if self._loaded:
            return
        self._loaded = True
        for entry in importlib.metadata.entry_points(group=self.group):
            try:
                entry.load()
            except Exception as error:  # a plugin's import may raise anything
                raise RegistryError(f"the {self.what} entry point {entry.name} = {entry.value} (group {self.group}) "
                                    f"failed to import: {type(error).__name__}: {error}") from error

    def names(self) -> list[str]:
        self.load()
        return sorted(self.classes)

    def items(self):
        self.load()
        return sorted(self.classes.items())

    def __getitem__(self, name: str) -> type:
        self.load()
        if name not in self.classes:
            raise RegistryError(f"unknown {self.what} {name!r}; known: {', '.join(self.names()) or 'none'}.")
        return self.classes[name]

    def __contains__(self, name: str) -> bool:
        self.load()
        return name in self.classes


def import_modules(modules) -> None:
    """Imports each module (a dotted name, or a path to a .py file) so it registers what it
    defines; an ElectraError names the one that fails."""
    for module in modules:
        try:
            if module.endswith(".py"):
                path = Path(module).resolve()
                if getattr(sys.modules.get(path.stem), "__file__", None) == str(path):
                    continue  # imported already (a command run twice in one process)
                spec = importlib.util.spec_from_file_location(path.stem, path)
                if spec is None or not path.is_file():
                    raise FileNotFoundError(f"no file {path}")
                loaded = importlib.util.module_from_spec(spec)
                sys.modules[path.stem] = loaded
                spec.loader.exec_module(loaded)
            else:
                importlib.import_module(module)
        except ElectraError:
            raise
        except Exception as error:
            raise RegistryError(f"--import {module}: {type(error).__name__}: {error}. Give a module name importable "
                                "from the current folder (or PYTHONPATH), or a .py file's path.") from error


def imports_in(argv) -> list[str]:
    """The `--import MODULE` values of a command line, read before its parser exists (the
    modules may add kinds, and with them options)."""
    found = []
    for index, argument in enumerate(argv):
        if argument == "--import" and index + 1 < len(argv):
            found.append(argv[index + 1])
        elif argument.startswith("--import="):
            found.append(argument.partition("=")[2])
    return found
