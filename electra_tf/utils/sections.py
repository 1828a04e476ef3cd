"""Config sections: small frozen dataclasses whose fields are checked by their declared type,
and a config made of several of them that is read and overridden by flat keys.

A section is a `@dataclasses.dataclass(frozen=True)` subclass of `Section` whose fields are
annotated with one of `int`, `float`, `bool`, `str` (optionally `| None`); `check()` adds the
section's own rules. `Sections` maps a flat key (`hidden_size`) or a dotted one
(`model.hidden_size`) to its section, so JSON files and `--set key=value` need not know the
grouping, and an unknown key gets the closest known ones.

>>> import dataclasses
>>> @dataclasses.dataclass(frozen=True)
... class Sizes(Section):
...     width: int = 4
...     rate: float = 0.5
>>> Sizes.from_dict({"width": 8}).rate, Sizes.parse("rate", "1e-3")
(0.5, 0.001)
>>> Sections({"sizes": Sizes}).split({"width": 2, "sizes.rate": 1})
{'sizes': {'width': 2, 'rate': 1}}
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any, Mapping

from electra_tf.utils.errors import ElectraError


class ConfigError(ElectraError):
    """A configuration value is unknown, of the wrong type, or impossible."""


_TYPE_CHECKS = {
    "int": lambda value: isinstance(value, int) and not isinstance(value, bool),
    "float": lambda value: isinstance(value, (int, float)) and not isinstance(value, bool),
    "bool": lambda value: isinstance(value, bool),
    "str": lambda value: isinstance(value, str),
}


class Section:
    """Base of a frozen config dataclass: types checked (ints accepted as floats) and the
    section's `check()` run at construction."""

    def __post_init__(self):
        for name, declared in self.field_types().items():
            value = getattr(self, name)
            if value is None and "None" in declared:
                continue
            base = declared.split(" |")[0]
            if not _TYPE_CHECKS[base](value):
                raise ConfigError(f"{name!r} must be {declared}, got {value!r} ({type(value).__name__}).")
            if base == "float":
                object.__setattr__(self, name, float(value))
        self.check()

    def check(self) -> None:
        """The section's own rules (`require`)."""

    def require(self, condition: bool, key: str, message: str) -> None:
        if not condition:
            raise ConfigError(f"{key!r} = {getattr(self, key)!r}: {message}")

    @classmethod
    def field_types(cls) -> dict[str, str]:
        return {f.name: f.type for f in dataclasses.fields(cls)}

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], source: str = "config"):
        unknown = sorted(set(values) - set(cls.field_types()))
        if unknown:
            raise ConfigError(f"{source}: unknown key(s) {', '.join(map(repr, unknown))}. "
                              f"Known keys: {', '.join(sorted(cls.field_types()))}.")
        try:
            return cls(**values)
        except ConfigError as error:
            raise ConfigError(f"{source}: {error}") from None

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def parse(cls, key: str, raw: str) -> Any:
        """`raw` (a command line's text) as the type `key` is declared with."""
        declared = cls.field_types()[key]
        if raw.lower() in ("none", "null") and "None" in declared:
            return None
        try:
            if declared.startswith("bool"):
                if raw.lower() not in ("true", "false", "1", "0"):
                    raise ValueError
                return raw.lower() in ("true", "1")
            if declared.startswith("int"):
                return int(raw.replace("_", ""))
            if declared.startswith("float"):
                return float(raw)
        except ValueError:
            raise ConfigError(f"override {key}={raw!r}: expected {declared}.") from None
        return raw


class Sections:
    """The sections of a config by name, and which section each key belongs to."""

    def __init__(self, sections: Mapping[str, type]):
        self.sections = dict(sections)
        self.owner = {}
        for section, cls in self.sections.items():
            for key in cls.field_types():
                if key in self.owner:
                    raise ValueError(f"{key!r} is a field of both {self.owner[key]} and {section}.")
                self.owner[key] = section

    def locate(self, key: str, source: str = "config") -> tuple[str, str]:
        """(section, field) of a flat or `section.field` key; an unknown one is a ConfigError
        naming the closest known keys."""
        section, dot, field = key.partition(".")
        if dot and section in self.sections and field in self.sections[section].field_types():
            return section, field
        if not dot and key in self.owner:
            return self.owner[key], key
        close = difflib.get_close_matches(key.rpartition(".")[2], self.owner, n=3)
        raise ConfigError(f"{source}: unknown key {key!r}. "
                          + (f"Did you mean {' or '.join(close)}? " if close else "")
                          + f"Keys: {', '.join(sorted(self.owner))}.")

    def split(self, values: Mapping[str, Any], source: str = "config") -> dict[str, dict]:
        """Flat (or dotted) keys -> {section: {field: value}}; a section given as a nested object
        ({"model": {...}}) is taken whole."""
        grouped: dict[str, dict] = {}
        for key, value in values.items():
            if key in self.sections and isinstance(value, Mapping):
                for inner, inner_value in value.items():
                    section, field = self.locate(f"{key}.{inner}", source)
                    grouped.setdefault(section, {})[field] = inner_value
                continue
            section, field = self.locate(key, source)
            grouped.setdefault(section, {})[field] = value
        return grouped

    def parse_assignments(self, assignments, source: str = "override") -> dict[str, dict]:
        """`key=value` strings (a command's repeated `--set`) -> {section: {field: value}},
        each value parsed by its field's type."""
        grouped: dict[str, dict] = {}
        for assignment in assignments:
            key, sep, raw = assignment.partition("=")
            if not sep:
                raise ConfigError(f"override {assignment!r}: expected key=value.")
            section, field = self.locate(key.strip(), f"override {assignment!r}")
            grouped.setdefault(section, {})[field] = self.sections[section].parse(field, raw.strip())
        return grouped
