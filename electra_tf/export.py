"""`python -m electra_tf.export`: a model as a SavedModel for TensorFlow Serving, as
HuggingFace folders, as a keras-hub preset, or as a LiteRT file for devices.

    python -m electra_tf.export --model_dir runs/electra_tiny
    python -m electra_tf.export --model_dir runs/electra_tiny --checkpoint ckpt-2000 \\
        --export_dir exports --name electra_tiny
    python -m electra_tf.export --model_dir runs/my_task/best.keras
    python -m electra_tf.export --model_dir runs/electra_tiny --format huggingface
    python -m electra_tf.export --model_dir runs/electra_tiny --format keras_hub --export_dir presets/electra_tiny
    python -m electra_tf.export --model_dir runs/my_task/best.keras --format litert --quantize dynamic

From a pre-training model_dir (or an earlier export) it exports the discriminator; from a
fine-tuned `.keras` file (a fine-tuning run's best.keras) the task model, head and label
names included, as fine-tuning itself exports it. The generator is never exported.

Where: EXPORT_DIR/NAME/<version>/, by default inside the source (MODEL_DIR/export/, or
export/ beside the .keras file), named after the run (its folder, or a fine-tuning run's task),
so runs never share a TF Serving model by accident. The next integer version is built in a
temporary folder and renamed, so a server never sees a half-written version and an existing
version is never overwritten; exporting what the newest version already holds writes nothing.
Signatures: `serving_default` (text in) and `encode_ids` (ids in), described in
`electra_tf/models/signatures.py`; writing is `electra_tf/serving/publish.py`.

With `--format huggingface`: EXPORT_DIR/NAME-huggingface/discriminator (what
`transformers.ElectraForPreTraining.from_pretrained` loads) and .../generator
(`ElectraForMaskedLM`), each with config.json, model.safetensors, vocab.txt and
tokenizer_config.json; see `electra_tf/interop/convert.py`.

With `--format keras_hub`: a preset folder (by default EXPORT_DIR/NAME-keras_hub; --export_dir
names the folder itself) that `keras_hub.models.ElectraBackbone.from_preset` and
`keras_hub.models.ElectraTokenizer.from_preset` load on any Keras backend: the discriminator's
encoder (of a pre-training run, a converted checkpoint, or a fine-tuned model's backbone) and its
vocabulary. keras-hub computes GELU in its tanh form and has an untrained pooler; see
`electra_tf/interop/keras_hub_presets.py` and docs/interop.md.

With `--format litert`: EXPORT_DIR/NAME.tflite (NAME-int8.tflite with `--quantize dynamic`), one
file that takes text (the tokenizer inside): a fine-tuned classifier's or tagger's `best.keras`,
or a pre-training run's discriminator. It runs with LiteRT's interpreter and tensorflow-text's
custom-op kernels, no Select TF ops; see `electra_tf/serving/litert.py` and docs/serving.md.
Exit status: 0 exported, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from electra_tf.utils.errors import command
from electra_tf.utils.logs import int64_notice_left_out, start_tensorflow
from electra_tf.utils.run_dir import FinetuneDir, ModelDir, task_export_name


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m electra_tf.export", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model_dir", required=True,
                        help="a pre-training model_dir (or a .keras file / earlier export)")
    parser.add_argument("--checkpoint", default=None, help="e.g. ckpt-2000 (default: the latest)")
    parser.add_argument("--export_dir", default=None,
                        help="the folder exports go in: TF Serving's base folder, or where the .tflite file goes "
                             "(default: MODEL_DIR/export, or export/ beside a .keras file); for keras_hub, the preset "
                             "folder itself")
    parser.add_argument("--name", default=None,
                        help="model name (default: the model_dir's name, or a fine-tuning run's task)")
    parser.add_argument("--format", default="saved_model", choices=("saved_model", "huggingface", "keras_hub", "litert"),
                        help="saved_model: for TF Serving; huggingface: folders transformers loads; keras_hub: a "
                             "preset folder keras-hub loads (--export_dir is then the preset folder itself); litert: "
                             "a .tflite file that takes text, for phones and edge devices")
    parser.add_argument("--quantize", default="none", choices=("none", "dynamic"),
                        help="litert: dynamic = 8-bit weights, float activations (about a quarter of the size)")
    parser.add_argument("--overwrite", action="store_true",
                        help="keras_hub, litert: replace an existing preset folder or .tflite file")
    return parser


def default_export_dir(source: Path) -> Path:
    """Inside the run the model comes from: MODEL_DIR/export, export/ beside a .keras file, or
    the export folder an export version already sits in."""
    if source.suffix == ".keras":
        return FinetuneDir(source.parent).exports
    if source.name.isdigit() and (source / "saved_model.pb").is_file():  # EXPORT_DIR/NAME/<n>
        return source.parent.parent
    return ModelDir(source).exports


def default_name(source: Path) -> str:
    """The run's name: a model_dir's folder name; for a fine-tuning run's `.keras` file, its task."""
    import json

    if source.suffix == ".keras":
        metrics = FinetuneDir(source.parent).metrics
        if metrics.is_file():
            return task_export_name(json.loads(metrics.read_text(encoding="utf-8"))["task"])
        return source.stem if source.stem not in ("best", "model") else source.resolve().parent.name
    return source.parent.name if source.name.isdigit() else source.resolve().name


