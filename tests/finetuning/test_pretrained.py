"""Where a discriminator can come from, and the errors when it cannot."""

import json

import numpy as np
import pytest

from electra_tf.models.backbone import BackboneConfig
from electra_tf.pretraining.config import PretrainingConfig
from electra_tf.utils.errors import PretrainedError
from electra_tf.models.encoders import build_discriminator, model_weights
from electra_tf.finetuning.pretrained import load_pretrained, pretrained_hidden_size

VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "river", "bees", "library"]


def tiny_config():
    return PretrainingConfig.load("electra_tiny").replace(vocab_size=len(VOCABULARY), num_layers=1, hidden_size=32,
                                                      num_heads=1, intermediate_size=64, embedding_size=32)


def test_a_bare_discriminator_keras_file_with_its_config_and_vocabulary(tmp_path):
    config = tiny_config()
    discriminator = build_discriminator(config.model)
    discriminator.save(tmp_path / "discriminator.keras")
    with pytest.raises(PretrainedError, match="bare Discriminator: put the config.json and vocab.txt"):
        load_pretrained(tmp_path / "discriminator.keras")
    config.save(tmp_path / "config.json")
    with pytest.raises(PretrainedError, match="vocab.txt is missing"):
        load_pretrained(tmp_path / "discriminator.keras")
    (tmp_path / "vocab.txt").write_text("\n".join(VOCABULARY) + "\n")
    loaded = load_pretrained(tmp_path / "discriminator.keras")
    assert loaded.config == BackboneConfig(config.model, config.run.max_seq_length)
    assert loaded.tokenizer.vocabulary == VOCABULARY
    for mine, theirs in zip(model_weights(loaded.discriminator), model_weights(discriminator)):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())


def test_folders_and_files_that_hold_no_discriminator(tmp_path):
    with pytest.raises(PretrainedError, match="does not exist"):
        load_pretrained(tmp_path / "missing")
    (tmp_path / "run").mkdir()
    tiny_config().save(tmp_path / "run" / "config.json")
    with pytest.raises(PretrainedError, match="no checkpoints/ folder"):
        load_pretrained(tmp_path / "run")
    (tmp_path / "run" / "checkpoints").mkdir()
    (tmp_path / "run" / "vocab.txt").write_text("\n".join(VOCABULARY) + "\n")
    with pytest.raises(PretrainedError, match="holds no checkpoint"):
        load_pretrained(tmp_path / "run")
    with pytest.raises(PretrainedError, match="ckpt-7 does not exist"):
        load_pretrained(tmp_path / "run", checkpoint="ckpt-7")
    (tmp_path / "broken.keras").write_text("not a zip")
    with pytest.raises(PretrainedError, match="not a loadable .keras model"):
        load_pretrained(tmp_path / "broken.keras")
    (tmp_path / "notes").mkdir()
    with pytest.raises(PretrainedError, match="holds no discriminator"):
        load_pretrained(tmp_path / "notes")
    (tmp_path / "bad_config").mkdir()
    (tmp_path / "bad_config" / "config.json").write_text(json.dumps({"hidden_size": -1}))
    (tmp_path / "bad_config" / "checkpoints").mkdir()
    with pytest.raises(PretrainedError, match="hidden_size"):
        load_pretrained(tmp_path / "bad_config")


def test_an_mlm_baseline_run_is_fine_tuned_through_its_encoder(tmp_path):
    import tensorflow as tf

    from electra_tf.pretraining.pretrainer import ElectraPretrainer

    config = tiny_config().replace(objective="mlm", dropout=0.0)
    pretrainer = ElectraPretrainer.from_pretraining_config(config)
    for variable in model_weights(pretrainer):  # away from the fresh init a copy would also have
        variable.assign(variable + tf.random.stateless_normal(variable.shape, (1, 2), dtype=variable.dtype) * 0.1)
    (tmp_path / "checkpoints").mkdir()
    tf.train.Checkpoint(model_variables=list(pretrainer.variables)).write(str(tmp_path / "checkpoints" / "ckpt-1"))
    (tmp_path / "checkpoints" / "checkpoint").write_text('model_checkpoint_path: "ckpt-1"\n')
    config.save(tmp_path / "config.json")
    (tmp_path / "vocab.txt").write_text("\n".join(VOCABULARY) + "\n")

    with pytest.raises(PretrainedError, match="objective='mlm'.*no discriminator to export"):
        load_pretrained(tmp_path)
    loaded = load_pretrained(tmp_path, encoder_only=True)
    batch = {"token_ids": np.array([[2, 5, 4, 7, 3]], "int32"), "segment_ids": np.zeros((1, 5), "int32"),
             "padding_mask": np.ones((1, 5), "int32")}
    np.testing.assert_allclose(loaded.discriminator.encode(batch).numpy(),
                               pretrainer.generator.encode(batch).numpy(), atol=1e-6)


def test_the_width_is_read_before_anything_is_built(tmp_path):
    config = tiny_config()  # hidden_size 32
    (tmp_path / "run").mkdir()
    config.save(tmp_path / "run" / "config.json")
    version = tmp_path / "export" / "3"
    (version / "assets.extra").mkdir(parents=True)
    (version / "saved_model.pb").write_bytes(b"")
    config.replace(hidden_size=64, intermediate_size=128).save(version / "assets.extra" / "config.json")
    (tmp_path / "alone").mkdir()
    (tmp_path / "alone" / "classifier.keras").write_bytes(b"")

    assert pretrained_hidden_size(tmp_path / "run") == 32  # a pre-training model_dir
    assert pretrained_hidden_size(tmp_path / "run" / "best.keras") == 32  # a .keras file beside its config
    assert pretrained_hidden_size(tmp_path / "export") == 64  # an export's highest version
    assert pretrained_hidden_size(version) == 64
    assert pretrained_hidden_size(tmp_path / "alone" / "classifier.keras") is None  # its config is inside
    assert pretrained_hidden_size(tmp_path / "missing") is None
    (tmp_path / "run" / "config.json").write_text("{not json")
    assert pretrained_hidden_size(tmp_path / "run") is None  # load_pretrained reports it


def test_a_question_answering_keras_file_gives_its_encoder_in_a_fresh_process(tmp_path):
    """Fine-tuning again from a QA run's best.keras: the loader registers the QA model's class
    itself (a fresh process has imported nothing else)."""
    import subprocess
    import sys

    from electra_tf.finetuning.question_answering.model import ElectraQuestionAnswerer

    config = tiny_config()
    model = ElectraQuestionAnswerer(build_discriminator(config.model), beam_size=4)
    length = 8
    model.predict({"token_ids": np.zeros((1, length), "int32"), "segment_ids": np.zeros((1, length), "int32"),
                   "padding_mask": np.ones((1, length), "int32")}, verbose=0)
    model.save(tmp_path / "best.keras")
    config.save(tmp_path / "config.json")
    (tmp_path / "vocab.txt").write_text("\n".join(VOCABULARY) + "\n")
    code = ("from electra_tf.finetuning.pretrained import load_pretrained\n"
            f"print(type(load_pretrained({str(tmp_path / 'best.keras')!r}).discriminator).__name__)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.stdout.strip().splitlines()[-1:] == ["Discriminator"], result.stderr[-2000:]
