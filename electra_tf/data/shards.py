"""The pre-training shard format, written and read here only.

A data folder, written by `python -m electra_tf.build_data` (`data/builder.py`), holds
`shard-00000-of-00008.tfrecord`, ... and `metadata.json` (vocabulary fingerprint, sequence
length, counts, shard sizes and sha256). Records hold unpadded `token_ids` and `segment_ids`
(`serialize_example`); `parse_padded_batch` reads a batch of them back, cut or padded to the
sequence length; masking happens later, in the input pipeline (`pretraining/input_pipeline.py`).

The metadata is checked before reading: a different vocabulary or sequence length, or a shard
whose size changed (truncated, replaced), is an error naming the file, not silent garbage.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from electra_tf.data.vocabulary_files import BASIC_TOKENIZATION, V1_RULE, WORDPIECE, TokenizerSettings
from electra_tf.utils.errors import ElectraError
from electra_tf.utils.files import file_sha256

if TYPE_CHECKING:  # the tokenizer is TensorFlow's; this module reads files without it
    from electra_tf.data.tokenization import ElectraTokenizer

METADATA_FILE = "metadata.json"
FORMAT = "electra_tf.pretraining_shards.v1"


class DataError(ElectraError):
    """Pre-training data that cannot be used as asked (mismatch, missing, corrupt)."""


# --- records ------------------------------------------------------------------------------------

def serialize_example(token_ids: list[int], segment_ids: list[int]) -> bytes:
    import tensorflow as tf  # here, not at import: a build's worker processes start it quietly first

    feature = {
        "token_ids": tf.train.Feature(int64_list=tf.train.Int64List(value=token_ids)),
        "segment_ids": tf.train.Feature(int64_list=tf.train.Int64List(value=segment_ids)),
    }
    example = tf.train.Example(features=tf.train.Features(feature=feature))
    # Map entries are otherwise ordered per process (hash seeds): same data, different bytes.
    return example.SerializeToString(deterministic=True)


def parse_padded_batch(serialized, length: int):
    """A batch of serialized examples -> token_ids, segment_ids and padding_mask [batch, length]
    (int32, zero-padded, cut to `length`). One vectorized parse per batch: parsing example by
    example took most of the pipeline's time."""
    import tensorflow as tf

    features = tf.io.parse_example(serialized, {"token_ids": tf.io.VarLenFeature(tf.int64),
                                                "segment_ids": tf.io.VarLenFeature(tf.int64)})
    batch = tf.shape(serialized, out_type=tf.int64)[0]
    shape = [serialized.shape[0], length]
    dense = {}
    for key, value in features.items():
        cut = tf.sparse.reset_shape(tf.sparse.slice(value, [0, 0], [batch, length]), [batch, length])
        dense[key] = tf.ensure_shape(tf.cast(tf.sparse.to_dense(cut), tf.int32), shape)
    real_tokens = tf.math.bincount(tf.cast(features["token_ids"].indices[:, 0], tf.int32),
                                   minlength=tf.cast(batch, tf.int32), maxlength=tf.cast(batch, tf.int32))
    dense["padding_mask"] = tf.ensure_shape(tf.cast(
        tf.range(length)[tf.newaxis, :] < tf.minimum(real_tokens, length)[:, tf.newaxis], tf.int32), shape)
    return dense


HELD_OUT_FILE = "held_out.tfrecord"  # the held-out split's examples (build_data --held_out)


def shard_name(index: int, count: int) -> str:
    return f"shard-{index:05d}-of-{count:05d}.tfrecord"


# --- metadata -----------------------------------------------------------------------------------

def read_metadata(data_dir: str | Path) -> dict:
    path = Path(data_dir) / METADATA_FILE
    if not path.is_file():
        raise DataError(f"{path} is missing: {data_dir} was not written by "
                        "`python -m electra_tf.build_data` (or the build did not finish).")
    try:
        metadata = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise DataError(f"{path} is not valid JSON ({error}); rebuild with --overwrite.") from None
    if metadata.get("format") != FORMAT:
        raise DataError(f"{path}: unknown format {metadata.get('format')!r}, expected {FORMAT!r}.")
    return metadata


def metadata_vocab_file(data_dir: str | Path, metadata: dict) -> str:
    """The vocabulary a data folder was built with: absolute when it was given to the build,
    relative to the folder when the build learned it (then it is the folder's own vocab.txt;
    folders built before paths were stored relative name it by the build's working directory)."""
    path = Path(metadata["vocab_file"])
    if path.is_absolute():
        return str(path)
    inside = Path(data_dir) / path
    return str(inside if inside.is_file() else Path(data_dir) / path.name)


