"""Where the time before the first pre-training step goes.

    python benchmarks/startup.py                        # ELECTRA-Small, batch 32 x 128, float32
    python benchmarks/startup.py --preset electra_tiny --batch 128
    ELECTRA_TF_COMPILE_CACHE=/tmp/cache python benchmarks/startup.py --xla   # twice: a rerun's stages
    python benchmarks/startup.py --build_only --initializers zeros   # what a rerun could skip in stage 1
    python benchmarks/startup.py --build_only --profile_build 15     # where stage 1's time goes

`benchmarks/pretrain_step.py` prints the first step's time as a whole, as `fit` runs it. This
script takes the same work apart, timing each stage in order in one fresh process:

1. building the generator and discriminator (variable creation) and the optimizer's slots
   (Adam's two moments, each one flat variable), as `run_pretraining` does before `fit`;
2. tracing the train step into a graph (Python: Keras layer calls, autodiff, the optimizer's
   update), with the number of ops in the traced graph, nested functions included;
3. the first call of the traced graph: TensorFlow's graph optimization (grappler, oneDNN
   rewrites), kernel creation and the first step itself; with `--xla`, XLA's lowering of the
   graph to HLO (which runs on every call that is not already compiled in this process: the
   compile cache keys a program by its HLO), then the compile, or the cached program's load;
4. a second call, the steady-state step, to show how much of stage 3 is the step.

`--initializers zeros` builds every variable from zeros instead of its initializer (a patch of
Keras' variable class for this measurement; no run does it): the difference is what a rerun,
whose checkpoint overwrites every weight, could save of stage 1 (docs/results.md, "What a
rerun's build could skip").

`--profile_build N` runs stage 1 under cProfile and prints the N functions with the most time of
their own (pstats' table, `tottime`), TensorFlow's C entry points among them: `TFE_Py_FastPathExecute` and `TFE_Py_Execute`
are the eager ops the build ran (the initializers' draws, the variables' assignments), with their
count, so a GPU's build splits into the ops it executes on the device and the Python around them.
On one H200 the build took 5.4-5.5 s against 1.6-2.5 s on 2 CPU cores (docs/results.md).

The step is `ElectraPretrainer.train_step` in a `tf.function` (without AutoGraph, as Keras
traces it), under the default strategy, on a synthetic batch in memory: `fit` wraps the same
function in a loop over an iterator, so its first step costs these stages plus a little.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # pretrain_step: the step's shared set-up
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def graph_op_count(graph) -> int:
    """Ops in `graph` and in every function graph it calls (the gradient's, the strategy's)."""
    count = len(graph.get_operations())
    for function in getattr(graph, "_functions", {}).values():
        if hasattr(function, "graph"):
            count += graph_op_count(function.graph)
    return count


def zero_initialized_variables() -> None:
    """Keras' TensorFlow variables take zeros of their shape instead of calling their initializer."""
    import tensorflow as tf
    from keras.src.backend.tensorflow.core import Variable

    def from_zeros(variable, initializer):
        variable._initialize(lambda: tf.zeros(variable._shape, variable._dtype))

    Variable._initialize_with_initializer = from_zeros


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="electra_small")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--precision", default="float32", choices=["float32", "mixed_bfloat16", "mixed_float16"])
    parser.add_argument("--xla", action="store_true",
                        help="compile the step with XLA, through the run's compile cache (ELECTRA_TF_COMPILE_CACHE "
                             "names its folder): run twice to see a rerun's stages")
    parser.add_argument("--initializers", default="as_configured", choices=["as_configured", "zeros"],
                        help="zeros: build every variable from zeros, not its initializer (a measurement only)")
    parser.add_argument("--build_only", action="store_true", help="stop after stage 1")
    parser.add_argument("--profile_build", type=int, default=0, metavar="N",
                        help="with --build_only: run stage 1 under cProfile and print the N functions with the most "
                             "time of their own (the profiler slows the build; compare its shares, not its total)")
    args = parser.parse_args(argv)
    if args.profile_build and not args.build_only:
        parser.error("--profile_build profiles stage 1 alone: give --build_only with it")

    from electra_tf.runtime.devices import align_function_names, cached_programs, use_compile_cache

    cache = use_compile_cache() if args.xla else None
    import keras
    import tensorflow as tf

    from pretrain_step import benchmark_inputs, compiled_pretrainer

    keras.config.set_dtype_policy(args.precision)
    if args.initializers == "zeros":
        zero_initialized_variables()
    config, batch = benchmark_inputs(args.preset, args.batch)
    programs_before = cached_programs(cache)
    align_function_names()  # the name the cache keys the program by, as in a run
    # Imported here, not inside stage 1, where `compiled_pretrainer` would import them: about a
    # thousand modules (keras-hub's among them), a third of the build's time on 2 CPU cores.
    imported = time.perf_counter()
    import electra_tf.runtime.optimizer  # noqa: F401
    import electra_tf.pretraining.pretrainer  # noqa: F401
    import_line = f"{'(before stage 1) import the models and keras-hub':66} {time.perf_counter() - imported:7.2f} s"
    stages = []
    started = time.perf_counter()

    def stage(name):
        nonlocal started
        now = time.perf_counter()
        stages.append((name, now - started))
        started = now

    profiler = None
    if args.profile_build:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    pretrainer = compiled_pretrainer(config)
    if profiler is not None:
        profiler.disable()
    stage("build the networks and the optimizer's slots"
          + (" (from zeros)" if args.initializers == "zeros" else ""))
    if args.build_only:
        nonzero = sum(bool(tf.math.reduce_any(tf.not_equal(v.value, 0))) for v in pretrainer.variables)
        print(f"{args.preset}, {args.precision}, TensorFlow {tf.__version__}, {len(pretrainer.variables)} variables "
              f"({nonzero} not all zeros) on {pretrainer.variables[0].value.device or 'the default device'}")
        print(import_line)
        print(f"{stages[0][0]:66} {stages[0][1]:7.2f} s" + (" (under cProfile)" if profiler else ""))
        if profiler is not None:
            import pstats

            pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(args.profile_build)
        return 0
    # As Keras traces it: `fit` wraps the step in do_not_convert, so AutoGraph does not rewrite it.
    step = tf.function(pretrainer.train_step, jit_compile=args.xla, autograph=False)
    concrete = step.get_concrete_function(batch)
    stage("trace the train step (Python)")
    step(batch)
    stage("first call: XLA's lowering and compile or cache load, the step" if args.xla
          else "first call: graph optimization, kernels, the step")
    step(batch)
    stage("second call: the step alone")

    print(f"{args.preset}, batch {args.batch} x {config.max_seq_length}, {args.precision}, XLA "
          f"{'on' if args.xla else 'off'}, TensorFlow {tf.__version__}, {os.cpu_count()} CPU(s); "
          f"{graph_op_count(concrete.graph):,} ops in the traced step")
    if cache is not None:
        print(f"compile cache {cache}: {cached_programs(cache) - programs_before} program(s) added")
    print(import_line)
    for name, seconds in stages:
        print(f"{name:55} {seconds:7.1f} s")
    ready = sum(seconds for _, seconds in stages[:3])
    print(f"{'first step done (stages 1-3)':55} {ready:7.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
