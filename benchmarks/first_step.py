"""The first step under XLA, fresh and rerun, for sets of XLA flags: what a user waits for
before a run's first step, and what each flag costs the steps after it.

    python benchmarks/first_step.py                            # on a GPU: ELECTRA-Small, 128 x 128, mixed_bfloat16
    python benchmarks/first_step.py --flag_set= --flag_set="--xla_gpu_enable_triton_gemm=false --xla_gpu_autotune_level=1"
    python benchmarks/first_step.py --size tiny --batch 8 --precision float32 --flag_set=   # a quick look on CPU

XLA compiles the step the first time it runs (183 s for ELECTRA-Small on one H100 with the
default flags: LLVM, `ptxas`, and autotuning, which times candidate kernels on the GPU). Every
run keeps compiled programs in a persistent cache (`runtime.use_compile_cache`), so a rerun,
resume or extension loads the program instead. For each set of XLA_FLAGS this script runs
`benchmarks/pretrain_step.py`'s measured step (the project's pre-trainer driven by `fit` on a
synthetic batch in memory) in two fresh processes over one new, empty cache folder:

- fresh: the cache is empty, the first step compiles (model build and tracing included);
- rerun: the same program again, the cache now holding it and the step's trace
  (`traced_steps.py`, as runs keep it): the first step traces nothing and loads the program.

Printed per set: both first steps, the files each process added to the cache (the rerun should
add none: it compiled nothing), and the steady step time after warm-up, with its ratio to the
first set's (the flags that compile faster may pick slower kernels); a set whose process fails
gets a row saying so and the next set runs. `--cache_root DIR` keeps each set's cache folder
(DIR/set-N), so another process over it (`ELECTRA_TF_COMPILE_CACHE=DIR/set-0 python
benchmarks/pretrain_step.py ...` with the same size, batch and precision) loads the step too. Sets run one after another:
autotuning times kernels on the GPU, and a second process on it would disturb both. The flags
are XLA's own (`--xla_gpu_autotune_level`: 0 off, 1 default-only, 4 the default, everything;
`--xla_gpu_enable_triton_gemm`: matmuls through Triton's fusions or cuBLAS), added to any
XLA_FLAGS already set.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# The sets worth comparing on a GPU: the package's default (XLA's parallel compile on,
# runtime.use_parallel_gpu_compile), XLA's own one-core compile, and the parallel compile with
# less autotuning, with Triton's GEMMs off, and with both.
GPU_FLAG_SETS = ("", "--xla_gpu_enable_llvm_module_compilation_parallelism=false", "--xla_gpu_autotune_level=1",
                 "--xla_gpu_enable_triton_gemm=false",
                 "--xla_gpu_enable_triton_gemm=false --xla_gpu_autotune_level=1")


def child(size: str, precision: str, batch: int, steps: int, warmup: int) -> None:
    """One measurement in this process (the parent set XLA_FLAGS and the cache): a JSON line."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from electra_tf.runtime.devices import cached_programs

    sys.path.insert(0, str(REPO / "benchmarks"))
    from pretrain_step import benchmark_session, measure

    cache, _ = benchmark_session()
    before = cached_programs(cache)
    result = measure(size, precision, True, steps, warmup, batch, compile_cache=cache)
    print(json.dumps({**result, "cache_files_added": cached_programs(cache) - before}), flush=True)


def run_child(args, flags: str, cache: Path) -> dict:
    environ = dict(os.environ, ELECTRA_TF_COMPILE_CACHE=str(cache),
                   XLA_FLAGS=" ".join(filter(None, [os.environ.get("XLA_FLAGS", ""), flags])))
    environ.pop("TF_XLA_FLAGS", None)  # a cache named there would win over this set's own folder
    command = [sys.executable, str(Path(__file__).resolve()), "--child", "--size", args.size, "--precision",
               args.precision, "--batch", str(args.batch), "--steps", str(args.steps), "--warmup", str(args.warmup)]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, env=environ, timeout=args.timeout)
    lines = done.stdout.strip().splitlines()
    if done.returncode or not lines:
        said = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"XLA_FLAGS={flags!r}: the measuring process failed (exit {done.returncode}): {said}")
    return {**json.loads(lines[-1]), "process_s": time.monotonic() - started}


