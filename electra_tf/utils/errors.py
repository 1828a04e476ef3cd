"""One error base for everything a user can get wrong, and the one place it becomes exit 2.

Every error that means "this input, file, config or folder cannot be used as asked" is an
`ElectraError` (subclasses name the stage: `ConfigError`, `DataError`, `InputError`,
`VocabularyError`, `TaskDataError`, `PretrainedError`, `RunError`, ...). Its message names the
file or field and says what to do. A command's `main` is wrapped in `command`, which prints
`error: <message>` to stderr and returns exit status 2 for these, turns Ctrl-C into one line
and exit status 130, and lets anything else (a bug) raise with its traceback.

>>> @command
... def main(argv=None):
...     raise ElectraError("data/train.csv, line 3: no 'label' column.")
>>> main([])
2
"""

from __future__ import annotations

import functools
import sys

USAGE_ERROR = 2


class ElectraError(Exception):
    """Input that cannot be used as asked; the message says which and what to do."""


class RunError(ElectraError):
    """A run (pre-training, fine-tuning, export) cannot start or continue as asked."""


class PretrainedError(ElectraError):
    """A pre-trained model (model_dir, checkpoint, .keras file or export) cannot be read as asked."""


INTERRUPTED = 128 + 2  # as a shell reports a process stopped by SIGINT


def command(main=None, *, interrupted: str = "stopped before it finished"):
    """Wraps a command's `main(argv) -> int`: an `ElectraError` becomes `error: ...` on
    stderr and exit status 2; Ctrl-C (KeyboardInterrupt) becomes one line, `interrupted`
    (what became of the command's output), and exit status 130, instead of a traceback.
    Use as `@command` or `@command(interrupted="...")`."""
    if main is None:
        return functools.partial(command, interrupted=interrupted)

    @functools.wraps(main)
    def wrapped(argv=None) -> int:
        try:
            return main(argv)
        except ElectraError as error:
            print(f"error: {error}", file=sys.stderr, flush=True)
            return USAGE_ERROR
        except KeyboardInterrupt:
            print(f"\nStopped by Ctrl-C: {interrupted}.", file=sys.stderr, flush=True)
            return INTERRUPTED
    return wrapped
