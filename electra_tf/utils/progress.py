"""Progress lines with rate and ETA for long jobs (data building, question-answering windows and
predictions, a run's final evaluation)."""

from __future__ import annotations

import collections
import contextlib
import sys
import threading
import time


def format_duration(seconds: float) -> str:
    seconds = int(max(0, seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def readable_rate(rate: float) -> str:
    """Whole numbers from 100, one decimal from 1, three significant digits below.

    >>> [readable_rate(r) for r in (12345.6, 12.34, 0.012345, 0.0)]
    ['12,346', '12.3', '0.0123', '0']
    """
    if rate >= 100:
        return f"{rate:,.0f}"
    if rate >= 1:
        return f"{rate:.1f}"
    return f"{rate:.3g}"


class Progress:
    """Prints `label: 42.0% | 3.1 MB/s | ETA 0:01:05 | extra` at most every `interval` s, the
    first after `interval` s (a job shorter than that prints only its last line).

    On a terminal the line is rewritten in place; in a log a new line is written, less often.
    The rate, and the ETA from it, are those of the last `window` seconds: a job's start
    (loading, compiling) does not weigh on them once it has passed. A rate below 1 keeps three
    significant digits (0.0421 MB/s, not 0.0).

    Example:
    >>> progress = Progress("demo", total=100, unit="items", stream=None)
    >>> progress.line(50, elapsed=10.0)
    'demo: 50.0% | 5.0 items/s | ETA 0:00:10'
    """

    def __init__(self, label: str, total: float | None, unit: str = "MB", scale: float = 1.0,
                 stream="stderr", interval: float | None = None, window: float = 60.0):
        self.label, self.total, self.unit, self.scale = label, total, unit, scale
        self.stream = sys.stderr if stream == "stderr" else stream  # resolved now, not at import
        self.tty = bool(self.stream is not None and getattr(self.stream, "isatty", lambda: False)())
        self.interval = interval if interval is not None else (0.5 if self.tty else 10.0)
        self.window = window
        self.started = time.monotonic()
        self._last = self.started
        self._last_done = None  # the count of the last line written
        self._history = collections.deque([(self.started, 0.0)])  # (time, done) of recent updates

    def rate(self, done: float, now: float) -> float:
        """Per second over the last `window` seconds (since the start until one has passed)."""
        while len(self._history) > 1 and now - self._history[1][0] >= self.window:
            self._history.popleft()
        since, done_then = self._history[0]
        return (done - done_then) / (now - since) if now > since else 0.0

    def line(self, done: float, extra: str = "", elapsed: float | None = None) -> str:
        if elapsed is None:
            rate = self.rate(done, time.monotonic())
        else:
            rate = done / elapsed if elapsed > 0 else 0.0
        parts = [f"{self.label}:"]
        if self.total:
            parts.append(f"{100.0 * done / self.total:.1f}% |")
        parts.append(f"{readable_rate(rate / self.scale)} {self.unit}/s")
        if self.total and rate > 0:
            parts.append(f"| ETA {format_duration((self.total - done) / rate)}")
        if extra:
            parts.append(f"| {extra}")
        return " ".join(parts)

    def update(self, done: float, extra: str = "", force: bool = False) -> None:
        now = time.monotonic()
        if self.stream is None or (not force and now - self._last < self.interval):
            return
        self._last, self._last_done = now, done
        text = self.line(done, extra)
        self._history.append((now, done))
        if self.tty:
            self.stream.write("\r" + text.ljust(100))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def finish(self, done: float, extra: str = "") -> None:
        # In a log, a line already written for this count is not written again (a one-batch
        # evaluation printed its 100% line twice); on a terminal the line is redrawn in place.
        if self.tty or done != self._last_done:
            self.update(done, extra, force=True)
        if self.tty and self.stream is not None:
            self.stream.write("\n")


def batch_progress(label: str, total_batches: int, unit: str = "batches", stream=None):
    """A Keras callback that shows a `Progress` line over `evaluate` or `predict` batches,
    reaching 100% when they end (Keras' own bar is off in the commands' logs)."""
    import keras

    class BatchProgress(keras.callbacks.Callback):
        def _begin(self, logs=None):
            self.progress = Progress(label, total=total_batches, unit=unit, stream=stream or sys.stdout)
            self.done = 0

        def _batch(self, batch, logs=None):
            self.done = batch + 1
            self.progress.update(self.done)

        def _end(self, logs=None):
            self.progress.finish(self.done)

        on_predict_begin = on_test_begin = _begin
        on_predict_batch_end = on_test_batch_end = _batch
        on_predict_end = on_test_end = _end

    return BatchProgress()


@contextlib.contextmanager
def heartbeat(label: str, interval: float = 15.0, stream=None):
    """For one long call that reports nothing (the WordPiece learner, writing a SavedModel): a
    line `label: still working, 0:00:30 elapsed` every `interval` seconds until it returns, and
    `label: done in 0:01:49`. No percentage: there is nothing to measure it by."""
    stream = stream or sys.stderr
    started, finished = time.monotonic(), threading.Event()

    def beat():
        while not finished.wait(interval):
            stream.write(f"{label}: still working, {format_duration(time.monotonic() - started)} elapsed\n")
            stream.flush()

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        finished.set()
        thread.join()
    stream.write(f"{label}: done in {format_duration(time.monotonic() - started)}\n")
    stream.flush()
