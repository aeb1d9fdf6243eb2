"""Issue 35's six batches: what ``auto`` delivers against what its plan certifies.

Usage (docs/benchmarks/shifted-queries.md; the "before" rows measure the planner of the commit
before issue 35 — its sources exported by ``git archive`` — on the same corpora, which that
commit's package lacks, so they are loaded from this checkout):

    python benchmarks/bench_shifted_batches.py --index-cache /tmp/arecall-graphs
    python benchmarks/bench_shifted_batches.py --index-cache /tmp/arecall-graphs \\
        --planner-of 66d9430
    python benchmarks/bench_shifted_batches.py --n 20000 --batches lowrank-flipped:0.5

Each batch: one corpus of ``arecall.vector.shifted`` (100,000 vectors, 200 scored queries
drawn unlike the documents), one HNSW graph (M=16, one thread), ``auto`` calibrated on held-out
queries drawn like the documents (``--calibrate-on documents``, as the pipeline does) or like
the scored ones (``workload``), its graph costs timed on this machine as the adversarial
benchmark times them; then one ``auto`` call on the batch. Printed per batch: the plan string
(its certified figure), the recall@k delivered (ids' overlap with the exact scan of the
authorized subset), the worst query's, k of k returned, and auto's seconds over the scan's.
Wall-clock seconds on a shared machine: the ratio is indicative, the recall is exact.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import io
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import faiss
import numpy as np

#: (corpus, selectivity) of the issue's table, in its order.
BATCHES: tuple[tuple[str, float], ...] = (
    ("lowrank-offmean", 0.5),
    ("lowrank-offmean", 1.0),
    ("lowrank-flipped", 0.5),
    ("lowrank-flipped", 1.0),
    ("noisedir-shifted", 0.3),
    ("noisedir-shifted", 0.5),
    ("tight-few", 1.0),
)
DIMS = {"tight-few": 96}


def _shifted_module() -> Any:
    """``arecall.vector.shifted`` of the importable package, or this checkout's own file (the
    planner before issue 35 had no shifted corpora; the corpora use only its generator)."""
    try:
        import arecall.vector.shifted as shifted  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        path = Path(__file__).parents[1] / "src" / "arecall" / "vector" / "shifted.py"
        spec = importlib.util.spec_from_file_location("shifted_corpora", path)
        assert spec is not None and spec.loader is not None
        shifted = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(shifted)
    return shifted


def _planner_of(rev: str, into: str) -> None:
    """Import ``arecall`` from git revision ``rev``'s ``src/`` (exported under ``into``)."""
    root = Path(__file__).parents[1]
    tar = subprocess.run(
        ["git", "-C", str(root), "archive", rev, "src"], capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        archive.extractall(into, filter="data")
    sys.path.insert(0, str(Path(into) / "src"))
    for name in [m for m in sys.modules if m == "arecall" or m.startswith("arecall.")]:
        del sys.modules[name]


def _index(vectors: np.ndarray, args: argparse.Namespace) -> Any:
    """The corpus's HNSW graph, built or read from ``--index-cache`` (the adversarial
    benchmark's file names: the two share their graphs)."""
    digest = hashlib.blake2b(vectors.tobytes(), digest_size=8).hexdigest()
    path = Path(args.index_cache or "") / f"hnsw-m{args.m}-{vectors.shape[0]}-{digest}.faiss"
    if args.index_cache and path.exists():
        from arecall.vector.index import VectorIndex

        graph = faiss.read_index(str(path))
        graph.hnsw.efSearch = 64
        return VectorIndex(
            vectors,
            graph,
            kind="hnsw",
            m=args.m,
            ef_construction=int(graph.hnsw.efConstruction),
            ef_search=64,
        )
    from arecall.vector.index import VectorIndex, build_index

    index = build_index(vectors, m=args.m, ef_search=64, deterministic=False)
    if args.index_cache:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        faiss.write_index(index.faiss_index, str(tmp))
        tmp.replace(path)
    return index


def _recalls(ids: np.ndarray, truth: np.ndarray, k: int) -> np.ndarray:
    """Each query's recall@k by ids (no corpus here holds exact copies)."""
    return np.array(
        [
            len(set(a[a >= 0].tolist()) & set(b[b >= 0].tolist())) / k
            for a, b in zip(ids, truth, strict=True)
        ]
    )


def run(args: argparse.Namespace, log: Any) -> list[str]:
    """The table's rows, one a batch."""
    from arecall.vector.placement import (
        auto,
        calibrate_auto,
        measure_graph_cost,
        measure_graph_costs,
    )

    shifted = _shifted_module()
    rows = [
        "| corpus and queries | filter | plan | certified | recall@10 delivered | worst query "
        "| k of k | auto/scan s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    wanted = [b for b in BATCHES if not args.batches or f"{b[0]}:{b[1]:g}" in args.batches]
    for name in dict.fromkeys(n for n, _ in wanted):
        dims = DIMS.get(name, 128)
        data, _, workload = shifted.shifted_corpus(
            name, args.n, dims, args.queries, args.seed, n_clusters=60, few=1
        )
        index = _index(data.vectors, args)
        if args.calibrate_on == "workload":
            held = workload(args.workload_skip + args.calibration_queries)[args.workload_skip :]
        else:
            held = data.calibration_queries(args.calibration_queries)
        cal = held[: args.queries]
        planner = calibrate_auto(
            index,
            args.k,
            queries=held,
            graph_cost=measure_graph_cost(index, cal, args.k),
        )
        planner = measure_graph_costs(index, cal, planner)
        q = data.queries
        for corpus, s in wanted:
            if corpus != name:
                continue
            mask = data.draws < s
            t0 = time.perf_counter()
            truth = index.exact(q, args.k, mask)
            t_scan = time.perf_counter() - t0
            t0 = time.perf_counter()
            hits, plan = auto(index, q, args.k, mask, planner)
            t_auto = time.perf_counter() - t0
            per_query = _recalls(hits.ids, truth.ids, args.k)
            full = bool(np.all(hits.returned() == args.k))
            text = str(plan).replace("|", "/")
            found = re.search(r"certified recall ([0-9.]+)", text)
            certified = found.group(1) if found else "-"
            row = (
                f"| {name} | {s:.0%} | {text} | {certified} | {per_query.mean():.3f} "
                f"| {per_query.min():.1f} | {'yes' if full else 'no'} | {t_auto / t_scan:.2f} |"
            )
            log(row)
            rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--m", type=int, default=16)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--calibration-queries", type=int, default=400)
    parser.add_argument("--calibrate-on", choices=("documents", "workload"), default="documents")
    parser.add_argument(
        "--workload-skip",
        type=int,
        default=1000,
        help="workload queries skipped before the held-out ones (--calibrate-on workload)",
    )
    parser.add_argument(
        "--batches", type=lambda t: t.split(","), default=[], help="corpus:share,... (default all)"
    )
    parser.add_argument(
        "--index-cache", help="directory of built graphs (shared with bench_adversarial.py)"
    )
    parser.add_argument(
        "--planner-of",
        metavar="REV",
        help="measure the planner of git revision REV (its src/, exported by git archive) "
        "instead of the installed one",
    )
    parser.add_argument("--output", help="also write the Markdown table here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="arecall-planner-") as tmp:
        if args.planner_of:
            _planner_of(args.planner_of, tmp)
        from arecall.vector.index import set_threads

        set_threads(args.threads)
        return _main(args)


def _main(args: argparse.Namespace) -> int:
    """Measure, print the table (and write it to ``--output``)."""

    def log(line: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)

    rows = run(args, log)
    if args.planner_of:
        rows.insert(0, f"planner of {args.planner_of}\n")
    text = "\n".join(rows) + "\n"
    print(text, end="")
    if args.output:
        Path(args.output).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
