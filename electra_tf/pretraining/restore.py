"""A pre-training run's networks from its model_dir, and a new run started from another's weights.

`restore_pretrainer` (generator and discriminator at a checkpoint; used by fine-tuning, export
and conversion through `finetuning/pretrained.py`), `initialize_from` (`pretrain --init_from`:
the weights of another run or a converted release, matched by name), and the small readers
they share. Every failure is a `PretrainedError` naming the path and what was expected.
"""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf

from electra_tf.models.backbone import read_tokenizer
from electra_tf.models.encoders import model_weights
from electra_tf.pretraining.config import PretrainingConfig
from electra_tf.pretraining.pretrainer import ElectraPretrainer
from electra_tf.training.checkpointing import checkpoint_damage
from electra_tf.utils.errors import PretrainedError
from electra_tf.utils.run_dir import ModelDir, read_provenance
from electra_tf.utils.sections import ConfigError


def read_config(path: Path) -> PretrainingConfig:
    """A run's config.json (every version's), or a PretrainedError naming it."""
    try:
        return PretrainingConfig.load(str(path))
    except OSError as error:
        raise PretrainedError(f"{path}: cannot read the model config ({error}).") from None
    except ConfigError as error:
        raise PretrainedError(str(error)) from None


def restore_pretrainer(model_dir, checkpoint: str | None = None, allow_mlm: bool = False):
    """Generator and discriminator of a pre-training model_dir, restored from its latest (or the
    named) checkpoint: (pretrainer, tokenizer, config, checkpoint path). A run of the MLM
    baseline has no discriminator; it is refused unless `allow_mlm`."""
    model_dir = ModelDir(model_dir)
    config = read_config(model_dir.config)
    tokenizer = read_tokenizer(model_dir.vocab)
    checkpoints = model_dir.checkpoints
    if checkpoint is None:
        found = tf.train.latest_checkpoint(str(checkpoints))
        if found is None:
            raise PretrainedError(f"{checkpoints} holds no checkpoint: pre-training saved none yet.")
    else:
        found = checkpoint if Path(checkpoint).is_absolute() else str(checkpoints / checkpoint)
        if not tf.io.gfile.exists(found + ".index"):
            raise PretrainedError(f"checkpoint {found} does not exist.")
    if config.objective.objective == "mlm" and not allow_mlm:
        raise PretrainedError(f"{model_dir.path} was trained with objective='mlm' (BERT-style baseline): "
                              "it has no discriminator to export or convert; fine-tune it instead.")

    problem = checkpoint_damage(found)
    if problem is not None:
        state = tf.train.get_checkpoint_state(str(checkpoints))
        listed = state.all_model_checkpoint_paths if state else []
        intact = [p for p in listed if p != found and checkpoint_damage(p) is None]
        raise PretrainedError(f"checkpoint {found} is damaged ({problem}): its files {found}.index / "
                              f"{found}.data-* cannot be read in full. "
                              + (f"Intact: {', '.join(Path(p).name for p in intact)}; pass one with --checkpoint."
                                 if intact else "No other intact checkpoint is listed."))
    pretrainer = ElectraPretrainer.from_pretraining_config(config)
    # Same variable list as RunCheckpoint; the optimizer and input state are not needed here.
    tf.train.Checkpoint(model_variables=list(pretrainer.variables)).restore(found).expect_partial()
    return pretrainer, tokenizer, config, found


def source_model_dir(source) -> tuple[Path, str | None]:
    """(model_dir, checkpoint or None) for a model_dir or a checkpoint prefix inside one."""
    source = Path(source)
    if source.is_dir():
        return source, None
    if Path(str(source) + ".index").is_file() and ModelDir(source.parent.parent).config.is_file():
        return source.parent.parent, str(source)
    raise PretrainedError(f"{source} is neither a model_dir (config.json + checkpoints/) nor a checkpoint "
                          "(ckpt-N) inside one's checkpoints/ folder.")


def initialize_from(pretrainer, source) -> str:
    """Copies the weights of another run (or a converted checkpoint) into `pretrainer`, matched
    by variable name; returns the checkpoint used. The optimizer, step and random state are not
    copied: the new run starts its own schedule. Every mismatch is named. A source converted
    from a format that holds no generator (a keras-hub preset) brings the fresh generator its
    conversion initialised; the run's summary says so."""
    model_dir, checkpoint = source_model_dir(source)
    provenance = read_provenance(model_dir)
    if (not provenance.get("generator_weights", True) and not provenance.get("generator_initialised")
            and pretrainer.discriminator is not None):
        raise PretrainedError(f"{model_dir} was converted without a generator; continued ELECTRA pre-training "
                              "needs both networks. Convert again with --generator.")
    source_pretrainer, _, _, found = restore_pretrainer(model_dir, checkpoint)
    theirs = {v.path: v for v in model_weights(source_pretrainer)}
    ours = model_weights(pretrainer)
    missing = [v.path for v in ours if v.path not in theirs]
    mismatched = [f"{v.path} {tuple(theirs[v.path].shape)} -> {tuple(v.shape)}" for v in ours
                  if v.path in theirs and tuple(theirs[v.path].shape) != tuple(v.shape)]
    unused = [path for path in theirs if path not in {v.path for v in ours}]
    if missing or mismatched or unused:
        problems = [f"shape differs: {', '.join(mismatched[:5])}" if mismatched else "",
                    f"not in {found}: {_by_layer(missing)}" if missing else "",
                    f"only in {found}: {_by_layer(unused)}" if unused else ""]
        raise PretrainedError(f"--init_from {source}: the sizes do not match this run's config ("
                              + "; ".join(p for p in problems if p) + "). Use the source's config (leave out "
                              "--config) or change only training settings.")
    for variable in ours:
        variable.assign(theirs[variable.path].numpy())
    return found


def _by_layer(paths: list[str]) -> str:
    """Variable paths grouped by their layer ("generator/transformer_layer_1 (16 variables)")."""
    groups: dict[str, int] = {}
    for path in paths:
        layer = "/".join(path.split("/")[:2])
        groups[layer] = groups.get(layer, 0) + 1
    return ", ".join(f"{layer} ({count} variable{'s' if count > 1 else ''})" for layer, count in groups.items())