def empty_cache_folder(cache_root: Path | None, number: int):
    """A context holding an empty cache folder for flag set `number`: kept as
    cache_root/set-N, or temporary without a root (a fresh compile needs an empty folder)."""
    if cache_root is None:
        return tempfile.TemporaryDirectory(prefix="xla_cache_")
    folder = cache_root / f"set-{number}"
    folder.mkdir(parents=True, exist_ok=False)
    return contextlib.nullcontext(str(folder))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="small", choices=("tiny", "small", "base"))
    # bfloat16: what `auto` picks on GPUs of compute capability 8.0 and later (float16 made no update there).
    parser.add_argument("--precision", default="mixed_bfloat16", choices=("float32", "mixed_bfloat16", "mixed_float16"))
    parser.add_argument("--batch", type=int, default=128, help="examples of 128 tokens per step (the paper's Small: 128)")
    parser.add_argument("--flag_set", action="append", dest="flag_sets", metavar="FLAGS",
                        help='XLA_FLAGS to compare, once per set, written with "=": --flag_set= (the default '
                             'flags), --flag_set="--xla_gpu_autotune_level=1" (default: the five GPU sets above)')
    parser.add_argument("--steps", type=int, default=20, help="timed steps after warm-up")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps (float16's skipped first steps fall here)")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per process")
    parser.add_argument("--output", type=Path, default=None, help="also write the results here as JSON")
    parser.add_argument("--cache_root", type=Path, default=None,
                        help="keep each set's cache folder here, as set-0, set-1, ... (default: temporary folders)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.flag_sets = args.flag_sets or list(GPU_FLAG_SETS)
    if args.child:
        child(args.size, args.precision, args.batch, args.steps, args.warmup)
        return 0

    print(f"{args.size}, batch {args.batch}, {args.precision}, XLA on; each set in two fresh processes over one "
          "empty cache folder\n")
    print("| XLA_FLAGS | fresh first step (s) | rerun first step (s) | rerun: build / trace / rest (s) "
          "| cache files added (fresh / rerun) | step (ms) | step vs first set |\n|---|---|---|---|---|---|---|",
          flush=True)
    results, base = [], None
    for number, flags in enumerate(args.flag_sets):
        try:
            with empty_cache_folder(args.cache_root, number) as folder:
                fresh = run_child(args, flags, Path(folder))
                rerun = run_child(args, flags, Path(folder))
        except (RuntimeError, subprocess.TimeoutExpired) as failed:
            results.append({"xla_flags": flags, "failure": str(failed)})
            write_results(args, results)
            print(f"| {shlex.quote(flags) if flags else '(default)'} | fails: {str(failed)[:300]} | | | | | |", flush=True)
            continue
        base = base or fresh["step_s"]
        results.append({"xla_flags": flags, "fresh": fresh, "rerun": rerun})
        write_results(args, results)
        print(f"| {shlex.quote(flags) if flags else '(default)'} | {fresh['first_step_s']:.1f} | "
              f"{rerun['first_step_s']:.1f} | {rerun['build_s']:.1f} / {rerun['trace_s']:.1f} / {rerun['rest_s']:.1f} | "
              f"{fresh['cache_files_added']} / {rerun['cache_files_added']} | "
              f"{1000 * fresh['step_s']:.1f} | {fresh['step_s'] / base:.2f}x |", flush=True)
    return 0


def write_results(args, results) -> None:
    """The sets measured so far, to `--output` after each set: a command cut short by an outer
    timeout (a GPU session's) keeps the sets it finished."""
    if args.output:
        from electra_tf.utils.files import atomic_write_text

        atomic_write_text(args.output, json.dumps({"size": args.size, "batch": args.batch,
                                                   "precision": args.precision, "sets": results}, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
