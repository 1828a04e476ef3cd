"""Docs that cannot drift: every relative link and anchor in README.md and docs/ resolves,
every `python -m electra_tf.<command> ...` line in a fenced block parses with that command's
own parser (nothing is executed), every `--set key=value` is a valid PretrainingConfig override,
and every Python block runs, unless a `<!-- not run: reason -->` line stands right above it.
The same command check covers the examples in the commands' own --help texts."""

import argparse
import contextlib
import importlib
import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from electra_tf.__main__ import COMMANDS

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
NOT_RUN = re.compile(r"^<!-- not run: (.+) -->$")


def fenced_blocks(text: str):
    """(language, first line number, body) of every fenced block."""
    blocks, language, start, body = [], None, 0, []
    for number, line in enumerate(text.splitlines(), 1):
        fence = re.match(r"^\s*```(\w*)", line)
        if fence and language is None:
            language, start, body = fence.group(1) or "text", number + 1, []
        elif fence:
            blocks.append((language, start, "\n".join(body)))
            language = None
        elif language is not None:
            body.append(line)
    return blocks


def anchors(text: str) -> set[str]:
    """GitHub's anchors for a page's headings (outside code blocks)."""
    found, seen, in_code = set(), {}, False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            in_code = not in_code
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*$", line)
        if heading and not in_code:
            slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def broken_links(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    prose = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    problems = []
    for target in re.findall(r"\]\(([^)\s]+)\)", prose):
        if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            problems.append(f"{path.name}: link to {target}: no such file")
        elif anchor and (linked.suffix != ".md" or anchor not in anchors(linked.read_text(encoding="utf-8"))):
            problems.append(f"{path.name}: link to {target}: no heading with that anchor")
    return problems


def command_lines(text: str):
    """(line number, command, arguments) of every `python -m electra_tf.X ...` in the text,
    continuation lines joined, comments and what follows a shell operator dropped."""
    lines, joined, start = text.splitlines(), [], None
    for number, line in enumerate(lines, 1):
        if start is None:
            start, pending = number, ""
        pending += line.rstrip("\\").rstrip() + " " if line.rstrip().endswith("\\") else line
        if not line.rstrip().endswith("\\"):
            joined.append((start, pending))
            start = None
    found = []
    for number, line in joined:
        if "-m electra_tf" not in line:
            continue
        try:
            words = shlex.split(line, comments=True)
        except ValueError as error:
            raise AssertionError(f"line {number}: cannot split {line!r}: {error}")
        for index, word in enumerate(words[:-1]):
            if word == "-m" and words[index + 1].startswith("electra_tf"):
                module = words[index + 1]
                rest = []
                for argument in words[index + 2:]:
                    if argument in ("&&", "||", "|", ";", ">", ">>") or argument.startswith(">"):
                        break
                    rest.append(argument)
                found.append((number, module, rest))
    return found


def parse_error(module: str, arguments: list[str]) -> str | None:
    """What the command's own parser says of these arguments (None: accepted)."""
    from electra_tf.utils.registry import import_modules, imports_in

    name = module.removeprefix("electra_tf").lstrip(".")
    if name == "":  # `python -m electra_tf [COMMAND ...]`
        if not arguments or arguments[0] in ("--version", "-V", "--help", "-h"):
            return None
        if arguments[0] not in COMMANDS:
            return f"unknown command {arguments[0]!r}"
        name, arguments = arguments[0], arguments[1:]
    if name not in COMMANDS:
        return f"no command electra_tf.{name} (commands: {', '.join(COMMANDS)})"
    with kinds_and_formats_as_they_were():
        import_modules(imports_in(arguments))  # a kind or format of one's own adds options
        parser = importlib.import_module(f"electra_tf.{name}").build_parser()
        parser.allow_abbrev = False  # a doc must spell a flag out, as the parser may later gain a longer one
        errors = io.StringIO()
        try:
            with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
                parsed = parser.parse_args(arguments)
        except SystemExit as stop:
            return None if stop.code == 0 else errors.getvalue().strip().splitlines()[-1]
        problems = [bad_override(name, assignment, parsed) for assignment in getattr(parsed, "set", [])]
    if name == "launch":  # the arguments after -- are the worker command's
        worker = parsed.arguments[1:] if parsed.arguments[:1] == ["--"] else parsed.arguments
        problems.append(parse_error(parsed.module, worker))
    return "; ".join(p for p in problems if p) or None


def bad_override(command: str, assignment: str, parsed) -> str | None:
    """What the command's config says of a `--set` (a preset's, or the fine-tuning kind's)."""
    from electra_tf.finetuning.config import FinetuningConfig, requested_kind
    from electra_tf.pretraining.config import PretrainingConfig, preset_names
    from electra_tf.utils.sections import ConfigError

    try:
        if command == "finetune":
            FinetuningConfig.for_kind(requested_kind(parsed, None)).with_overrides([assignment])
        else:
            config = getattr(parsed, "config", None)
            PretrainingConfig.load(config if config in preset_names() else "electra_tiny").with_overrides([assignment])
    except ConfigError as error:
        return f"--set {assignment}: {error}"
    return None


@contextlib.contextmanager
def kinds_and_formats_as_they_were():
    """Kinds and formats a doc's --import registers are gone after it: the other tests of this
    process see the package's own."""
    from electra_tf.serving.exports import FORMATS
    from electra_tf.training.task import KINDS

    for registry in (KINDS, FORMATS):
        registry.load()
    saved = {registry: dict(registry.classes) for registry in (KINDS, FORMATS)}
    try:
        yield
    finally:
        for registry, classes in saved.items():
            registry.classes = classes


def command_problems(text: str, where: str) -> list[str]:
    problems = []
    for language, first, body in fenced_blocks(text):
        if language in ("bash", "sh", "shell", "console", "text"):
            for number, module, arguments in command_lines(body):
                error = parse_error(module, arguments)
                if error:
                    problems.append(f"{where}:{first + number - 1}: {module} {' '.join(arguments)}\n    {error}")
    return problems


# --- the checks ----------------------------------------------------------------------------------

def test_every_link_and_anchor_resolves():
    problems = [problem for path in DOCS for problem in broken_links(path)]
    assert not problems, "\n".join(problems)


def test_every_command_line_parses_with_its_own_parser():
    problems = [p for path in DOCS for p in command_problems(path.read_text(encoding="utf-8"), path.name)]
    assert not problems, "\n".join(problems)


def test_the_examples_in_each_commands_help_parse_too():
    problems = []
    for name in COMMANDS:
        module = importlib.import_module(f"electra_tf.{name}")
        examples, continued = [], False
        for line in (line.strip() for line in module.__doc__.splitlines()):
            if line.startswith("python -m electra_tf") or continued:
                examples.append(line)
            continued = (line.startswith("python -m electra_tf") or continued) and line.endswith("\\")
        fenced = "```bash\n" + "\n".join(examples) + "\n```\n"
        problems += command_problems(fenced, f"electra_tf/{name}.py")
    assert not problems, "\n".join(problems)


def test_the_check_catches_a_misspelt_flag_an_unknown_command_and_a_bad_override():
    doc = """```bash
.venv/bin/python -m electra_tf.pretrain --model_dir runs/x --stpes 10
.venv/bin/python -m electra_tf.pretrian --help
python -m electra_tf.pretrain --set learnig_rate=1e-3 \\
    --steps 5   # a comment --bogus
.venv/bin/python -m electra_tf.launch --workers 2 -- --model_dir runs/y --batchsize 8
python -m electra_tf.finetune --pretrained p --train t --eval e --output_dir o && echo --not-a-flag
```
"""
    problems = command_problems(doc, "doc.md")
    assert len(problems) == 4, "\n".join(problems)
    assert "doc.md:2:" in problems[0] and "--stpes" in problems[0]
    assert "doc.md:3:" in problems[1] and "no command electra_tf.pretrian" in problems[1]
    assert "doc.md:4:" in problems[2] and "learnig_rate" in problems[2]
    assert "doc.md:6:" in problems[3] and "--batchsize" in problems[3]


def test_links_and_anchors_are_checked(tmp_path):
    (tmp_path / "other.md").write_text("# A page\n\n## Its section: one, two\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text("[ok](other.md#its-section-one-two) [gone](missing.md) [bad](other.md#nowhere) "
                    "[web](https://example.org/x) [self](#top)\n\n# Top\n\n```\n[not a link](nope.md)\n```\n",
                    encoding="utf-8")
    problems = broken_links(page)
    assert problems == ["page.md: link to missing.md: no such file",
                        "page.md: link to other.md#nowhere: no heading with that anchor"]


def python_blocks():
    for path in DOCS:
        lines = path.read_text(encoding="utf-8").splitlines()
        for language, first, body in fenced_blocks("\n".join(lines)):
            if language == "python":
                above = lines[first - 3].strip() if first >= 3 else ""
                yield pytest.param(path, first, body, NOT_RUN.match(above), id=f"{path.name}:{first}")


@pytest.fixture(scope="session")
def task_exports(pretrained_run, tmp_path_factory):
    """The three kinds of fine-tuned export, as `finetune` leaves them in OUTPUT_DIR/export/NAME/1:
    a classifier, an entity tagger and a question answerer on the pre-trained run's weights. The
    heads are untrained: the docs show how an export is loaded and called, not its accuracy."""
    from electra_tf.finetuning.text.models import ElectraClassifier, ElectraTokenClassifier
    from electra_tf.finetuning.question_answering.model import ElectraQuestionAnswerer
    from electra_tf.finetuning.pretrained import load_pretrained
    from electra_tf.serving.publish import export_model

    root = tmp_path_factory.mktemp("task_exports")
    pretrained = load_pretrained(pretrained_run)
    backbone, tokenizer, config = pretrained.discriminator, pretrained.tokenizer, pretrained.config
    models = {  # OUTPUT_DIR name: (export name, model), as --task conll2003 and --task squad name them
        "sentiment": ("sentiment", ElectraClassifier(backbone, 2, label_names=["negative", "positive"])),
        "entities": ("conll2003", ElectraTokenClassifier(backbone, 5, label_names=["O", "B-PER", "I-PER", "B-LOC",
                                                                                   "I-LOC"])),
        "squad": ("squad", ElectraQuestionAnswerer(backbone, answerable=False))}
    for folder, (name, model) in models.items():
        export_model(model, tokenizer, config, root / folder / "export", name)
    return root


@pytest.mark.parametrize("path, line, code, not_run", list(python_blocks()))
def test_python_blocks_run(path, line, code, not_run, pretrained_run, tmp_path, request):
    """Each block runs in a fresh process, in a folder where `runs/electra_tiny` is a short
    real pre-training run (as command 1 leaves it, smaller), `runs/{sentiment,entities,
    squad}/export/NAME/1` fine-tuned exports (`task_exports`) for the blocks that load them, and
    `presets/electra_tiny` its keras-hub preset and `litert/electra_tiny.tflite` its LiteRT file for
    the blocks that read them."""
    if not_run:
        assert len(not_run.group(1)) > 10, f"{path.name}:{line}: say why the block is not run"
        pytest.skip(f"not run: {not_run.group(1)}")
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "electra_tiny").symlink_to(pretrained_run)
    if "/export/" in code and "electra_tiny/export" not in code:
        for task in request.getfixturevalue("task_exports").iterdir():
            (tmp_path / "runs" / task.name).symlink_to(task)
    if "litert/electra_tiny.tflite" in code:  # as the export command before the block writes it
        from electra_tf import export

        assert export.main(["--model_dir", str(pretrained_run), "--format", "litert", "--export_dir",
                            str(tmp_path / "litert")]) == 0
    if "presets/electra_tiny" in code:  # as the export command before the block writes it
        from electra_tf import export

        assert export.main(["--model_dir", str(pretrained_run), "--format", "keras_hub", "--export_dir",
                            str(tmp_path / "presets" / "electra_tiny")]) == 0
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                            timeout=600, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 0, f"{path.name}:{line}:\n{result.stderr[-3000:]}"


def test_every_command_is_listed_and_has_a_parser():
    result = subprocess.run([sys.executable, "-m", "electra_tf"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0
    listed = [line.split()[0] for line in result.stdout.splitlines() if line.startswith("  ")]
    assert listed == list(COMMANDS)
    for name in COMMANDS:
        assert isinstance(importlib.import_module(f"electra_tf.{name}").build_parser(), argparse.ArgumentParser)
    version = subprocess.run([sys.executable, "-m", "electra_tf", "--version"], capture_output=True, text=True)
    import electra_tf
    assert version.stdout.strip() == f"electra_tf {electra_tf.__version__}"
