"""`python -m electra_tf`: lists the commands, one line each; `--version` prints the version;
`--check` shows the devices TensorFlow sees and what a run would choose on them (strategy,
precision, XLA), and runs a matmul (and an XLA-compiled one) on each, before a long run.
`python -m electra_tf COMMAND ARGS` runs `python -m electra_tf.COMMAND ARGS`.

>>> [name for name, _ in commands()][:3]
['build_vocab', 'build_data', 'pretrain']
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from pathlib import Path

from electra_tf import __version__
from electra_tf.pretraining.config import PretrainingConfig
from electra_tf.utils.errors import command

# In the order of the workflow. Each is a module `electra_tf.<name>` with `build_parser()` and `main(argv)`.
COMMANDS = ("build_vocab", "build_data", "pretrain", "finetune", "export", "convert", "launch")


def commands() -> list[tuple[str, str]]:
    """(name, one-line summary) of every command, read from the modules' docstrings without
    importing them (importing some would start TensorFlow)."""
    listed = []
    for name in COMMANDS:
        source = Path(importlib.util.find_spec(f"electra_tf.{name}").origin).read_text(encoding="utf-8")
        first_paragraph = " ".join((ast.get_docstring(ast.parse(source)) or "").split("\n\n")[0].split())
        listed.append((name, first_paragraph.split(": ", 1)[-1].rstrip(".")))
    return listed


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["--version"], ["-V"]):
        print(f"electra_tf {__version__}")
        return 0
    if argv[:1] == ["--check"]:
        from electra_tf.runtime.check import check

        preset = "electra_small"
        return command(lambda _: check(preset, PretrainingConfig.load(preset).model.hidden_size))(None)
    if argv and argv[0] in COMMANDS:
        return importlib.import_module(f"electra_tf.{argv[0]}").main(argv[1:])
    width = max(len(name) for name in COMMANDS)
    print("usage: python -m electra_tf.<command> [options]   (each command takes --help)\n\ncommands:")
    for name, summary in commands():
        print(f"  {name:{width}}  {summary}")
    print("\n--check shows the devices found and what a run would choose on them; --version the version.")
    print("Docs: README.md and docs/ in the repository.")
    if argv and argv[0] not in ("-h", "--help"):
        print(f"\nerror: unknown command {argv[0]!r}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
