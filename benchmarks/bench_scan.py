"""The exact scan (``VectorIndex.exact``) and its top-k, against the argpartition top-k it replaced.

Usage (the README figures came from the first line):

    python benchmarks/bench_scan.py --n 1000000 --output /tmp/bench_scan.md
    python benchmarks/bench_scan.py --n 100000 --min-time 0.2   # a quick look

Per share of a uniform random filter over ``--n`` × 128 unit vectors, ``--queries`` queries,
k = 10, one BLAS thread:

* ``scan`` — ``VectorIndex.exact`` as it is: the authorized ids, ``np.take`` of their vectors,
  one matrix product, the one-pass threshold top-k (``index._top_k``);
* ``argpartition scan`` — the same steps with ``vectors[ids]`` and the ``argpartition`` top-k
  (``index._top_k_partition``), the scan before this benchmark existed;
* ``top-k`` / ``argpartition top-k`` — the two top-k alone, on the same score matrix.

Every contender of a share is timed interleaved, by the process's CPU clock, fastest call (the
adversarial benchmark's timer, ``arecall.vector._timing.interleaved``), and both scans must return
the same ids and scores, or the run stops.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np
from bench_adversarial import _floats, _keep_freed_memory

from arecall.io.atomic import write_text
from arecall.vector._timing import interleaved
from arecall.vector.index import (
    _BLOCK_BYTES,
    Hits,
    _top_k,
    _top_k_partition,
    build_index,
    set_threads,
)


def _argpartition_scan(vectors: np.ndarray, q: np.ndarray, k: int, mask: np.ndarray) -> Hits:
    """The scan as it was: fancy-indexed gather, matrix product, ``argpartition`` top-k, in
    the same blocks of queries (BLAS sums a block's rows in an order that depends on the
    block's height: at 10⁶ documents a row's scores moved by up to 3e-6 between 67 and 100)."""
    every = bool(mask.all())
    ids = np.arange(mask.size) if every else np.flatnonzero(mask)
    base = vectors if every else np.ascontiguousarray(vectors[ids])
    block = max(1, _BLOCK_BYTES // (4 * base.shape[0]))
    parts = [_top_k_partition(q[i : i + block] @ base.T, k) for i in range(0, q.shape[0], block)]
    return Hits(ids[np.vstack([p[0] for p in parts])], np.vstack([p[1] for p in parts]))


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    rng = np.random.default_rng(args.seed)
    vectors = rng.standard_normal((args.n, args.dims), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    queries = rng.standard_normal((args.queries, args.dims), dtype=np.float32)
    index = build_index(vectors, kind="exact")
    rows = []
    for share in args.shares:
        mask = rng.random(args.n) < share
        if mask.sum() <= args.k:
            continue
        scores = queries @ np.take(vectors, np.flatnonzero(mask), axis=0).T
        new, old = (
            index.exact(queries, args.k, mask),
            _argpartition_scan(vectors, queries, args.k, mask),
        )
        if not (np.array_equal(new.ids, old.ids) and np.array_equal(new.scores, old.scores)):
            raise SystemExit(f"share {share}: the two scans disagree")
        fns = {
            "scan": lambda m=mask: index.exact(queries, args.k, m),
            "argpartition scan": lambda m=mask: _argpartition_scan(vectors, queries, args.k, m),
            "top-k": lambda s=scores: _top_k(s, args.k),
            "argpartition top-k": lambda s=scores: _top_k_partition(s, args.k),
        }
        first = {}
        for name, fn in fns.items():
            start = time.process_time()
            fn()
            first[name] = time.process_time() - start
        best = interleaved(fns, first, args.min_time, args.min_calls, time.process_time)
        rows.append({"share": share, "n_allowed": int(mask.sum()), **best})
        print(
            f"share {share}: scan {best['scan'] * 1e3:.2f} ms, argpartition scan "
            f"{best['argpartition scan'] * 1e3:.2f} ms",
            file=sys.stderr,
            flush=True,
        )
    return rows


def render(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    lines = [
        f"{args.n:,} × {args.dims} vectors, {args.queries} queries, k = {args.k}, one thread",
        "",
        "| share | authorized | scan ms | argpartition scan ms | speed-up | top-k ms "
        "| argpartition top-k ms | speed-up |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['share']:.1%} | {r['n_allowed']:,} | {r['scan'] * 1e3:.2f} "
            f"| {r['argpartition scan'] * 1e3:.2f} | {r['argpartition scan'] / r['scan']:.2f}× "
            f"| {r['top-k'] * 1e3:.2f} | {r['argpartition top-k'] * 1e3:.2f} "
            f"| {r['argpartition top-k'] / r['top-k']:.2f}× |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--dims", type=int, default=128)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shares", type=_floats, default=[0.001, 0.01, 0.05, 0.3, 1.0])
    parser.add_argument("--min-calls", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=1.0)
    parser.add_argument("--output", help="also write the Markdown here (atomically)")
    args = parser.parse_args(argv)
    set_threads(1)
    _keep_freed_memory()
    text = render(run(args), args)
    print(text)
    if args.output:
        write_text(args.output, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
