import io

from electra_tf.utils.progress import Progress, format_duration


def test_format_duration():
    assert format_duration(0) == "0:00:00"
    assert format_duration(3723.9) == "1:02:03"
    assert format_duration(-5) == "0:00:00"


def test_line_shows_share_rate_eta_and_extra():
    progress = Progress("build", total=200, unit="MB", stream=None)
    assert progress.line(50, "12 documents", elapsed=25.0) == "build: 25.0% | 2.0 MB/s | ETA 0:01:15 | 12 documents"
    assert Progress("open", total=None, stream=None).line(10, elapsed=5.0) == "open: 2.0 MB/s"


def test_updates_are_throttled_in_a_log_and_the_last_one_is_forced():
    stream = io.StringIO()
    progress = Progress("job", total=10, unit="items", stream=stream, interval=3600)
    progress.update(1, force=True)
    progress.update(2)  # inside the interval: skipped
    progress.finish(10)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2 and lines[0].startswith("job: 10.0%") and lines[1].startswith("job: 100.0%")
    every = io.StringIO()
    progress = Progress("job", total=10, unit="items", stream=every, interval=0.0)
    for done in range(1, 4):
        progress.update(done)
    assert len(every.getvalue().splitlines()) == 3
    once = io.StringIO()
    progress = Progress("job", total=1, unit="items", stream=once, interval=0.0)
    progress.update(1)  # the only item: its line is already the last one
    progress.finish(1)
    lines = once.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("job: 100.0%")


def test_heartbeat_says_a_long_call_is_still_working_and_when_it_ended():
    import io
    import time

    from electra_tf.utils.progress import heartbeat

    stream = io.StringIO()
    with heartbeat("learning", interval=0.05, stream=stream):
        time.sleep(0.18)
    lines = stream.getvalue().splitlines()
    assert len(lines) >= 3 and all(line.startswith("learning: still working, 0:00:00 elapsed") for line in lines[:-1])
    assert lines[-1] == "learning: done in 0:00:00"


def test_on_a_terminal_the_default_stream_rewrites_its_line_in_place(monkeypatch):
    """`stream="stderr"` (the default) is a terminal when sys.stderr is one: the line is redrawn
    with a carriage return instead of a new line each time (it was decided from the string
    "stderr", so never)."""

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    progress = Progress("job", total=10, unit="items", interval=0.0)
    assert progress.tty
    progress.update(5)
    progress.finish(10)
    assert terminal.getvalue().startswith("\rjob: 50.0%") and "\rjob: 100.0%" in terminal.getvalue()
    assert terminal.getvalue().count("\n") == 1  # only the finished line ends
    monkeypatch.setattr("sys.stderr", io.StringIO())  # a log: new lines
    assert not Progress("job", total=10).tty


def test_the_rate_and_eta_follow_the_last_window(monkeypatch):
    """A slow start (loading, compiling) stops weighing on the rate once a window has passed."""
    clock = [1000.0]
    monkeypatch.setattr("time.monotonic", lambda: clock[0])
    progress = Progress("job", total=1000, unit="items", stream=None, window=60.0)
    for seconds, done in ((100, 10), (110, 110), (120, 210), (170, 710)):  # 100 s for 10, then 10/s
        clock[0] = 1000.0 + seconds
        line = progress.line(done)
        progress._history.append((clock[0], done))
    assert "10.0 items/s" in line and "ETA 0:00:29" in line  # 290 left at 10/s (the average says 4.2/s)
