import json
import shutil

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.pretraining.config import PretrainingConfig
from electra_tf.data.shards import DataError, explain_read_error, resolve_data
from electra_tf.data.tokenization import ElectraTokenizer
from electra_tf.pretraining.input_pipeline import files_for_pipeline, pretraining_dataset, raw_text_dataset

SEQ = 32


@pytest.fixture(scope="module")
def tokenizer(small_vocab):
    return ElectraTokenizer(small_vocab)


@pytest.fixture(scope="module")
def config(tokenizer):
    return PretrainingConfig.load("electra_tiny", {"vocab_size": tokenizer.vocabulary_size, "max_seq_length": SEQ})


@pytest.fixture(scope="module")
def data_dir(corpus, small_vocab, tmp_path_factory):
    return corpus.build_test_shards(tmp_path_factory.mktemp("pipeline"), small_vocab, SEQ, num_shards=4, repeat=20)


def take(dataset, count):
    return [{k: v.numpy() for k, v in batch.items()} for batch in dataset.take(count)]


def test_fixed_shape_masked_batches(data_dir, config, tokenizer):
    [batch] = take(pretraining_dataset(data_dir, config, tokenizer, batch_size=8, seed=1), 1)
    n = config.num_masked_predictions
    for key, shape in [("token_ids", (8, SEQ)), ("segment_ids", (8, SEQ)), ("padding_mask", (8, SEQ)),
                       ("mask_positions", (8, n)), ("mask_ids", (8, n)), ("mask_weights", (8, n))]:
        assert batch[key].shape == shape and batch[key].dtype == np.int32, key
    assert (batch["token_ids"][batch["padding_mask"] == 0] == tokenizer.pad_id).all()
    assert (batch["token_ids"][:, 0] == tokenizer.cls_id).all()
    rows, slots = np.nonzero(batch["mask_weights"])
    positions = batch["mask_positions"][rows, slots]
    assert (batch["padding_mask"][rows, positions] == 1).all()
    masked = batch["token_ids"][rows, positions]
    assert ((masked == tokenizer.mask_id) | (masked == batch["mask_ids"][rows, slots])).all()


def test_deterministic_with_a_seed(data_dir, config, tokenizer):
    first = take(pretraining_dataset(data_dir, config, tokenizer, batch_size=4, seed=3), 5)
    second = take(pretraining_dataset(data_dir, config, tokenizer, batch_size=4, seed=3), 5)
    other = take(pretraining_dataset(data_dir, config, tokenizer, batch_size=4, seed=4), 5)
    for a, b in zip(first, second):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    assert any((a["token_ids"] != c["token_ids"]).any() for a, c in zip(first, other))


def test_workers_read_disjoint_files(data_dir, config, tokenizer):
    files = [f"shard-{i}" for i in range(7)]
    shares = [files_for_pipeline(files, tf.distribute.InputContext(3, worker, 1), data_dir)
              for worker in range(3)]
    assert sorted(sum(shares, [])) == sorted(files)
    assert all(not set(a) & set(b) for i, a in enumerate(shares) for b in shares[i + 1:])

    # Through the pipeline: two workers together read every example exactly once.
    def examples(context):
        dataset = pretraining_dataset(data_dir, config, tokenizer, batch_size=1, input_context=context,
                                      repeat=False)
        return sorted(tuple(b["segment_ids"][0]) + tuple(b["padding_mask"][0]) for b in take(dataset, -1))

    halves = examples(tf.distribute.InputContext(2, 0, 1)) + examples(tf.distribute.InputContext(2, 1, 1))
    assert sorted(halves) == examples(None)

    context = tf.distribute.InputContext(num_input_pipelines=5, input_pipeline_id=0)
    with pytest.raises(DataError, match="4 shard\\(s\\) for 5 workers.*--num_shards >= 5"):
        pretraining_dataset(data_dir, config, tokenizer, batch_size=1, input_context=context)


def test_mismatched_vocabulary_or_length_is_an_error(data_dir, config, tokenizer, tmp_path):
    other_vocab = tmp_path / "vocab.txt"
    other_vocab.write_text("\n".join(tokenizer.vocabulary + ["extra"]) + "\n")
    with pytest.raises(DataError, match="different vocabulary"):
        pretraining_dataset(data_dir, config, ElectraTokenizer(other_vocab), batch_size=2)
    with pytest.raises(DataError, match="length 32.*max_seq_length=64"):
        pretraining_dataset(data_dir, config.replace(max_seq_length=64), tokenizer, batch_size=2)


def test_truncated_shard_is_caught_before_reading(data_dir, config, tokenizer, tmp_path):
    copy = tmp_path / "data"
    shutil.copytree(data_dir, copy)
    shard = sorted(copy.glob("shard-*"))[1]
    shard.write_bytes(shard.read_bytes()[:-40])
    with pytest.raises(DataError, match=f"{shard.name} is .* bytes but was written as .*truncated"):
        pretraining_dataset(copy, config, tokenizer, batch_size=2)


def test_corrupt_shard_at_read_time_is_named(data_dir, config, tokenizer, tmp_path):
    copy = tmp_path / "data"
    shutil.copytree(data_dir, copy)
    shard = sorted(copy.glob("shard-*"))[2]
    data = bytearray(shard.read_bytes())
    data[len(data) // 2: len(data) // 2 + 8] = b"XXXXXXXX"  # same size, broken record
    shard.write_bytes(bytes(data))
    dataset = pretraining_dataset(copy, config, tokenizer, batch_size=2, repeat=False)
    with pytest.raises(tf.errors.DataLossError) as error:
        take(dataset, -1)
    explained = explain_read_error(error.value, copy)
    assert shard.name in str(explained) and "--overwrite" in str(explained)


def test_missing_metadata(tmp_path, config, tokenizer):
    (tmp_path / "shard-00000-of-00001.tfrecord").write_bytes(b"")
    with pytest.raises(DataError, match="metadata.json"):
        resolve_data(str(tmp_path / "shard-00000-of-00001.tfrecord"))
    with pytest.raises(DataError, match="metadata.json is missing"):
        pretraining_dataset(tmp_path, config, tokenizer, batch_size=2)
    (tmp_path / "metadata.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(DataError, match="unknown format"):
        pretraining_dataset(tmp_path, config, tokenizer, batch_size=2)


def test_raw_text_on_the_fly(corpus, tmp_path, config, tokenizer):
    text = corpus.write_sentence_file(tmp_path / "raw.txt", repeat=3)
    assert resolve_data(str(text)) == ("raw", [str(text)])
    batches = take(raw_text_dataset([str(text)], config, tokenizer, batch_size=4, seed=0), 3)
    assert len(batches) == 3 and batches[0]["token_ids"].shape == (4, SEQ)
    assert batches[0]["mask_weights"].sum() > 0
