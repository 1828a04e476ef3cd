"""The model's config: what it checks, the generator's sizes, and a saved config.json read back in
any of the forms this package has written."""


import pytest

from electra_tf.models.config import ModelConfig, read_json_object
from electra_tf.utils.sections import ConfigError


def test_the_architecture_is_checked():
    for values, message in (({"hidden_size": 100, "num_heads": 3}, "'hidden_size' = 100: must be divisible by "
                                                                     "num_heads \\(3\\)"),
                            ({"dropout": 1.0}, "'dropout' = 1.0: must be in \\[0, 1\\)"),
                            ({"position_embedding_init": "random"}, "'position_embedding_init' = 'random'")):
        with pytest.raises(ConfigError, match=message):
            ModelConfig(**values)
    generator = ModelConfig(hidden_size=256, num_heads=4).resized(64, num_heads=1, intermediate_size=256)
    assert (generator.hidden_size, generator.num_heads, generator.num_layers) == (64, 1, 12)


def test_a_saved_config_is_read_by_section_or_flat(tmp_path):
    sectioned = {"model": {"hidden_size": 64, "num_heads": 2}, "run": {"max_seq_length": 32}}
    flat = {"hidden_size": 64, "num_heads": 2, "max_seq_length": 32, "mask_prob": 0.15}
    assert ModelConfig.from_any(sectioned) == ModelConfig.from_any(flat) == ModelConfig(hidden_size=64, num_heads=2)
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(ConfigError, match="bad.json: expected a JSON object"):
        read_json_object(tmp_path / "bad.json")
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(ConfigError, match="broken.json: not valid JSON"):
        read_json_object(tmp_path / "broken.json")
