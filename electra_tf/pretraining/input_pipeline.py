"""The pre-training input pipeline: shards (or raw text) -> masked, fixed-shape batches.

  files -> shard by worker (by file) -> shuffle files -> interleave reads -> shuffle records
  -> repeat -> batch -> parse and pad, a batch at a time (fixed shape) -> mask (seeded per
  batch) -> prefetch

Everything is deterministic for a seed; the masking (`masking.mask_tokens`) runs in the
graph, per batch. Raw text or dump paths are accepted too (`raw_text_dataset`): they are
tokenized and packed on the fly in this process, for quick experiments.
"""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf

from electra_tf.data.corpus import InputError, Skips, expand_inputs, iter_raw_documents, to_sentences
from electra_tf.data.packing import ExamplePacker, pack_sentences
from electra_tf.data.shards import DataError, check_shards, parse_padded_batch
from electra_tf.data.tokenization import ElectraTokenizer
from electra_tf.pretraining.config import PretrainingConfig
from electra_tf.pretraining.masking import mask_tokens

# Records are shuffled in a buffer of 1,000 after the shard files are shuffled and interleaved
# (8 files at a time, 16 records from each in turn). The official code shuffles a buffer of 100
# (google-research/electra, pretrain/pretrain_data.py); 1,000 mixes more: a batch draws from about
# 60 interleaved blocks. A deliberate bound, not a larger one: the buffer is part of the input
# iterator's state, serialized at every checkpoint: ten times the records made a save of the
# tiny preset six times longer.
SHUFFLE_BUFFER = 1_000

# The input functions hold no Python control flow on tensors: tf.data traces them as written,
# without AutoGraph's source conversion (a cost paid in every process that builds the pipeline).
_unconverted = tf.autograph.experimental.do_not_convert


def pretraining_dataset(data_dir: str | Path, config: PretrainingConfig, tokenizer: ElectraTokenizer,
                        batch_size: int, seed: int = 0, input_context=None,
                        repeat: bool = True) -> tf.data.Dataset:
    """Masked, fixed-shape batches from a build_data folder.

    `input_context` (a `tf.distribute.InputContext`) shards files across input pipelines
    (workers); `batch_size` is then this pipeline's batch.
    """
    files = files_for_pipeline(check_shards(data_dir, tokenizer, config.run.max_seq_length),
                               input_context, data_dir)
    file_dataset = tf.data.Dataset.from_tensor_slices(files)
    if repeat:
        file_dataset = file_dataset.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    records = file_dataset.interleave(
        tf.data.TFRecordDataset, cycle_length=min(len(files), 8), block_length=16,
        num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    # Shuffled and batched as serialized records, then parsed and padded a batch at a time:
    # the same batches as parsing example by example (parsing is a pure function), at several
    # times the rate (benchmarks/input_pipeline.py).
    if repeat:
        records = records.shuffle(SHUFFLE_BUFFER, seed=seed).repeat()
    return _masked(_parsed(records, batch_size, config.run.max_seq_length), config, tokenizer, seed)


def evaluation_dataset(files: list[str], config: PretrainingConfig, tokenizer: ElectraTokenizer, batch_size: int,
                       seed: int = 0, input_context=None) -> tf.data.Dataset:
    """Masked, fixed-shape batches of held-out examples, in file order, repeated when the files
    hold fewer than the batches taken (each pass masked afresh). In a multi-worker run each
    worker reads every count-th example."""
    records = tf.data.TFRecordDataset(files)
    if input_context is not None and input_context.num_input_pipelines > 1:
        records = records.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    return _masked(_parsed(records.repeat(), batch_size, config.run.max_seq_length), config, tokenizer, seed)


def files_for_pipeline(files: list[str], input_context, data_dir) -> list[str]:
    """This input pipeline's share of the shards: every count-th file, disjoint across workers."""
    if input_context is None or input_context.num_input_pipelines == 1:
        return files
    count = input_context.num_input_pipelines
    if len(files) < count:
        raise DataError(f"{data_dir} has {len(files)} shard(s) for {count} workers: each "
                        f"worker needs its own files. Rebuild with --num_shards >= {count}.")
    return files[input_context.input_pipeline_id::count]


def _parsed(records, batch_size, length):
    """Serialized records -> fixed-shape batches of `batch_size`, parsed and padded a batch at a time."""
    return records.batch(batch_size, drop_remainder=True).map(
        _unconverted(lambda serialized: parse_padded_batch(serialized, length)), num_parallel_calls=tf.data.AUTOTUNE)


def _to_batches(examples, config, tokenizer, batch_size, seed, repeat):
    if repeat:
        examples = examples.shuffle(SHUFFLE_BUFFER, seed=seed).repeat()
    length = config.run.max_seq_length
    examples = examples.map(_unconverted(lambda example: _pad(example, length)),
                            num_parallel_calls=tf.data.AUTOTUNE)
    batches = examples.batch(batch_size, drop_remainder=True)
    return _masked(batches, config, tokenizer, seed)


def _masked(batches, config, tokenizer, seed):
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


def masking_function(config: PretrainingConfig, tokenizer: ElectraTokenizer):
    """(batch, seed) -> batch with ELECTRA's masking fields, for `Dataset.map`."""
    continuations = tf.constant(tokenizer.word_continuations, tf.bool) if config.objective.whole_word_masking else None

    @_unconverted
    def mask(batch, seed):
        return {**batch, **mask_tokens(
            batch["token_ids"], batch["padding_mask"], seed,
            mask_prob=config.objective.mask_prob, max_predictions=config.num_masked_predictions,
            mask_token_id=tokenizer.mask_id, special_token_ids=tokenizer.special_token_ids,
            mask_token_rate=config.objective.mask_token_rate, random_token_rate=config.objective.random_token_rate,
            vocab_size=tokenizer.vocabulary_size, word_continuations=continuations)}
    return mask


def raw_text_dataset(inputs: list[str], config: PretrainingConfig, tokenizer: ElectraTokenizer,
                     batch_size: int, seed: int = 0, repeat: bool = True, text_field: str = "text") -> tf.data.Dataset:
    """Masked batches straight from text files, wiki dumps or record files (their `text_field`),
    tokenized and packed on the fly."""
    skips = Skips()
    files = expand_inputs(inputs, skips)
    if not files:
        raise InputError(f"no input files in {inputs} ({skips.describe()}).")
    packer = ExamplePacker(config.run.max_seq_length, tokenizer.cls_id, tokenizer.sep_id)

    def generate():
        for path in files:
            for document in iter_raw_documents(path, skips, text_field):
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
