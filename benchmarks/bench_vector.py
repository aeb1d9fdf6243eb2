"""Filtered vector search at scale: recall@10 and QPS of post, pushdown, auto and exact pre.

Usage (the figures in the README came from the first line, on a 2-core box):

    python benchmarks/bench_vector.py --n-docs 1000000 --output reports/bench_vector.md
    python benchmarks/bench_vector.py --n-docs 100000 --repeats 1   # a quick look

See ``arecall.vector.bench`` for what is measured and why two corpora.
"""

from __future__ import annotations

import argparse
import sys
import time

from arecall.core.errors import ArecallError
from arecall.io.atomic import write_text
from arecall.vector.bench import BENCH_DATASETS, render_benchmark, run_benchmark


def _floats(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a comma-separated list of numbers: {text!r}"
        ) from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-docs", type=int, default=1_000_000)
    parser.add_argument("--dims", type=int, default=128)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--selectivities", type=_floats, default=[0.001, 0.01, 0.1, 0.5, 1.0])
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--data", choices=[*BENCH_DATASETS, "both"], default="both")
    parser.add_argument("--m", type=int, default=16)
    parser.add_argument("--ef-construction", type=int, default=40)
    parser.add_argument("--ef-search", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs; the fastest counts")
    parser.add_argument("--output", help="also write the Markdown here (atomically)")
    args = parser.parse_args(argv)

    def log(line: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)

    datasets = BENCH_DATASETS if args.data == "both" else (args.data,)
    parts = []
    try:
        for dataset in datasets:
            result = run_benchmark(
                n_docs=args.n_docs,
                dims=args.dims,
                n_queries=args.queries,
                selectivities=args.selectivities,
                k=args.k,
                dataset=dataset,
                m=args.m,
                ef_construction=args.ef_construction,
                ef_search=args.ef_search,
                seed=args.seed,
                threads=args.threads,
                repeats=args.repeats,
                log=log,
            )
            parts.append(render_benchmark(result))
            print(parts[-1], flush=True)
    except ArecallError as exc:
        print(f"bench_vector: {exc}", file=sys.stderr)
        return 2
    if args.output:
        write_text(args.output, "\n".join(parts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
