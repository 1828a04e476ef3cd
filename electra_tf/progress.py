"""Progress lines with rate and ETA for long jobs (data building, vocabulary learning)."""

from __future__ import annotations

import sys
import time


def format_duration(seconds: float) -> str:
    seconds = int(max(0, seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class Progress:
    """Prints `label: 42.0% | 3.1 MB/s | ETA 0:01:05 | extra` at most every `interval` s.

    On a terminal the line is rewritten in place; in a log a new line is written, less often.

    Example:
    >>> progress = Progress("demo", total=100, unit="items", stream=None)
    >>> progress.line(50, elapsed=10.0)
    'demo: 50.0% | 5.0 items/s | ETA 0:00:10'
    """

    def __init__(self, label: str, total: float | None, unit: str = "MB", scale: float = 1.0,
                 stream="stderr", interval: float | None = None):
        self.label, self.total, self.unit, self.scale = label, total, unit, scale
        self.stream = sys.stderr if stream == "stderr" else stream  # resolved now, not at import
        self.tty = bool(stream is not None and getattr(stream, "isatty", lambda: False)())
        self.interval = interval if interval is not None else (0.5 if self.tty else 10.0)
        self.started = time.monotonic()
        self._last = 0.0

    def line(self, done: float, extra: str = "", elapsed: float | None = None) -> str:
        elapsed = time.monotonic() - self.started if elapsed is None else elapsed
        rate = done / elapsed if elapsed > 0 else 0.0
        parts = [f"{self.label}:"]
        if self.total:
            parts.append(f"{100.0 * done / self.total:.1f}% |")
        parts.append(f"{rate / self.scale:.1f} {self.unit}/s")
        if self.total and rate > 0:
            parts.append(f"| ETA {format_duration((self.total - done) / rate)}")
        if extra:
            parts.append(f"| {extra}")
        return " ".join(parts)

    def update(self, done: float, extra: str = "", force: bool = False) -> None:
        now = time.monotonic()
        if self.stream is None or (not force and now - self._last < self.interval):
            return
        self._last = now
        text = self.line(done, extra)
        if self.tty:
            self.stream.write("\r" + text.ljust(100))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def finish(self, done: float, extra: str = "") -> None:
        self.update(done, extra, force=True)
        if self.tty and self.stream is not None:
            self.stream.write("\n")
