"""The public names load lazily, and every one resolves."""

import subprocess
import sys

import electra_tf


def test_every_public_name_resolves():
    for name in electra_tf.__all__:
        assert getattr(electra_tf, name) is not None, name


def test_importing_the_package_or_a_command_does_not_start_tensorflow():
    """Also what lets a command leave TensorFlow's start-up lines out (utils/logs.py) before they print."""
    from electra_tf.__main__ import COMMANDS

    # data.builder too: its spawned worker processes import it, then start TensorFlow quietly.
    code = ("import sys, electra_tf, electra_tf.data.builder\n"
            + "".join(f"import electra_tf.{name}\n" for name in COMMANDS) + "print('tensorflow' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "False", result.stderr[-2000:]


def imported_modules(node, module: str, is_package: bool) -> list[str]:
    """The electra_tf modules an import statement names, relative ones (`from . import x`,
    `from ..y import z`) resolved against the importing module."""
    import ast

    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.startswith("electra_tf")]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        package = package[:len(package) - (node.level - 1)]
        base = ".".join(package + ([base] if base else []))
    if not base.startswith("electra_tf"):
        return []
    # `from electra_tf.x import y`: y may be a module of its own.
    return [base] + [f"{base}.{a.name}" for a in node.names]


def test_every_import_arrow_in_the_package_points_one_way():
    """No two modules of the package import each other, directly or around a circle (imports
    inside functions included): each stage builds on the ones below it."""
    import ast
    from pathlib import Path

    root = Path(electra_tf.__file__).parent
    modules = {".".join(p.relative_to(root.parent).with_suffix("").parts).removesuffix(".__init__"): p
               for p in root.rglob("*.py")}
    imports = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = imported_modules(node, name, path.name == "__init__.py")
            named = [t for t in targets[1:] if t in modules]  # `from package import module`
            imports[name] |= {t for t in (named or targets[:1]) if t in modules and t != name}

    def circle_from(start, path):
        for target in sorted(imports[path[-1]]):
            if target == start:
                return path + [start]
            if target not in path:
                found = circle_from(start, path + [target])
                if found:
                    return found
        return None

    circles = [" -> ".join(c) for c in (circle_from(name, [name]) for name in sorted(modules)) if c]
    assert not circles, "\n".join(circles)


# The package's layers, bottom first: a module may import from its own subpackage and from the
# layers below it, never from a layer beside or above it. Models never import the runtime (what
# changes a graph is a constructor argument); the trainer knows no task (tasks are above it);
# training never imports serving (the commands export after training, and task models give their
# own signatures). The commands (`electra_tf.<command>`) sit on top.
LAYERS = {
    "electra_tf.utils": 0, "electra_tf.compat": 0,
    "electra_tf.data": 1,
    "electra_tf.models": 2,
    "electra_tf.runtime": 3,
    "electra_tf.training": 4,
    "electra_tf.pretraining": 5,
    "electra_tf.finetuning": 6,
    "electra_tf.serving": 7,
    "electra_tf.interop": 8,
}


def _layer_of(module: str) -> tuple[str, int]:
    for name, rank in LAYERS.items():
        if module == name or module.startswith(name + "."):
            return name, rank
    return "commands", len(LAYERS)


def test_every_module_belongs_to_a_layer_and_the_root_holds_only_commands():
    from pathlib import Path

    from electra_tf.__main__ import COMMANDS

    root = Path(electra_tf.__file__).parent
    at_root = sorted(p.stem for p in root.glob("*.py"))
    assert at_root == sorted(["__init__", "__main__", "compat", *COMMANDS])
    subpackages = sorted(p.name for p in root.iterdir() if (p / "__init__.py").is_file() and p.name != "presets")
    assert [f"electra_tf.{name}" for name in subpackages] == sorted(n for n in LAYERS if n != "electra_tf.compat")


def test_imports_between_subpackages_point_down_the_layers():
    """Imports inside functions included: a lazy import is still a dependency."""
    import ast
    from pathlib import Path

    root = Path(electra_tf.__file__).parent
    wrong = []
    for path in sorted(root.rglob("*.py")):
        module = ".".join(path.relative_to(root.parent).with_suffix("").parts).removesuffix(".__init__")
        own, rank = _layer_of(module)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = imported_modules(node, module, path.name == "__init__.py")
            if targets[:1] == ["electra_tf"]:  # `import electra_tf`, `from electra_tf import __version__`
                targets = []
            for target in targets[:1]:
                layer, target_rank = _layer_of(target)
                if target == "electra_tf" or layer == own:
                    continue
                if target_rank >= rank:
                    wrong.append(f"{module} (layer {own}) imports {target} (layer {layer})")
    assert not wrong, "\n".join(wrong)


PRIVATE_MODULES = ("tensorflow.python", "keras.src", "keras_hub.src", "tensorflow_text.python", "tf.__internal__",
                   "tf.compat.v1")


def test_relative_imports_are_resolved_by_the_layer_checks():
    import ast

    tree = ast.parse("from ..serving import publish\nfrom . import losses\nfrom .config import X\n")
    found = [imported_modules(node, "electra_tf.pretraining.task", False) for node in tree.body]
    assert found == [["electra_tf.serving", "electra_tf.serving.publish"],
                     ["electra_tf.pretraining", "electra_tf.pretraining.losses"],
                     ["electra_tf.pretraining.config", "electra_tf.pretraining.config.X"]]
    assert _layer_of(found[0][0]) == ("electra_tf.serving", LAYERS["electra_tf.serving"])
    assert LAYERS["electra_tf.training"] < LAYERS["electra_tf.pretraining"] < LAYERS["electra_tf.serving"]


def test_no_private_framework_api_outside_the_compatibility_module():
    """Neither a private module of TensorFlow, Keras, keras-hub or tf-text, nor an underscore
    attribute the package does not define itself (a framework object's private state), outside
    electra_tf/compat.py."""
    import ast
    from pathlib import Path

    root = Path(electra_tf.__file__).parent
    sources = {path: path.read_text(encoding="utf-8") for path in sorted(root.rglob("*.py"))}
    own = set()  # the underscore names the package defines: its own private helpers and state
    for source in sources.values():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
                own.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                own.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                own.add(node.id)
    found = []
    for path, source in sources.items():
        if path.name == "compat.py":
            continue
        for name in PRIVATE_MODULES:
            if name in source:
                found.append(f"{path.relative_to(root)}: {name}")
        for node in ast.walk(ast.parse(source)):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and node.attr not in own):
                found.append(f"{path.relative_to(root)}:{node.lineno}: .{node.attr}")
    assert not found, "\n".join(found)


def test_every_module_that_holds_logic_has_a_test_module_of_its_own():
    """Tests mirror the package: electra_tf/<sub>/<module>.py is tested in tests/<sub>/test_<module>.py
    (a command in tests/test_<command>.py; `python -m electra_tf` in tests/test_main.py)."""
    import ast
    from pathlib import Path

    root = Path(electra_tf.__file__).parent
    tests = Path(__file__).parent
    missing = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "__init__.py" or not any(isinstance(node, (ast.FunctionDef, ast.ClassDef))
                                                  for node in ast.parse(path.read_text(encoding="utf-8")).body):
            continue
        relative = path.relative_to(root)
        name = "main" if path.stem == "__main__" else path.stem
        if not (tests / relative.parent / f"test_{name}.py").is_file():
            missing.append(str(relative))
    assert not missing, missing
