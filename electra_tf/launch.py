"""`python -m electra_tf.launch`: a multi-worker run on this machine.

    python -m electra_tf.launch --workers 2 -- --model_dir runs/two_workers --steps 400

starts `python -m electra_tf.pretrain <arguments after -->` as 2 worker processes, each with
its own TF_CONFIG on free 127.0.0.1 ports and an equal share of the CPU threads, and prints
their output prefixed by worker. The run uses MultiWorkerMirroredStrategy: the global batch
(train_batch_size) is split evenly between the workers, each reading its own shards. If a
worker dies the others are stopped and the launcher exits with the dead worker's status;
rerunning the same command resumes from the last checkpoint, every worker at its own input
position. It is for trials on one machine. On several machines run the same pretrain command on
each: with a TF_CONFIG naming all of them, under SLURM's srun, or as a Kubernetes Indexed Job,
which the package reads itself (docs/scaling.md, examples/slurm/, examples/kubernetes/). The
work is `electra_tf.runtime.cluster.launch_local`.
"""

from __future__ import annotations

import argparse
import sys

from electra_tf.utils.errors import command


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m electra_tf.launch", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--threads_per_worker", type=int, default=None,
                        help="CPU threads each worker's TensorFlow uses (default: the CPUs / workers)")
    parser.add_argument("--module", default="electra_tf.pretrain",
                        help="the command each worker runs, as `python -m MODULE` (default electra_tf.pretrain)")
    parser.add_argument("arguments", nargs=argparse.REMAINDER,
                        help="after --: the arguments of every worker's command")
    return parser


@command
def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    arguments = args.arguments[1:] if args.arguments[:1] == ["--"] else args.arguments
    from electra_tf.runtime.cluster import launch_local

    return launch_local([sys.executable, "-m", args.module, *arguments], args.workers, args.threads_per_worker)


if __name__ == "__main__":
    sys.exit(main())
