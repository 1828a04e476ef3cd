"""Pre-training data on disk (sharded TFRecords + metadata.json) and the tf.data pipeline.

A data folder, written by `python -m electra_tf.build_data`, holds
`shard-00000-of-00008.tfrecord`, ... and `metadata.json` (vocabulary fingerprint, sequence
length, counts, shard sizes). Records hold unpadded `token_ids` and `segment_ids`; the
pipeline pads them, derives `padding_mask`, and applies ELECTRA's dynamic masking per batch:

  files -> shard by worker (by file) -> shuffle files -> interleave reads -> shuffle examples
  -> repeat -> pad to max_seq_length -> batch (fixed shape) -> mask (seeded per batch)
  -> prefetch

Everything is deterministic for a seed. The metadata is checked before reading: a different
vocabulary or sequence length, or a shard whose size changed (truncated, replaced), is an
error naming the file, not silent garbage.

Raw text or dump paths are accepted too (`raw_text_dataset`): they are tokenized and packed on
the fly in this process, for quick experiments.
"""

from __future__ import annotations

import json
from pathlib import Path

import tensorflow as tf

from electra_tf.config import ElectraConfig
from electra_tf.files import file_sha256
from electra_tf.masking import mask_tokens
from electra_tf.tokenization import ElectraTokenizer

METADATA_FILE = "metadata.json"
FORMAT = "electra_tf.pretraining_shards.v1"
SHUFFLE_BUFFER = 10_000


class DataError(ValueError):
    """Pre-training data that cannot be used as asked (mismatch, missing, corrupt)."""


# --- records ------------------------------------------------------------------------------------

def serialize_example(token_ids: list[int], segment_ids: list[int]) -> bytes:
    feature = {
        "token_ids": tf.train.Feature(int64_list=tf.train.Int64List(value=token_ids)),
        "segment_ids": tf.train.Feature(int64_list=tf.train.Int64List(value=segment_ids)),
    }
    example = tf.train.Example(features=tf.train.Features(feature=feature))
    # Map entries are otherwise ordered per process (hash seeds): same data, different bytes.
    return example.SerializeToString(deterministic=True)


def _parse(serialized):
    features = tf.io.parse_single_example(serialized, {
        "token_ids": tf.io.VarLenFeature(tf.int64),
        "segment_ids": tf.io.VarLenFeature(tf.int64),
    })
    return {key: tf.cast(tf.sparse.to_dense(value), tf.int32) for key, value in features.items()}


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


# --- the pipeline -------------------------------------------------------------------------------

def pretraining_dataset(data_dir: str | Path, config: ElectraConfig, tokenizer: ElectraTokenizer,
                        batch_size: int, seed: int = 0, input_context=None,
                        repeat: bool = True) -> tf.data.Dataset:
    """Masked, fixed-shape batches from a build_data folder.

    `input_context` (a `tf.distribute.InputContext`) shards files across input pipelines
    (workers); `batch_size` is then this pipeline's batch.
    """
    files = files_for_pipeline(check_shards(data_dir, tokenizer, config.max_seq_length),
                               input_context, data_dir)
    file_dataset = tf.data.Dataset.from_tensor_slices(files)
    if repeat:
        file_dataset = file_dataset.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    examples = file_dataset.interleave(
        tf.data.TFRecordDataset, cycle_length=min(len(files), 8), block_length=16,
        num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    examples = examples.map(_parse, num_parallel_calls=tf.data.AUTOTUNE)
    return _to_batches(examples, config, tokenizer, batch_size, seed, repeat)


def files_for_pipeline(files: list[str], input_context, data_dir) -> list[str]:
    """This input pipeline's share of the shards: every count-th file, disjoint across workers."""
    if input_context is None or input_context.num_input_pipelines == 1:
        return files
    count = input_context.num_input_pipelines
    if len(files) < count:
        raise DataError(f"{data_dir} has {len(files)} shard(s) for {count} workers: each "
                        f"worker needs its own files. Rebuild with --num_shards >= {count}.")
    return files[input_context.input_pipeline_id::count]


def _to_batches(examples, config, tokenizer, batch_size, seed, repeat):
    if repeat:
        examples = examples.shuffle(SHUFFLE_BUFFER, seed=seed).repeat()
    length = config.max_seq_length
    examples = examples.map(lambda example: _pad(example, length),
                            num_parallel_calls=tf.data.AUTOTUNE)
    batches = examples.batch(batch_size, drop_remainder=True)
    # One seed per batch from a seeded stream: masking is reproducible, and resumable with the
    # iterator state.
    seeds = tf.data.Dataset.random(seed=seed).batch(2)
    masker = masking_function(config, tokenizer)
    batches = tf.data.Dataset.zip(batches, seeds).map(masker, num_parallel_calls=tf.data.AUTOTUNE)
    return batches.prefetch(tf.data.AUTOTUNE)


def _pad(example, length):
    token_ids = example["token_ids"][:length]
    segment_ids = example["segment_ids"][:length]
    pad = length - tf.shape(token_ids)[0]
    return {
        "token_ids": tf.ensure_shape(tf.pad(token_ids, [[0, pad]]), [length]),
        "segment_ids": tf.ensure_shape(tf.pad(segment_ids, [[0, pad]]), [length]),
        "padding_mask": tf.ensure_shape(
            tf.pad(tf.ones_like(token_ids), [[0, pad]]), [length]),
    }


def masking_function(config: ElectraConfig, tokenizer: ElectraTokenizer):
    """(batch, seed) -> batch with ELECTRA's masking fields, for `Dataset.map`."""
    def mask(batch, seed):
        return {**batch, **mask_tokens(
            batch["token_ids"], batch["padding_mask"], seed,
            mask_prob=config.mask_prob, max_predictions=config.num_masked_predictions,
            mask_token_id=tokenizer.mask_id, special_token_ids=tokenizer.special_token_ids,
            mask_token_rate=config.mask_token_rate, random_token_rate=config.random_token_rate,
            vocab_size=tokenizer.vocabulary_size)}
    return mask


def raw_text_dataset(inputs: list[str], config: ElectraConfig, tokenizer: ElectraTokenizer,
                     batch_size: int, seed: int = 0, repeat: bool = True) -> tf.data.Dataset:
    """Masked batches straight from text files or wiki dumps, tokenized and packed on the fly."""
    from electra_tf.corpus import InputError, Skips, expand_inputs, iter_raw_documents, to_sentences
    from electra_tf.packing import ExamplePacker, pack_sentences

    skips = Skips()
    files = expand_inputs(inputs, skips)
    if not files:
        raise InputError(f"no input files in {inputs} ({skips.describe()}).")
    packer = ExamplePacker(config.max_seq_length, tokenizer.cls_id, tokenizer.sep_id)

    def generate():
        for path in files:
            for document in iter_raw_documents(path, skips):
                sentences = to_sentences(document, skips)
                if not sentences:
                    continue
                for ids, segments in pack_sentences(packer, tokenizer, sentences, seed,
                                                    document.source, document.index):
                    yield {"token_ids": ids, "segment_ids": segments}

    spec = {"token_ids": tf.TensorSpec([None], tf.int32),
            "segment_ids": tf.TensorSpec([None], tf.int32)}
    examples = tf.data.Dataset.from_generator(generate, output_signature=spec)
    return _to_batches(examples, config, tokenizer, batch_size, seed, repeat)
