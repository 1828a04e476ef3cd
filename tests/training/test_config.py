"""The trainer's cadence settings: what each checks, and the profiler's step range."""

import pytest

from electra_tf.training.config import TrainerConfig
from electra_tf.utils.sections import ConfigError


def test_the_cadence_is_checked_with_the_sections_error_style():
    assert TrainerConfig().log_every == 50 and TrainerConfig(profile_steps="3,5").profile_range == (3, 5)
    assert TrainerConfig().profile_range is None
    for values, message in (({"keep_checkpoints": 0}, "'keep_checkpoints' = 0: must be at least 1"),
                            ({"eval_every": 30, "log_every": 20}, "'eval_every' = 30: must be a positive multiple "
                                                                  "of log_every \\(20\\)"),
                            ({"profile_steps": "5,3"}, "'profile_steps' = '5,3': takes START,STOP"),
                            ({"profile_steps": "five"}, "'profile_steps' = 'five'")):
        with pytest.raises(ConfigError, match=message):
            TrainerConfig(**values)
