"""A pre-training run's configuration, by what each part configures.

    PretrainingConfig
      model      models.config.ModelConfig          the discriminator (what the backbone keeps)
      objective  ObjectiveConfig                    the generator's size, masking, the losses
      optimizer  runtime.optimizer.OptimizerConfig  the update and its learning-rate schedule
      run        RunConfig                          sequence length, batch, steps, phase, seed
      evaluation EvaluationConfig                   the evaluation's size, the replacement samples
      trainer    training.config.TrainerConfig      progress lines, checkpoints, evaluations, profiling
      runtime    runtime.config.RuntimeConfig       strategy, precision, XLA

The first four decide the weights a run ends with (`TRAINING_SECTIONS`): a rerun that continues
the run may change them only as `phases.py` allows. The last three may change on any rerun.
The run's config.json also records the preset (or config file) it started from (`preset`), so
a rerun that repeats `--config <that preset>` continues the run's own values.

Presets live in `configs/<name>.json` (shipped with the package as `electra_tf.presets`).
`PretrainingConfig.load("electra_small", {"train_batch_size": 64})` reads one, applies
overrides, validates every field and derives the rest. A file or override may name a key flat
(`hidden_size`, as the presets and every config.json written before the sections do) or with
its section (`model.hidden_size`); a run's config.json is written with its sections.

Derived values (generator width/heads/FFN/depth, maximum predictions per sequence) are
computed from the final field values, so an override of `max_seq_length` or `mask_prob` is
always reflected in them. The official code computes
`max_predictions_per_seq = int((mask_prob + 0.005) * max_seq_length)` *before* applying the
size-specific settings, which caps base/large far too low; that ordering bug is deliberately
not reproduced here.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Mapping

from electra_tf.models.config import ModelConfig, read_json_object
from electra_tf.runtime.config import OptimizerConfig, RuntimeConfig
from electra_tf.training.config import TrainerConfig, steps_per_loop_needs_one_device
from electra_tf.utils.sections import ConfigError, Section, SectionedConfig, option

OBJECTIVES = ("electra", "mlm")
EMBEDDING_SHARING = ("shared", "untied", "gdes")
# Written by `PretrainingConfig.save` beside the values: derived sizes, for people reading the file.
DERIVED_KEY = "_derived"
PRESET_KEY = "preset"


@dataclasses.dataclass(frozen=True)
class ObjectiveConfig(Section):
    """The pre-training objective: the generator beside the discriminator, the masking, the losses."""

    objective: str = "electra"  # "electra" or "mlm" (BERT-style baseline at equal compute)
    # The generator as fractions of the discriminator (official `get_generator_config`).
    generator_hidden_fraction: float = 0.25
    generator_layers_fraction: float = 1.0
    # A generator wider than the discriminator makes the task too hard for D (paper, Sec. 3.2);
    # allowed only on purpose.
    allow_wide_generator: bool = False
    # How the generator and discriminator share embeddings: "shared" (the official ELECTRA: one
    # embedding layer), "untied" (each its own; the generator's as wide as its hidden size), or
    # "gdes" (DeBERTaV3's gradient-disentangled sharing: the discriminator reads the shared tables
    # through a stop-gradient plus residuals of its own; models/embeddings.py).
    embedding_sharing: str = "shared"
    untied_generator_embeddings: bool = False  # the older spelling of embedding_sharing = "untied"
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

    def check(self) -> None:
        self.require(self.objective in OBJECTIVES, "objective", f"must be one of {OBJECTIVES}.")
        self.require(self.embedding_sharing in EMBEDDING_SHARING, "embedding_sharing",
                     f"must be one of {EMBEDDING_SHARING}.")
        self.require(not self.untied_generator_embeddings or self.embedding_sharing != "gdes", "embedding_sharing",
                     "gdes shares the embeddings: drop untied_generator_embeddings.")
        self.require(self.objective == "electra" or self.embedding_sharing != "gdes", "embedding_sharing",
                     "gdes shares the generator's embeddings with a discriminator, which objective mlm has not.")
        self.require(self.generator_hidden_fraction > 0, "generator_hidden_fraction", "must be positive.")
        self.require(self.generator_hidden_fraction <= 1.0 or self.allow_wide_generator, "generator_hidden_fraction",
                     "a generator wider than the discriminator needs allow_wide_generator=true.")
        self.require(0 < self.generator_layers_fraction <= 1.0, "generator_layers_fraction", "must be in (0, 1].")
        self.require(0.0 < self.mask_prob < 1.0, "mask_prob", "must be in (0, 1).")
        self.require(0.0 <= self.mask_token_rate <= 1.0, "mask_token_rate", "must be in [0, 1].")
        self.require(0.0 <= self.random_token_rate <= 1.0 - self.mask_token_rate, "random_token_rate",
                     "must be in [0, 1 - mask_token_rate].")
        self.require(self.temperature > 0, "temperature", "must be positive.")
        self.require(self.gen_weight >= 0 and self.disc_weight >= 0, "disc_weight", "loss weights must be >= 0.")

    @property
    def sharing(self) -> str:
        """The embedding sharing in effect ("shared", "untied" or "gdes")."""
        return "untied" if self.untied_generator_embeddings else self.embedding_sharing

    def generator_model(self, model: ModelConfig) -> ModelConfig:
        """The generator's encoder: the discriminator's at the configured fractions (heads one
        per 64 units, FFN 4x, as the official code), or the discriminator's own size for the
        BERT-style baseline (`objective: mlm`, which trains its generator alone)."""
        if self.objective == "mlm":
            return model
        hidden = int(round(model.hidden_size * self.generator_hidden_fraction))
        return model.resized(hidden_size=hidden, num_layers=max(1, int(round(model.num_layers
                                                                             * self.generator_layers_fraction))),
                             num_heads=max(1, hidden // 64), intermediate_size=4 * hidden)


@dataclasses.dataclass(frozen=True)
class RunConfig(Section):
    """What one update reads and how many the run makes, in which phase."""

    max_seq_length: int = 128
    train_batch_size: int = 128
    # Micro-batches of train_batch_size summed into one update: the update's batch (the
    # effective batch) is gradient_accumulation_steps x train_batch_size. 1: the official step.
    gradient_accumulation_steps: int = 1
    num_train_steps: int = 1_000_000  # the step the run ends at (over all its phases)
    # A run may continue in a new phase (pretrain --phase 2: e.g. 512-token sequences after
    # 128, docs/pretraining.md) from the step phase_start_step, keeping weights, optimizer
    # state and step count; the phase's learning rate warms up and decays over
    # [phase_start_step, num_train_steps]. Phase 1 starts at step 0 (the official single phase).
    phase: int = 1
    phase_start_step: int = 0
    seed: int = 0

    def check(self) -> None:
        for key in ("max_seq_length", "train_batch_size", "gradient_accumulation_steps", "num_train_steps"):
            self.require(getattr(self, key) > 0, key, "must be positive.")
        self.require(self.phase >= 1, "phase", "must be at least 1.")
        self.require(self.phase_start_step == 0 or self.phase > 1, "phase_start_step", "must be 0 in phase 1.")
        self.require(0 <= self.phase_start_step < self.num_train_steps, "phase_start_step",
                     f"must be in [0, num_train_steps ({self.num_train_steps})): num_train_steps is the step the "
                     "run ends at, over all its phases.")

    @property
    def effective_batch_size(self) -> int:
        """The examples of one update: train_batch_size x gradient_accumulation_steps."""
        return self.train_batch_size * self.gradient_accumulation_steps

    @property
    def phase_steps(self) -> int:
        return self.num_train_steps - self.phase_start_step


@dataclasses.dataclass(frozen=True)
class EvaluationConfig(Section):
    """What the run shows of itself: its evaluation's size and the replacement samples."""

    eval_batches: int = option(20, "batches of the evaluation: held-out text if the data has a held-out split "
                                    "(build_data --held_out) or --eval_data names one, else training text masked afresh")
    sample_every: int = option(200, "steps between TensorBoard replacement samples")

    def check(self) -> None:
        self.at_least_one("eval_batches", "sample_every")


