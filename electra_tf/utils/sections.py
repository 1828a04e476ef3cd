"""Config sections, and a run's config made of them, read and overridden by flat keys.

A section is a `@dataclasses.dataclass(frozen=True)` subclass of `Section` whose fields are
annotated with one of `int`, `float`, `bool`, `str` (optionally `| None`); `check()` adds the
section's own rules. `Sections` maps a flat key (`hidden_size`) or a dotted one
(`model.hidden_size`) to its section, so JSON files and `--set key=value` need not know the
grouping, and an unknown key gets the closest known ones. A field declared with `option(...)`
is also a command-line flag (`add_options`), so a command's flags, its `--set` keys and its
config.json are one set of names.

`SectionedConfig` is the base of a run's whole config (`PretrainingConfig`,
`FinetuningConfig`): a frozen dataclass whose fields are sections, with one way to read, change
and write it, and one error type (`ConfigError`, "'key' = value: what is wrong").

>>> import dataclasses
>>> @dataclasses.dataclass(frozen=True)
... class Sizes(Section):
...     width: int = option(4, "the width")
...     rate: float = 0.5
>>> Sizes.from_dict({"width": 8}).rate, Sizes.parse("rate", "1e-3")
(0.5, 0.001)
>>> Sections({"sizes": Sizes}).split({"width": 2, "sizes.rate": 1})
{'sizes': {'width': 2, 'rate': 1}}
>>> @dataclasses.dataclass(frozen=True)
... class Whole(SectionedConfig):
...     sizes: Sizes = Sizes()
>>> Whole().with_overrides(["rate=0.25"]).sizes.rate, Whole().flat()
(0.25, {'width': 4, 'rate': 0.5})
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import os
from typing import Any, Mapping

from electra_tf.utils.errors import ElectraError
from electra_tf.utils.files import atomic_write_text


class ConfigError(ElectraError):
    """A configuration value is unknown, of the wrong type, or impossible."""


_TYPE_CHECKS = {
    "int": lambda value: isinstance(value, int) and not isinstance(value, bool),
    "float": lambda value: isinstance(value, (int, float)) and not isinstance(value, bool),
    "bool": lambda value: isinstance(value, bool),
    "str": lambda value: isinstance(value, str),
}


def option(default, help: str, flag: str | None = None, choices=None, metavar: str | None = None,
           joined_by: str | None = None):
    """A section field that is also a command-line flag (`--<name>`, or `flag`) with `help`.
    `joined_by`: a str field whose flag takes one or more values, stored joined by it (so the
    field stays one string in config.json and in `--set`)."""
    return dataclasses.field(default=default, metadata={"help": help, "flag": flag, "choices": choices,
                                                        "metavar": metavar, "joined_by": joined_by})


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
        """The section's own rules (`require`), true of its defaults too."""

    def check_complete(self) -> None:
        """What a run cannot start without that the defaults leave out (a value only the user can
        give), checked once the command's flags are in."""

    def require(self, condition: bool, key: str, message: str) -> None:
        if not condition:
            raise ConfigError(f"{key!r} = {getattr(self, key)!r}: {message}")

    def at_least_one(self, *keys: str) -> None:
        for key in keys:
            value = getattr(self, key)
            self.require(value is None or value >= 1, key, "must be at least 1.")

    @classmethod
    def field_types(cls) -> dict[str, str]:
        """{field: its declared type as written ("int", "str | None")}, whether or not the module
        that declares the section defers its annotations."""
        return {f.name: f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
                for f in dataclasses.fields(cls)}

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
        known = [f"{self.owner[k]}.{k}" for k in self.owner] if dot else list(self.owner)
        close = difflib.get_close_matches(key, known, n=3)
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


class SectionedConfig:
    """Base of a run's whole config: a frozen dataclass whose fields are `Section`s (others,
    such as the preset a run started from, are the subclass's). Subclasses whose sections
    depend on the instance (a fine-tuning kind's own section) override `section_map`."""

    @classmethod
    def section_classes(cls) -> dict[str, type]:
        return {f.name: type(f.default) for f in dataclasses.fields(cls) if isinstance(f.default, Section)}

    def section_map(self) -> Sections:
        return Sections(self.section_classes())

    def flat(self) -> dict[str, Any]:
        """Every field by its flat name (TensorBoard's hyper-parameters, comparisons)."""
        return {key: value for name in self.section_map().sections
                for key, value in getattr(self, name).to_dict().items()}

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name).to_dict() for name in self.section_map().sections}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def save(self, path: str | os.PathLike) -> None:
        atomic_write_text(path, self.to_json() + "\n")

    def with_sections(self, grouped: Mapping[str, Mapping[str, Any]], source: str = "override"):
        """A copy whose sections take these {section: {field: value}} changes, every section
        checked again (and the whole config's own rules, in `__post_init__`)."""
        sections = self.section_map().sections
        changed = {name: sections[name].from_dict({**getattr(self, name).to_dict(), **values}, source)
                   for name, values in grouped.items()}
        try:
            return dataclasses.replace(self, **changed)
        except ConfigError as error:
            raise ConfigError(str(error) if str(error).startswith(source) else f"{source}: {error}") from None

    def replace(self, **changes):
        """Changed fields, named flat or dotted (`num_train_steps=...`, `**{"run.seed": 1}`)."""
        return self.with_sections(self.section_map().split(changes, "override"))

    def with_overrides(self, assignments) -> "SectionedConfig":
        """Applies `key=value` strings (the CLI's repeated `--set`), parsed by the key's type."""
        return self.with_sections(self.section_map().parse_assignments(assignments))


def add_options(parser, section: type, defined: set[str]) -> list[str]:
    """A flag for each field of `section` declared with `option(...)`, into `parser` (or an
    argument group), but for the fields in `defined` (a flag several sections or kinds share is
    added once; the set is updated). Flags default to "not given", so `given_options` leaves the
    config's value. Returns the fields added."""
    added = []
    for field in dataclasses.fields(section):
        meta = field.metadata
        if "help" not in meta or field.name in defined:
            continue
        flag = meta.get("flag") or f"--{field.name}"
        declared = section.field_types()[field.name].split(" |")[0]
        kwargs = {"dest": field.name, "default": argparse.SUPPRESS, "help": meta["help"]}
        if declared == "bool":
            kwargs["action"] = argparse.BooleanOptionalAction
        elif meta.get("joined_by"):
            kwargs.update(nargs="+", action=_joined(meta["joined_by"]), metavar=meta.get("metavar"))
        else:
            kwargs.update(type=_parser_of(section, field.name), choices=meta.get("choices"),
                          metavar=meta.get("metavar"))
        parser.add_argument(flag, **kwargs)
        defined.add(field.name)
        added.append(field.name)
    return added


def _joined(separator: str):
    class Joined(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None):
            setattr(namespace, self.dest, separator.join(value.strip() for value in values))
    return Joined


def _parser_of(section: type, key: str):
    def parse(raw: str):
        try:
            return section.parse(key, raw)
        except ConfigError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
    parse.__name__ = section.field_types()[key].split(" |")[0]  # argparse names the type in its error
    return parse


def given_options(args: argparse.Namespace, section: type) -> dict[str, Any]:
    """The fields of `section` that a command line gave as flags (`add_options`)."""
    return {name: getattr(args, name) for name in section.field_types() if name in vars(args)}
