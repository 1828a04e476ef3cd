"""`python -m electra_tf.export`: the discriminator as a SavedModel for TensorFlow Serving, or
the model as HuggingFace folders.

    python -m electra_tf.export --model_dir runs/electra_tiny
    python -m electra_tf.export --model_dir runs/electra_tiny --checkpoint ckpt-2000 \\
        --export_dir exports --name electra_tiny
    python -m electra_tf.export --model_dir runs/electra_tiny --format huggingface

With `--format huggingface`: EXPORT_DIR/NAME-huggingface/discriminator (what
`transformers.ElectraForPreTraining.from_pretrained` loads) and .../generator
(`ElectraForMaskedLM`), each with config.json, model.safetensors, vocab.txt and
tokenizer_config.json; see `electra_tf/interop/convert.py`.

With the default `--format saved_model`:
writes `EXPORT_DIR/NAME/<version>/` (saved_model.pb, variables/, assets.extra/), the layout
TF Serving watches: the next integer version, built in a temporary folder and renamed, so a
server never sees a half-written version and an existing version is never overwritten. The
generator is not exported. Signatures: `serving_default` (text in) and `encode_ids` (ids in),
described in `electra_tf/serving/signatures.py`; writing is `electra_tf/serving/publish.py`.
Exit status: 0 exported, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from electra_tf.errors import command
from electra_tf.run_dir import DEFAULT_EXPORT_DIR


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m electra_tf.export", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model_dir", required=True,
                        help="a pre-training model_dir (or a .keras file / earlier export)")
    parser.add_argument("--checkpoint", default=None, help="e.g. ckpt-2000 (default: the latest)")
    parser.add_argument("--export_dir", default=str(DEFAULT_EXPORT_DIR))
    parser.add_argument("--name", default=None, help="model name (default: the model_dir's name)")
    parser.add_argument("--format", default="saved_model", choices=("saved_model", "huggingface"),
                        help="saved_model: for TF Serving; huggingface: folders transformers loads")
    return parser


@command
def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    from electra_tf.loading import load_pretrained
    from electra_tf.serving.publish import export_discriminator

    model_dir = Path(args.model_dir)
    if args.format == "huggingface":
        from electra_tf.interop.convert import export_huggingface

        target = Path(args.export_dir) / f"{args.name or model_dir.name}-huggingface"
        folders = export_huggingface(model_dir, target, args.checkpoint)
        print("Exported for HuggingFace transformers:\n" + "\n".join(f"  {folder}" for folder in folders))
        return 0
    pretrained = load_pretrained(model_dir, args.checkpoint)
    target = export_discriminator(pretrained.discriminator, pretrained.tokenizer, pretrained.config,
                                  Path(args.export_dir), args.name or model_dir.name)
    print(f"Exported the discriminator to {target}\n  saved_model_cli show --dir {target} --all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
