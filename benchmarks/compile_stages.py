"""Where a compiled step's first call spends its time, read from TensorFlow's own log.

    TF_CPP_MIN_LOG_LEVEL=0 TF_CPP_VMODULE=xla_compiler=1,device_compiler=1,device_executable_persistor=1 \\
        python benchmarks/startup.py --xla 2> tf.log
    python benchmarks/compile_stages.py tf.log

`startup.py` times a first call as a whole: XLA's lowering and compile, or the cached program's
load, and the step. With the three modules' log on (level 1), TensorFlow logs a line as each part
begins; this script reads their timestamps and prints each part's duration, for every XLA program
the process compiled or loaded (the longest first):

- preparing the function for lowering: from `XlaCompiler::CompileFunction` to the graph's
  symbolic execution (TensorFlow's function instantiation and graph passes);
- lowering to HLO: each op's XLA kernel runs once, symbolically (grows with the traced ops);
- hashing the HLO, the persistent cache's key;
- reading the cache file, then loading the cached executable (a rerun); or, with no file there,
  XLA's compile, then writing the program to the cache (a fresh process).

The step itself comes after; `startup.py`'s first call minus these is the first step's run.

With `command_buffer_thunk=3` in TF_CPP_VMODULE too, the script also sums up how the program ran
its command buffers (`command_buffers`): XLA's GPU backend records runs of kernels into CUDA
graphs and replays each graph with one launch (`--xla_gpu_enable_command_buffer`, on by default
in TensorFlow 2.21's XLA; how TensorFlow's step runs them is what this log shows). The log says
how often a graph was launched, how often it was recorded again because the buffers it points at
had moved (host work that grows with its commands, timed in the log), and how often it ran kernel
by kernel instead because a profiler was on (XLA's workaround for CUPTI, unless
`--xla_enable_command_buffers_during_profiling=true`).
"""

from __future__ import annotations

import argparse
import re
import sys

# absl's prefix: severity, MMDD (or 0000), HH:MM:SS.us (TensorFlow 2.21 prints 00:00:<unix seconds>),
# thread id, file:line].
LOG_LINE = re.compile(r"^[IWEF](\d{4}) (\d\d):(\d\d):(\d+(?:\.\d+)?)\s+\d+ [\w.]+:\d+\] (.*)$")

# (what the line says, the stage that begins with it)
MARKERS = (
    ("XlaCompiler::CompileFunction", "prepare the function for lowering"),
    ("Executing graph symbolically", "lower the graph to HLO"),
    ("Building new computation", "build the XLA computation"),
    ("Try loading serialized cache entry", "read the cache file (none there: XLA's compile)"),
    ("Loading cached entry for", "load the cached executable"),
    ("Serializing and saving cache entry", "write the program to the cache"),
)
LOWERED = "hash the HLO (the cache's key)"  # begins with the banner that closes the lowering
END = "Compilation of XLA executable time"


def timestamp(match) -> float:
    """Seconds: TensorFlow's prefix is either MMDD and a clock time or 0000 00:00:<unix seconds>.
    A run across midnight keeps counting (a month counts 31 days: only differences are used)."""
    month, day = int(match.group(1)[:2]), int(match.group(1)[2:])
    hours, minutes, seconds = int(match.group(2)), int(match.group(3)), float(match.group(4))
    return ((month * 31 + day) * 24 + hours) * 3600 + minutes * 60 + seconds


def compiles(lines) -> list[dict]:
    """Each compile or load in the log: {"function", "stages": [(stage, seconds)], "total"}.

    The lowering of a function lowers the functions it calls (loop bodies, branches) with their
    own `CompileFunction` lines; a stack of the functions being lowered (each: whether its
    computation is built yet) keeps those inside their caller's stage."""
    found, current, stack = [], None, []
    for line in lines:
        match = LOG_LINE.match(line.rstrip("\n"))
        if not match:
            continue
        when, message = timestamp(match), match.group(5)
        stage = next((stage for text, stage in MARKERS if message.startswith(text)), None)
        if message.startswith("XlaCompiler::CompileFunction"):
            if current is None:
                words = message.split()
                current = {"function": words[1].split("[")[0] if len(words) > 1 else "?", "marks": []}
            stack.append(False)
        if current is None:
            continue
        if stack and message.startswith("Building new computation"):
            stack[-1] = True
        if stack and message.startswith("=====") and stack[-1]:
            stack.pop()  # the banner that closes a function's lowering
            stage = None if stack else LOWERED
        outermost = len(stack) <= 1
        if stage and outermost and stage not in (s for s, _ in current["marks"]):
            current["marks"].append((stage, when))
        if message.startswith(END):
            marks = current["marks"]
            stages = [(stage, (marks[i + 1][1] if i + 1 < len(marks) else when) - start)
                      for i, (stage, start) in enumerate(marks)]
            found.append({"function": current["function"], "stages": stages, "total": when - marks[0][1]})
            current, stack = None, []
    return found