@dataclasses.dataclass(frozen=True)
class PretrainingConfig(SectionedConfig):
    """A pre-training run's config (module docstring). `preset`: the preset name or config file
    the run started from, which a rerun may repeat without changing what the run set since."""

    model: ModelConfig = ModelConfig()
    objective: ObjectiveConfig = ObjectiveConfig()
    optimizer: OptimizerConfig = OptimizerConfig()
    run: RunConfig = RunConfig()
    evaluation: EvaluationConfig = EvaluationConfig()
    trainer: TrainerConfig = TrainerConfig()
    runtime: RuntimeConfig = RuntimeConfig()
    preset: str | None = None

    def __post_init__(self):
        # The rules that join two sections.
        if self.run.max_seq_length > self.model.max_position_embeddings:
            raise ConfigError(f"'max_seq_length' = {self.run.max_seq_length}: must not exceed max_position_embeddings "
                              f"({self.model.max_position_embeddings}).")
        limit = self.objective.max_predictions_per_seq
        if limit is not None and not 0 < limit <= self.run.max_seq_length:
            raise ConfigError(f"'max_predictions_per_seq' = {limit}: must be in [1, max_seq_length] (or null to "
                              "derive it).")
        if self.trainer.steps_per_loop > 1 and self.runtime.strategy not in ("auto", "one_device"):
            raise ConfigError(steps_per_loop_needs_one_device(self.trainer.steps_per_loop, self.runtime.strategy))

    # --- derived values ----------------------------------------------------------------------
    @property
    def generator_model(self) -> ModelConfig:
        return self.objective.generator_model(self.model)

    @property
    def num_masked_predictions(self) -> int:
        """N, the fixed number of prediction slots per sequence."""
        if self.objective.max_predictions_per_seq is not None:
            return self.objective.max_predictions_per_seq
        return max(1, int((self.objective.mask_prob + 0.005) * self.run.max_seq_length))

    def derived(self) -> dict[str, int]:
        generator = self.generator_model
        return {"generator_hidden_size": generator.hidden_size, "generator_num_heads": generator.num_heads,
                "generator_intermediate_size": generator.intermediate_size,
                "generator_num_layers": generator.num_layers, "num_masked_predictions": self.num_masked_predictions,
                "effective_batch_size": self.run.effective_batch_size}

    def training_values(self) -> dict[str, Any]:
        """The values that decide the weights a run ends with (`TRAINING_SECTIONS`), flat: what
        a rerun that continues the run compares (`phases.py`)."""
        return {key: value for name in TRAINING_SECTIONS for key, value in getattr(self, name).to_dict().items()}

    # --- construction ------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, values: Mapping[str, Any], source: str = "config") -> "PretrainingConfig":
        """Flat keys, dotted keys or section objects (the derived sizes a saved file carries are
        recomputed, not read)."""
        preset = values.get(PRESET_KEY)
        values = {key: value for key, value in values.items() if key not in (DERIVED_KEY, PRESET_KEY)}
        grouped = SECTIONS.split(values, source)
        try:
            return cls(**{name: section.from_dict(grouped.get(name, {}), source)
                          for name, section in SECTIONS.sections.items()}, preset=preset)
        except ConfigError as error:
            raise ConfigError(error.args[0] if str(error).startswith(source) else f"{source}: {error}") from None

    @classmethod
    def load(cls, name_or_path: str, overrides: Mapping[str, Any] | None = None) -> "PretrainingConfig":
        """Loads a preset name (`electra_small`) or a JSON file path, then applies overrides. The
        config records what it was loaded from (`preset`), unless the file names its own (a run's
        config.json)."""
        path = _resolve(name_or_path)
        read = read_json_object(path, "key: value pairs")
        values = _flat(read, str(path))
        preset = read.get(PRESET_KEY) or preset_label(name_or_path)
        return cls.from_dict({**values, **_flat(overrides or {}, "override"), PRESET_KEY: preset}, source=str(path))

    def to_json(self) -> str:
        """The sections plus the derived sizes (for people reading it; `load` drops them)."""
        return json.dumps({PRESET_KEY: self.preset, **self.to_dict(), DERIVED_KEY: self.derived()}, indent=2)


