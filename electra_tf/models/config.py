"""`ModelConfig`: what building an ELECTRA encoder needs, and nothing else.

The discriminator's architecture (its encoder and replaced-token head), saved with the
backbone (`models/backbone.py`) and read back to rebuild it. How it is trained lives beside the
training code: the pre-training objective and run in `pretraining/config.py`, the optimizer in
`runtime/optimizer.py`. The generator is an encoder of the same kind at other sizes
(`ModelConfig.resized`, what `pretraining.config.ObjectiveConfig.generator_model` asks for).

>>> model = ModelConfig(hidden_size=256, num_heads=4)
>>> model.resized(hidden_size=64, num_heads=1, intermediate_size=256).hidden_size
64
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Mapping

from electra_tf.utils.sections import ConfigError, Section

POSITION_INITS = ("truncated_normal", "sinusoidal")


@dataclasses.dataclass(frozen=True)
class ModelConfig(Section):
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

    def check(self) -> None:
        for key in ("vocab_size", "embedding_size", "hidden_size", "num_layers", "num_heads", "intermediate_size",
                    "max_position_embeddings", "type_vocab_size"):
            self.require(getattr(self, key) > 0, key, "must be positive.")
        self.require(self.hidden_size % self.num_heads == 0, "hidden_size",
                     f"must be divisible by num_heads ({self.num_heads}).")
        self.require(0.0 <= self.dropout < 1.0, "dropout", "must be in [0, 1).")
        self.require(self.layer_norm_epsilon > 0, "layer_norm_epsilon", "must be positive.")
        self.require(self.initializer_range > 0, "initializer_range", "must be positive.")
        self.require(self.position_embedding_init in POSITION_INITS, "position_embedding_init",
                     f"must be one of {POSITION_INITS}.")

    def resized(self, hidden_size: int, num_layers: int | None = None, num_heads: int | None = None,
                intermediate_size: int | None = None) -> "ModelConfig":
        """The same kind of encoder at other sizes (the generator's)."""
        return self.replace(hidden_size=hidden_size, num_layers=num_layers or self.num_layers,
                            num_heads=num_heads or self.num_heads,
                            intermediate_size=intermediate_size or self.intermediate_size)

    @classmethod
    def from_any(cls, values: Mapping[str, Any], source: str = "config") -> "ModelConfig":
        """The model section of a saved config: `{"model": {...}}`, or a flat file as every
        config.json was written before the sections (its other keys are not the model's)."""
        model = values.get("model")
        if isinstance(model, Mapping):
            return cls.from_dict(model, source)
        known = cls.field_types()
        return cls.from_dict({key: value for key, value in values.items() if key in known}, source)


def read_json_object(path: str | Path, what: str = "config") -> dict:
    """A JSON file that must hold an object; a ConfigError naming the file otherwise."""
    path = Path(path)
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ConfigError(f"{path}: not valid JSON ({error}).") from None
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: expected a JSON object ({what}).")
    return values
