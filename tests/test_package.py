"""The public names load lazily, and every one resolves."""

import subprocess
import sys

import electra_tf


def test_every_public_name_resolves():
    for name in electra_tf.__all__:
        assert getattr(electra_tf, name) is not None, name


def test_importing_the_package_or_a_command_does_not_start_tensorflow():
    """Also what lets a command filter TensorFlow's start-up banners (log_filter) before they print."""
    from electra_tf.__main__ import COMMANDS

    code = ("import sys, electra_tf\n" + "".join(f"import electra_tf.{name}\n" for name in COMMANDS)
            + "print('tensorflow' in sys.modules)")
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