@command(interrupted="no new export version was written")
def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    start_tensorflow()  # quietly, before anything else loads it
    int64_notice_left_out()
    from electra_tf.finetuning.pretrained import load_pretrained, load_task_model
    from electra_tf.serving.publish import export_discriminator, export_task_model

    source = Path(args.model_dir)
    export_dir = Path(args.export_dir) if args.export_dir else default_export_dir(source)
    name = args.name or default_name(source)
    if args.format == "litert":
        return export_litert(source, export_dir, name, args)
    if args.format == "keras_hub":
        return export_keras_hub(source, Path(args.export_dir) if args.export_dir else export_dir / f"{name}-keras_hub",
                                args.checkpoint, args.overwrite)
    if args.format == "huggingface":
        from electra_tf.interop.convert import export_huggingface

        task_model = load_task_model(source) if source.suffix == ".keras" and source.is_file() else None
        if task_model is not None:
            from electra_tf.finetuning.question_answering.model import ElectraQuestionAnswerer
            from electra_tf.interop.question_answering import export_question_answerer

            model, tokenizer, config = task_model
            if not isinstance(model, ElectraQuestionAnswerer):
                from electra_tf.interop.huggingface import ConversionError

                raise ConversionError(f"{source} is a fine-tuned {type(model).__name__}; --format huggingface "
                                      "takes a pre-training model_dir or a question answerer (--qa_head plain).")
            folders = export_question_answerer(model, config, tokenizer,
                                               export_dir / f"{name}-huggingface")
        else:
            folders = export_huggingface(source, export_dir / f"{name}-huggingface", args.checkpoint)
        print("Exported for HuggingFace transformers:\n" + "\n".join(f"  {folder.resolve()}" for folder in folders))
        return 0
    from electra_tf.serving.publish import next_version

    task_model = load_task_model(source) if source.suffix == ".keras" and source.is_file() else None
    first_new_version = next_version(export_dir / name)
    if task_model is not None:
        target = export_task_model(*task_model, export_dir, name)
        what = f"the fine-tuned {type(task_model[0]).__name__}"
    else:
        pretrained = load_pretrained(source, args.checkpoint)
        target = export_discriminator(pretrained.discriminator, pretrained.tokenizer, pretrained.config,
                                      export_dir, name)
        what = f"the discriminator (from {pretrained.source})"
    if int(target.name) < first_new_version:
        return 0  # nothing new: the export said which version already holds this model
    print(f"Exported {what} to {target.resolve()}\n  saved_model_cli show --dir {target.resolve()} --all")
    return 0


def export_keras_hub(source: Path, output: Path, checkpoint: str | None, overwrite: bool) -> int:
    from electra_tf.finetuning.pretrained import load_pretrained
    from electra_tf.interop.keras_hub_presets import sentencepiece_tokenizer_file, write_preset

    backbone = load_pretrained(source, checkpoint)
    step = backbone.metadata().get("step")
    folder = write_preset(backbone, output, overwrite, {"step": step} if step is not None else None)
    tokenizer = (f"keras_hub.tokenizers.SentencePieceTokenizer(proto={str(sentencepiece_tokenizer_file(folder))!r})"
                 if backbone.tokenizer.kind == "sentencepiece"
                 else f"keras_hub.models.ElectraTokenizer.from_preset({str(folder)!r})")
    print(f"Exported the discriminator's encoder (from {backbone.source}) as a keras-hub preset: {folder.resolve()}\n"
          f"  keras_hub.models.ElectraBackbone.from_preset({str(folder)!r})\n"
          f"  {tokenizer}\n"
          "  (keras-hub computes GELU in its tanh form, and its pooled_output is untrained: use "
          "sequence_output[:, 0]; docs/interop.md)")
    return 0


def export_litert(source: Path, export_dir: Path, name: str, args) -> int:
    from electra_tf.finetuning.pretrained import load_pretrained, load_task_model
    import importlib.util

    from electra_tf.serving.litert import litert_file_name, write_litert

    task_model = load_task_model(source) if source.suffix == ".keras" and source.is_file() else None
    if task_model is not None:
        model, tokenizer, config = task_model
        what = f"the fine-tuned {type(model).__name__}"
    else:
        backbone = load_pretrained(source, args.checkpoint)
        model, tokenizer, config = backbone.discriminator, backbone.tokenizer, backbone.config
        what = (f"the discriminator (per-token replaced probabilities, from {backbone.source}; a classifier or "
                "tagger comes from a fine-tuning run's best.keras)")
    path = write_litert(model, tokenizer, config.max_seq_length, export_dir / litert_file_name(name, args.quantize),
                        args.quantize, args.overwrite)
    checked = ("checked: it runs" if importlib.util.find_spec("ai_edge_litert") is not None
               else "not run here: pip install -e \".[litert]\" to check it")
    print(f"Exported {what} as LiteRT ({'8-bit weights' if args.quantize == 'dynamic' else 'float32'}, "
          f"{path.stat().st_size / 2**20:.1f} MiB): {path.resolve()}\n"
          f"  LiteRT's interpreter with tensorflow-text's kernels ({checked}); docs/serving.md, \"On a device\"")
    return 0


if __name__ == "__main__":
    sys.exit(main())
