import json

import pytest

from electra_tf.models.config import ConfigError, ElectraConfig, preset_names

# The paper's recipes (Table 6 / electra.md): layers, hidden, heads, FFN, embedding, generator
# fraction, mask prob, seq len, batch, lr, steps.
PAPER = {
    "electra_small": (12, 256, 4, 1024, 128, 0.25, 0.15, 128, 128, 5e-4, 1_000_000),
    "electra_small_plus": (12, 256, 4, 1024, 128, 1.0, 0.15, 128, 128, 5e-4, 1_000_000),
    "electra_base": (12, 768, 12, 3072, 768, 0.33333, 0.15, 512, 256, 2e-4, 766_000),
    "electra_large": (24, 1024, 16, 4096, 1024, 0.25, 0.25, 512, 2048, 2e-4, 400_000),
}


def test_presets_exist():
    assert set(PAPER) | {"electra_tiny"} <= set(preset_names())


@pytest.mark.parametrize("name", sorted(PAPER))
def test_presets_match_the_paper(name):
    c = ElectraConfig.load(name)
    assert (c.num_layers, c.hidden_size, c.num_heads, c.intermediate_size, c.embedding_size,
            c.generator_hidden_fraction, c.mask_prob, c.max_seq_length, c.train_batch_size,
            c.learning_rate, c.num_train_steps) == PAPER[name]
    assert (c.num_warmup_steps, c.weight_decay, c.adam_epsilon, c.vocab_size) == (10_000, 0.01, 1e-6, 30522)
    assert (c.gen_weight, c.disc_weight, c.mask_token_rate, c.random_token_rate) == (1.0, 50.0, 0.85, 0.0)


def test_generator_sizes_are_derived_as_in_the_official_code():
    assert ElectraConfig.load("electra_small").derived()["generator_hidden_size"] == 64
    base = ElectraConfig.load("electra_base")
    assert (base.generator_hidden_size, base.generator_num_heads,
            base.generator_intermediate_size, base.generator_num_layers) == (256, 4, 1024, 12)
    large = ElectraConfig.load("electra_large")
    assert (large.generator_hidden_size, large.generator_num_heads) == (256, 4)
    assert ElectraConfig.load("electra_small_plus").generator_hidden_size == 256


def test_max_predictions_is_derived_from_final_values_not_the_official_ordering():
    # Official: int((0.15 + 0.005) * 128) = 19 is computed before base's length 512 is set.
    assert ElectraConfig.load("electra_base").num_masked_predictions == 79
    assert ElectraConfig.load("electra_large").num_masked_predictions == int(0.255 * 512) == 130
    assert ElectraConfig.load("electra_small").num_masked_predictions == 19
    overridden = ElectraConfig.load("electra_small", {"max_seq_length": 256, "mask_prob": 0.25})
    assert overridden.num_masked_predictions == int(0.255 * 256)
    assert ElectraConfig.load("electra_small", {"max_predictions_per_seq": 7}).num_masked_predictions == 7


@pytest.mark.parametrize("overrides, key", [
    ({"hidden_sise": 4}, "hidden_sise"),
    ({"hidden_size": "256"}, "hidden_size"),
    ({"num_layers": 2.5}, "num_layers"),
    ({"disallow_correct": 1}, "disallow_correct"),
    ({"hidden_size": 250}, "hidden_size"),
    ({"mask_prob": 0.0}, "mask_prob"),
    ({"mask_prob": 1.0}, "mask_prob"),
    ({"generator_hidden_fraction": 1.5}, "generator_hidden_fraction"),
    ({"objective": "bert"}, "objective"),
    ({"max_seq_length": 1024}, "max_seq_length"),
])
def test_bad_values_are_rejected_naming_the_key(overrides, key):
    with pytest.raises(ConfigError, match=key):
        ElectraConfig.load("electra_small", overrides)


def test_wide_generator_needs_explicit_opt_in():
    config = ElectraConfig.load("electra_small", {"generator_hidden_fraction": 1.5,
                                                  "allow_wide_generator": True})
    assert config.generator_hidden_size == 384


def test_set_overrides_are_parsed_by_type():
    config = ElectraConfig.load("electra_tiny").with_overrides(
        ["learning_rate=3e-4", "num_layers=3", "disallow_correct=true", "objective=mlm",
         "max_predictions_per_seq=null"])
    assert (config.learning_rate, config.num_layers, config.disallow_correct, config.objective) == (3e-4, 3, True, "mlm")
    with pytest.raises(ConfigError, match="num_layers"):
        config.with_overrides(["num_layers=three"])
    with pytest.raises(ConfigError, match="nope"):
        config.with_overrides(["nope=1"])


def test_file_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="bad.json"):
        ElectraConfig.load(str(bad))
    with pytest.raises(ConfigError, match="unknown config 'electra_huge'"):
        ElectraConfig.load("electra_huge")
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({"hidden_size": 64, "colour": "red"}))
    with pytest.raises(ConfigError, match="unknown.json.*'colour'"):
        ElectraConfig.load(str(unknown))


def test_save_round_trip_is_atomic(tmp_path):
    config = ElectraConfig.load("electra_base", {"seed": 3})
    path = tmp_path / "run" / "config.json"
    config.save(path)
    assert [p.name for p in path.parent.iterdir()] == ["config.json"]  # no temp file left
    saved = json.loads(path.read_text())
    assert saved["_derived"]["num_masked_predictions"] == 79
    saved.pop("_derived")
    assert ElectraConfig.from_dict(saved) == config


def test_a_saved_run_config_loads_as_a_config(tmp_path):
    # `--config runs/<run>/config.json` reuses a finished run's settings.
    config = ElectraConfig.load("electra_tiny", {"num_layers": 3})
    config.save(tmp_path / "config.json")
    assert ElectraConfig.load(str(tmp_path / "config.json")) == config


def test_a_misspelt_override_names_the_key_it_probably_meant():
    with pytest.raises(ConfigError, match="unknown key 'learnig_rate'. Did you mean learning_rate\\?"):
        ElectraConfig.load("electra_tiny").with_overrides(["learnig_rate=1e-3"])
    with pytest.raises(ConfigError, match="Keys: .*adam_epsilon"):  # no close match: every key listed
        ElectraConfig.load("electra_tiny").with_overrides(["zzz=1"])
