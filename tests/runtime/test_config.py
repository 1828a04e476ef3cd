"""Where a run executes and its pre-training optimizer: the choices each section accepts."""

import pytest

from electra_tf.runtime.config import OptimizerConfig, RuntimeConfig
from electra_tf.utils.sections import ConfigError


def test_the_runtime_and_optimizer_choices_are_checked():
    assert RuntimeConfig() == RuntimeConfig("auto", "auto", None)
    assert OptimizerConfig().learning_rate == 5e-4 and OptimizerConfig(optimizer="lamb").optimizer == "lamb"
    for section, values, message in (
            (RuntimeConfig, {"strategy": "horovod"}, "'strategy' = 'horovod': must be one of"),
            (RuntimeConfig, {"mixed_precision": "float8"}, "'mixed_precision' = 'float8': must be one of"),
            (RuntimeConfig, {"xla": "yes"}, "'xla' must be bool \\| None"),
            (OptimizerConfig, {"optimizer": "sgd"}, "'optimizer' = 'sgd': must be one of"),
            (OptimizerConfig, {"adam_beta_2": 1.0}, "'adam_beta_2' = 1.0: must be in \\[0, 1\\)"),
            (OptimizerConfig, {"clip_global_norm": 0}, "'clip_global_norm' = 0.0: must be positive")):
        with pytest.raises(ConfigError, match=message):
            section(**values)
