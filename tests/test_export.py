"""`python -m electra_tf.export`: a run's model by the command, and a version no server could load never
left behind (the formats themselves: tests/serving/, tests/interop/)."""

import os
import shutil
import subprocess
import sys

from electra_tf import export
from electra_tf.finetuning.pretrained import load_pretrained
from electra_tf.serving import publish


def test_export_cli_from_a_model_dir(short_run, tmp_path, capsys):
    root = tmp_path  # a copy: the shared run (conftest.short_run) is only read
    shutil.copytree(short_run / "run", root / "run")
    assert export.main(["--model_dir", str(root / "run"), "--export_dir", str(root / "cli"),
                        "--checkpoint", "ckpt-12"]) == 0
    assert (root / "cli" / "run" / "1" / "saved_model.pb").is_file()
    assert f"to {(root / 'cli' / 'run' / '1').resolve()}" in capsys.readouterr().out  # absolute
    # By default inside the run's own folder, named after it.
    assert export.main(["--model_dir", str(root / "run")]) == 0
    assert (root / "run" / "export" / "run" / "1" / "saved_model.pb").is_file()
    capsys.readouterr()
    assert export.main(["--model_dir", str(root / "nope")]) == 2
    assert "nope does not exist" in capsys.readouterr().err
    (root / "empty").mkdir()
    assert export.main(["--model_dir", str(root / "empty")]) == 2
    assert "holds no discriminator" in capsys.readouterr().err
    (root / "no_checkpoint").mkdir()
    (root / "no_checkpoint" / "config.json").write_text((root / "run" / "config.json").read_text())
    assert export.main(["--model_dir", str(root / "no_checkpoint")]) == 2
    assert "--pretrained" not in capsys.readouterr().err


def test_sigkill_during_export_leaves_no_version_tf_serving_could_load(short_run, tmp_path):
    """Killed after the SavedModel is written, before it is renamed into place: the only trace
    is a hidden temporary folder, which TF Serving (integer versions only) never looks at."""
    code = f"""
import os, signal
from electra_tf.finetuning.pretrained import load_pretrained
from electra_tf.serving import publish
pretrained = load_pretrained({str(short_run / "run")!r})
publish.write_warmup_requests = lambda *args, **kwargs: os.kill(os.getpid(), signal.SIGKILL)
publish.export_model(pretrained.discriminator, pretrained.tokenizer, pretrained.config,
                             {str(tmp_path)!r}, "run")
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=300,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == -9
    written = [p for p in (tmp_path / "run").iterdir()]
    assert written and all(p.name.startswith(".") and ".tmp-" in p.name for p in written)  # under way
    assert not [p for p in written if p.name.isdigit()]
    # The next export still becomes version 1.
    pretrained = load_pretrained(short_run / "run")
    assert publish.export_model(pretrained.discriminator, pretrained.tokenizer, pretrained.config,
                                        tmp_path, "run").name == "1"
