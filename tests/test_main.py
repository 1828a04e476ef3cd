"""`python -m electra_tf` (electra_tf/__main__.py): the commands, one line each, the version, and
an unknown command named."""

import electra_tf
from electra_tf import __main__ as package_command


def test_the_commands_are_listed_and_the_version_printed(capsys):
    assert package_command.main([]) == 0
    listed = capsys.readouterr().out
    assert all(f"python -m electra_tf.{name}" in listed or name in listed for name in package_command.COMMANDS)
    assert package_command.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"electra_tf {electra_tf.__version__}"
    assert package_command.main(["no_such_command"]) == 2
    assert "no_such_command" in capsys.readouterr().err