# The sections whose values decide the weights a run ends with; the others (what the run shows,
# when it saves, where it runs) may change when a rerun continues it.
TRAINING_SECTIONS = ("model", "objective", "optimizer", "run")
SECTIONS = PretrainingConfig().section_map()


def preset_label(name_or_path: str) -> str:
    """How a config records the preset it came from: a preset's name, or a file's absolute path."""
    path = Path(name_or_path)
    return str(path.resolve()) if path.suffix == ".json" or path.exists() else name_or_path


def same_preset(requested: str, recorded: str | None) -> bool:
    """Whether `--config requested` names the preset (or file) a run recorded."""
    return recorded is not None and preset_label(requested) == recorded


def _flat(values: Mapping[str, Any], source: str) -> dict[str, Any]:
    """Section objects spelled out as dotted keys, so a later flat key of the same field wins
    whichever way either was written."""
    flat = {}
    for key, value in values.items():
        if key in SECTIONS.sections and isinstance(value, Mapping):
            flat.update({SECTIONS.locate(f"{key}.{inner}", source)[1]: v for inner, v in value.items()})
        elif key in (DERIVED_KEY, PRESET_KEY):
            continue
        else:
            flat[SECTIONS.locate(key, source)[1]] = value
    return flat


def preset_names() -> list[str]:
    return sorted(p.name[: -len(".json")] for p in _presets_dir().iterdir() if p.name.endswith(".json"))


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
        raise ConfigError(f"unknown config {name_or_path!r}: not a file and not a preset. "
                          f"Presets: {', '.join(preset_names())}.")
    return preset
