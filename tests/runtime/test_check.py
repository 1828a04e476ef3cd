"""`python -m electra_tf --check`."""


def test_check_shows_the_devices_the_choice_and_runs_a_compiled_matmul(capsys, monkeypatch, tmp_path):
    from electra_tf.__main__ import main
    from electra_tf.runtime import check

    # The suite runs with the cache off (conftest.py); here a folder stands in for the user's.
    (tmp_path / "program.pb").write_bytes(b"x" * 2**20)
    monkeypatch.setattr(check, "use_compile_cache", lambda: tmp_path)
    assert main(["--check"]) == 0
    printed = capsys.readouterr().out
    assert "TensorFlow 2." in printed and "no GPU visible" in printed and 'pip install -e ".[gpu]"' in printed
    assert "pretrain --config electra_small with the defaults would run: one_device" in printed
    assert f"XLA compile cache: {tmp_path} (holds 1 program(s), 1.0 MiB; delete the folder to clear it;" in printed
    assert "ok   /device:CPU:0: a 256 x 256 matmul compiled by XLA" in printed


