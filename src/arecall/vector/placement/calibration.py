"""Calibration: measure an index's recall and cost against efSearch, once, before any batch.

:func:`calibrate_auto` searches held-out queries (never the scored ones) at every efSearch of
a ladder (k, then 16·2^(j/4): 16, 20, 23, 27, 32, 39, …), unfiltered and under uniform
filters of shares 2^(-j/2), against the exact scan; counts faiss's own distances per query;
fits the coarse cells; and finds the smallest efSearch reaching ``target_recall + margin``
(``ef_base``). What it measures describes *the calibration queries*: a batch unlike them is
the certificate's to catch (`arecall.vector.placement.certification`), so calibrate on
queries drawn like the ones users send — held-out queries from the workload — where there are
any; :func:`synthetic_queries` (the documents' distribution) is the fallback.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import faiss
import numpy as np
import numpy.typing as npt

from arecall.core.errors import ArecallError
from arecall.vector._checks import check_k, check_positive_int
from arecall.vector.index import Hits, VectorIndex
from arecall.vector.oracle import tie_aware_recall
from arecall.vector.placement.cells import Cells, coarse_cells, probe_width
from arecall.vector.placement.costs import ladder
from arecall.vector.placement.planner import AutoPlanner
from arecall.vector.placement.settings import DEFAULTS, PlannerSettings
from arecall.vector.schema import IndexConfig

__all__ = ["calibrate_auto", "synthetic_queries"]

_faiss: Any = faiss  # hnsw_stats is missing from faiss's bundled stubs


def synthetic_queries(
    vectors: npt.NDArray[np.float32], n: int, seed: int = 0, fit_docs: int = DEFAULTS.synthetic_fit
) -> npt.NDArray[np.float32]:
    """Queries drawn from a Gaussian fitted to (a sample of ``fit_docs``) the documents.

    The fallback when no held-out queries exist. Documents themselves make flattering queries:
    each is a graph node whose links were chosen as its neighbours, so HNSW finds their
    neighbourhoods far more easily than a new point's (on verity's corpus, recall 0.89 against
    0.42 at efSearch=10). A fitted Gaussian keeps the documents' mean and covariance — their
    subspace, if they have one — without that advantage; unit-norm documents give unit-norm
    queries. It does not know the users' queries: a workload drawn elsewhere (another mean, a
    noisier encoder) is caught by the certificate, not fixed by this draw.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> synthetic_queries(rng.normal(size=(50, 4)).astype(np.float32), 3).shape
    (3, 4)
    """
    rng = np.random.default_rng(seed)
    n_docs = vectors.shape[0]
    rows = rng.choice(n_docs, size=min(n_docs, fit_docs), replace=False)
    sample = vectors[np.sort(rows)].astype(np.float64)
    mean = sample.mean(axis=0)
    _, sv, vt = np.linalg.svd(sample - mean, full_matrices=False)
    scale = sv / math.sqrt(max(1, sample.shape[0] - 1))
    z = rng.normal(size=(n, scale.shape[0]))
    out = (mean + (z * scale) @ vt).astype(np.float32)
    if np.allclose(np.linalg.norm(sample, axis=1), 1.0, atol=1e-3):
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        out = out / np.where(norms == 0, 1, norms)
    return np.ascontiguousarray(out, dtype=np.float32)


def _sd(values: npt.NDArray[np.float64]) -> float:
    """The sample standard deviation (0 for fewer than two values)."""
    return float(np.std(values, ddof=1)) if values.size > 1 else 0.0


Observed = tuple[float, int, npt.NDArray[np.float64], Hits]
"""(share, efSearch, each calibration query's recall, its hits) at one calibration point."""


@dataclass
class _Unfiltered:
    """What the unfiltered ladder measured: per efSearch the distances per query, the mean
    recall, its spread as measured (share 1.0: the planner's where no pushdown pays), and
    each query's recall and k-th score (the second look's evidence) and hits (the
    certificate's support); ``ef_base``: the first efSearch reaching the goal."""

    ndis: list[tuple[int, float]]
    recall: list[tuple[int, float]]
    spread: list[tuple[float, int, float]]
    walks: dict[int, tuple[npt.NDArray[np.float64], npt.NDArray[np.float32]]]
    observed: list[Observed]
    ef_base: int | None = None


def _unfiltered_ladder(
    index: VectorIndex,
    q: npt.NDArray[np.float32],
    truth: Hits,
    wanted: float,
    graph_cost: float,
    settings: PlannerSettings,
) -> _Unfiltered:
    """Plain searches up the ladder until one costs a full scan (:class:`_Unfiltered`).

    Past ``ef_base`` the ladder continues for the cost curve only: filtered searches run at
    ``ef_base / s``, and measured distance counts grow sublinearly in efSearch."""
    k = truth.ids.shape[1]
    out = _Unfiltered([], [], [], {}, [])
    stats = _faiss.cvar.hnsw_stats  # faiss's own distance counter
    for ef in ladder(k, index.n_docs, settings.ladder_start, settings.ladder_steps):
        stats.reset()
        hits = index.search(q, k, ef_search=ef)
        per_query = max(1.0, float(stats.ndis) / q.shape[0])
        each = tie_aware_recall(hits, truth, index.vectors, q)
        r = float(np.mean(each))
        out.observed.append((1.0, ef, each, hits))
        out.ndis.append((ef, per_query))
        out.recall.append((ef, r))
        out.spread.append((1.0, ef, _sd(each)))
        out.walks[ef] = (each, hits.scores[:, -1].copy())
        if out.ef_base is None and r >= wanted:
            out.ef_base = ef
        if graph_cost * per_query >= index.n_docs:
            # A graph search at this ef already costs a full scan: larger ef never pays, and
            # if the target is still unmet, pushdown never pays at all.
            break
    return out


def _filtered_grid(
    index: VectorIndex,
    q: npt.NDArray[np.float32],
    wanted: float,
    so_far: AutoPlanner,
    seed: int,
) -> tuple[list[tuple[float, int, float]], list[Observed]]:
    """(share, efSearch, recall) and what each query got (:data:`Observed`) of pushdown under
    uniform filters of shares 2^(-j/2), each up the ladder to the goal or a scan's cost; the
    filter of a share is ``draws < share`` (:func:`_draws`).

    The goal here is ``wanted`` plus the calibration's own error at the confidence (``z`` of
    σ/√n, σ the largest spread of the rungs from the one below ``so_far.goal`` on, stuck walks
    counted as they came: no narrower than the spread the aim keeps), so that every aim
    (`~arecall.vector.placement.curves.RecallCurves.aim`) is a calibrated point.
    Shares √2 apart, so interpolating between two (``filtered_recall``) is close. A smaller
    share never needs a smaller efSearch, so each share's ladder starts two steps below where
    the previous share reached ``wanted``."""
    k, n, settings = so_far.k, index.n_docs, so_far.settings
    assert so_far.ef_base is not None
    draws = _draws(n, seed)
    efs = ladder(k, n, settings.ladder_start, settings.ladder_steps)
    filtered: list[tuple[float, int, float]] = []
    observed: list[Observed] = []
    start, j = 0, 1
    while (share := 2 ** (-j / settings.share_steps)) * n >= settings.share_min_docs * k:
        mask = draws < share
        n_allowed = int(mask.sum())
        if so_far.graph_cost * so_far.distances(so_far.ef_base) >= n_allowed:
            break  # below this share the scan is always cheaper: nothing to plan
        exact = index.exact(q, k, mask)
        widest, previous_sd, reached = 0.0, 0.0, None
        for i in range(start, len(efs)):
            ef = efs[i]
            hits = index.search_filtered(q, k, mask, ef_search=ef)
            each = tie_aware_recall(hits, exact, index.vectors, q)
            r, sd = float(np.mean(each)), _sd(each)
            observed.append((share, ef, each, hits))
            filtered.append((share, ef, r))
            if r >= so_far.goal:
                widest = max(widest, previous_sd, sd)
            previous_sd = sd
            if reached is None and r >= wanted:
                reached = i
            if r >= min(1.0, wanted + so_far.z * widest / math.sqrt(q.shape[0])):
                break
            if so_far.graph_cost * so_far.distances(ef) >= n_allowed:
                break
        if reached is not None:
            start = max(0, reached - 2)
        j += 1
    return filtered, observed


def _stuck(
    point: Observed,
    cells: Cells,
    q: npt.NDArray[np.float32],
    draws: npt.NDArray[np.float64],
    settings: PlannerSettings,
) -> tuple[float, npt.NDArray[np.bool_]]:
    """At one calibration point: the deep threshold (exactly ``ceil(deep_share × n)``
    calibration queries score their k-th hit below it) and which walks were stuck there — a
    deep answer whose best document an authorized landmark outscores, as the audit reads a
    batch's (`arecall.vector.placement.certification.audit`)."""
    share, _, _, hits = point
    n = q.shape[0]
    deep_n = min(n, math.ceil(settings.deep_share * n))
    kth = hits.scores[:, -1]
    deep_below = float(np.sort(kth)[deep_n]) if deep_n < n else math.inf
    mask = None if share >= 1.0 else draws < share
    return deep_below, cells.stuck(q, hits.scores[:, 0], kth < deep_below, mask)


def _delivered(
    observed: list[Observed],
    cells: Cells,
    q: npt.NDArray[np.float32],
    draws: npt.NDArray[np.float64],
    settings: PlannerSettings,
) -> tuple[list[tuple[float, npt.NDArray[np.bool_]]], list[npt.NDArray[np.float64]]]:
    """Each calibration point's deep threshold and stuck walks (:func:`_stuck`), and each
    calibration query's recall there as the plans deliver it: a walk the audit reads as
    stuck is searched again at the rung of at least ``escalate_factor`` times its efSearch
    and, stuck again there, scanned
    (`arecall.vector.placement.settle.settle`). Where the calibration measured no such rung
    at that share, the stuck walk counts as it came back (the plan does better: no credit).

    The aim keeps ``z`` of this recall's spread twice
    (`~arecall.vector.placement.curves.RecallCurves.aim`), and stuck walks are what widened
    it: at 100,000 clustered vectors (``clustered-corr``, seed 0) with no filter and efSearch
    108, 3 of 400 calibration queries stuck at 0 of 10 made the spread of their recall 0.092,
    where the recall delivered spreads 0.034; the aim came out 0.990, crossed only at a scan's
    price."""
    found = [_stuck(point, cells, q, draws, settings) for point in observed]
    stuck = [flags for _, flags in found]
    at = {(share, ef): i for i, (share, ef, _, _) in enumerate(observed)}
    escalate = settings.escalate_factor
    out = []
    for (share, ef, each, _), flags in zip(observed, stuck, strict=True):
        again = min((e for g, e in at if g == share and e >= escalate * ef), default=None)
        if again is None or not flags.any():
            out.append(each)
            continue
        j = at[share, again]
        out.append(np.where(flags, np.where(stuck[j], 1.0, observed[j][2]), each))
    return found, out


def _spread_and_deficit(
    observed: list[Observed], delivered: list[npt.NDArray[np.float64]]
) -> tuple[tuple[tuple[float, int, float], ...], tuple[tuple[float, int, float], ...]]:
    """Per calibration point, (share, efSearch, the spread of the recall delivered) and
    (share, efSearch, how far the recall as the walks came back falls below it, on average):
    the planner's ``spread`` and ``stuck_deficit``."""
    pairs = list(zip(observed, delivered, strict=True))
    spread = tuple((float(g), int(e), _sd(r)) for (g, e, _, _), r in pairs)
    deficit = tuple((float(g), int(e), float(np.mean(r - each))) for (g, e, each, _), r in pairs)
    return spread, deficit


def _delivered_walks(
    plain: _Unfiltered, delivered: list[npt.NDArray[np.float64]]
) -> dict[int, tuple[npt.NDArray[np.float64], npt.NDArray[np.float32], npt.NDArray[np.float64]]]:
    """The second look's evidence (:func:`_second_look`): per efSearch of the unfiltered
    ladder, each query's recall as the walk came back, its k-th score, and its recall as a
    plain search delivers it (``delivered``, the ladder's points in its order:
    :func:`_delivered`)."""
    return {
        ef: (each, kth, recall)
        for (ef, (each, kth)), recall in zip(plain.walks.items(), delivered, strict=True)
    }


def _support(
    observed: list[Observed],
    stuck: list[tuple[float, npt.NDArray[np.bool_]]],
    settings: PlannerSettings,
) -> tuple[tuple[float, int, float, float, float, float, float], ...]:
    """Per calibration point, what the certificate reads a batch's answers by
    (`arecall.vector.placement.curves.Stratum`): (share, efSearch, the deep and tail
    thresholds, below which exactly ``ceil(deep_share × n)`` and ``ceil(tail_share × n)``
    calibration queries are, and the mean recall of the typical, tail and deep queries that
    were not stuck (:func:`_stuck`: a walk that never reached its query's neighbourhood is
    not certified at all).

    Post-stratified by what the batch's own answers show, the calibration certifies a batch
    whose queries are harder or easier than its own at their own rates; a stratum the
    calibration saw none of certifies nothing (recall 0)."""
    out = []
    for (share, ef, each, hits), (deep_below, flags) in zip(observed, stuck, strict=True):
        n = each.shape[0]
        tail_n = min(n, math.ceil(settings.tail_share * n))
        kth = hits.scores[:, -1]
        tail_below = float(np.sort(kth)[tail_n]) if tail_n < n else math.inf
        live = ~flags
        strata = (kth >= tail_below, (kth < tail_below) & (kth >= deep_below), kth < deep_below)
        means = [float(each[m & live].mean()) if (m & live).any() else 0.0 for m in strata]
        typical, tail, deep = means
        out.append((float(share), int(ef), deep_below, tail_below, typical, tail, deep))
    return tuple(out)


def _draws(n: int, seed: int) -> npt.NDArray[np.float64]:
    """One uniform draw per document: the calibration's filter of share ``g`` is ``< g``."""
    return np.random.default_rng([seed, 41]).random(n)


def _uncalibrated(
    n_docs: int,
    k: int,
    target_recall: float,
    margin: float,
    graph_cost: float,
    confidence: float,
    settings: PlannerSettings,
) -> AutoPlanner:
    """The planner before any measurement, once every argument of :func:`calibrate_auto` is
    in range."""
    if not 0.0 < target_recall <= 1.0:
        raise ArecallError(f"target_recall={target_recall!r}: must be in (0, 1]")
    if not 0.0 <= margin < 1.0:
        raise ArecallError(f"margin={margin!r}: must be in [0, 1)")
    if not graph_cost > 0:
        raise ArecallError(f"graph_cost={graph_cost!r}: must be positive")
    if not 0.5 <= confidence < 1.0:
        raise ArecallError(f"confidence={confidence!r}: must be in [0.5, 1)")
    return AutoPlanner(
        n_docs,
        k,
        None,
        graph_cost=float(graph_cost),
        target_recall=float(target_recall),
        margin=float(margin),
        confidence=float(confidence),
        settings=settings,
    )


def calibrate_auto(
    index: VectorIndex,
    k: int,
    *,
    queries: Any = None,
    target_recall: float = IndexConfig.target_recall,
    margin: float = DEFAULTS.margin,
    graph_cost: float = DEFAULTS.graph_cost,
    n_sample: int = DEFAULTS.calibration_queries,
    seed: int = 0,
    confidence: float = IndexConfig.confidence,
    settings: PlannerSettings = DEFAULTS,
) -> AutoPlanner:
    """Measure an index's recall and cost against efSearch and return an ``auto`` planner.

    Parameters
    ----------
    index : VectorIndex
    k : int
    queries : array_like, optional
        Held-out calibration queries from the query distribution (never the scored ones). When
        omitted, ``n_sample`` queries are drawn by :func:`synthetic_queries`.
    target_recall, margin : float
        Calibrate to ``target_recall + margin`` unfiltered recall@k.
    graph_cost : float
        Graph-distance cost relative to a scan distance (`arecall.vector.placement.costs`).
    n_sample, seed : int
        Number and seed of the synthetic queries used when ``queries`` is omitted.
    confidence, settings : float, PlannerSettings
        The per-batch confidence of the promise (``index.confidence``, in [0.5, 1)), and the
        planner's tuned numbers (`arecall.vector.placement.settings`).

    Returns
    -------
    AutoPlanner

    Examples
    --------
    >>> from arecall.vector.index import build_index
    >>> from arecall.vector.generator import generate
    >>> data = generate()
    >>> idx = build_index(data.vectors)
    >>> planner = calibrate_auto(idx, 10, queries=data.calibration_queries())
    >>> planner.ef_base is None  # at 2,000 documents a scan beats any graph walk
    True
    """
    k = check_k(k)
    n_sample = check_positive_int("n_sample", n_sample)
    args = (target_recall, margin, graph_cost, confidence, settings)
    base = _uncalibrated(index.n_docs, k, *args)
    if index.kind == "exact":
        return base
    q = (
        synthetic_queries(index.vectors, n_sample, seed, settings.synthetic_fit)
        if queries is None
        else index.check_queries(queries)
    )
    truth = index.exact(q, k)
    wanted = min(1.0, target_recall + margin)
    plain = _unfiltered_ladder(index, q, truth, wanted, graph_cost, settings)
    measured = replace(base, ef_base=plain.ef_base, ndis=tuple(plain.ndis))
    measured = replace(measured, recall=tuple(plain.recall), n_calibration=int(q.shape[0]))
    if plain.ef_base is None:
        # The probe and the filtered grid are worth measuring only where pushdown can pay.
        return replace(measured, spread=tuple(plain.spread))
    cells = coarse_cells(index.vectors, seed=seed, settings=settings, metric=index.metric)
    cells = replace(cells, probe=probe_width(plain.ef_base, cells))
    filtered, observed = _filtered_grid(index, q, wanted, measured, seed)
    points = plain.observed + observed
    stuck, delivered = _delivered(points, cells, q, _draws(index.n_docs, seed), settings)
    walks = _delivered_walks(plain, delivered[: len(plain.observed)])
    look = _second_look(walks, dict(plain.ndis), plain.ef_base, wanted, settings, measured.z)
    spread, deficit = _spread_and_deficit(points, delivered)
    measured = replace(measured, cells=cells, filtered=tuple(filtered), second_look=look)
    support = _support(points, stuck, settings)
    return replace(measured, spread=spread, stuck_deficit=deficit, support=support)


def _second_look(
    walks: dict[
        int, tuple[npt.NDArray[np.float64], npt.NDArray[np.float32], npt.NDArray[np.float64]]
    ],
    ndis: dict[int, float],
    ef_base: int,
    wanted: float,
    settings: PlannerSettings = DEFAULTS,
    z: float = 0.0,
) -> tuple[int, float, int, float, float, float, float] | None:
    """The cheapest plain search with a second look that the calibration certifies, if it is
    cheaper than one plain search at ``ef_base`` (``None`` otherwise).

    A plain search misses mostly where a query sits far from its neighbours: at 100,000
    clustered vectors and efSearch 64, the tenth of the queries with the lowest k-th score held
    two thirds of the recall lost. So the queries whose k-th hit scores below a threshold — the
    calibration queries' 5% or 10% quantile at a smaller first efSearch
    (``settings.second_look_shares``) — are searched again at 4× that efSearch
    (``second_look_factor``). The rest of the batch pays a cheaper walk, and a query set harder
    than the calibration's is not certified at the held-out queries' recall: more of it falls
    below the threshold and is searched again (1,000 clustered queries from all clusters: plain
    efSearch 64, calibrated at 0.973, returned 0.941 on 200 scored ones; a first walk at 46
    and a second look at 182 returned 0.969). ``walks``: per calibrated efSearch, each query's
    recall as it came back, k-th score, and recall as delivered (a stuck walk searched again);
    ``ndis``: distances per query at each efSearch; ``z``: standard errors of the
    calibration's mean kept below it (0: the mean as measured). Certified as a plain search
    is: the recall as the walks came back, less ``z`` of a spread over √n, reaches
    ``wanted`` — the spread of that recall, stuck walks and all (as before stuck walks were
    searched again: then every stuck walk may stay), or of the recall delivered (then all but
    the look's stuck deficit are searched again). The last field is the share of a batch's
    answers that may stay stuck
    (`~arecall.vector.placement.curves.RecallCurves.stuck_allowance`): 1, or that deficit. At
    100,000 clustered vectors the benchmark's calibration looks again at 216, certified either
    way; a batch left one walk stuck there, and searching it again at 512 cost it 9%.

    Examples
    --------
    >>> each = np.array([1.0, 1.0, 1.0, 0.0]), np.array([1.0, 1.0, 1.0, 1.0])
    >>> walks = {10: (each[0], np.array([0.9, 0.8, 0.7, 0.1]), each[0]),
    ...          40: (each[1], np.array([0.9, 0.8, 0.7, 0.6]), each[1])}
    >>> _second_look(walks, {10: 100.0, 40: 300.0}, 40, 0.97)  # 100 + 300/4 < 300
    (10, 0.19, 40, 0.25, 1.0, 1.0, 1.0)
    """
    efs = sorted(walks)
    best: tuple[float, tuple[int, float, int, float, float, float, float]] | None = None
    n = next(iter(walks.values()))[0].shape[0] if walks else 1
    for lo in (e for e in efs if e < ef_base):
        hi = next((e for e in efs if e >= settings.second_look_factor * lo), None)
        if hi is None:
            break
        (kept, score, kept_delivered), (again, _, again_delivered) = walks[lo], walks[hi]
        for share in settings.second_look_shares:
            threshold = float(np.quantile(score, share))
            far = score < threshold
            flagged = float(far.mean())
            each = np.where(far, again, kept)
            delivered = np.where(far, again_delivered, kept_delivered)
            recall = float(np.mean(each))
            cost = ndis[lo] + flagged * ndis[hi]
            as_came = recall - z * _sd(each) / math.sqrt(n) >= wanted
            rescued = recall - z * _sd(delivered) / math.sqrt(n) >= wanted
            if (as_came or rescued) and cost < ndis[ef_base] and (best is None or cost < best[0]):
                r_near = float(kept[~far].mean()) if flagged < 1.0 else 1.0
                r_far = float(again[far].mean()) if flagged > 0.0 else 1.0
                stay = 1.0 if as_came else float(np.mean(delivered - each))
                best = (cost, (lo, threshold, hi, flagged, r_near, r_far, stay))
    return None if best is None else best[1]
