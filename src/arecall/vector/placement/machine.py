"""The machine's prices: how long a graph distance, a scan, a list walk and the plan's own
bookkeeping take here, in scan distances.

Timed, so not reproducible: for benchmarks and for a user planning on their own machine; the
reproducible experiment keeps the flat default (``settings.graph_cost``). Every contender of a
measurement is timed in one interleaved sequence (`arecall.vector._timing.interleaved`), so the
machine's noise lands on all of them alike; the graph costs, which decide between walking and
scanning, as medians of ratios of a walk and a scan timed back to back on the CPU clock
(:func:`_graph_costs`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

import faiss
import numpy as np
import numpy.typing as npt

from arecall.vector._checks import check_k, check_positive_int
from arecall.vector._timing import clock, interleaved, pair_cycle
from arecall.vector.index import Hits, VectorIndex
from arecall.vector.placement import certification
from arecall.vector.placement.batch import Batch
from arecall.vector.placement.plan import certified
from arecall.vector.placement.planner import AutoPlanner
from arecall.vector.placement.settings import DEFAULTS, PlannerSettings

__all__ = ["measure_graph_cost", "measure_graph_costs"]

_faiss: Any = faiss  # hnsw_stats is missing from faiss's bundled stubs


def measure_graph_cost(
    index: VectorIndex,
    queries: Any,
    k: int,
    *,
    ef_search: int | None = None,
    repeats: int = DEFAULTS.cost_repeats,
) -> float:
    """Time one graph distance against one scan distance on this machine (``graph_cost``).

    ``settings.graph_cost`` (16) was measured at a million vectors and 1,000-query batches; the
    ratio depends on the machine, the corpus size and the batch (a small batch makes the BLAS
    scan less efficient). Pass the result to ``calibrate_auto`` to plan for this machine.
    Timed, so not reproducible: the experiment keeps the fixed default. ``repeats``: at least
    ``2·repeats + 1`` rounds of a scan and a walk timed back to back (:func:`_graph_costs`).

    Examples
    --------
    >>> from arecall.vector.index import build_index
    >>> x = np.random.default_rng(0).normal(size=(2000, 16)).astype(np.float32)
    >>> measure_graph_cost(build_index(x), x[:50], 10) > 0
    True
    """
    q = index.check_queries(queries)
    k = check_k(k)
    if index.kind == "exact":
        return DEFAULTS.graph_cost
    ef = index._ef(ef_search, k)
    return _graph_costs(index, q, k, [ef], repeats, DEFAULTS.cost_min_time)[ef]


def measure_graph_costs(
    index: VectorIndex, queries: Any, planner: AutoPlanner, *, repeats: int = DEFAULTS.cost_repeats
) -> AutoPlanner:
    """``planner`` with the machine's prices measured on the batch ``queries``: ``graph_costs``
    at efSearch 64, 256, 1024, … (those at least k, up to the largest its calibration walked)
    and at ``ef_base``; the batch scan's ``scan_slopes`` at 1/8, 1/4 and 1/2 of the documents
    (:func:`_scan_slopes`) and its pass over the vectors, ``scan_pass`` (:func:`_scan_pass`);
    the batch's ``list_costs`` at those efSearch values up to 256 (:func:`_list_costs`); the
    bookkeeping of a plan for a filter that follows the cells, per call and per query
    (``plan_overhead``, ``query_overhead``: :func:`_overheads`); and the batch size they were
    timed at (``cost_batch``), so that a smaller batch's scans are priced with their pass.

    Timed, like :func:`measure_graph_cost`: for benchmarks and for a user planning on their
    own machine, not for the reproducible experiment. A scan and every efSearch's walk are
    timed back to back, round after round (:func:`_graph_costs`).

    Examples
    --------
    >>> from arecall.vector.index import build_index
    >>> x = np.random.default_rng(0).normal(size=(2000, 16)).astype(np.float32)
    >>> idx = build_index(x)
    >>> from arecall.vector.placement import calibrate_auto
    >>> p = measure_graph_costs(idx, x[:50], calibrate_auto(idx, 10, queries=x[:50]))
    >>> p.graph_costs[0][0] == p.ef_base, all(c > 0 for _, c in p.graph_costs)
    (True, True)
    >>> [g for g, _ in p.scan_slopes], all(0.25 <= v <= 1 for _, v in p.scan_slopes)
    ([0.125, 0.25, 0.5], True)
    """
    if planner.ef_base is None or not planner.ndis or index.kind == "exact":
        return planner
    q = index.check_queries(queries)
    top = planner.ndis[-1][0]
    looks = () if planner.second_look is None else planner.second_look[0:3:2]
    settings = planner.settings
    min_time = settings.cost_min_time
    # every efSearch at least k: the index refuses a smaller one (a k of 100 met 64 here)
    timed = (e for e in settings.cost_efs if planner.k <= e <= top)
    efs = sorted({planner.ef_base, *looks, *timed})
    costs = _graph_costs(index, q, planner.k, efs, repeats, min_time)
    slopes = _scan_slopes(index, q, planner.k, settings, repeats, min_time)
    listed = [ef for ef in efs if ef <= settings.list_ef_max]
    lists = _list_costs(index, q, planner.k, listed, repeats, min_time)
    measured = replace(
        planner,
        graph_costs=tuple((int(ef), costs[ef]) for ef in efs),
        scan_slopes=tuple(sorted(slopes.items())),
        list_costs=tuple((int(ef), ratio) for ef, ratio in sorted(lists.items())),
        scan_pass=_scan_pass(index, q, planner.k, repeats, min_time),
        cost_batch=int(q.shape[0]),
    )
    per_call, per_query = _overheads(index, q, measured, min_time)
    return replace(measured, plan_overhead=per_call, query_overhead=per_query)


def _scan_pass(
    index: VectorIndex, q: npt.NDArray[np.float32], k: int, repeats: int, min_time: float
) -> float:
    """A scan's pass over the authorized vectors in query-shares: with a scan of m queries
    taking u·(m + P), one query's time over the batch's, r = (1 + P)/(n + P), gives
    P = (n·r − 1)/(1 − r); timed under a uniform half, where a scan gathers the vectors it
    reads (the settings' value for a batch of one; clipped to [0, n]).

    One query alone had taken 8 queries' share of a 200-query batch scan at 50,000 × 128; a
    one-query call priced without it had been 8-9x cheaper to scan than it is."""
    n = q.shape[0]
    if n < 2:
        return DEFAULTS.scan_pass
    half = np.random.default_rng(43).random(index.n_docs) < 0.5
    fns: dict[str, Any] = {
        "batch": partial(index.exact, q, k, half),
        "one": partial(index.exact, q[:1], k, half),
    }
    first = {name: clock(fn)[1] for name, fn in fns.items()}
    best = interleaved(fns, first, min_time, repeats)
    r = best["one"] / max(best["batch"], 1e-15)
    return float(np.clip((n * r - 1.0) / max(1.0 - r, 1e-9), 0.0, n))


def _list_costs(
    index: VectorIndex,
    q: npt.NDArray[np.float32],
    k: int,
    efs: Sequence[int],
    repeats: int,
    min_time: float,
) -> dict[int, float]:
    """Per efSearch, the batch's two ways of answering a filter independent of the data, timed
    under a uniform half of the documents (fixed seed; the selector's cost depends on how many
    nodes it checks, not which): every query's top-efSearch list in one unfiltered call,
    against the sample's lists and a pushdown of the rest (the direct plan) — fastest call
    each, in one interleaved sequence (:attr:`AutoPlanner.list_costs`)."""
    half = np.random.default_rng(43).random(index.n_docs) < 0.5
    listed = certification.sample_rows(q.shape[0])
    sample = q[listed]
    rest = np.delete(q, listed, axis=0)

    def split(ef: int) -> None:
        index.search(sample, ef, ef_search=ef)
        if rest.shape[0]:  # a batch of 2 x sample_min or fewer is all sample
            index.search_filtered(rest, k, half, ef_search=ef)

    fns: dict[str, Any] = {}
    for ef in efs:
        fns[f"lists {ef}"] = partial(index.search, q, int(ef), ef_search=int(ef))
        fns[f"split {ef}"] = partial(split, int(ef))
    first = {name: clock(fn)[1] for name, fn in fns.items()}
    best = interleaved(fns, first, min_time, repeats)
    return {int(ef): float(best[f"lists {ef}"] / max(best[f"split {ef}"], 1e-12)) for ef in efs}


class _TimedIndex(VectorIndex):
    """``index`` with the time spent in its searches and scans added up (``seconds``): what
    is left of a plan's time is the planner's own (:func:`_plan_overhead`). Timed where faiss
    and BLAS run (``_walk``, ``_scan_ids``, ``_scan_masked``), so the checks around them count
    as the plan's. (Untimed, a few queries' scan by masking — 5.8 ms of 8 queries' at 100,000
    vectors — had been counted as the plan's bookkeeping.)"""

    def __init__(self, index: VectorIndex) -> None:
        super().__init__(
            index.vectors,
            index.faiss_index,
            kind=index.kind,
            m=index.m,
            ef_construction=index.ef_construction,
            ef_search=index.ef_search,
            metric=index.metric,
        )
        self.seconds = 0.0

    def _timed(self, method: Callable[..., Hits], *args: Any, **kwargs: Any) -> Hits:
        start = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start

    def _walk(
        self,
        q: npt.NDArray[np.float32],
        k: int,
        ef: int,
        mask: npt.NDArray[np.bool_] | None = None,
        bitmap: npt.NDArray[np.uint8] | None = None,
    ) -> Hits:
        return self._timed(super()._walk, q, k, ef, mask, bitmap)

    def _scan_ids(
        self, q: npt.NDArray[np.float32], k: int, ids: npt.NDArray[np.int64] | None
    ) -> Hits:
        return self._timed(super()._scan_ids, q, k, ids)

    def _scan_masked(self, q: npt.NDArray[np.float32], k: int, mask: npt.NDArray[np.bool_]) -> Hits:
        return self._timed(super()._scan_masked, q, k, mask)


def _plan_overhead(
    index: VectorIndex, q: npt.NDArray[np.float32], planner: AutoPlanner, min_time: float
) -> float:
    """Scan distances per call that the general plan for a filter following the data spends on
    its own bookkeeping on ``q``: its own seconds (:func:`_plan_seconds`) in distances of a
    full batch scan timed between its calls, less the probes, which are priced apart. 0
    without cells."""
    if planner.cells is None or q.shape[0] < 4:
        return 0.0
    own, scan = _plan_seconds(index, q, planner, min_time)
    per_distance = scan / (q.shape[0] * index.n_docs)
    probes = planner.settings.probe_distances * planner.cells.n_cells * q.shape[0]
    return float(max(0.0, own / max(per_distance, 1e-15) - probes))


def _overheads(
    index: VectorIndex, q: npt.NDArray[np.float32], planner: AutoPlanner, min_time: float
) -> tuple[float, float]:
    """(per call, per query) of the plan's own bookkeeping, in scan distances: timed on the
    batch and on its first ``settings.overhead_batch`` queries, then a line through both.

    Priced whole per call, a 200-query batch's bookkeeping had landed on each one-query call of
    a principal, and those calls always scanned: at 20x a fixed pushdown, on queries inside
    authorized clusters. Its mask's cell counts are remembered across the calls
    (``Cells.counts``), as a principal's are: what is left per call is the plan's arithmetic."""
    n, m = q.shape[0], min(planner.settings.overhead_batch, q.shape[0] // 2)
    if planner.cells is None or m < 4:
        return _plan_overhead(index, q, planner, min_time), 0.0
    assert planner.cells is not None
    own_n, scan = _plan_seconds(index, q, planner, min_time)
    own_m, _ = _plan_seconds(index, q[:m], planner, min_time)
    per_distance = max(scan / (n * index.n_docs), 1e-15)
    probe = planner.settings.probe_distances * planner.cells.n_cells  # priced apart, per query
    at_n, at_m = own_n / per_distance - probe * n, own_m / per_distance - probe * m
    per_query = max(0.0, (at_n - at_m) / (n - m))
    return float(max(0.0, at_m - m * per_query)), float(per_query)


def _plan_seconds(
    index: VectorIndex, q: npt.NDArray[np.float32], planner: AutoPlanner, min_time: float
) -> tuple[float, float]:
    """(Seconds of a probing plan's call beside its searches and scans, seconds of a full
    scan of ``q``), fastest of at least ``settings.overhead_calls`` calls each, alternated, and
    ``min_time`` seconds.

    The plan is ``certified``'s under a filter of every other cell (it follows the data
    whatever the corpus), with walks priced at a ``settings.eager_discount``-th of their cost
    (a hundredth) so that it probes
    every query and walks where the cells are authorized; its searches and scans are timed
    apart by :class:`_TimedIndex`. Needs ``planner.cells``."""
    assert planner.cells is not None
    settings = planner.settings
    mask = planner.cells.assignment % 2 == 0
    n_allowed = int(np.count_nonzero(mask))
    eager = replace(
        planner,
        graph_cost=planner.graph_cost / settings.eager_discount,
        graph_costs=tuple((ef, c / settings.eager_discount) for ef, c in planner.graph_costs),
        plan_overhead=0.0,
        query_overhead=0.0,
    )
    timed = _TimedIndex(index)
    own, scan = math.inf, math.inf
    spent, calls = 0.0, 0
    while calls < settings.overhead_calls or spent < min_time:
        timed.seconds = 0.0
        start = time.perf_counter()
        certified(Batch(timed, q, planner.k, mask, n_allowed, None, eager))
        whole = time.perf_counter() - start
        start = time.perf_counter()
        index.exact(q, planner.k)
        this_scan = time.perf_counter() - start
        scan, own = min(scan, this_scan), min(own, whole - timed.seconds)
        spent += whole + this_scan
        calls += 1
    return own, scan


def _scan_slopes(
    index: VectorIndex,
    q: npt.NDArray[np.float32],
    k: int,
    settings: PlannerSettings,
    repeats: int,
    min_time: float,
) -> dict[float, float]:
    """Per share, what the batch's second half adds to a scan of its first half, as a share
    of the whole batch's mean per-query cost (:attr:`AutoPlanner.scan_slopes`), at each of
    ``settings.slope_shares``, clipped to [``settings.slope_floor``, 1]; empty for a batch of
    fewer than 4 queries. Uniform masks from a fixed seed: the slope depends on how many
    vectors the scan streams, not on which."""
    n_q = q.shape[0]
    if n_q < 4:
        return {}
    half = n_q // 2
    draws = np.random.default_rng(43).random(index.n_docs)
    fns: dict[str, Any] = {}
    shares = settings.slope_shares
    for share in shares:
        mask = draws < share
        fns[f"all {share}"] = partial(index.exact, q, k, mask)
        fns[f"half {share}"] = partial(index.exact, q[:half], k, mask)
    first = {name: clock(fn)[1] for name, fn in fns.items()}
    best = interleaved(fns, first, min_time, repeats)
    slopes = {}
    for share in shares:
        whole, part = best[f"all {share}"], best[f"half {share}"]
        slope = (whole - part) / ((n_q - half) * whole / n_q)
        slopes[float(share)] = float(np.clip(slope, settings.slope_floor, 1.0))
    return slopes


def _graph_costs(
    index: VectorIndex,
    q: npt.NDArray[np.float32],
    k: int,
    efs: Sequence[int],
    repeats: int,
    min_time: float,
    timer: Callable[[], float] = time.process_time,
) -> dict[int, float]:
    """Scan distances per graph distance at each of ``efs``: the median, over every timed walk,
    of its time per distance over that of the scan timed nearest it, on the process's CPU
    clock (``timer``).

    A round is one pass of a cycle in which every contender (the scan and each efSearch's
    walk) follows every other one once (:func:`arecall.vector._timing.pair_cycle`), reversed
    every other round; each walk is paired with the scan nearest it in the sequence, so
    whatever load the machine is under at that moment lands on both. At least
    ``2·repeats + 1`` pairs per efSearch and two rounds, and enough rounds for the scans to add
    up to ``min_time`` seconds. The CPU clock leaves out the time the process waited for a
    core; with several threads it adds up their work, as it does for the scan.

    The fastest wall-clock call of each contender put the cost at 100,000 low-rank vectors
    and efSearch 27 at 29-50 in six measurements seconds apart on a loaded machine (load 7),
    and a plan priced near the scan flipped between walking and scanning from one run to the
    next. ``BENCH --corpora lowrank-uniform``, the info table's graph_cost."""
    repeats = check_positive_int("repeats", repeats)
    stats = _faiss.cvar.hnsw_stats
    ndis: dict[int, float] = {}
    index.exact(q[:4], k)  # warm-up
    for ef in efs:
        stats.reset()
        index.search(q, k, ef_search=ef)
        ndis[ef] = max(1.0, float(stats.ndis))
    fns: list[Callable[[], Any]] = [partial(index.exact, q, k)]  # 0: the scan
    fns += [partial(index.search, q, k, ef_search=ef) for ef in efs]
    cycle = pair_cycle(len(fns))
    least = max(2, math.ceil((2 * repeats + 1) / max(1, len(fns) - 1)))
    sequence: list[tuple[int, float]] = []
    scanned, rounds = 0.0, 0
    while rounds < least or scanned < min_time:
        for at in cycle if rounds % 2 == 0 else cycle[::-1]:
            start = timer()
            fns[at]()
            seconds = timer() - start
            sequence.append((at, seconds))
            scanned += seconds if at == 0 else 0.0
        rounds += 1
    scans = np.array([i for i, (at, _) in enumerate(sequence) if at == 0])
    ratios: dict[int, list[float]] = {ef: [] for ef in efs}
    per_scan = q.shape[0] * index.n_docs
    for i, (at, seconds) in enumerate(sequence):
        if at:
            nearest = scans[np.argmin(np.abs(scans - i))]  # the earlier one on a tie
            scan = max(sequence[nearest][1], 1e-12) / per_scan
            ratios[efs[at - 1]].append((seconds / ndis[efs[at - 1]]) / scan)
    return {ef: float(max(1e-3, np.median(ratios[ef]))) for ef in efs}
