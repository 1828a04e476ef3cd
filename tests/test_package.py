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
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("electra_tf"):
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                           for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            imports[name] |= {t for t in targets if t in modules and t != name}

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
# changes a graph is a constructor argument); serving never imports fine-tuning (task models give
# their own signatures). The commands (`electra_tf.<command>`) sit on top.
LAYERS = {
    "electra_tf.utils": 0, "electra_tf.compat": 0,
    "electra_tf.data": 1,
    "electra_tf.models": 2,
    "electra_tf.runtime": 3, "electra_tf.serving": 3,
    "electra_tf.pretraining": 4,
    "electra_tf.finetuning": 5,
    "electra_tf.interop": 6,
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
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("electra_tf"):
                targets = [node.module] if node.module != "electra_tf" else [f"electra_tf.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.startswith("electra_tf")]
            else:
                continue
            for target in targets:
                layer, target_rank = _layer_of(target)
                if target == "electra_tf" or layer == own:
                    continue
                if target_rank >= rank:
                    wrong.append(f"{module} (layer {own}) imports {target} (layer {layer})")
    assert not wrong, "\n".join(wrong)


PRIVATE_MODULES = ("tensorflow.python", "keras.src", "keras_hub.src", "tensorflow_text.python", "tf.__internal__",
                   "tf.compat.v1")


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