def format_compiles(found, minimum_seconds: float = 0.5) -> str:
    rows = []
    for compiled in sorted(found, key=lambda c: -c["total"]):
        if compiled["total"] < minimum_seconds:
            continue
        rows.append(f"{compiled['function']}: {compiled['total']:.2f} s")
        rows += [f"  {stage:<70} {seconds:7.2f} s" for stage, seconds in compiled["stages"]]
    skipped = sum(1 for c in found if c["total"] < minimum_seconds)
    if skipped:
        rows.append(f"({skipped} more under {minimum_seconds} s each)")
    return "\n".join(rows) if rows else "no XLA compile in the log: was TF_CPP_VMODULE set (see the docstring)?"


# command_buffer_thunk.cc's VLOG(3) lines (TensorFlow 2.21's XLA) and its VLOG(1) line under a profiler.
RECORDED = re.compile(r"^Initialized command buffer on device #\d+ in (\d+) \S+; num_commands=(\d+)")
UPDATE = re.compile(r"^Update command buffer on device #\d+ by recoding command buffer cmd sequence after "
                    r"(\d+) executions")
UPDATED = re.compile(r"^Updated command buffer in (\d+) \S+; num_commands=(\d+)")
EXECUTED = "Execute command buffer on device #"
OP_BY_OP = "Execute command buffer thunk as a regular thunk sequence"


def command_buffers(lines) -> dict:
    """How a process's command buffers ran, from command_buffer_thunk's log: launches as graphs,
    first recordings and re-recordings (count, microseconds, commands), the executions before
    each re-recording, and the replays kernel by kernel under a profiler."""
    found = {"launched": 0, "recorded": 0, "recorded_us": 0, "rerecorded": 0, "rerecorded_us": 0,
             "commands": [], "executions_before_rerecording": [], "op_by_op": 0}
    for line in lines:
        match = LOG_LINE.match(line.rstrip("\n"))
        if not match:
            continue
        message = match.group(5)
        if message.startswith(EXECUTED):
            found["launched"] += 1
        elif message.startswith(OP_BY_OP):
            found["op_by_op"] += 1
        elif recorded := RECORDED.match(message):
            found["recorded"] += 1
            found["recorded_us"] += int(recorded.group(1))
            found["commands"].append(int(recorded.group(2)))
        elif update := UPDATE.match(message):
            found["executions_before_rerecording"].append(int(update.group(1)))
        elif updated := UPDATED.match(message):
            found["rerecorded"] += 1
            found["rerecorded_us"] += int(updated.group(1))
    return found


def any_command_buffer(found: dict) -> bool:
    """Whether `command_buffers` found a graph recorded, launched or replayed in the log."""
    return bool(found["launched"] or found["recorded"] or found["op_by_op"])


def format_command_buffers(found: dict) -> str:
    if not any_command_buffer(found):
        return ("no command buffer in the log (command_buffer_thunk=3 not in TF_CPP_VMODULE, no GPU, or "
                "--xla_gpu_enable_command_buffer= empty)")
    commands = sorted(found["commands"])
    lines = [f"command buffers (CUDA graphs): {found['recorded']} recorded ({found['recorded_us'] / 1e3:.1f} ms; "
             f"commands each: {commands[0] if commands else 0} to {commands[-1] if commands else 0}, "
             f"{sum(commands)} in all), launched {found['launched']} times as graphs, "
             f"{found['op_by_op']} times kernel by kernel (under a profiler)"]
    if found["rerecorded"]:
        waits = sorted(found["executions_before_rerecording"])
        lines.append(f"  re-recorded {found['rerecorded']} times (the buffers they point at had moved): "
                     f"{found['rerecorded_us'] / 1e3:.1f} ms, {found['rerecorded_us'] / found['rerecorded']:.0f} us "
                     f"each; median executions before one: {waits[len(waits) // 2] if waits else '?'}")
    else:
        lines.append("  never re-recorded: every launch replayed its graph as recorded")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("log", help="the stderr of a process run with the docstring's TF_CPP_VMODULE")
    parser.add_argument("--command_buffers", action="store_true",
                        help="sum up the command buffers even if the log has none (then says so): for a log "
                             "with command_buffer_thunk=3 in TF_CPP_VMODULE")
    args = parser.parse_args(argv)
    with open(args.log, errors="replace") as log:
        lines = log.readlines()
    print(format_compiles(compiles(lines)))
    buffers = command_buffers(lines)
    if args.command_buffers or any_command_buffer(buffers):
        print(format_command_buffers(buffers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
