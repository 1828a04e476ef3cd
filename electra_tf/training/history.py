"""A run's history across the processes that trained it: `RUN_DIR/processes.json`.

A run may take several processes: one stopped by Ctrl-C or preemption, or killed, then
resumed; a finished run extended or rerun. Each process's entry (when it started, the step it
resumed from and the last step it saved, its training time, its evaluations during training)
is rewritten at every checkpoint and at the end, atomically, so a killed process leaves what it
had saved. metrics.json, written when the run finishes, describes the whole run from it:
evaluations from every process, time and steps summed, each process listed.

A folder whose run finished before this file existed has a metrics.json only: its one process
is read from there (`from_summary`).

>>> import tempfile
>>> history = RunHistory(Path(tempfile.mkdtemp()) / "processes.json")
>>> history.begin(resumed_from=None, step=0)
>>> history.update(step=100, timings={"train_seconds": 20.0, "step_seconds": 0.1}, evaluations={100: {"auc": 0.7}})
>>> again = RunHistory(history.path)
>>> again.begin(resumed_from=100, step=100)
>>> again.update(step=200, timings={"train_seconds": 10.0, "step_seconds": 0.1}, evaluations={200: {"auc": 0.8}})
>>> again.totals()["train_seconds"], again.totals()["steps_trained"], sorted(again.evaluations())
(30.0, 200, ['100', '200'])
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from electra_tf.utils.files import atomic_write_text


class RunHistory:
    """The processes of a run; this process's entry is the last. `writes=False` (a worker that
    is not the chief) keeps its entry in memory only."""

    def __init__(self, path: Path, writes: bool = True, summary_path: Path | None = None):
        self.path, self.writes = Path(path), writes
        self.earlier = self._read(summary_path)
        self.current: dict = {}
        self._began = time.monotonic()

    def _read(self, summary_path: Path | None) -> list[dict]:
        if self.path.is_file():
            try:
                processes = json.loads(self.path.read_text(encoding="utf-8"))
                if isinstance(processes, list):
                    return processes
            except json.JSONDecodeError:
                pass  # a damaged history starts afresh; the run's state is in its checkpoints
        if summary_path is not None and Path(summary_path).is_file():
            return [from_summary(json.loads(Path(summary_path).read_text(encoding="utf-8")))]
        return []

    def begin(self, resumed_from: int | None, step: int) -> None:
        self.current = {"started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "pid": os.getpid(),
                        "resumed_from": resumed_from, "first_step": step, "step": step, "steps": 0,
                        "status": "running", "seconds": 0.0, "evaluations": {}}

    def update(self, step: int, timings: dict | None = None, evaluations: dict | None = None,
               status: str | None = None) -> None:
        """This process reached `step` (saved there, or ended); rewrites the file."""
        self.current.update({"step": step, "steps": step - self.current["first_step"],
                             "seconds": round(time.monotonic() - self._began, 1), **(timings or {})})
        self.current["evaluations"] = {str(k): v for k, v in (evaluations or {}).items()}
        if status is not None:
            self.current["status"] = status
        if self.writes:
            atomic_write_text(self.path, json.dumps(self.processes(), indent=2) + "\n")

    def processes(self) -> list[dict]:
        return [*self.earlier, self.current] if self.current else list(self.earlier)

    def described(self) -> list[dict]:
        """The processes for metrics.json: each one's evaluations by count (their metrics are
        `evaluations()`)."""
        return [{**{k: v for k, v in p.items() if k != "evaluations"}, "evaluations": len(p.get("evaluations", {}))}
                for p in self.processes()]

    def evaluations(self) -> dict[str, dict]:
        """Every process's evaluations during training by step (a later process's at the same
        step, after a resume, replaces the earlier one's)."""
        merged = {}
        for process in self.processes():
            merged.update(process.get("evaluations", {}))
        return dict(sorted(merged.items(), key=lambda item: int(item[0])))

    def totals(self) -> dict:
        """Summed over the processes: training time, wall time, steps trained (a killed
        process's steps after its last checkpoint are trained again, and counted twice)."""
        processes = self.processes()
        trained = [p for p in processes if p.get("steps")]
        timed = [p for p in trained if "step_seconds" in p]
        totals = {"train_seconds": round(sum(p.get("train_seconds", 0.0) for p in processes), 3),
                  "seconds": round(sum(p.get("seconds", 0.0) for p in processes), 1),
                  "steps_trained": sum(p.get("steps", 0) for p in processes), "processes": len(processes)}
        if trained and "first_step_seconds" in trained[0]:
            totals["first_step_seconds"] = trained[0]["first_step_seconds"]  # the run's fresh start
        if timed:  # weighted by steps: the run's steady step
            totals["step_seconds"] = sum(p["step_seconds"] * p["steps"] for p in timed) / sum(p["steps"] for p in timed)
        return totals


def from_summary(summary: dict) -> dict:
    """The one process a metrics.json written without a history describes."""
    evaluations = summary.get("evaluations_during_run") or {}
    steps = summary.get("steps_this_run") or 0
    step = summary.get("step", 0)
    entry = {"started": None, "resumed_from": None, "first_step": step - steps, "step": step, "steps": steps,
             "status": "finished", "seconds": summary.get("seconds", 0.0), "evaluations": evaluations}
    for key in ("train_seconds", "first_step_seconds", "step_seconds"):
        if summary.get(key) is not None:
            entry[key] = summary[key]
    return entry
