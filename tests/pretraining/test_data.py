"""What a pre-training run reads: a build_data folder with its vocabulary, the text it evaluates on
(the held-out split, --eval_data, or training text masked afresh, said so), and a run kept on
the vocabulary it started with."""

import pytest

from electra_tf.data.tokenization import ElectraTokenizer
from electra_tf.data.vocabulary_files import write_vocabulary
from electra_tf.pretraining.data import DataSource, check_same_vocabulary, evaluation_text, prepare_data
from electra_tf.runtime.cluster import WorkerRole
from electra_tf.utils.errors import RunError
from electra_tf.utils.run_dir import ModelDir


def test_a_build_data_folder_brings_its_vocabulary_and_says_what_is_evaluated(corpus, small_vocab, tmp_path):
    shards = corpus.build_test_shards(tmp_path, small_vocab, 32, num_shards=1, repeat=2)
    data = prepare_data(DataSource((str(shards),)), 32, ModelDir(tmp_path / "model"), WorkerRole())
    assert data.kind == "records" and data.tokenizer.vocabulary_size > 100 and "packed examples" in data.description
    text = evaluation_text(DataSource((str(shards),)), data, 32)
    assert text.files is None and "training text masked afresh" in text.description
    with pytest.raises(RunError, match="--eval_data .* is the training data, which has no held-out split"):
        evaluation_text(DataSource((str(shards),), eval_data=str(shards)), data, 32)


def test_a_run_continues_with_the_vocabulary_it_started_with(small_vocab, tmp_path):
    model_dir = ModelDir(tmp_path / "model")
    tokenizer = ElectraTokenizer(small_vocab)
    tokenizer.save(model_dir.vocab)
    check_same_vocabulary(model_dir, tokenizer)
    write_vocabulary(model_dir.vocab, tokenizer.vocabulary[:-1])
    with pytest.raises(RunError, match="is not the vocabulary of the data"):
        check_same_vocabulary(model_dir, tokenizer)
