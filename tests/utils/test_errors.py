"""One error base, and every command maps it (and only it) to `error: ...` and exit status 2."""

import importlib

import pytest

from electra_tf.models.config import ConfigError
from electra_tf.data.corpus import InputError
from electra_tf.data.shards import DataError
from electra_tf.data.vocabulary_files import VocabularyError
from electra_tf.utils.errors import ElectraError, RunError, command
from electra_tf.finetuning.text.task_data import TaskDataError
from electra_tf.interop.huggingface import ConversionError
from electra_tf.utils.errors import PretrainedError

COMMANDS = ("build_vocab", "build_data", "pretrain", "finetune", "export", "convert")


@pytest.mark.parametrize("error", [ConfigError, InputError, DataError, VocabularyError, TaskDataError,
                                   PretrainedError, RunError, ConversionError])
def test_every_input_error_is_an_electra_error(error):
    assert issubclass(error, ElectraError)
    assert not issubclass(error, ValueError)  # so `except ValueError` cannot swallow them, nor they a bug


def test_command_maps_electra_errors_to_exit_2_and_lets_bugs_raise(capsys):
    @command
    def refuses(argv=None):
        raise DataError("data/x: no metadata.json; run build_data first.")

    @command
    def has_a_bug(argv=None):
        raise ValueError("a bug, not bad input")

    assert refuses([]) == 2
    assert capsys.readouterr().err == "error: data/x: no metadata.json; run build_data first.\n"
    with pytest.raises(ValueError, match="a bug"):
        has_a_bug([])


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_main_is_wrapped(name):
    main = importlib.import_module(f"electra_tf.{name}").main
    assert getattr(main, "__wrapped__", None) is not None, f"electra_tf.{name}.main is not wrapped in `command`"
