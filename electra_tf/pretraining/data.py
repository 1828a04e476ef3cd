"""What a pre-training run reads: its data (the bundled Wikipedia sample, built once; a
build_data folder; or raw text packed on the fly), the tokenizer, and the text its evaluations
read (`evaluation.EvaluationText`)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from electra_tf.data.builder import BuildRunner, ShardSpec, build_shards
from electra_tf.data.shards import check_shards, held_out_file, metadata_vocab_file, read_metadata, resolve_data
from electra_tf.data.tokenization import ElectraTokenizer
from electra_tf.data.vocabulary import MIN_VOCAB_SIZE, VocabularySpec, build_vocabulary
from electra_tf.data.vocabulary_files import read_tokenizer_settings, read_vocabulary, vocabulary_files
from electra_tf.pretraining.evaluation import EvaluationText
from electra_tf.training.workers import wait_for_chief
from electra_tf.utils.errors import RunError
from electra_tf.utils.run_dir import ModelDir, bundled_data_dir

BUNDLED_SAMPLE_SHARDS = 8


@dataclasses.dataclass(frozen=True)
class DataSource:
    """What the command names. `data` None: the bundled Wikipedia sample; `vocab` None: the
    data's vocabulary (or one learned from raw text into the model_dir); `text_field`: the field
    of raw record inputs (JSON Lines, Parquet, Arrow) that holds the text; `eval_data`: a
    build_data folder of held-out text (None: the data's held-out split)."""

    data: tuple[str, ...] | None = None
    vocab: str | None = None
    text_field: str = "text"
    eval_data: str | None = None


@dataclasses.dataclass(frozen=True)
class PretrainingData:
    kind: str  # "records" (a build_data folder) or "raw" (text packed on the fly)
    location: object  # the folder, or the list of raw inputs
    tokenizer: object  # data.tokenization.ElectraTokenizer
    description: str


def prepare_data(source: DataSource, max_seq_length: int, model_dir: ModelDir, role) -> PretrainingData:
    if source.data is None:
        kind, location = "records", str(_bundled_sample(max_seq_length, role))
    else:
        kind, paths = resolve_data(source.data[0])
        location = paths[0] if kind == "records" else list(source.data)
    if kind == "records":
        metadata = read_metadata(location)
        vocab = source.vocab or metadata_vocab_file(location, metadata)
        description = f"{location} ({metadata['examples']:,} packed examples)"
    else:
        if role.is_multi_worker:
            raise RunError("a multi-worker run reads build_data shards, which split between workers by file "
                           "and resume exactly: build them first (python -m electra_tf.build_data --input ... "
                           "--num_shards N, N at least the number of workers) and pass that folder to --data.")
        vocab = source.vocab or str(model_dir.vocab)
        if not Path(vocab).is_file():
            learned = build_vocabulary(list(location), Path(vocab), VocabularySpec(text_field=source.text_field))
            _refuse_too_little_text(learned, location, Path(vocab))
        description = f"raw text, packed on the fly: {' '.join(location)}"
    return PretrainingData(kind, location, ElectraTokenizer(vocab), description)


def _refuse_too_little_text(vocabulary: list, location, written: Path) -> None:
    """Raw text too small to learn a vocabulary from is refused, naming what a run needs (the
    vocabulary learned from it removed, so a rerun with more text learns afresh)."""
    if len(vocabulary) >= MIN_VOCAB_SIZE:
        return
    for path in vocabulary_files(written):
        path.unlink(missing_ok=True)
    raise RunError(f"{' '.join(map(str, location))} holds too little text to pre-train on: the vocabulary learned "
                   f"from it has {len(vocabulary)} tokens, and a run needs at least {MIN_VOCAB_SIZE} (in practice "
                   "thousands of sentences: the bundled Wikipedia sample is 2,000 articles). Give more text, a "
                   "vocabulary learned elsewhere (--vocab; build_vocab --input YOUR_TEXT --with_sample), or leave out "
                   "--data to pre-train on the bundled sample.")


def _bundled_sample(max_seq_length: int, role) -> Path:
    data_dir = bundled_data_dir(max_seq_length)
    if not role.is_chief:
        wait_for_chief(data_dir / "metadata.json", "the bundled sample's shards")
    elif not (data_dir / "metadata.json").is_file():
        print(f"Preparing the bundled Wikipedia sample in {data_dir} (once; later runs reuse it) ...", flush=True)
        build_shards(data_dir, spec=ShardSpec(max_seq_length, BUNDLED_SAMPLE_SHARDS),
                     runner=BuildRunner(num_workers=min(BUNDLED_SAMPLE_SHARDS, os.cpu_count() or 1)), overwrite=True)
    return data_dir


def check_same_vocabulary(model_dir: ModelDir, tokenizer) -> None:
    """A run continues with the vocabulary, and the casing, it started with."""
    settings = read_tokenizer_settings(model_dir.vocab)
    if read_vocabulary(model_dir.vocab) != tokenizer.vocabulary:
        raise RunError(f"{model_dir.vocab} is not the vocabulary of the data ({tokenizer.vocabulary_path}): the "
                       "run was started with other data. Use a new --model_dir, or the data it was started with.")
    if settings != tokenizer.settings:
        raise RunError(f"{model_dir.path} tokenizes {settings.describe()}, but the data's vocabulary "
                       f"({tokenizer.vocabulary_path}) is read {tokenizer.settings.describe()}. Use a new "
                       "--model_dir, or data built with the run's casing.")


def evaluation_text(source: DataSource, data: PretrainingData, max_seq_length: int):
    """What the run evaluates on: --eval_data's held-out split (or its shards), else the data's
    held-out split, else training text masked afresh (said so wherever the metrics are shown)."""
    if source.eval_data:
        kind, paths = resolve_data(source.eval_data)
        if kind != "records":
            raise RunError(f"--eval_data {source.eval_data}: give a build_data folder (its held-out split, or its "
                           "shards, are the evaluation's text).")
        folder = paths[0]
        split = held_out_file(folder, data.tokenizer, max_seq_length)
        if split:
            return EvaluationText([split], f"held-out text ({split})")
        if data.kind == "records" and Path(folder).resolve() == Path(data.location).resolve():
            raise RunError(f"--eval_data {folder} is the training data, which has no held-out split: rebuild it "
                           "with build_data --held_out 0.01, or name a folder of other text.")
        shards = check_shards(folder, data.tokenizer, max_seq_length)
        return EvaluationText(shards, f"held-out text ({folder}, {read_metadata(folder)['examples']:,} examples)")
    if data.kind == "records":
        split = held_out_file(data.location, data.tokenizer, max_seq_length)
        if split:
            entry = read_metadata(data.location)["held_out"]
            documents = f"{entry['documents']:,} document{'s' if entry['documents'] != 1 else ''}"
            return EvaluationText([split], f"held-out text ({documents}, {entry['examples']:,} examples, never "
                                           "trained on)")
    return EvaluationText(None, "training text masked afresh (the data has no held-out split: build_data "
                                "--held_out 0.01 sets one aside)")
