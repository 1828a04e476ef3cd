"""Where the time before the first pre-training step goes.

    python benchmarks/startup.py                        # ELECTRA-Small, batch 32 x 128, float32
    python benchmarks/startup.py --preset electra_tiny --batch 128

`benchmarks/pretrain_step.py` prints the first step's time as a whole, as `fit` runs it. This
script takes the same work apart, timing each stage in order in one fresh process:

1. building the generator and discriminator (variable creation) and the optimizer's slots
   (Adam's two moments per variable), as `run_pretraining` does before `fit`;
2. tracing the train step into a graph (Python: Keras layer calls, autodiff, the optimizer's
   update), with the number of ops in the traced graph, nested functions included;
3. the first call of the traced graph: TensorFlow's graph optimization (grappler, oneDNN
   rewrites), kernel creation and the first step itself;
4. a second call, the steady-state step, to show how much of stage 3 is the step.

The step is `ElectraPretrainer.train_step` in a `tf.function`, under the default strategy, on a
synthetic batch in memory: `fit` wraps the same function in a loop over an iterator, so its
first step costs these stages plus a little.
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="electra_small")
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args(argv)

    import tensorflow as tf

    from pretrain_step import benchmark_inputs, compiled_pretrainer

    config, batch = benchmark_inputs(args.preset, args.batch)
    stages = []
    started = time.perf_counter()

    def stage(name):
        nonlocal started
        now = time.perf_counter()
        stages.append((name, now - started))
        started = now

    pretrainer = compiled_pretrainer(config)
    stage("build the networks and the optimizer's slots")
    step = tf.function(pretrainer.train_step)
    concrete = step.get_concrete_function(batch)
    stage("trace the train step (Python)")
    step(batch)
    stage("first call: graph optimization, kernels, the step")
    step(batch)
    stage("second call: the step alone")

    print(f"{args.preset}, batch {args.batch} x {config.max_seq_length}, float32, TensorFlow {tf.__version__}, "
          f"{os.cpu_count()} CPU(s); {graph_op_count(concrete.graph):,} ops in the traced step")
    for name, seconds in stages:
        print(f"{name:55} {seconds:7.1f} s")
    ready = sum(seconds for _, seconds in stages[:3])
    print(f"{'first step done (stages 1-3)':55} {ready:7.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
