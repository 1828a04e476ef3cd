"""`python -m electra_tf.export`: any run's model in any export format.

    python -m electra_tf.export --model_dir runs/electra_tiny
    python -m electra_tf.export --model_dir runs/electra_tiny --checkpoint ckpt-2000 \\
        --export_dir exports --name electra_tiny
    python -m electra_tf.export --model_dir runs/my_task
    python -m electra_tf.export --model_dir runs/electra_tiny --format huggingface
    python -m electra_tf.export --model_dir runs/electra_tiny --format keras_hub --export_dir presets/electra_tiny
    python -m electra_tf.export --model_dir runs/my_task --format litert --quantize dynamic

--model_dir takes what any run leaves: a pre-training model_dir (its discriminator: its backbone,
or a checkpoint with --checkpoint; the generator is never served), a fine-tuning run's folder
(its best model: the task model, head and label names included) or a `.keras` file, a backbone
or keras-hub preset folder, or an earlier export. A format that does not take the source says
so and names the formats that do.

Formats (`electra_tf/serving/exports.py`; each one module):
  saved_model  EXPORT_DIR/NAME/<version>/ for TensorFlow Serving: text in (serving_default) and
               ids in (encode_ids). The next integer version is built in a temporary folder and
               renamed, so a server never sees a half-written version and an existing one is never
               overwritten; exporting what the newest version already holds writes nothing.
  litert       EXPORT_DIR/NAME.tflite (NAME-int8.tflite with --quantize dynamic): one file that
               takes text, for phones and edge devices; LiteRT's interpreter with tensorflow-text's
               kernels runs it, no Select TF ops.
  keras_hub    a preset folder (EXPORT_DIR/NAME-keras_hub; --export_dir names the folder itself)
               that keras_hub.models.ElectraBackbone and ElectraTokenizer load on any Keras backend:
               the encoder and its vocabulary (keras-hub computes GELU in its tanh form).
  huggingface  EXPORT_DIR/NAME-huggingface/discriminator (ElectraForPreTraining) and .../generator
               (ElectraForMaskedLM) of a pre-training model_dir; a plain-head question answerer's
               ElectraForQuestionAnswering.

Where: by default inside the source (MODEL_DIR/export/, or the fine-tuning run's export/), named
after the run (its folder, or a fine-tuning run's task), so runs never share a TF Serving model
by accident. A kind or format defined in a module of your own loads with --import MODULE.
Exit status: 0 exported, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from electra_tf.utils.errors import command
from electra_tf.utils.logs import import_tensorflow, int64_notice_left_out, start_tensorflow
from electra_tf.utils.registry import import_modules, imports_in
from electra_tf.utils.run_dir import FinetuneDir, ModelDir


def build_parser() -> argparse.ArgumentParser:
    import_tensorflow()  # quietly: the formats' modules import it
    from electra_tf.serving.exports import DEFAULT_FORMAT, FORMATS

    parser = argparse.ArgumentParser(prog="python -m electra_tf.export", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model_dir", required=True,
                        help="a run's folder (pre-training or fine-tuning), a .keras file, a backbone or preset folder, "
                             "or an earlier export")
    parser.add_argument("--checkpoint", default=None, help="a pre-training model_dir's checkpoint, e.g. ckpt-2000 "
                                                           "(default: its backbone, else the latest)")
    parser.add_argument("--export_dir", default=None,
                        help="the folder exports go in: TF Serving's base folder, or where the .tflite file goes "
                             "(default: the run's export/); for keras_hub, the preset folder itself")
    parser.add_argument("--name", default=None,
                        help="model name (default: the model_dir's name, or a fine-tuning run's task)")
    parser.add_argument("--format", default=DEFAULT_FORMAT, choices=FORMATS.names(),
                        help="; ".join(f"{name}: {cls.help}" for name, cls in FORMATS.items()))
    parser.add_argument("--quantize", default="none", choices=("none", "dynamic"),
                        help="litert: dynamic = 8-bit weights, float activations (about a quarter of the size)")
    parser.add_argument("--overwrite", action="store_true",
                        help="keras_hub, litert: replace an existing preset folder or .tflite file")
    parser.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                        help="a module (or .py file) of your own that registers kinds or formats")
    return parser


def default_export_dir(source: Path) -> Path:
    """Inside the run the model comes from: MODEL_DIR/export, a fine-tuning run's export/, or
    the export folder an export version already sits in."""
    if source.suffix == ".keras":
        return FinetuneDir(source.parent).exports
    if source.name.isdigit() and (source / "saved_model.pb").is_file():  # EXPORT_DIR/NAME/<n>
        return source.parent.parent
    return ModelDir(source).exports


def default_name(source: Path) -> str:
    """The run's name: a model_dir's folder name (an export version's model folder)."""
    return source.parent.name if source.name.isdigit() else source.resolve().name


@command(interrupted="no new export was written")
def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    import_tensorflow()
    import_modules(imports_in(argv))
    args = build_parser().parse_args(argv)
    start_tensorflow()
    int64_notice_left_out()
    from electra_tf.serving.exports import FORMATS, ExportOptions, export, load_source

    path = Path(args.model_dir)
    source = load_source(path, args.checkpoint)
    export_dir = Path(args.export_dir) if args.export_dir else default_export_dir(path)
    target = Path(args.export_dir) if args.export_dir and FORMATS[args.format].takes_target else None
    options = ExportOptions(export_dir, args.name or source.served.name or default_name(path), target, args.quantize,
                            args.overwrite)
    _, lines = export(source, args.format, options)
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
