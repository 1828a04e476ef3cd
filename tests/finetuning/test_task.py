"""`FinetuningTask`, the base of every fine-tuning kind: the settings chosen by model size, the
plan it gives the trainer, the output folder it prepares, and what a kind must fill in."""

import dataclasses
import json

import pytest

from electra_tf.finetuning.config import (FinetuningConfig, FinetuningOptimizerConfig, FinetuningRunConfig,
                                          PretrainedSource, TaskFiles)
from electra_tf.models.backbone import BackboneConfig
from electra_tf.models.config import ModelConfig
from electra_tf.utils.sections import Section
from electra_tf.finetuning.task import FinetuningTask, Settings, size_defaults, written
from electra_tf.utils.errors import RunError
from electra_tf.utils.run_dir import LOCK_FILE


@dataclasses.dataclass(frozen=True)
class Columns(Section):
    text_column: str = "text"


@dataclasses.dataclass(frozen=True)
class CountedTask(FinetuningTask):
    """A kind that fills in only the counts: what `_settings` and `plan` read."""

    section = Columns

    def counts(self, data):
        return data["train"], data["eval"]

    def default_epochs(self, data):
        return 3


def config(hidden_size: int, max_seq_length: int = 128) -> BackboneConfig:
    return BackboneConfig(ModelConfig(vocab_size=8, hidden_size=hidden_size, num_heads=1, num_layers=1,
                                      intermediate_size=4), max_seq_length)


class Tokenizer:
    def save(self, path):
        path.write_text("[PAD]\n[UNK]\n")


@dataclasses.dataclass
class Backbone:
    tokenizer: Tokenizer = dataclasses.field(default_factory=Tokenizer)


def task(overwrite: bool = False, **sections):
    base = FinetuningConfig("counted", Columns(), PretrainedSource("runs/model"), TaskFiles("train.tsv", "dev.tsv"))
    return CountedTask(dataclasses.replace(base, **sections), overwrite=overwrite)


@pytest.mark.parametrize("hidden_size, size", [(64, "tiny"), (128, "tiny"), (129, "small"), (256, "small"),
                                               (768, "base"), (1024, "large")])
def test_size_defaults_follow_the_hidden_size(hidden_size, size):
    name, learning_rate, decay = size_defaults(hidden_size)
    assert name == size
    assert (learning_rate, decay) == {"tiny": (3e-3, 0.8), "small": (3e-4, 0.8), "base": (1e-4, 0.8),
                                      "large": (5e-5, 0.9)}[size]


def test_settings_default_by_size_and_task_and_say_so(capsys):
    settings = task()._settings({"train": 100, "eval": 10}, config(256))
    assert settings == Settings("small", 3e-4, 0.8, epochs=3, steps_per_epoch=4)  # ceil(100 / 32)
    assert settings.total_steps == 12
    printed = capsys.readouterr().out
    assert "3 epoch(s) for 100 training examples" in printed and "defaults for a small model (hidden size 256)" in printed
    assert "(given)" not in printed


def test_given_settings_win_and_accumulation_counts_in_the_steps(capsys):
    given = task(optimizer=FinetuningOptimizerConfig(learning_rate=1e-5, layerwise_lr_decay=1.0),
                 run=FinetuningRunConfig(epochs=2, batch_size=8, gradient_accumulation_steps=4))
    settings = given._settings({"train": 100, "eval": 10}, config(768))
    assert (settings.learning_rate, settings.layerwise_lr_decay, settings.epochs) == (1e-5, 1.0, 2)
    assert settings.steps_per_epoch == 4  # ceil(100 / (8 x 4))
    assert capsys.readouterr().out.count("(given)") == 3
    plan = given.plan(type("Inputs", (), {"settings": settings, "train": "batches"})())
    assert (plan.total_steps, plan.examples_per_step, plan.epochs) == (8, 32, 2)
    assert plan.keep_best and not plan.resumable  # fine-tuning keeps its best epoch and starts again
    assert plan.data.dataset == "batches" and plan.data.stream is None


def test_the_output_folder_is_refused_when_written_and_emptied_with_overwrite(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / LOCK_FILE).write_text("")
    (folder / "old.txt").write_text("an earlier run")
    (folder / "export").mkdir()
    with pytest.raises(RunError, match="not empty; choose a new --output_dir or pass --overwrite"):
        task()._output_folder(folder, Backbone(), config(128))
    assert (folder / "old.txt").is_file()  # nothing removed when refused

    output = task(overwrite=True)._output_folder(folder, Backbone(), config(128, max_seq_length=64))
    assert sorted(p.name for p in written(folder)) == sorted([output.config.name, output.vocab.name])
    assert (folder / LOCK_FILE).is_file()  # the run's own lock stays
    saved = json.loads(output.config.read_text())  # the run's whole config, and the model it read
    assert saved["kind"] == "counted" and saved["model"]["hidden_size"] == 128 and saved["run"]["max_seq_length"] == 64
    assert BackboneConfig.load(output.config) == config(128, max_seq_length=64)  # what best.keras is read with


def test_a_kind_that_fills_in_nothing_says_so():
    bare = FinetuningTask(task().config)
    for call in (bare.read_files, lambda: bare.prepare(None, None, 128, 1), lambda: bare.default_epochs(None),
                 lambda: bare.counts(None), lambda: bare.metric_names(None), lambda: bare.score(None, None, None),
                 lambda: bare.evaluation_part("x", None, None, 8), lambda: bare.build_task_model(None, None, None)):
        with pytest.raises(NotImplementedError):
            call()
    assert bare.describe_data(None) == [] and bare.data_summary(None) == {} and bare.labels_of(None) is None


def test_tasks_are_frozen_settings_objects():
    one = task()
    with pytest.raises(dataclasses.FrozenInstanceError):
        one.overwrite = True
    assert one == task()  # equal settings, equal tasks: no state kept between calls
