"""Registries of named extensions: registering, unknown names, entry points that fail to import,
and modules of one's own imported by name or by file."""

import sys

import pytest

from electra_tf.utils.registry import Registry, RegistryError, import_modules, imports_in


def test_a_name_registers_once_and_an_unknown_one_lists_the_known():
    shapes = Registry("shape", "electra_tf.no_such_group")

    @shapes.register("square")
    class Square:
        pass

    assert shapes["square"] is Square and Square.name == "square" and "square" in shapes
    assert shapes.register("square")(Square) is Square  # the same class again is no conflict
    with pytest.raises(RegistryError, match="shape 'square' is registered twice"):
        shapes.register("square")(type("Other", (), {}))
    with pytest.raises(RegistryError, match="unknown shape 'circle'; known: square"):
        shapes["circle"]


def test_an_entry_point_that_fails_to_import_is_named(monkeypatch):
    class Broken:
        name, value = "broken", "no_such_package.kinds"

        def load(self):
            raise ModuleNotFoundError("No module named 'no_such_package'")

    monkeypatch.setattr("importlib.metadata.entry_points", lambda group: [Broken()])
    with pytest.raises(RegistryError, match="entry point broken = no_such_package.kinds .* failed to import: "
                                            "ModuleNotFoundError"):
        Registry("kind", "group").names()


def test_modules_of_ones_own_are_imported_by_name_or_by_file_once(tmp_path, monkeypatch):
    module = tmp_path / "my_kinds.py"
    module.write_text("COUNT = globals().get('COUNT', 0) + 1\nimport builtins\nbuiltins.MY_KINDS_IMPORTS = "
                      "getattr(builtins, 'MY_KINDS_IMPORTS', 0) + 1\n")
    import_modules([str(module)])
    import_modules([str(module)])  # a command run twice in one process imports it once
    import builtins
    assert builtins.MY_KINDS_IMPORTS == 1 and sys.modules["my_kinds"].COUNT == 1
    del builtins.MY_KINDS_IMPORTS
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "by_name.py").write_text("VALUE = 3\n")
    import_modules(["by_name"])
    assert sys.modules["by_name"].VALUE == 3
    with pytest.raises(RegistryError, match="--import not_a_module: ModuleNotFoundError"):
        import_modules(["not_a_module"])
    with pytest.raises(RegistryError, match="--import .*missing.py: FileNotFoundError"):
        import_modules([str(tmp_path / "missing.py")])


def test_imports_are_read_from_a_command_line_before_its_parser_exists():
    assert imports_in(["--kind", "x", "--import", "a", "--import=b.py", "--import"]) == ["a", "b.py"]
