"""Step rates of a pre-training run's progress windows, those holding a checkpoint save against
the others: the GPU issue's "a checkpoint write must not halve a window's rate", read off a run.

    python -m electra_tf.pretrain --steps 1000 2>&1 | tee run.log
    python benchmarks/window_rates.py run.log --checkpoint_every 200 --metrics runs/electra_tiny/metrics.json

A window is the steps between two progress lines (`--log_every`); its rate is the line's
examples/s. A save at step S holds up the window after S's line when S is a line's step (the
monitor runs before the saver: pretraining/run.py), so a window (start, end] holds a save when
a multiple of `--checkpoint_every` lies in [start, end), step 0 excepted. The first window (tracing and compiling) and the one after the first line (a
process's first line pays once for its own eager ops; docs/results.md) are shown but left out of
the reference rate: the median of the later windows without a save. Each window that holds a
save (a multiple of `--checkpoint_every` in it) is printed as a share of that median; so is the
smallest. With `--metrics`, the run's own pause counts (`pauses` in metrics.json) are printed
too. Exit status 0 whatever the shares (a measurement, not a test).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

from electra_tf.pretraining.callbacks import passed_a_multiple

PROGRESS_LINE = re.compile(r"^step (\d+)/\d+ .*?\| ([\d,.]+) examples/s")
SKIPPED_AT_START = 2  # the compile's window and the one after the process's first line


def windows(lines, checkpoint_every: int) -> list[dict]:
    """One dict per progress line: `end` step, `rate` (examples/s), `save` (whether the window
    held a save: a multiple of `checkpoint_every` in [start, end), not 0), in the order the
    lines came."""
    found, start = [], 0
    for line in lines:
        match = PROGRESS_LINE.match(line.strip())
        if not match:
            continue
        end, rate = int(match.group(1)), float(match.group(2).replace(",", ""))
        # A multiple in [start, end), step 0 excepted: one in (max(start, 1) - 1, end - 1].
        found.append({"end": end, "rate": rate,
                      "save": passed_a_multiple(max(start, 1) - 1, end - 1, checkpoint_every)})
        start = end
    return found


def shares(found: list[dict]) -> tuple[float | None, list[dict]]:
    """The reference rate (median of the windows without a save, after the first two) and each
    window with its `share` of it (None when there is no reference)."""
    later = found[SKIPPED_AT_START:]
    plain = [window["rate"] for window in later if not window["save"]]
    reference = statistics.median(plain) if plain else None
    return reference, [{**window, "share": window["rate"] / reference if reference else None} for window in found]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("log", type=Path, help="the run's console output (its progress lines)")
    parser.add_argument("--checkpoint_every", type=int, default=200, help="the run's --checkpoint_every")
    parser.add_argument("--metrics", type=Path, default=None, help="the run's metrics.json (its pauses)")
    args = parser.parse_args(argv)
    if not args.log.is_file():
        print(f"window_rates: no file {args.log}: give the run's console output", file=sys.stderr)
        return 2
    found = windows(args.log.read_text(errors="replace").splitlines(), args.checkpoint_every)
    if not found:
        print(f"window_rates: no progress lines ('step N/M ... examples/s') in {args.log}", file=sys.stderr)
        return 2
    reference, rows = shares(found)
    print("| window ends at step | examples/s | holds a save | share of the plain windows' median |")
    print("|---|---|---|---|")
    for index, row in enumerate(rows):
        note = " (left out: compile / first line)" if index < SKIPPED_AT_START else ""
        share = f"{row['share']:.0%}" if row["share"] is not None else ""
        print(f"| {row['end']} | {row['rate']:,.0f} | {'yes' if row['save'] else ''} | {share}{note} |")
    saved = [row["share"] for row in rows[SKIPPED_AT_START:] if row["save"] and row["share"] is not None]
    if reference is None:
        print("no window without a save after the first two: no reference rate")
    elif saved:
        print(f"plain windows' median {reference:,.0f} examples/s; the {len(saved)} holding a save: "
              f"median {statistics.median(saved):.0%}, lowest {min(saved):.0%} (halved below 50%)")
    else:
        print(f"plain windows' median {reference:,.0f} examples/s; no later window held a save")
    if args.metrics is not None and args.metrics.is_file():
        pauses = json.loads(args.metrics.read_text()).get("pauses", {})
        for name, summary in pauses.items():
            print(f"pauses.{name}: {json.dumps(summary)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
