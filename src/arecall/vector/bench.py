"""The scale benchmark: recall@k and QPS of post, pushdown, auto and exact pre at 1M vectors.

At verity's 2,000 documents every question about speed is moot — a scan of everything costs
less than one graph walk, and ``auto`` rightly always scans. The placement choice matters at a
million, where a scan of the authorized subset is either trivial (0.1% → 1,000 documents) or
the whole corpus (100%). This module measures that, on two corpora of the same shape:

* ``verity`` — the verity generator at scale: isotropic Gaussians, the worst case for any graph
  index (at 1M, M=16: recall@10 0.023 at efSearch 64, 0.64 at 4,096 — so a scan wins);
* ``lowrank`` — unit vectors near a 16-dimensional subspace, the structure real embeddings have,
  where the same graph reaches recall 0.974 at efSearch 64 and 0.995 at 128.

Measured here (1M × 128, 1,000 queries, 2 threads): ``auto`` keeps recall@10 ≥ 0.977 at every
selectivity on both corpora. It beats the exact scan by 14× at 50% and 52× at 100% on the
low-rank corpus; at 10% nothing does — a BLAS scan of 100,000 vectors answers ~600 queries/s,
and an HNSW pushdown accurate enough (efSearch ≈ 640) is slower than that — and on the
isotropic corpus nothing beats the scan at any selectivity, so ``auto`` scans (1.0×).

Targets checked (issue 4): ``auto`` recall@k ≥ 0.95 at every selectivity, and ``auto`` QPS ≥ 10×
exact ``pre`` at selectivity ≥ 10%. Timings are wall-clock with the given faiss thread count,
queries answered as one batch per principal (as the pipeline does), after one warm-up call,
best of ``repeats`` runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from arecall.core.errors import ArecallError
from arecall.vector._checks import check_k, check_positive_int, check_selectivities
from arecall.vector.generator import BenchData, generate, generate_lowrank
from arecall.vector.index import Hits, VectorIndex, build_index, set_threads
from arecall.vector.oracle import recall_loss
from arecall.vector.placement import (
    DEFAULT_GRAPH_COST,
    AutoPlanner,
    auto,
    calibrate_auto,
    post,
    pushdown,
)

__all__ = ["BENCH_DATASETS", "BenchResult", "render_benchmark", "run_benchmark"]

BENCH_DATASETS: tuple[str, ...] = ("verity", "lowrank")


@dataclass(frozen=True)
class BenchResult:
    """Rows of the benchmark plus what it cost to get there."""

    table: pd.DataFrame
    dataset: str
    n_docs: int
    dims: int
    n_queries: int
    k: int
    threads: int | None
    generate_seconds: float
    build_seconds: float
    calibrate_seconds: float
    planner: AutoPlanner


def _mean_recall(hits: Hits, oracle: Hits) -> float:
    pairs = zip(hits.rows(), oracle.rows(), strict=True)
    return float(np.mean([recall_loss(a, b)[0] for a, b in pairs]))


def _clock(fn: Callable[..., Any], *args: Any, repeats: int = 1) -> tuple[Any, float]:
    """Result of ``fn(*args)`` and its best wall time over ``repeats`` runs.

    The minimum, not the mean: on a shared box other processes only ever add time, so the
    fastest run is the best estimate of what the method itself costs.
    """
    best = float("inf")
    out: Any = None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn(*args)
        best = min(best, time.perf_counter() - start)
    return out, best


def run_benchmark(
    *,
    n_docs: int = 1_000_000,
    dims: int = 128,
    n_queries: int = 1000,
    selectivities: Sequence[float] = (0.001, 0.01, 0.1, 0.5, 1.0),
    k: int = 10,
    dataset: str = "verity",
    m: int = 16,
    ef_construction: int = 40,
    ef_search: int = 64,
    seed: int = 42,
    threads: int | None = 2,
    target_recall: float = 0.95,
    graph_cost: float = DEFAULT_GRAPH_COST,
    repeats: int = 3,
    log: Callable[[str], None] | None = None,
) -> BenchResult:
    """Measure recall@k and QPS of ``post``, ``pushdown``, ``auto`` and ``pre`` per selectivity.

    Parameters
    ----------
    n_docs, dims, n_queries, selectivities, k, seed
        Corpus and workload.
    dataset : {"verity", "lowrank"}
    m, ef_construction, ef_search : int
        HNSW parameters (``post``/``pushdown`` search at ``ef_search``).
    threads : int, optional
        faiss OpenMP threads (the graph is built with them, so not deterministically).
    target_recall, graph_cost : float
        ``auto`` planner parameters.
    repeats : int
        Each timed call runs this many times; the fastest counts.
    log : callable, optional
        Receives progress lines.

    Returns
    -------
    BenchResult

    Examples
    --------
    >>> r = run_benchmark(n_docs=2000, dims=16, n_queries=20, selectivities=[0.5], threads=None)
    >>> r.table["mode"].tolist(), float(r.table["recall"].iloc[-1])
    (['post', 'pushdown', 'auto', 'pre'], 1.0)
    """
    say = log or (lambda _line: None)
    k = check_k(k)
    sels = check_selectivities(selectivities)
    repeats = check_positive_int("repeats", repeats)
    if dataset not in BENCH_DATASETS:
        raise ArecallError(f"dataset={dataset!r}: must be one of {', '.join(BENCH_DATASETS)}")
    set_threads(threads)
    maker = generate if dataset == "verity" else generate_lowrank
    data: BenchData
    data, t_gen = _clock(lambda: maker(n_docs, dims, n_queries, seed))
    say(f"{dataset}: generated {n_docs:,} x {dims} in {t_gen:.1f} s")
    index: VectorIndex
    index, t_build = _clock(
        lambda: build_index(
            data.vectors,
            kind="hnsw",
            m=m,
            ef_construction=ef_construction,
            ef_search=ef_search,
            deterministic=False,
        )
    )
    say(f"{dataset}: HNSW M={m} efConstruction={ef_construction} built in {t_build:.1f} s")
    planner: AutoPlanner
    planner, t_cal = _clock(
        lambda: calibrate_auto(
            index,
            k,
            queries=data.calibration_queries(),
            target_recall=target_recall,
            graph_cost=graph_cost,
        )
    )
    say(f"{dataset}: auto calibrated in {t_cal:.1f} s: ef_base={planner.ef_base}")
    q = data.queries
    index.exact(q[:8], k)  # warm-up: BLAS threads, page faults
    rows = []
    for s in sels:
        mask = data.mask(s)
        matching = int(mask.sum())
        if matching < k:
            say(f"{dataset}: selectivity {s} has {matching} < k matches, skipped")
            continue
        oracle, t_pre = _clock(index.exact, q, k, mask, repeats=repeats)
        runs: list[tuple[str, Hits, float, str]] = []
        hits, t = _clock(post, index, q, k, mask, repeats=repeats)
        runs.append(("post", hits, t, f"ef={ef_search}"))
        hits, t = _clock(pushdown, index, q, k, mask, repeats=repeats)
        runs.append(("pushdown", hits, t, f"ef={ef_search}"))
        (hits, plan), t = _clock(auto, index, q, k, mask, planner, repeats=repeats)
        runs.append(("auto", hits, t, str(plan)))
        runs.append(("pre", oracle, t_pre, "scan"))
        for mode, hits, seconds, label in runs:
            rows.append(
                {
                    "dataset": dataset,
                    "selectivity": s,
                    "matching": matching,
                    "mode": mode,
                    "recall": _mean_recall(hits, oracle),
                    "returned": float(hits.returned().mean()),
                    "qps": q.shape[0] / max(seconds, 1e-9),
                    "speedup": t_pre / max(seconds, 1e-9),
                    "plan": label,
                }
            )
        say(f"{dataset}: selectivity {s} done")
    return BenchResult(
        table=pd.DataFrame(rows),
        dataset=dataset,
        n_docs=int(n_docs),
        dims=int(dims),
        n_queries=int(n_queries),
        k=k,
        threads=threads,
        generate_seconds=t_gen,
        build_seconds=t_build,
        calibrate_seconds=t_cal,
        planner=planner,
    )


def render_benchmark(result: BenchResult) -> str:
    """A Markdown table of one benchmark run, with the two targets checked underneath.

    Examples
    --------
    >>> r = run_benchmark(n_docs=2000, dims=16, n_queries=20, selectivities=[0.5], threads=None)
    >>> render_benchmark(r).splitlines()[4].startswith("| selectivity | matching | mode |")
    True
    """
    k = result.k
    lines = [
        f"**{result.dataset}** — {result.n_docs:,} × {result.dims}, {result.n_queries:,} queries, "
        f"k={k}, threads={result.threads}; HNSW built in {result.build_seconds:.0f} s, "
        f"auto calibrated in {result.calibrate_seconds:.1f} s (ef_base={result.planner.ef_base})",
        "",
        "auto calibration (held-out queries, unfiltered): "
        + ", ".join(
            f"ef={ef}: recall {r:.3f}, {d:,.0f} distances/query"
            for (ef, r), (_, d) in zip(result.planner.recall, result.planner.ndis, strict=True)
        )
        + (
            " — stopped: a graph search would cost as much as scanning everything"
            if result.planner.ef_base is None
            else ""
        ),
        "",
        f"| selectivity | matching | mode | recall@{k} | returned / {k} | QPS | × pre | plan |",
        "|---|---|---|---|---|---|---|---|",
    ]
    table = result.table
    for row in table.to_dict("records"):
        lines.append(
            f"| {row['selectivity'] * 100:.3g}% | {row['matching']:,} | `{row['mode']}` "
            f"| {row['recall']:.3f} | {row['returned']:.2f} | {row['qps']:,.0f} "
            f"| {row['speedup']:.1f} | {row['plan']} |"
        )
    auto_rows = table[table["mode"] == "auto"]
    recall_ok = bool((auto_rows["recall"] >= 0.95).all())
    wide = auto_rows[auto_rows["selectivity"] >= 0.1]
    speed_ok = bool((wide["speedup"] >= 10).all())
    worst = float(auto_rows["recall"].min()) if len(auto_rows) else float("nan")
    speeds = ", ".join(
        f"{s * 100:.3g}%: {x:.1f}×"
        for s, x in zip(wide["selectivity"], wide["speedup"], strict=True)
    )
    lines += [
        "",
        f"- auto recall@{k} ≥ 0.95 at every selectivity: "
        f"{'met' if recall_ok else 'NOT met'} (lowest {worst:.3f})",
        f"- auto QPS ≥ 10× exact pre at selectivity ≥ 10%: "
        f"{'met' if speed_ok else 'NOT met'} ({speeds})",
    ]
    return "\n".join(lines) + "\n"
