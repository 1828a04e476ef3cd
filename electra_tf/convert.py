"""`python -m electra_tf.convert`: a released ELECTRA checkpoint (HuggingFace, Google TF1) or a
keras-hub preset -> a model_dir.

    python -m electra_tf.convert --from huggingface --input electra-small-discriminator \\
        --generator electra-small-generator --output runs/electra_small_hf
    python -m electra_tf.convert --from google --input electra_small --output runs/electra_small_google
    python -m electra_tf.convert --from keras_hub --input electra_small_discriminator_uncased_en \\
        --output runs/electra_small_keras_hub

`huggingface`: folders as `save_pretrained` writes them (config.json, model.safetensors,
vocab.txt or tokenizer.json, tokenizer_config.json): an ElectraForPreTraining (or ElectraModel)
discriminator, and with --generator its ElectraForMaskedLM, which continued pre-training needs.
`google`: the official TF1 checkpoint folder (model.ckpt-*, vocab.txt), generator included;
sizes are read off the variable shapes, the head count (one per 64 units, as the official
sizes) or anything else from --config.
`keras_hub`: a keras-hub ELECTRA preset folder (as Kaggle ships them, as `save_to_preset` writes
them): the discriminator's encoder and its tokenizer. It holds no replaced-token head and no
generator: both start fresh (continued pre-training trains a generator of the config's size from
scratch), and keras-hub's untrained pooler is left out. The work is
`electra_tf.interop.keras_hub_presets`.

Cased models convert too. A HuggingFace folder says how it tokenizes (tokenizer_config.json's
do_lower_case, strip_accents, tokenize_chinese_chars); a TF1 folder does not, so it is taken as
uncased, as the official code's default, unless --do_lower_case false (and the other two flags)
say otherwise; a vocabulary that is plainly cased is refused until they do. The flags also
override a HuggingFace folder's settings. The model_dir keeps the casing beside its vocab.txt.

The model_dir works with `finetune --pretrained`, `export --model_dir` and
`pretrain --init_from`. Nothing is downloaded: fetch the checkpoint yourself. Exit status: 0
converted, 2 bad input (nothing is written then). The work is `electra_tf.interop.convert`.
"""

from __future__ import annotations

import argparse
import sys

from electra_tf.data.vocabulary_files import read_tokenizer_settings
from electra_tf.utils.errors import command
from electra_tf.utils.logs import int64_notice_left_out, start_tensorflow
from electra_tf.utils.run_dir import read_provenance


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m electra_tf.convert", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--from", dest="source", required=True, choices=("huggingface", "google", "keras_hub"))
    parser.add_argument("--input", required=True,
                        help="the discriminator folder, the TF1 checkpoint folder, or the keras-hub preset folder")
    parser.add_argument("--generator", default=None, help="huggingface: the matching ElectraForMaskedLM folder")
    parser.add_argument("--output", required=True, help="the model_dir to write")
    parser.add_argument("--config", default=None,
                        help="google: a preset or JSON config for what shapes cannot tell (e.g. electra_base)")
    parser.add_argument("--max_seq_length", type=int, default=None,
                        help="the model_dir's max_seq_length (default 128, at most max_position_embeddings)")
    parser.add_argument("--overwrite", action="store_true", help="replace a non-empty --output")
    tokenizer = parser.add_argument_group(
        "tokenizer (transformers' names; default: a HuggingFace folder's tokenizer_config.json, uncased for "
        "a TF1 checkpoint, whose folder does not say)")
    for flag, what in (("--do_lower_case", "lower-case the text (false for a cased model)"),
                       ("--strip_accents", "remove accents (default: as --do_lower_case)"),
                       ("--tokenize_chinese_chars", "every CJK ideograph a word of its own (default true)")):
        tokenizer.add_argument(flag, choices=("true", "false"), default=None, help=what)
    return parser


def tokenizer_overrides(args) -> dict:
    """The tokenizer flags given, as transformers' keys and booleans."""
    return {key: getattr(args, key) == "true" for key in ("do_lower_case", "strip_accents", "tokenize_chinese_chars")
            if getattr(args, key) is not None}


@command(interrupted="no model_dir was written")
def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    start_tensorflow()  # quietly, before anything else loads it
    int64_notice_left_out()
    from electra_tf.interop.convert import import_google, import_huggingface
    from electra_tf.interop.huggingface import ConversionError

    if args.source == "keras_hub":
        from electra_tf.interop.keras_hub_presets import import_keras_hub

        if args.config or args.generator or tokenizer_overrides(args):
            raise ConversionError("--config, --generator and the tokenizer flags are for the other formats; a "
                                  "keras-hub preset's config.json and tokenizer.json say it all.")
        model_dir = import_keras_hub(args.input, args.output, args.max_seq_length, args.overwrite)
    elif args.source == "huggingface":
        if args.config:
            raise ConversionError("--config is for --from google; a HuggingFace folder's config.json says it all.")
        model_dir = import_huggingface(args.input, args.output, args.generator, args.max_seq_length, args.overwrite,
                                       tokenizer_overrides(args))
    else:
        if args.generator:
            raise ConversionError("--generator is for --from huggingface; a TF1 checkpoint holds both networks.")
        from electra_tf.pretraining.config import PretrainingConfig
        base = PretrainingConfig.load(args.config) if args.config else None
        model_dir = import_google(args.input, args.output, base, args.max_seq_length, args.overwrite,
                                  tokenizer_overrides(args))
    provenance = read_provenance(model_dir.path)

    print(f"Converted {args.input} into {model_dir.path} "
          f"(tokenizer: {read_tokenizer_settings(model_dir.vocab).describe()})")
    if not provenance["rtd_head"]:
        print("  no replaced-token head in the source (ElectraModel): fine for fine-tuning; the exported "
              "replaced_probability is untrained")
    if provenance.get("generator_initialised"):
        print("  no generator in the source: continued pre-training starts one of the config's size from scratch")
    elif not provenance["generator_weights"]:
        print("  no generator: fine-tuning and export work; continued pre-training needs --generator")
    if provenance.get("question_answering_head"):
        answerer = model_dir.path / "question_answerer.keras"
        print(f"  question answering (ElectraForQuestionAnswering): the whole model is {answerer}\n"
              f"  serve it: python -m electra_tf.export --model_dir {answerer}")
    print(f"  fine-tune: python -m electra_tf.finetune --pretrained {model_dir.path} ...\n"
          f"  continue pre-training: python -m electra_tf.pretrain --init_from {model_dir.path} ...")
    return 0


if __name__ == "__main__":
    sys.exit(main())
