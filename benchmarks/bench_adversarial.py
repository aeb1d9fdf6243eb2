"""Filters that follow the data: auto vs the exact scan, the best fixed pushdown and partitions.

Usage (the README figures came from the first line, on a 2-core box shared with other jobs):

    python benchmarks/bench_adversarial.py --n 100000 --output /tmp/bench_adversarial.md
    python benchmarks/bench_adversarial.py --n 1000000 --queries 500   # ~10 GB-minutes; see below
    python benchmarks/bench_adversarial.py --n 20000 --corpora clustered-anti   # a quick look

Corpora: ``arecall.vector.adversarial`` (clustered with anti-correlated and correlated queries,
low-rank with a half-space filter and opposite-tail queries, low-rank uniform, verity's). Per
corpus one HNSW graph (M=16, built with ``--threads``), ``auto`` calibrated on held-out queries
of the documents' distribution; per selectivity:

* ``auto`` — recall@k, returned/k, QPS, and the plan with its evidence;
* ``scan`` — the exact scan of the authorized subset (the oracle), QPS;
* ``best pushdown`` — the fastest fixed efSearch on the ladder k, 16, 32, … reaching recall
  ≥ target with k of k returned (searched until one is slower than 3 scans; ``none`` if no
  efSearch qualifies), its efSearch, recall and QPS;
* ``partitions`` — one HNSW graph per cluster (clustered corpora), recall and QPS, and its
  memory next to the global graph's;
* ``auto/best`` — auto's time over the cheaper of the scan and the best pushdown (target
  ≤ 1.1).

Timings are wall-clock, best of ``--repeats``; the ratios within one run are what to read.
faiss and BLAS run with the same thread count (``--threads``, default 1): with both pools at 2
on a 2-core box their spinning threads fight and a small scan slows down up to 20×.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import faiss
import numpy as np

from arecall.core.errors import ArecallError
from arecall.io.atomic import write_text
from arecall.vector._timing import clock
from arecall.vector.adversarial import ADVERSARIAL_CORPORA, adversarial_corpus
from arecall.vector.index import Hits, VectorIndex, build_index, set_threads
from arecall.vector.oracle import recall_loss
from arecall.vector.partitions import PartitionedIndex
from arecall.vector.placement import AutoPlanner, auto, calibrate_auto, measure_graph_cost

SELECTIVITIES = (0.001, 0.01, 0.05, 0.10, 0.30, 0.50, 1.0)


def _recall(hits: Hits, oracle: Hits) -> float:
    pairs = zip(hits.rows(), oracle.rows(), strict=True)
    return float(np.mean([recall_loss(a, b)[0] for a, b in pairs]))


def _best_pushdown(
    index: VectorIndex,
    q: np.ndarray,
    k: int,
    mask: np.ndarray,
    oracle: Hits,
    t_scan: float,
    target: float,
    repeats: int,
) -> tuple[int | None, float, float, float]:
    """(efSearch, recall, returned, seconds) of the fastest fixed pushdown meeting the target."""
    ef = k
    best: tuple[int | None, float, float, float] = (None, float("nan"), float("nan"), np.inf)
    while ef <= index.n_docs:
        hits, t = clock(index.search_filtered, q, k, mask, ef_search=ef, repeats=repeats)
        r, ret = _recall(hits, oracle), float(hits.returned().mean())
        if r >= target and ret == min(k, int(mask.sum())) and t < best[3]:
            best = (ef, r, ret, t)
        if t > 3 * t_scan or (best[0] is not None and t > best[3]):
            break
        ef = 16 if ef < 16 else 2 * ef
    return best


def run_corpus(
    name: str, args: argparse.Namespace, log: Any
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    corpus, t_gen = clock(adversarial_corpus, name, args.n, 128, args.queries, args.seed)
    data = corpus.data
    index, t_build = clock(build_index, data.vectors, m=args.m, ef_search=64, deterministic=False)
    cal = data.calibration_queries(args.queries)
    graph_cost = (
        measure_graph_cost(index, cal, args.k) if args.graph_cost is None else args.graph_cost
    )
    planner: AutoPlanner
    planner, t_cal = clock(calibrate_auto, index, args.k, queries=cal[:100], graph_cost=graph_cost)
    graph_bytes = int(faiss.serialize_index(index.faiss_index).nbytes)
    info: dict[str, Any] = {
        "corpus": name,
        "generate_s": t_gen,
        "build_s": t_build,
        "calibrate_s": t_cal,
        "ef_base": planner.ef_base,
        "graph_cost": graph_cost,
        "graph_mb": graph_bytes / 2**20,
    }
    part = None
    if corpus.groups is not None and not args.no_partitions:
        part, t_part = clock(
            PartitionedIndex,
            data.vectors,
            corpus.groups,
            min_size=args.partition_min_size,
            m=args.m,
            deterministic=False,
        )
        info["partition_build_s"] = t_part
        info["partition_mb"] = part.memory_bytes() / 2**20
    log(
        f"{name}: generated {t_gen:.1f}s, built {t_build:.1f}s, calibrated {t_cal:.1f}s "
        f"(ef_base={planner.ef_base}, graph_cost={graph_cost:.1f})"
    )
    q = data.queries
    index.exact(q[:4], args.k)  # warm-up
    rows = []
    for s in args.selectivities:
        mask = corpus.mask(s)
        matching = int(mask.sum())
        if matching < args.k:
            log(f"{name}: {s} has {matching} < k documents, skipped")
            continue
        oracle, t_scan = clock(index.exact, q, args.k, mask, repeats=args.repeats)
        (hits, plan), t_auto = clock(auto, index, q, args.k, mask, planner, repeats=args.repeats)
        ef, r_push, _, t_push = _best_pushdown(
            index, q, args.k, mask, oracle, t_scan, args.target, args.repeats
        )
        row: dict[str, Any] = {
            "corpus": name,
            "selectivity": s,
            "matching": matching,
            "auto_recall": _recall(hits, oracle),
            "auto_returned": float(hits.returned().mean()),
            "auto_qps": q.shape[0] / t_auto,
            "scan_qps": q.shape[0] / t_scan,
            "push_ef": ef,
            "push_recall": r_push,
            "push_qps": q.shape[0] / t_push if ef is not None else float("nan"),
            "auto_over_best": t_auto / min(t_scan, t_push),
            "plan": str(plan),
        }
        if part is not None:
            p_hits, t_p = clock(part.search, q, args.k, mask, repeats=args.repeats)
            row["part_recall"] = _recall(p_hits, oracle)
            row["part_returned"] = float(p_hits.returned().mean())
            row["part_qps"] = q.shape[0] / t_p
        rows.append(row)
        log(
            f"{name} {s:g}: auto {row['auto_recall']:.3f} {row['auto_returned']:.1f}/k "
            f"{row['auto_qps']:,.0f} q/s, scan {row['scan_qps']:,.0f}, push ef={ef} "
            f"{row['push_qps']:,.0f}; auto/best {row['auto_over_best']:.2f} | {plan}"
        )
    return rows, info


def render(
    rows: list[dict[str, Any]], infos: list[dict[str, Any]], args: argparse.Namespace
) -> str:
    k = args.k
    lines = [
        f"{args.n:,} × 128 per corpus, {args.queries} queries, k={k}, HNSW M={args.m}, "
        f"threads={args.threads}, best of {args.repeats}; target recall@{k} ≥ {args.target}.",
        "",
        f"| corpus | sel. | matching | auto recall@{k} | auto ret/{k} | auto QPS | scan QPS "
        f"| best pushdown (ef: recall, QPS) | partitions (recall, ret, QPS) | auto / best "
        "| auto plan |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        push = (
            f"ef={r['push_ef']}: {r['push_recall']:.3f}, {r['push_qps']:,.0f}"
            if r["push_ef"] is not None
            else "none"
        )
        part = (
            f"{r['part_recall']:.3f}, {r['part_returned']:.1f}, {r['part_qps']:,.0f}"
            if "part_recall" in r
            else "n/a"
        )
        lines.append(
            f"| {r['corpus']} | {r['selectivity'] * 100:.3g}% | {r['matching']:,} "
            f"| {r['auto_recall']:.3f} | {r['auto_returned']:.2f} | {r['auto_qps']:,.0f} "
            f"| {r['scan_qps']:,.0f} | {push} | {part} | {r['auto_over_best']:.2f} "
            f"| {r['plan']} |"
        )
    lines += [
        "",
        "| corpus | build s | calibrate s | ef_base | graph_cost | graph MB | partitions MB |",
        "|---|---|---|---|---|---|---|",
    ]
    for i in infos:
        lines.append(
            f"| {i['corpus']} | {i['build_s']:.0f} | {i['calibrate_s']:.1f} | {i['ef_base']} "
            f"| {i['graph_cost']:.1f} | {i['graph_mb']:.0f} | "
            + (f"{i['partition_mb']:.0f}" if "partition_mb" in i else "n/a")
            + " |"
        )
    ok_recall = all(r["auto_recall"] >= args.target for r in rows)
    ok_k = all(r["auto_returned"] == min(k, r["matching"]) for r in rows)
    worst = max((r["auto_over_best"] for r in rows), default=float("nan"))
    lines += [
        "",
        f"- auto recall@{k} ≥ {args.target} in every cell: {'met' if ok_recall else 'NOT met'} "
        f"(lowest {min(r['auto_recall'] for r in rows):.3f})",
        f"- auto returns k of k in every cell: {'met' if ok_k else 'NOT met'}",
        f"- auto time ≤ 1.1 × min(scan, best pushdown): worst cell {worst:.2f} "
        f"({sum(r['auto_over_best'] <= 1.1 for r in rows)}/{len(rows)} cells within)",
    ]
    return "\n".join(lines) + "\n"


def _floats(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of numbers: {text!r}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="vectors per corpus (1000000 ok)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--m", type=int, default=16)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--target", type=float, default=0.95)
    parser.add_argument("--selectivities", type=_floats, default=list(SELECTIVITIES))
    parser.add_argument(
        "--corpora", default=",".join(ADVERSARIAL_CORPORA), help="comma-separated names"
    )
    parser.add_argument(
        "--threads", type=int, default=1, help="faiss OpenMP and BLAS threads (both)"
    )
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--no-partitions", action="store_true")
    parser.add_argument(
        "--partition-min-size",
        type=int,
        default=256,
        help="groups smaller than this get no graph of their own (scanned)",
    )
    parser.add_argument(
        "--graph-cost",
        type=float,
        help="auto's graph/scan distance cost ratio (default: measured on this machine)",
    )
    parser.add_argument("--output", help="also write the Markdown here (atomically)")
    args = parser.parse_args(argv)

    def log(line: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)

    # faiss's OpenMP threads and OpenBLAS's spinning threads fight over the cores when both
    # are > 1 (a 1% scan measured 17 ms instead of 0.9 ms on the 2-core box): one pool size.
    from threadpoolctl import threadpool_limits

    threadpool_limits(args.threads)
    set_threads(args.threads)
    rows: list[dict[str, Any]] = []
    infos = []
    try:
        for name in [c.strip() for c in args.corpora.split(",") if c.strip()]:
            if name not in ADVERSARIAL_CORPORA:
                raise ArecallError(
                    f"--corpora: {name!r} is not one of {', '.join(ADVERSARIAL_CORPORA)}"
                )
            r, info = run_corpus(name, args, log)
            rows += r
            infos.append(info)
    except ArecallError as exc:
        print(f"bench_adversarial: {exc}", file=sys.stderr)
        return 2
    text = render(rows, infos, args)
    print(text, flush=True)
    if args.output:
        write_text(args.output, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
