"""What a rerun may change in a model_dir's run: the phase policy, without TensorFlow."""

import subprocess
import sys

import pytest

from electra_tf.pretraining.config import PretrainingConfig
from electra_tf.pretraining.phases import RunShortcuts, continue_run, position_note, requested_config
from electra_tf.utils.errors import RunError


def run_of(**values):
    return PretrainingConfig.load("electra_tiny", {"num_train_steps": 1000, **values})


def test_the_policy_imports_no_tensorflow():
    code = "import sys, electra_tf.pretraining.phases; print('tensorflow' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


def test_overrides_change_the_saved_run_not_the_preset():
    """Phase 1 made room for longer sequences (--set max_position_embeddings=256); phase 2 asks
    only for the longer length, and the run's own position table is what it is checked against."""
    saved = run_of(max_position_embeddings=256)
    requested = requested_config(saved, ["max_seq_length=256", "num_warmup_steps=10"], RunShortcuts(steps=1100),
                                 saved=saved)
    decision = continue_run(saved, requested, phase=2, latest_step=1000)
    assert decision.starts_phase and decision.config.run.max_seq_length == 256
    assert decision.config.model.max_position_embeddings == 256 and decision.config.run.phase_start_step == 1000
    assert decision.change["changed"]["max_seq_length"] == [128, 256]


def test_a_phase_longer_than_the_position_table_says_how_to_make_room():
    saved = run_of()  # the tiny preset: 128 positions, 128 tokens
    with pytest.raises(RunError, match=r"position table has 128 rows .* --set max_position_embeddings=512"):
        requested_config(saved, ["max_seq_length=512"], RunShortcuts(steps=1100), saved=saved)
    assert "max_position_embeddings=512" in position_note(saved)  # phase 1's header says it at the start
    assert position_note(run_of(max_position_embeddings=512)) is None


def test_the_same_phase_may_only_grow_and_keeps_its_warmup():
    saved = run_of()
    same = continue_run(saved, saved, phase=None, latest_step=1000)
    assert same.config == saved and same.change is None and not same.messages
    longer = continue_run(saved, saved.replace(num_train_steps=2000, num_warmup_steps=50), None, 1000, where="RUN")
    assert longer.config.run.num_train_steps == 2000 and longer.config.optimizer.num_warmup_steps == 200
    assert "keeps that run's num_warmup_steps 200" in longer.warnings[0] and "remove RUN" in longer.warnings[0]
    with pytest.raises(RunError, match="--steps may only grow"):
        continue_run(saved, saved.replace(num_train_steps=500), None, 1000)
    with pytest.raises(RunError, match="add --phase 2"):
        continue_run(saved, saved.replace(max_seq_length=64), None, 1000)
    with pytest.raises(RunError, match="different config .*learning_rate"):
        continue_run(saved, saved.replace(learning_rate=1e-4), None, 1000)


def test_a_new_phase_keeps_the_model_and_needs_a_checkpoint_and_room():
    saved = run_of()
    shorter = saved.replace(max_seq_length=64, num_train_steps=1100, num_warmup_steps=10)
    with pytest.raises(RunError, match="has none: train phase 1 first"):
        continue_run(saved, shorter, 2, latest_step=None)
    with pytest.raises(RunError, match="give --steps larger than 1,000"):
        continue_run(saved, shorter.replace(num_train_steps=1000), 2, 1000)
    with pytest.raises(RunError, match="keeps the run's model, objective and optimizer.*hidden_size"):
        continue_run(saved, shorter.replace(hidden_size=64, num_heads=1), 2, 1000)
    with pytest.raises(RunError, match="num_warmup_steps is 200"):
        continue_run(saved, shorter.replace(num_warmup_steps=200), 2, 1000)
    with pytest.raises(RunError, match="can only continue it"):
        continue_run(saved, shorter, 3, 1000)
    with pytest.raises(RunError, match="holds none"):
        continue_run(None, shorter, 2, None)
