import json

import pytest

from electra_tf.pretraining.config import PretrainingConfig, preset_names
from electra_tf.utils.sections import ConfigError

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
    c = PretrainingConfig.load(name)
    model, objective, optimizer, run = c.model, c.objective, c.optimizer, c.run
    assert (model.num_layers, model.hidden_size, model.num_heads, model.intermediate_size, model.embedding_size,
            objective.generator_hidden_fraction, objective.mask_prob, run.max_seq_length, run.train_batch_size,
            optimizer.learning_rate, run.num_train_steps) == PAPER[name]
    assert (optimizer.num_warmup_steps, optimizer.weight_decay, optimizer.adam_epsilon, model.vocab_size) == \
        (10_000, 0.01, 1e-6, 30522)
    assert (objective.gen_weight, objective.disc_weight, objective.mask_token_rate, objective.random_token_rate) == \
        (1.0, 50.0, 0.85, 0.0)


def test_generator_sizes_are_derived_as_in_the_official_code():
    assert PretrainingConfig.load("electra_small").derived()["generator_hidden_size"] == 64
    base = PretrainingConfig.load("electra_base").generator_model
    assert (base.hidden_size, base.num_heads, base.intermediate_size, base.num_layers) == (256, 4, 1024, 12)
    large = PretrainingConfig.load("electra_large").generator_model
    assert (large.hidden_size, large.num_heads) == (256, 4)
    assert PretrainingConfig.load("electra_small_plus").generator_model.hidden_size == 256
    # The MLM baseline trains its generator at the discriminator's size.
    mlm = PretrainingConfig.load("electra_small", {"objective": "mlm"})
    assert mlm.generator_model == mlm.model


def test_max_predictions_is_derived_from_final_values_not_the_official_ordering():
    # Official: int((0.15 + 0.005) * 128) = 19 is computed before base's length 512 is set.
    assert PretrainingConfig.load("electra_base").num_masked_predictions == 79
    assert PretrainingConfig.load("electra_large").num_masked_predictions == int(0.255 * 512) == 130
    assert PretrainingConfig.load("electra_small").num_masked_predictions == 19
    overridden = PretrainingConfig.load("electra_small", {"max_seq_length": 256, "mask_prob": 0.25})
    assert overridden.num_masked_predictions == int(0.255 * 256)
    assert PretrainingConfig.load("electra_small", {"max_predictions_per_seq": 7}).num_masked_predictions == 7


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
        PretrainingConfig.load("electra_small", overrides)


def test_wide_generator_needs_explicit_opt_in():
    config = PretrainingConfig.load("electra_small", {"generator_hidden_fraction": 1.5,
                                                  "allow_wide_generator": True})
    assert config.generator_model.hidden_size == 384


def test_set_overrides_are_parsed_by_type():
    config = PretrainingConfig.load("electra_tiny").with_overrides(
        ["learning_rate=3e-4", "num_layers=3", "disallow_correct=true", "objective=mlm",
         "max_predictions_per_seq=null"])
    assert (config.optimizer.learning_rate, config.model.num_layers, config.objective.disallow_correct, config.objective.objective) == (3e-4, 3, True, "mlm")
    with pytest.raises(ConfigError, match="num_layers"):
        config.with_overrides(["num_layers=three"])
    with pytest.raises(ConfigError, match="nope"):
        config.with_overrides(["nope=1"])


def test_file_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="bad.json"):
        PretrainingConfig.load(str(bad))
    with pytest.raises(ConfigError, match="unknown config 'electra_huge'"):
        PretrainingConfig.load("electra_huge")
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({"hidden_size": 64, "colour": "red"}))
    with pytest.raises(ConfigError, match="unknown.json.*'colour'"):
        PretrainingConfig.load(str(unknown))


def test_save_round_trip_is_atomic(tmp_path):
    config = PretrainingConfig.load("electra_base", {"seed": 3})
    path = tmp_path / "run" / "config.json"
    config.save(path)
    assert [p.name for p in path.parent.iterdir()] == ["config.json"]  # no temp file left
    saved = json.loads(path.read_text())
    assert saved["_derived"]["num_masked_predictions"] == 79
    saved.pop("_derived")
    assert PretrainingConfig.from_dict(saved) == config


def test_a_saved_run_config_loads_as_a_config(tmp_path):
    # `--config runs/<run>/config.json` reuses a finished run's settings.
    config = PretrainingConfig.load("electra_tiny", {"num_layers": 3})
    config.save(tmp_path / "config.json")
    assert PretrainingConfig.load(str(tmp_path / "config.json")) == config


def test_a_misspelt_override_names_the_key_it_probably_meant():
    with pytest.raises(ConfigError, match="unknown key 'learnig_rate'. Did you mean learning_rate\\?"):
        PretrainingConfig.load("electra_tiny").with_overrides(["learnig_rate=1e-3"])
    with pytest.raises(ConfigError, match="Keys: .*adam_epsilon"):  # no close match: every key listed
        PretrainingConfig.load("electra_tiny").with_overrides(["zzz=1"])


def test_a_key_finds_its_section_written_flat_dotted_or_nested(tmp_path):
    flat = PretrainingConfig.load("electra_tiny", {"hidden_size": 64, "num_heads": 1, "learning_rate": 1e-4})
    dotted = PretrainingConfig.load("electra_tiny", {"model.hidden_size": 64, "model.num_heads": 1,
                                                     "optimizer.learning_rate": 1e-4})
    nested = PretrainingConfig.load("electra_tiny", {"model": {"hidden_size": 64, "num_heads": 1},
                                                     "optimizer": {"learning_rate": 1e-4}})
    assert flat == dotted == nested and flat.model.hidden_size == 64 and flat.optimizer.learning_rate == 1e-4
    assert flat.with_overrides(["run.seed=3", "temperature=1.5"]).run.seed == 3
    # The sections hold what they name, and a saved run is written by section.
    config = PretrainingConfig.load("electra_small")
    config.save(tmp_path / "config.json")
    saved = json.loads((tmp_path / "config.json").read_text())
    assert list(saved) == ["preset", "model", "objective", "optimizer", "run", "evaluation", "trainer", "runtime",
                           "_derived"]
    assert saved["preset"] == "electra_small" and "log_every" in saved["trainer"] and "xla" in saved["runtime"]
    assert "hidden_size" in saved["model"] and "mask_prob" in saved["objective"]
    assert "adam_epsilon" in saved["optimizer"] and "phase" in saved["run"]
    with pytest.raises(ConfigError, match="unknown key 'model.mask_prob'"):  # a key in the wrong section
        PretrainingConfig.load("electra_tiny", {"model.mask_prob": 0.2})


def test_a_flat_config_json_of_an_earlier_version_loads_unchanged():
    """Every run's config.json was flat before the sections; such a file is read as it was."""
    from pathlib import Path

    path = Path(__file__).parents[1] / "fixtures" / "flat_config_model_dir" / "config.json"
    flat = json.loads(path.read_text())
    config = PretrainingConfig.load(str(path))
    assert "model" not in flat and config.model.hidden_size == flat["hidden_size"] == 16
    values = config.training_values()
    assert {key: values[key] for key in flat if key != "_derived"} == {
        key: value for key, value in flat.items() if key != "_derived"}
    assert {key: values[key] for key in set(values) - set(flat)} == {"embedding_sharing": "shared"}  # added since


def test_no_section_is_a_bag_of_everything():
    import dataclasses

    from electra_tf.pretraining.config import SECTIONS

    assert {name: len(dataclasses.fields(cls)) <= 20 for name, cls in SECTIONS.sections.items()} == \
        dict.fromkeys(SECTIONS.sections, True)
