"""One validated configuration for an ELECTRA model and its pre-training run.

Presets live in `configs/<name>.json` (shipped with the package as `electra_tf.presets`).
`ElectraConfig.load("electra_small", overrides={"train_batch_size": 64})` reads one, applies
overrides, validates every field and derives the rest.

Derived values (generator width/heads/FFN/depth, maximum predictions per sequence) are
properties computed from the final field values, so an override of `max_seq_length` or
`mask_prob` is always reflected in them. The official code computes
`max_predictions_per_seq = int((mask_prob + 0.005) * max_seq_length)` *before* applying the
size-specific settings, which caps base/large far too low; that ordering bug is deliberately
not reproduced here.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
from pathlib import Path
from typing import Any, Mapping

from electra_tf.utils.errors import ElectraError
from electra_tf.utils.files import atomic_write_text

OBJECTIVES = ("electra", "mlm")
OPTIMIZERS = ("adamw", "lamb")
POSITION_INITS = ("truncated_normal", "sinusoidal")
# Written by `ElectraConfig.save` beside the values: derived sizes, for people reading the file.
DERIVED_KEY = "_derived"


class ConfigError(ElectraError):
    """A configuration value is unknown, of the wrong type, or impossible."""


@dataclasses.dataclass(frozen=True)
class ElectraConfig:
    # --- discriminator (the model that is kept) -------------------------------------------
    vocab_size: int = 30522
    embedding_size: int = 128
    hidden_size: int = 256
    num_layers: int = 12
    num_heads: int = 4
    intermediate_size: int = 1024
    dropout: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_epsilon: float = 1e-12
    # "truncated_normal" (official) or "sinusoidal": the learned table starts as the
    # Transformer's sin/cos code at the same scale, so nearby positions start out alike. A
    # deliberate deviation for tiny budgets (docs/faithfulness.md); the variables are the same.
    position_embedding_init: str = "truncated_normal"

    # --- generator, as fractions of the discriminator (official `get_generator_config`) ---
    generator_hidden_fraction: float = 0.25
    generator_layers_fraction: float = 1.0
    # A generator wider than the discriminator makes the task too hard for D (paper, Sec. 3.2);
    # allowed only on purpose.
    allow_wide_generator: bool = False
    untied_generator_embeddings: bool = False

    # --- objective ------------------------------------------------------------------------
    objective: str = "electra"  # "electra" or "mlm" (BERT-style baseline at equal compute)
    mask_prob: float = 0.15
    # None: derived as int((mask_prob + 0.005) * max_seq_length), from the final values.
    max_predictions_per_seq: int | None = None
    mask_token_rate: float = 0.85
    # Spend the masking budget on whole words (every piece of a chosen word masked together),
    # as TF Model Garden's BERT data can; off in the official code (pretraining/masking.py).
    whole_word_masking: bool = False
    random_token_rate: float = 0.0
    gen_weight: float = 1.0
    disc_weight: float = 50.0
    # Sampling temperature for the generator's replacements (official default 1.0). The
    # electra_tiny preset uses 2.0, a deliberate deviation: at 2-CPU budgets a generator
    # sampled at 1.0 soon writes words that only word order gives away, and the tiny
    # discriminator then stays at the base rate ([results](docs/results.md#the-embedded-default)).
    temperature: float = 1.0
    disallow_correct: bool = False

    # --- run --------------------------------------------------------------------------------
    max_seq_length: int = 128
    train_batch_size: int = 128
    # Micro-batches of train_batch_size summed into one update: the update's batch (the
    # effective batch) is gradient_accumulation_steps x train_batch_size. 1: the official step.
    gradient_accumulation_steps: int = 1
    learning_rate: float = 5e-4
    num_train_steps: int = 1_000_000  # the step the run ends at (over all its phases)
    num_warmup_steps: int = 10_000  # counted from the phase's first step
    # A run may continue in a new phase (pretrain --phase 2: e.g. 512-token sequences after
    # 128, docs/pretraining.md) from the step phase_start_step, keeping weights, optimizer
    # state and step count; the phase's learning rate warms up and decays over
    # [phase_start_step, num_train_steps]. Phase 1 starts at step 0 (the official single phase).
    phase: int = 1
    phase_start_step: int = 0
    # After warmup the rate falls as (1 - step / num_train_steps) ** lr_decay_power: 1.0 is the
    # official linear decay; NVIDIA's LAMB recipe uses 0.5.
    lr_decay_power: float = 1.0
    # "adamw" (official) or "lamb" (layer-wise adaptive, for large effective batches:
    # runtime/optimizer.py, docs/pretraining.md).
    optimizer: str = "adamw"
    adam_beta_1: float = 0.9
    adam_beta_2: float = 0.999
    weight_decay: float = 0.01
    adam_epsilon: float = 1e-6
    clip_global_norm: float = 1.0
    seed: int = 0

    def __post_init__(self):
        _check_types(self)
        _check_values(self)

    # --- derived values ----------------------------------------------------------------------
    @property
    def generator_hidden_size(self) -> int:
        return int(round(self.hidden_size * self.generator_hidden_fraction))

    @property
    def generator_num_heads(self) -> int:
        return max(1, self.generator_hidden_size // 64)

    @property
    def generator_intermediate_size(self) -> int:
        return 4 * self.generator_hidden_size

    @property
    def generator_num_layers(self) -> int:
        return max(1, int(round(self.num_layers * self.generator_layers_fraction)))

    @property
    def effective_batch_size(self) -> int:
        """The examples of one update: train_batch_size x gradient_accumulation_steps."""
        return self.train_batch_size * self.gradient_accumulation_steps

    @property
    def num_masked_predictions(self) -> int:
        """N, the fixed number of prediction slots per sequence."""
        if self.max_predictions_per_seq is not None:
            return self.max_predictions_per_seq
        return max(1, int((self.mask_prob + 0.005) * self.max_seq_length))

    def derived(self) -> dict[str, int]:
        return {
            "generator_hidden_size": self.generator_hidden_size,
            "generator_num_heads": self.generator_num_heads,
            "generator_intermediate_size": self.generator_intermediate_size,
            "generator_num_layers": self.generator_num_layers,
            "num_masked_predictions": self.num_masked_predictions,
            "effective_batch_size": self.effective_batch_size,
        }

    # --- construction ------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, values: Mapping[str, Any], source: str = "config") -> "ElectraConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(
                f"{source}: unknown key(s) {', '.join(map(repr, unknown))}. "
                f"Known keys: {', '.join(sorted(known))}."
            )
        try:
            return cls(**values)
        except ConfigError as error:
            raise ConfigError(f"{source}: {error}") from None

    @classmethod
    def load(cls, name_or_path: str, overrides: Mapping[str, Any] | None = None) -> "ElectraConfig":
        """Loads a preset name (`electra_small`) or a JSON file path, then applies overrides."""
        path = _resolve(name_or_path)
        try:
            values = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as error:
            raise ConfigError(f"{path}: not valid JSON ({error}).") from None
        if not isinstance(values, dict):
            raise ConfigError(f"{path}: expected a JSON object of key: value pairs.")
        # A run's saved config.json carries its derived sizes for humans; they are recomputed.
        values.pop(DERIVED_KEY, None)
        values.update(overrides or {})
        return cls.from_dict(values, source=str(path))

    def replace(self, **overrides) -> "ElectraConfig":
        return self.from_dict({**self.to_dict(), **overrides}, source="override")

    def with_overrides(self, assignments: list[str]) -> "ElectraConfig":
        """Applies `key=value` strings (the CLI's repeated `--set`), parsed by the key's type."""
        values = {}
        for assignment in assignments:
            key, sep, raw = assignment.partition("=")
            key = key.strip()
            if not sep:
                raise ConfigError(f"override {assignment!r}: expected key=value.")
            if key not in _FIELD_TYPES:
                close = difflib.get_close_matches(key, _FIELD_TYPES, n=3)
                raise ConfigError(f"override {assignment!r}: unknown key {key!r}. "
                                  + (f"Did you mean {' or '.join(close)}? " if close else "")
                                  + f"Keys: {', '.join(sorted(_FIELD_TYPES))}.")
            values[key] = _parse_value(key, raw.strip())
        return self.replace(**values)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        """The values plus the derived sizes (for people reading it; `load` drops them)."""
        return json.dumps({**self.to_dict(), DERIVED_KEY: self.derived()}, indent=2)

    def save(self, path: str | os.PathLike) -> None:
        atomic_write_text(path, self.to_json() + "\n")


def preset_names() -> list[str]:
    return sorted(p.name[: -len(".json")] for p in _presets_dir().iterdir() if p.name.endswith(".json"))


# --- validation ---------------------------------------------------------------------------------

_FIELD_TYPES = {f.name: f.type for f in dataclasses.fields(ElectraConfig)}


def _check_types(config: ElectraConfig) -> None:
    for name, declared in _FIELD_TYPES.items():
        value = getattr(config, name)
        if declared == "int | None" and value is None:
            continue
        expected = declared.split(" |")[0]
        ok = {
            "int": isinstance(value, int) and not isinstance(value, bool),
            "float": isinstance(value, (int, float)) and not isinstance(value, bool),
            "bool": isinstance(value, bool),
            "str": isinstance(value, str),
        }[expected]
        if not ok:
            raise ConfigError(f"{name!r} must be {declared}, got {value!r} ({type(value).__name__}).")
        if expected == "float":
            object.__setattr__(config, name, float(value))


def _check_values(c: ElectraConfig) -> None:
    def require(condition: bool, key: str, message: str) -> None:
        if not condition:
            raise ConfigError(f"{key!r} = {getattr(c, key)!r}: {message}")

    for key in ("vocab_size", "embedding_size", "hidden_size", "num_layers", "num_heads",
                "intermediate_size", "max_position_embeddings", "type_vocab_size",
                "max_seq_length", "train_batch_size", "gradient_accumulation_steps", "num_train_steps"):
        require(getattr(c, key) > 0, key, "must be positive.")
    require(c.hidden_size % c.num_heads == 0, "hidden_size",
            f"must be divisible by num_heads ({c.num_heads}).")
    require(0.0 <= c.dropout < 1.0, "dropout", "must be in [0, 1).")
    require(0.0 < c.mask_prob < 1.0, "mask_prob", "must be in (0, 1).")
    require(0.0 <= c.mask_token_rate <= 1.0, "mask_token_rate", "must be in [0, 1].")
    require(0.0 <= c.random_token_rate <= 1.0 - c.mask_token_rate, "random_token_rate",
            "must be in [0, 1 - mask_token_rate].")
    require(c.generator_hidden_fraction > 0, "generator_hidden_fraction", "must be positive.")
    require(c.generator_hidden_fraction <= 1.0 or c.allow_wide_generator,
            "generator_hidden_fraction",
            "a generator wider than the discriminator needs allow_wide_generator=true.")
    require(0 < c.generator_layers_fraction <= 1.0, "generator_layers_fraction", "must be in (0, 1].")
    require(c.max_seq_length <= c.max_position_embeddings, "max_seq_length",
            f"must not exceed max_position_embeddings ({c.max_position_embeddings}).")
    if c.max_predictions_per_seq is not None:
        require(0 < c.max_predictions_per_seq <= c.max_seq_length, "max_predictions_per_seq",
                "must be in [1, max_seq_length] (or null to derive it).")
    require(c.objective in OBJECTIVES, "objective", f"must be one of {OBJECTIVES}.")
    require(c.temperature > 0, "temperature", "must be positive.")
    require(c.gen_weight >= 0 and c.disc_weight >= 0, "disc_weight", "loss weights must be >= 0.")
    require(c.learning_rate > 0, "learning_rate", "must be positive.")
    require(0 <= c.num_warmup_steps, "num_warmup_steps", "must be >= 0.")
    require(c.phase >= 1, "phase", "must be at least 1.")
    require(c.phase_start_step == 0 or c.phase > 1, "phase_start_step", "must be 0 in phase 1.")
    require(0 <= c.phase_start_step < c.num_train_steps, "phase_start_step",
            f"must be in [0, num_train_steps ({c.num_train_steps})): num_train_steps is the step the run "
            "ends at, over all its phases.")
    require(0 <= c.weight_decay < 1, "weight_decay", "must be in [0, 1).")
    require(c.adam_epsilon > 0, "adam_epsilon", "must be positive.")
    require(c.optimizer in OPTIMIZERS, "optimizer", f"must be one of {OPTIMIZERS}.")
    require(0 <= c.adam_beta_1 < 1, "adam_beta_1", "must be in [0, 1).")
    require(0 <= c.adam_beta_2 < 1, "adam_beta_2", "must be in [0, 1).")
    require(c.lr_decay_power > 0, "lr_decay_power", "must be positive.")
    require(c.clip_global_norm > 0, "clip_global_norm", "must be positive.")
    require(c.layer_norm_epsilon > 0, "layer_norm_epsilon", "must be positive.")
    require(c.initializer_range > 0, "initializer_range", "must be positive.")
    require(c.position_embedding_init in POSITION_INITS, "position_embedding_init",
            f"must be one of {POSITION_INITS}.")


def _parse_value(key: str, raw: str) -> Any:
    declared = _FIELD_TYPES[key]
    if raw.lower() in ("none", "null") and "None" in declared:
        return None
    try:
        if declared.startswith("bool"):
            lowered = raw.lower()
            if lowered not in ("true", "false", "1", "0"):
                raise ValueError
            return lowered in ("true", "1")
        if declared.startswith("int"):
            return int(raw.replace("_", ""))
        if declared.startswith("float"):
            return float(raw)
    except ValueError:
        raise ConfigError(f"override {key}={raw!r}: expected {declared}.") from None
    return raw


# --- files --------------------------------------------------------------------------------------

def _presets_dir() -> Path:
    # An installed package ships configs/ as electra_tf/presets (setup.py's package_dir);
    # a source checkout (or editable install) reads configs/ directly.
    package = Path(__file__).resolve().parents[1]
    for candidate in (package / "presets", package.parent / "configs"):
        if candidate.is_dir():
            return candidate
    raise ConfigError(f"no presets found: neither {package / 'presets'} nor "
                      f"{package.parent / 'configs'} exists. Reinstall electra_tf.")


def _resolve(name_or_path: str) -> Path:
    path = Path(name_or_path)
    if path.suffix == ".json" or path.exists():
        if not path.is_file():
            raise ConfigError(f"config file {path} does not exist.")
        return path
    preset = _presets_dir() / f"{name_or_path}.json"
    if not preset.is_file():
        raise ConfigError(
            f"unknown config {name_or_path!r}: not a file and not a preset. "
            f"Presets: {', '.join(preset_names())}."
        )
    return preset

