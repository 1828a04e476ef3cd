"""Export formats, by name, and what they export: a run's served model (`ExportSource`).

A format is a class registered with `register_format(name)` in the module that writes it:

    saved_model   serving/publish.py            a SavedModel for TensorFlow Serving (text and ids in)
    litert        serving/litert.py             one .tflite file that takes text, for devices
    keras_hub     interop/keras_hub_presets.py  a keras-hub preset of the encoder, for any Keras backend
    huggingface   interop/convert.py            save_pretrained folders transformers loads
    openvino      serving/ids_exports.py        OpenVINO IR of the ids signature, for Intel's CPU runtime
    onnx          serving/ids_exports.py        ONNX of the ids signature, for ONNX Runtime

Each says which sources it takes (`refuses(source)`: None, or why not) and asks the source's
model for what it serves (`serving_endpoints`, `litert_endpoint`: the model classes of each kind
of run answer them), so neither `python -m electra_tf.export` nor the commands that export
after training name a kind or a model class. The package's formats, like a plugin's, are entry
points of the group `electra_tf.exports` (setup.py); `--import MODULE` adds one's own.

`load_source(path)` reads any run's model: a pre-training model_dir (its backbone or a
checkpoint), a backbone or keras-hub preset folder, a fine-tuning run's folder (its best
model) or a `.keras` file, an export. `source_of_run(served, run_dir)` is the same for the
model a run has just trained.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import keras

from electra_tf.finetuning.pretrained import load_pretrained, load_task_model, saved_model_class
from electra_tf.models.backbone import Backbone
from electra_tf.training.task import KINDS, ServedModel, kind_of_model
from electra_tf.utils.errors import ElectraError
from electra_tf.utils.registry import Registry
from electra_tf.utils.run_dir import FinetuneDir, ModelDir, task_export_name

FORMATS = Registry("export format", "electra_tf.exports")
DEFAULT_FORMAT = "saved_model"
FINETUNE_COMMAND = "finetune"  # the command whose kinds make task models


def register_format(name: str):
    """Class decorator: registers an `ExportFormat` subclass as the format `name`."""
    return FORMATS.register(name)


class ExportError(ElectraError):
    """A source a format does not take; the message names the formats that take it."""


@dataclasses.dataclass(frozen=True)
class ExportSource:
    """What an export reads: the model a run serves (`served`: the model, its tokenizer and
    config, the name it is served under, the kind of run that made it), its encoder (`backbone`),
    and where it came from (`path`; `model_dir` when it is a pre-training run whose checkpoints
    also hold the generator, with the `checkpoint` asked for)."""

    served: ServedModel
    backbone: Backbone
    path: Path | None = None
    model_dir: Path | None = None
    checkpoint: str | None = None

    @property
    def kind(self) -> str:
        return self.served.kind

    def describe(self) -> str:
        origin = f" (from {self.backbone.source})" if self.backbone.source else ""
        return f"the {self.kind} run's {type(self.served.model).__name__}{origin}"


@dataclasses.dataclass(frozen=True)
class ExportOptions:
    """Where and how: `export_dir` (the folder exports go in), `name` (the model's name there),
    `target` (a folder or file given as the export itself, for formats that take one),
    `quantize` (litert: "none" or "dynamic"), `overwrite` (replace what is there)."""

    export_dir: Path
    name: str
    target: Path | None = None
    quantize: str = "none"
    overwrite: bool = False


class ExportFormat:
    """Base of a format (module docstring). `write` returns the path it wrote and the lines
    the command prints after it."""

    name = "format"  # set by register_format
    help = ""
    takes_target = False  # export's --export_dir names the export itself (a folder), not where it goes

    def refuses(self, source: ExportSource) -> str | None:
        return None

    def write(self, source: ExportSource, options: ExportOptions) -> tuple[Path, list[str]]:
        raise NotImplementedError


def formats_for(source: ExportSource) -> list[str]:
    """The formats that take `source`."""
    return [name for name, cls in FORMATS.items() if cls().refuses(source) is None]


def export(source: ExportSource, format_name: str, options: ExportOptions) -> tuple[Path, list[str]]:
    """Writes `source` in the format; an ExportError names the formats that take it when this
    one does not."""
    exporter = FORMATS[format_name]()
    reason = exporter.refuses(source)
    if reason is not None:
        raise ExportError(f"--format {format_name} does not take {source.describe()}: {reason}. This source exports "
                          f"as: {', '.join(formats_for(source)) or 'nothing'}.")
    return exporter.write(source, options)


def load_source(path, checkpoint: str | None = None) -> ExportSource:
    """The model a run (or a file) serves, as `export` takes it (module docstring)."""
    path = Path(path)
    if _holds_task_model(path):
        model, tokenizer, config = load_task_model(path)
        served = ServedModel(model, tokenizer, config, _task_name(path), _kind_of(model))
        return ExportSource(served, Backbone(model.backbone, tokenizer, config, str(path)), path)
    backbone = load_pretrained(path, checkpoint)
    model_dir = path if path.is_dir() and ModelDir(path).has_checkpoints() else None
    served = ServedModel(backbone.discriminator, backbone.tokenizer, backbone.config, "", _kind_of(backbone.discriminator))
    return ExportSource(served, backbone, path, model_dir, checkpoint)


def source_of_run(served: ServedModel, run_dir: Path) -> ExportSource:
    """The model a run has just trained, as `export` takes it."""
    backbone = Backbone(getattr(served.model, "backbone", served.model), served.tokenizer, served.config, str(run_dir))
    model_dir = run_dir if ModelDir(run_dir).has_checkpoints() else None
    return ExportSource(served, backbone, run_dir, model_dir)


def _holds_task_model(path: Path) -> bool:
    """A fine-tuning run's folder, or a .keras file of a model some fine-tuning kind makes."""
    if path.is_dir():
        return FinetuneDir(path).best_model.is_file()
    name = saved_model_class(path) if path.suffix == ".keras" and path.is_file() else None
    return name is not None and kind_of_model(FINETUNE_COMMAND, name) is not None


def _kind_of(model) -> str:
    """The kind of run whose models are of `model`'s class ("" for a class no kind names)."""
    registered = keras.saving.get_registered_name(type(model))
    return next((name for name, cls in KINDS.items() if registered in cls.model_names), "")


def _task_name(path: Path) -> str:
    """A fine-tuning run's task name (its metrics.json's), as its own export was named; else
    the run folder's name."""
    folder = FinetuneDir(path if path.is_dir() else path.parent)
    if folder.metrics.is_file():
        return task_export_name(json.loads(folder.metrics.read_text(encoding="utf-8")).get("task", ""))
    return path.stem if path.is_file() and path.stem not in ("best", "model") else folder.path.resolve().name


def add_export_options(parser, where: str) -> None:
    """A training command's options for what it exports when the run is done (`--export FORMAT
    ...`, SavedModel by default; `--no-export`), and where (`where`: the default folder, said in
    the help)."""
    group = parser.add_argument_group("the export after the run")
    group.add_argument("--export", nargs="+", default=None, metavar="FORMAT",
                       help=f"formats written when the run is done: {', '.join(FORMATS.names())} (default: "
                            f"{DEFAULT_FORMAT}); python -m electra_tf.export writes any of them later")
    group.add_argument("--no-export", dest="export", action="store_const", const=[], help="export nothing")
    group.add_argument("--export_dir", default=None, help=f"the folder exports go in (default: {where})")
    group.add_argument("--export_name", default=None, help="the name exports take (default: the run's)")
    group.add_argument("--quantize", default="none", choices=("none", "dynamic"),
                       help="litert: dynamic = 8-bit weights, float activations (about a quarter of the size)")


def exporter(args, run_dir: Path, default_export_dir: Path, default_name: str, default_formats=(DEFAULT_FORMAT,)):
    """What the chief runs once the run is done (`Trainer.run(after_training=...)`): each format
    of `--export` (`default_formats` when it is not given), over the run's served model; returns
    metrics.json's `export` (the first format's path) and `exports` (every format's). None when
    nothing is to be exported."""
    formats = list(default_formats) if args.export is None else args.export
    unknown = [name for name in formats if name not in FORMATS]
    if unknown:
        raise ExportError(f"--export {unknown[0]}: not an export format; formats: {', '.join(FORMATS.names())}.")
    if not formats:
        return None

    def export_run(served) -> dict:
        if served is None:
            return {"export": None, "exports": {}}
        source = source_of_run(served, run_dir)
        options = ExportOptions(Path(args.export_dir) if args.export_dir else default_export_dir,
                                args.export_name or served.name or default_name, quantize=args.quantize, overwrite=True)
        written = {}
        for name in formats:
            print(f"exporting as {name} ...", flush=True)
            path, lines = export(source, name, options)
            written[name] = str(path.resolve())
            for line in lines:
                print(line, flush=True)
        return {"export": written[formats[0]], "exports": written}
    return export_run
