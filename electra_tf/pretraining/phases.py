"""What a pre-training command may change in a model_dir that already holds a run: a pure
policy (no TensorFlow, no files), which `pretraining/task.py` applies.

A command on a model_dir that holds a run starts from that run's saved config, not from a
preset: `--set` overrides change the run's own values (`requested_config`). Then
`continue_run` decides:

- the same phase: only a longer run may differ. More num_train_steps extends it, keeping its
  warmup; the learning rate then follows the official schedule for the new total, as the
  official code does when restarted with a larger num_train_steps (linear decay to 0 at the
  new end; at the extension point the rate steps up from where the old plan had it);
- the next phase (`--phase` one above the saved run's): it starts at the run's latest
  checkpoint, keeping weights, optimizer state and step count, and may change only
  `PHASE_SETTINGS` (sequence length and batch, and its own schedule). NVIDIA's recipe starts
  its phase 2 from phase 1's checkpoint with a schedule of its own (new warmup and decay);
  here the step count goes on, and the schedule is offset to the phase's first step.

A later phase cannot read longer sequences than the run's position table has rows
(max_position_embeddings, fixed when the run started). The tiny preset's table holds 128,
its sequence length, so it makes room for a longer phase only when phase 1 starts with
`--set max_position_embeddings=512` (`position_note` says so in phase 1's header).

>>> from electra_tf.pretraining.config import PretrainingConfig
>>> saved = PretrainingConfig.load("electra_small", {"num_train_steps": 1000})
>>> decision = continue_run(saved, saved.replace(num_train_steps=2000), phase=None, latest_step=1000)
>>> decision.config.run.num_train_steps, decision.change["rule"].split(",")[0]
(2000, 'linear decay to 0 at the new num_train_steps')
>>> phase_2 = continue_run(saved, saved.replace(num_train_steps=1200, max_seq_length=512, num_warmup_steps=20),
...                        phase=2, latest_step=1000)
>>> phase_2.config.run.phase, phase_2.config.run.phase_start_step, phase_2.starts_phase
(2, 1000, True)
"""

from __future__ import annotations

import dataclasses

from electra_tf.pretraining.config import SECTIONS, PretrainingConfig
from electra_tf.utils.errors import RunError
from electra_tf.utils.sections import ConfigError

# What a new phase may change: the sequence length and batch, and the phase's own schedule.
PHASE_SETTINGS = ("max_seq_length", "train_batch_size", "gradient_accumulation_steps", "learning_rate",
                  "num_warmup_steps", "num_train_steps", "lr_decay_power")
DOCS = "docs/pretraining.md#when-the-batch-does-not-fit"


@dataclasses.dataclass(frozen=True)
class RunShortcuts:
    """The command's shortcuts for run settings (`--steps`, `--batch_size`, `--seed`,
    `--gradient_accumulation_steps`); None leaves the config's value."""

    steps: int | None = None
    batch_size: int | None = None
    seed: int | None = None
    gradient_accumulation_steps: int | None = None


@dataclasses.dataclass(frozen=True)
class PhaseDecision:
    """What to run with. `messages` go to the progress output, `warnings` to stderr; `change`
    ({"changed": {key: [old, new]}, "rule": ...}) is what config_history.json records."""

    config: PretrainingConfig
    starts_phase: bool = False
    messages: tuple = ()
    warnings: tuple = ()
    change: dict | None = None


