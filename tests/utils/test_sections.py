"""Config sections and a run's config of them: types checked, one error style, keys found flat or
dotted with "did you mean", flags made from the fields and given back, overrides applied."""

import argparse
import dataclasses

import pytest

from electra_tf.utils.sections import (ConfigError, Section, SectionedConfig, Sections, add_options, given_options,
                                       option)


@dataclasses.dataclass(frozen=True)
class Sizes(Section):
    width: int = option(4, "the width")
    rate: float | None = option(None, "the rate")
    name: str = "tiny"
    bold: bool = option(False, "bold or not")

    def check(self):
        self.require(self.width > 0, "width", "must be positive.")


@dataclasses.dataclass(frozen=True)
class Steps(Section):
    count: int = option(10, "how many")


@dataclasses.dataclass(frozen=True)
class Whole(SectionedConfig):
    sizes: Sizes = Sizes()
    steps: Steps = Steps()


def test_values_are_checked_by_their_declared_type_and_the_sections_rules():
    assert Sizes(rate=1).rate == 1.0 and isinstance(Sizes(rate=1).rate, float)  # an int where a float is declared
    with pytest.raises(ConfigError, match="'width' must be int, got '4' \\(str\\)"):
        Sizes(width="4")
    with pytest.raises(ConfigError, match="'width' = 0: must be positive"):
        Sizes(width=0)
    with pytest.raises(ConfigError, match="in a.json: unknown key\\(s\\) 'depth'"):
        Sizes.from_dict({"depth": 2}, "in a.json")
    assert Sizes.parse("rate", "none") is None and Sizes.parse("bold", "true") is True
    with pytest.raises(ConfigError, match="override width='x': expected int"):
        Sizes.parse("width", "x")


def test_a_key_is_found_flat_or_dotted_and_a_misspelt_one_gets_the_closest():
    sections = Sections({"sizes": Sizes, "steps": Steps})
    assert sections.locate("width") == ("sizes", "width") == sections.locate("sizes.width")
    with pytest.raises(ConfigError, match="unknown key 'widht'. Did you mean width"):
        sections.locate("widht")
    with pytest.raises(ConfigError, match="unknown key 'steps.widht'. Did you mean sizes.width or steps.count"):
        sections.locate("steps.widht")
    with pytest.raises(ValueError, match="'width' is a field of both sizes and again"):
        Sections({"sizes": Sizes, "again": Sizes})


def test_a_whole_config_changes_by_flat_or_dotted_keys_and_checks_again():
    whole = Whole()
    changed = whole.with_overrides(["width=8", "steps.count=3"]).replace(rate=0.5)
    assert (changed.sizes.width, changed.steps.count, changed.sizes.rate) == (8, 3, 0.5)
    assert changed.flat() == {"width": 8, "rate": 0.5, "name": "tiny", "bold": False, "count": 3}
    assert changed.to_dict()["steps"] == {"count": 3}
    with pytest.raises(ConfigError, match="override: 'width' = -1: must be positive"):
        whole.replace(width=-1)


def test_flags_are_made_from_the_fields_and_only_the_given_ones_come_back():
    parser, defined = argparse.ArgumentParser(), set()
    assert add_options(parser, Sizes, defined) == ["width", "rate", "bold"]  # name has no option(): --set only
    assert add_options(parser, Sizes, defined) == []  # a flag two sections share is added once
    args = parser.parse_args(["--width", "6", "--bold"])
    assert given_options(args, Sizes) == {"width": 6, "bold": True}
    with pytest.raises(SystemExit):
        parser.parse_args(["--width", "six"])
