"""`python -m electra_tf.launch`: a multi-worker run on this machine.

    python -m electra_tf.launch --workers 2 -- --model_dir runs/two_workers --steps 400

starts `python -m electra_tf.pretrain <arguments after -->` as 2 worker processes, each with
its own TF_CONFIG on free 127.0.0.1 ports and an equal share of the CPU threads, and prints
their output prefixed by worker. The run uses MultiWorkerMirroredStrategy: the global batch
(train_batch_size) is split evenly between the workers, each reading its own shards. If a
worker dies the others are stopped and the launcher exits with the dead worker's status;
rerunning the same command resumes from the last checkpoint, every worker at its own input
position. It is for trials on one machine; `--engine ray` runs the same as a Ray Train job on a
Ray cluster (`runtime/ray_engine.py`: restarts after a worker dies with `--max_failures`, each
resuming from the newest checkpoint). On several machines otherwise run the same pretrain command on
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
    parser.add_argument("--engine", choices=("local", "ray"), default="local",
                        help="local: worker processes on this machine (trials); ray: a Ray Train job on the Ray "
                             "cluster RAY_ADDRESS names, or a local one (pip install -e \".[ray]\")")
    ray = parser.add_argument_group("--engine ray")
    ray.add_argument("--cpus_per_worker", type=float, default=1.0, help="Ray resources of each worker (default 1)")
    ray.add_argument("--gpus_per_worker", type=float, default=0.0, help="GPUs of each worker (default 0)")
    ray.add_argument("--max_failures", type=int, default=0,
                     help="restarts of the worker group after a worker dies; each resumes from the newest checkpoint")
    ray.add_argument("--storage", default=None, help="where Ray keeps the job's results (default: Ray's)")
    parser.add_argument("arguments", nargs=argparse.REMAINDER,
                        help="after --: the arguments of every worker's command")
    return parser


@command
def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    arguments = args.arguments[1:] if args.arguments[:1] == ["--"] else args.arguments
    if args.engine == "ray":
        from electra_tf.runtime.ray_engine import launch_ray

        return launch_ray(args.module, arguments, args.workers, args.cpus_per_worker, args.gpus_per_worker,
                          args.max_failures, args.storage)
    from electra_tf.runtime.cluster import launch_local

    return launch_local([sys.executable, "-m", args.module, *arguments], args.workers, args.threads_per_worker)


if __name__ == "__main__":
    sys.exit(main())