def requested_config(base: PretrainingConfig, assignments: list[str], shortcuts: RunShortcuts = RunShortcuts(),
                     saved: PretrainingConfig | None = None) -> PretrainingConfig:
    """`base` (the run's saved config when it has one, else a preset or file) with `--set`
    assignments and the shortcuts. `--steps` shortens warmup to at most a tenth of the run, so
    a short run still decays. A sequence longer than the saved run's position table is
    refused here, with how to make room."""
    changes = {f"{section}.{key}": value for section, fields in SECTIONS.parse_assignments(assignments).items()
               for key, value in fields.items()}
    if shortcuts.steps is not None:
        changes["num_train_steps"] = shortcuts.steps
        changes["num_warmup_steps"] = min(changes.get("optimizer.num_warmup_steps", base.optimizer.num_warmup_steps),
                                          shortcuts.steps // 10)
    for key, value in (("train_batch_size", shortcuts.batch_size), ("seed", shortcuts.seed),
                       ("gradient_accumulation_steps", shortcuts.gradient_accumulation_steps)):
        if value is not None:
            changes[key] = value
    length = changes.get("run.max_seq_length", base.run.max_seq_length)
    positions = changes.get("model.max_position_embeddings", base.model.max_position_embeddings)
    if saved is not None and length > positions:
        raise RunError(f"this command trains at {length} tokens, but the run's position table has {positions} rows "
                       f"(max_position_embeddings, fixed when its first phase started): no phase of it can read "
                       f"longer sequences. To train at {length} tokens later, start the run's first phase with "
                       f"--set max_position_embeddings={max(length, 512)} ({DOCS}); or use a new --model_dir.")
    try:
        return base.replace(**changes)
    except ConfigError as error:
        raise RunError(str(error)) from None


def continue_run(saved: PretrainingConfig | None, requested: PretrainingConfig, phase: int | None,
                 latest_step: int | None, where: str = "the model_dir") -> PhaseDecision:
    """The config to run with in a model_dir whose saved config is `saved` (None: a new run),
    whose latest checkpoint is at `latest_step`, when the command asks for `requested` and
    `phase` (None: the current one)."""
    if saved is None:
        if phase not in (None, 1):
            raise RunError(f"--phase {phase} continues a run, but {where} holds none: give the model_dir of the "
                           "run's first phase.")
        return PhaseDecision(requested)
    phase = saved.run.phase if phase is None else phase
    if phase == saved.run.phase + 1:
        return _start_phase(saved, requested.replace(phase=phase), latest_step, where)
    if phase != saved.run.phase:
        raise RunError(f"{where} holds phase {saved.run.phase} of a run: --phase {phase} can only continue it "
                       f"(--phase {saved.run.phase}) or start phase {saved.run.phase + 1}.")
    config = requested.replace(phase=saved.run.phase, phase_start_step=saved.run.phase_start_step)
    differing = differing_keys(saved, config)
    if not differing:
        return PhaseDecision(config)
    if set(differing) <= {"num_train_steps", "num_warmup_steps"} and \
            config.run.num_train_steps > saved.run.num_train_steps:
        return _extend(saved, config, where)
    details = describe_changes(saved, config, differing)
    if "max_seq_length" in differing:
        raise RunError(f"{where} holds a run at {saved.run.max_seq_length} tokens and this command trains at "
                       f"{config.run.max_seq_length} ({details}). To continue the run at the new length, keeping its "
                       f"weights, optimizer state and step count, start a new phase: add --phase {saved.run.phase + 1} "
                       f"({DOCS}). Otherwise use a new --model_dir.")
    hint = " (--steps may only grow: a larger value extends the run)" if "num_train_steps" in differing else ""
    raise RunError(f"{where} holds a run with a different config ({details}){hint}. Rerun with the same settings "
                   "to continue it, choose a new --model_dir, or start a new run from its weights with --init_from.")


def _extend(saved: PretrainingConfig, config: PretrainingConfig, where: str) -> PhaseDecision:
    extended = config.replace(num_warmup_steps=saved.optimizer.num_warmup_steps)
    warnings = ()
    if config.optimizer.num_warmup_steps != saved.optimizer.num_warmup_steps:
        # A short trial run in the default folder would otherwise silently become the run this
        # command asked for, with the trial's warmup.
        warnings = (f"warning: {where} holds an earlier, shorter run, which this continues: it keeps that run's "
                    f"num_warmup_steps {saved.optimizer.num_warmup_steps:,} (these settings alone would warm up "
                    f"over {config.optimizer.num_warmup_steps:,}). To train these settings from the start, give a "
                    f"new --model_dir or remove {where}.",)
    return PhaseDecision(
        extended, messages=(f"  extending the run from {saved.run.num_train_steps:,} to "
                            f"{extended.run.num_train_steps:,} steps: the learning rate decays linearly to 0 at the "
                            "new end (official schedule for the new total)",),
        warnings=warnings, change=_change(saved, extended, "linear decay to 0 at the new num_train_steps, warmup "
                                                           "unchanged"))


def _start_phase(saved: PretrainingConfig, config: PretrainingConfig, start: int | None, where: str) -> PhaseDecision:
    phase = config.run.phase
    if start is None:
        raise RunError(f"phase {phase} starts from phase {saved.run.phase}'s latest checkpoint, but {where} has none: "
                       f"train phase {saved.run.phase} first.")
    if config.run.num_train_steps <= start:
        raise RunError(f"phase {phase} starts at step {start:,}, and num_train_steps ({config.run.num_train_steps:,}) "
                       "is the step the run ends at, over all phases: give --steps larger than "
                       f"{start:,} (e.g. --steps {start + max(1, start // 10):,} for a phase a tenth as long).")
    config = config.replace(phase_start_step=start)
    fixed = [k for k in differing_keys(saved, config) if k not in PHASE_SETTINGS + ("phase", "phase_start_step")]
    if fixed:
        raise RunError(f"a new phase keeps the run's model, objective and optimizer; this command changes "
                       f"{describe_changes(saved, config, fixed)}. A phase may change only {', '.join(PHASE_SETTINGS)}.")
    length = config.run.num_train_steps - start
    if config.optimizer.num_warmup_steps >= length:
        raise RunError(f"phase {phase} is {length:,} steps long, but its num_warmup_steps is "
                       f"{config.optimizer.num_warmup_steps:,}: set num_warmup_steps below {length:,} "
                       "(--set num_warmup_steps=N).")
    message = (f"  starting phase {phase} at step {start:,}: {length:,} steps at {config.run.max_seq_length} tokens, "
               f"warming up over {config.optimizer.num_warmup_steps:,}; weights, optimizer state and step count "
               "carry over")
    return PhaseDecision(config, starts_phase=True, messages=(message,), change=_change(
        saved, config, f"phase {phase} from step {start}: its own warmup and decay over [phase_start_step, "
        "num_train_steps]; weights, optimizer state and step count kept"))


def position_note(config: PretrainingConfig) -> str | None:
    """A first phase's note when its position table leaves no room for a longer phase."""
    if config.run.phase == 1 and config.model.max_position_embeddings <= config.run.max_seq_length:
        return (f"  positions: the table holds {config.model.max_position_embeddings}, this run's sequence length; a "
                "later phase at longer sequences needs a run started with --set max_position_embeddings=512")
    return None


def differing_keys(saved: PretrainingConfig, config: PretrainingConfig) -> list[str]:
    """The values deciding the weights (`TRAINING_SECTIONS`) that differ; the others may change."""
    ours, theirs = saved.training_values(), config.training_values()
    return sorted(k for k in theirs if ours[k] != theirs[k])


def describe_changes(saved: PretrainingConfig, config: PretrainingConfig, keys) -> str:
    ours, theirs = saved.training_values(), config.training_values()
    return ", ".join(f"{k}: {ours[k]!r} -> {theirs[k]!r}" for k in keys)


def _change(saved: PretrainingConfig, new: PretrainingConfig, rule: str) -> dict:
    ours, theirs = saved.training_values(), new.training_values()
    return {"changed": {k: [ours[k], theirs[k]] for k in differing_keys(saved, new)}, "rule": rule}
