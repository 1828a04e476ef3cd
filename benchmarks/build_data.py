"""Data building, local builder against Apache Beam's DirectRunner, on the same input and cores.

    python benchmarks/build_data.py                      # the bundled Wikipedia sample, 2 workers each
    python benchmarks/build_data.py --input corpus/ --vocab vocab.txt --workers 2

Both build the same examples (tests/data/test_beam_builder.py); printed: wall time and packed
examples per second for `build_shards` with `--num_workers W` and with `--runner beam --
--direct_num_workers W --direct_running_mode multi_processing`, and, from the faster one's
rate per worker, a projection (a projection, not a measurement) of the hours a Wikipedia-sized
corpus takes on N workers: ELECTRA's 3.3B tokens are about 26M examples of 128.
The vocabulary is given (or learned once beforehand), so only the building is timed.
Beam needs the `.[beam]` extra (without it the local builder alone is timed).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import common

WIKIPEDIA_EXAMPLES = 26_000_000  # ~3.3B tokens in examples of 128


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", nargs="+", default=None, help="default: the bundled Wikipedia sample")
    parser.add_argument("--vocab", default=None, help="default: learned from the input once, before timing")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--project_to", type=int, nargs="+", default=[8, 64, 512], metavar="N",
                        help="worker counts for the projection")
    parser.add_argument("--runners", nargs="+", default=["local", "beam"], choices=["local", "beam"],
                        help="beam needs the .[beam] extra; without it only the local builder is timed")
    args = parser.parse_args(argv)
    common.start(compile_cache=False)
    runners = list(args.runners)
    if "beam" in runners:
        try:
            import apache_beam  # noqa: F401
        except ImportError:
            print("note: apache-beam is not installed (pip install -e \".[beam]\"): timing the local builder only")
            runners.remove("beam")
    print(common.host())

    from electra_tf.data.builder import BuildRunner, ShardSpec, build_shards
    from electra_tf.data.corpus import embedded_sample_path
    from electra_tf.data.vocabulary import build_vocabulary

    inputs = args.input or [str(embedded_sample_path())]
    with tempfile.TemporaryDirectory() as scratch:
        vocab = args.vocab
        if vocab is None:
            vocab = str(Path(scratch) / "vocab.txt")
            build_vocabulary(inputs, Path(vocab))
        rates = {}
        every = {"local": BuildRunner(num_workers=args.workers),
                 "beam": BuildRunner("beam", pipeline_args=("--direct_num_workers", str(args.workers),
                                                            "--direct_running_mode", "multi_processing"))}
        for name, runner in ((runner, every[runner]) for runner in runners):
            started = time.monotonic()
            metadata = build_shards(Path(scratch) / name, inputs, ShardSpec(args.max_seq_length, 8), vocab=vocab,
                                    runner=runner)
            seconds = time.monotonic() - started
            rates[name] = metadata["examples"] / seconds
            print(f"{name:6s} {args.workers} worker(s): {metadata['examples']:,} examples in {seconds:.1f} s = "
                  f"{rates[name]:.0f} examples/s", flush=True)
    if len(rates) == 2:
        print(f"beam / local: {rates['beam'] / rates['local']:.2f}x")
    per_worker = max(rates.values()) / args.workers
    print(f"\nProjection (not measured) from {per_worker:.0f} examples/s per worker, assuming it scales "
          f"linearly, for a Wikipedia-sized corpus ({WIKIPEDIA_EXAMPLES / 1e6:.0f}M examples of 128):")
    for workers in args.project_to:
        print(f"  {workers:5d} workers: {WIKIPEDIA_EXAMPLES / (per_worker * workers) / 3600:6.2f} h")
    return 0


if __name__ == "__main__":
    sys.exit(main())
