"""Google's official TF1 ELECTRA checkpoints in: a folder with `model.ckpt-<step>.{index,data-*}`,
`checkpoint` and `vocab.txt`, as in the released zips (electra_small, electra_base,
electra_large), or a checkpoint prefix. Generator and discriminator are in the one checkpoint
and share `electra/embeddings/*`; Adam slots (`*/adam_m`, `*/adam_v`) and `global_step` are
ignored. Sizes are read off the variable shapes; what shapes cannot tell (the number of
attention heads: the official sizes use one head per 64 units) comes from `--config`.
"""

from __future__ import annotations

import re
from pathlib import Path

import tensorflow as tf

from electra_tf.data.vocabulary_files import read_vocabulary
from electra_tf.interop.huggingface import DEFAULT_MAX_SEQ_LENGTH, ConversionError
from electra_tf.pretraining.config import PretrainingConfig
from electra_tf.utils.sections import ConfigError

HEAD_WIDTH = 64  # official ELECTRA sizes: small 256/4, base 768/12, large 1024/16


class GoogleCheckpoint:
    def __init__(self, path):
        path = Path(path)
        self.folder = path if path.is_dir() else path.parent
        prefix = tf.train.latest_checkpoint(str(path)) if path.is_dir() else str(path)
        if prefix is None and path.is_dir():
            indexes = sorted(path.glob("*.index"))
            prefix = str(indexes[-1].with_suffix("")) if indexes else None
        if prefix is None or not Path(prefix + ".index").is_file():
            raise ConversionError(f"{path} holds no TF1 checkpoint (model.ckpt-<step>.index and its data files).")
        self.prefix = prefix
        try:
            self.reader = tf.train.load_checkpoint(prefix)
        except Exception as error:  # TensorFlow raises several types for damaged files
            raise ConversionError(f"{prefix}: cannot read the checkpoint ({type(error).__name__}: "
                                  f"{str(error).strip().splitlines()[-1][:200]}); it is damaged or incomplete.") from None
        self.shapes = {name: tuple(shape) for name, shape in self.reader.get_variable_to_shape_map().items()
                       if not name.endswith(("adam_m", "adam_v")) and name != "global_step"}
        if "electra/embeddings/word_embeddings" not in self.shapes:
            kind = "a BERT checkpoint (bert/...)" if any(n.startswith("bert/") for n in self.shapes) else "not ELECTRA's"
            raise ConversionError(f"{prefix}: no electra/embeddings/word_embeddings: the variable names are {kind}.")
        if any(name.startswith("generator/embeddings/") for name in self.shapes):
            raise ConversionError(f"{prefix}: the generator has its own embeddings (untied_generator_embeddings); "
                                  "converting that layout is not supported, only the released (shared) one.")

    @property
    def has_generator(self) -> bool:
        return "generator_predictions/output_bias" in self.shapes

    def tensor(self, name: str):
        if name not in self.shapes:
            raise ConversionError(f"{self.prefix}: variable {name!r} is missing from the checkpoint.")
        try:
            return self.reader.get_tensor(name)
        except Exception as error:
            raise ConversionError(f"{self.prefix}: variable {name!r} cannot be read ({type(error).__name__}); "
                                  "the data file is damaged or truncated.") from None

    def vocabulary(self) -> list[str]:
        return read_vocabulary(self.folder / "vocab.txt")

    def config(self, base: PretrainingConfig | None = None, max_seq_length: int | None = None) -> PretrainingConfig:
        """Sizes from the shapes; everything else from `base` (a --config), or ELECTRA's defaults."""
        shape = self.shapes
        vocab_size, embedding_size = shape["electra/embeddings/word_embeddings"]
        layers = _count_layers(shape, "electra/encoder/layer_")
        hidden = shape["electra/encoder/layer_0/attention/self/query/kernel"][1]
        values = dict(vocab_size=vocab_size, embedding_size=embedding_size, hidden_size=hidden, num_layers=layers,
                      intermediate_size=shape["electra/encoder/layer_0/intermediate/dense/kernel"][1],
                      max_position_embeddings=shape["electra/embeddings/position_embeddings"][0],
                      type_vocab_size=shape["electra/embeddings/token_type_embeddings"][0])
        if self.has_generator:
            generator_hidden = shape["generator/encoder/layer_0/attention/self/query/kernel"][1]
            values["generator_hidden_fraction"] = generator_hidden / hidden
            values["generator_layers_fraction"] = _count_layers(shape, "generator/encoder/layer_") / layers
            values["allow_wide_generator"] = generator_hidden > hidden
        if base is None:
            values["num_heads"] = max(1, hidden // HEAD_WIDTH)
            values["max_seq_length"] = min(max_seq_length or DEFAULT_MAX_SEQ_LENGTH, values["max_position_embeddings"])
            merged = values
        else:
            flat = base.flat()
            differing = {k: (flat[k], v) for k, v in values.items()
                         if k in ("vocab_size", "embedding_size", "hidden_size", "num_layers", "intermediate_size",
                                  "max_position_embeddings", "type_vocab_size") and flat[k] != v}
            if differing:
                details = ", ".join(f"{k}: config {a}, checkpoint {b}" for k, (a, b) in differing.items())
                raise ConversionError(f"{self.prefix}: the --config does not match the checkpoint ({details}).")
            merged = {**flat, **values}
        try:
            return PretrainingConfig.from_dict(merged, source=self.prefix)
        except ConfigError as error:
            raise ConversionError(str(error)) from None


def _count_layers(shapes: dict, prefix: str) -> int:
    found = {int(m.group(1)) for name in shapes if (m := re.match(re.escape(prefix) + r"(\d+)/", name))}
    if not found or found != set(range(len(found))):
        raise ConversionError(f"the checkpoint's {prefix}<i> layers are not numbered 0..N-1 ({sorted(found)}).")
    return len(found)