def metadata_tokenizer_settings(metadata: dict):
    """How the data was tokenized (metadata.json keeps `TokenizerSettings`' fields; data built
    before cased vocabularies only says lowercase: true, before SentencePiece no `tokenizer`, before
    BERT's word splitting no `basic_tokenization`)."""
    lowercase, kind = metadata.get("lowercase", True), metadata.get("tokenizer", WORDPIECE)
    if kind != WORDPIECE:  # a SentencePiece model splits text itself: its settings carry the default rule
        return TokenizerSettings.sentencepiece(lowercase)
    return TokenizerSettings(lowercase, metadata.get("strip_accents", lowercase), metadata.get("split_cjk", True),
                             kind, metadata.get(BASIC_TOKENIZATION, V1_RULE))


def check_shards(data_dir: str | Path, tokenizer: ElectraTokenizer, max_seq_length: int) -> list[str]:
    """The shard paths of `data_dir`, after checking them against its metadata."""
    data_dir = Path(data_dir)
    metadata = read_metadata(data_dir)
    if metadata["vocab_fingerprint"] != tokenizer.fingerprint:
        raise DataError(
            f"{data_dir} was built with a different vocabulary ({metadata.get('vocab_file')}, "
            f"{metadata['vocab_size']} tokens) than the one in use "
            f"({tokenizer.vocabulary_path or 'in memory'}, {tokenizer.vocabulary_size} tokens). "
            "Use that vocabulary, or rebuild the data with this one.")
    built_with = metadata_tokenizer_settings(metadata)
    if built_with != tokenizer.settings:
        raise DataError(
            f"{data_dir} was built {built_with.describe()}, but its vocabulary is read "
            f"{tokenizer.settings.describe()} ({tokenizer.vocabulary_path or 'in memory'}; the kind and casing "
            "come from the tokenizer_config.json beside vocab.txt). Rebuild the data with this vocabulary, or use the "
            "vocabulary folder the data was built from.")
    if metadata["max_seq_length"] != max_seq_length:
        raise DataError(
            f"{data_dir} holds examples of length {metadata['max_seq_length']}, but the model "
            f"uses max_seq_length={max_seq_length}. Set max_seq_length={metadata['max_seq_length']} "
            "or rebuild the data.")
    paths = []
    for shard in metadata["shards"]:
        path = data_dir / shard["file"]
        if not path.is_file():
            raise DataError(f"shard {path} listed in {METADATA_FILE} is missing; rebuild with "
                            "`python -m electra_tf.build_data ... --overwrite`.")
        size = path.stat().st_size
        if size != shard["bytes"]:
            raise DataError(f"shard {path} is {size:,} bytes but was written as {shard['bytes']:,}: "
                            "it is truncated or was modified. Rebuild with --overwrite.")
        paths.append(str(path))
    return paths


def held_out_file(data_dir: str | Path, tokenizer: ElectraTokenizer, max_seq_length: int) -> str | None:
    """The held-out split's examples in `data_dir` (build_data --held_out), checked as the shards
    are (`check_shards`), or None when the folder has no split or nothing fell in it."""
    data_dir = Path(data_dir)
    check_shards(data_dir, tokenizer, max_seq_length)
    entry = read_metadata(data_dir).get("held_out")
    if not entry or not entry["examples"]:
        return None
    path = data_dir / entry["file"]
    if not path.is_file() or path.stat().st_size != entry["bytes"]:
        raise DataError(f"the held-out split {path} listed in {METADATA_FILE} is missing or was modified "
                        f"({entry['bytes']:,} bytes when written). Rebuild with --overwrite.")
    return str(path)


def resolve_data(data: str) -> tuple[str, list[str]]:
    """("records", shard folder) or ("raw", text/dump files) for a --data argument."""
    path = Path(data)
    if path.is_dir() and (path / METADATA_FILE).is_file():
        return "records", [str(path)]
    if path.suffix == ".tfrecord" or "tfrecord" in path.name:
        folder = path.parent
        if not (folder / METADATA_FILE).is_file():
            raise DataError(f"{data}: TFRecords need the {METADATA_FILE} that build_data writes "
                            f"beside them, and {folder} has none.")
        return "records", [str(folder)]
    return "raw", [data]


def explain_read_error(error: Exception, data_dir: str | Path) -> DataError:
    """A DataError naming the corrupt shard(s) behind a read-time `tf.errors.DataLossError`.

    TensorFlow's message ("corrupted record at 99951") does not say which file; the sha256
    of every shard in metadata.json does.
    """
    data_dir = Path(data_dir)
    corrupt = [shard["file"] for shard in read_metadata(data_dir)["shards"]
               if file_sha256(data_dir / shard["file"]) != shard["sha256"]]
    where = ", ".join(corrupt) if corrupt else "no shard differs from metadata.json"
    return DataError(f"reading {data_dir} failed ({str(error).strip().splitlines()[-1][:200]}): "
                     f"corrupt shard(s): {where}. Rebuild with `python -m electra_tf.build_data "
                     "... --overwrite`.")
