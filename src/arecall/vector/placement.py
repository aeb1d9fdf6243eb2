"""Where the authorization filter goes: ``post``, ``pushdown``, ``pre`` — and ``auto``.

* ``post`` searches the top-k unfiltered, then drops what the principal may not use. It is
  what most stores do by default, and it under-returns: at 1% selectivity about 0.1 of 10.
* ``pushdown`` hands faiss an ``IDSelectorBitmap`` of the principal's documents; HNSW walks
  through rejected nodes but collects only accepted ones. It fixes post-filtering at moderate
  selectivity, but ``efSearch`` counts rejected candidates too, so a very selective filter
  starves it: on verity's corpus at M=16, efSearch=64 and 1% it returns 9.54/10, recall 0.658.
* ``pre`` scans the authorized subset exhaustively. Always right — it *is* the oracle — and
  as slow as a scan of that subset.
* ``auto`` chooses per principal between the two correct-or-tunable plans.

The ``auto`` rule
-----------------
Pushdown keeps recall at selectivity s if its candidate list still holds about as many
*authorized* candidates as an unfiltered search would: ``ef(s) = ceil(ef_base / s)``, clipped
to [k, n]. ``ef_base`` is not a guess: :func:`calibrate_auto` measures the index's unfiltered
recall against the exact scan on held-out queries for efSearch = k, 16, 32, 64, … and takes the
smallest value reaching ``target_recall + margin``. (Filtered search at the scaled ef has
measured at least the unfiltered recall at ef_base; the benchmark checks it again at 1M.)

Cost is counted in distance computations. An exact scan of the subset costs ``n·s``; a
pushdown search costs ``graph_cost × ndis(ef(s))``, where ``ndis`` (distances per query) is
measured by faiss's own counters during calibration — on the whole ladder, up to the efSearch
at which one graph search costs a full scan — interpolated log-log, and ``graph_cost`` is how
much dearer a graph distance is than a BLAS-batched scan distance (random memory access, heap
upkeep). Measured at 1M × 128 on this 2-core box: a scan runs 5–9·10⁷ distances/s, an HNSW
search 3–7·10⁶, 11–18× fewer; the default is 16. ``auto``
scans when ``n·s ≤ graph_cost × ndis(ef(s))`` and pushes down otherwise — so it scans small
principals (cheap, exact) and pushes down for large ones (sublinear). If no efSearch reaches the
target recall before a graph search costs as much as scanning everything, pushdown can never
pay and ``auto`` always scans; that is the honest answer on isotropic Gaussian data at a
million vectors, where HNSW reaches only recall 0.64 at efSearch 4,096 (94,000 distances per
query, already the cost of a scan).

Last, a safety net: any query for which the chosen pushdown returned fewer than
``min(k, n·s)`` results is re-answered by the exact scan. So ``auto`` returns k whenever k
items are authorized, always — the property tests check exactly that.

Everything in a plan is deterministic (counts, not timings), so the table is reproducible.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import faiss
import numpy as np
import numpy.typing as npt

from arecall.core.errors import ArecallError
from arecall.vector._checks import check_k, check_mask, check_positive_int
from arecall.vector.config import PLACEMENTS, IndexConfig
from arecall.vector.index import Hits, VectorIndex

__all__ = [
    "DEFAULT_GRAPH_COST",
    "PLACEMENTS",
    "AutoPlanner",
    "Plan",
    "answer",
    "auto",
    "calibrate_auto",
    "check_placements",
    "place",
    "post",
    "pre",
    "pushdown",
    "synthetic_queries",
]

_faiss: Any = faiss  # hnsw_stats is missing from faiss's bundled stubs

#: Cost of one graph-traversal distance relative to one batched-scan distance (see module doc).
DEFAULT_GRAPH_COST = 16.0


def post(
    index: VectorIndex, queries: Any, k: int, allowed: Any, *, ef_search: int | None = None
) -> Hits:
    """Search top-``k`` unfiltered, then drop unauthorized documents (under-returns).

    Examples
    --------
    >>> from arecall.vector.index import build_index
    >>> idx = build_index(np.eye(4, dtype=np.float32), kind="exact")
    >>> post(idx, [[1, 0.5, 0, 0]], 2, np.array([False, True, True, True])).rows()
    [[1]]
    """
    mask = check_mask(allowed, index.n_docs)
    hits = index.search(queries, k, ef_search=ef_search)
    return hits.select(mask[np.maximum(hits.ids, 0)])


def pushdown(
    index: VectorIndex, queries: Any, k: int, allowed: Any, *, ef_search: int | None = None
) -> Hits:
    """HNSW search with the principal's documents as an ``IDSelectorBitmap`` (faiss pushdown).

    Examples
    --------
    >>> from arecall.vector.index import build_index
    >>> idx = build_index(np.eye(4, dtype=np.float32), kind="hnsw", ef_search=4)
    >>> pushdown(idx, [[1, 0.5, 0, 0]], 2, np.array([False, True, True, True])).returned()
    array([2])
    """
    return index.search_filtered(queries, k, allowed, ef_search=ef_search)


def pre(index: VectorIndex, queries: Any, k: int, allowed: Any) -> Hits:
    """Exact search restricted to the authorized subset: the oracle.

    Examples
    --------
    >>> from arecall.vector.index import build_index
    >>> idx = build_index(np.eye(4, dtype=np.float32), kind="hnsw")
    >>> pre(idx, [[1, 0.5, 0, 0]], 2, np.array([False, True, True, True])).rows()[0][0]
    1
    """
    return index.exact(queries, k, allowed)


@dataclass(frozen=True)
class Plan:
    """What ``auto`` decided for one principal, and the cost estimates it compared."""

    method: Literal["exact", "pushdown"]
    ef_search: int | None
    n_allowed: int
    cost_exact: float
    cost_pushdown: float | None
    n_fallback: int = 0
    """Queries whose pushdown came back short and were re-answered by the scan."""

    def __str__(self) -> str:
        if self.method == "exact":
            return "scan"
        extra = f" (+{self.n_fallback} scanned)" if self.n_fallback else ""
        return f"pushdown ef={self.ef_search}{extra}"


@dataclass(frozen=True)
class AutoPlanner:
    """A calibrated per-principal planner (build it with :func:`calibrate_auto`).

    Attributes
    ----------
    n_docs, k : int
    ef_base : int or None
        Smallest calibrated efSearch reaching the target unfiltered recall; ``None`` means
        pushdown never pays on this index and every plan is an exact scan.
    ndis : tuple of (int, float)
        Measured (efSearch, mean distance computations per query), ascending, up to the
        efSearch at which a graph search costs a full scan.
    recall : tuple of (int, float)
        Measured (efSearch, unfiltered recall@k) on the calibration queries.
    graph_cost : float
    target_recall : float
    """

    n_docs: int
    k: int
    ef_base: int | None
    ndis: tuple[tuple[int, float], ...] = field(default=())
    recall: tuple[tuple[int, float], ...] = field(default=())
    graph_cost: float = DEFAULT_GRAPH_COST
    target_recall: float = 0.95

    def ef_for(self, n_allowed: int) -> int:
        """efSearch for a principal with ``n_allowed`` documents: ``ceil(ef_base / s)``.

        Examples
        --------
        >>> AutoPlanner(n_docs=1000, k=10, ef_base=64).ef_for(100)  # s = 10%
        640
        """
        if self.ef_base is None:
            raise ArecallError("auto: this planner never pushes down (ef_base is None)")
        s = max(n_allowed, 1) / self.n_docs
        return int(min(self.n_docs, max(self.k, math.ceil(self.ef_base / s))))

    def distances(self, ef: int) -> float:
        """Estimated distance computations per query at ``ef`` (log-log interpolation, ≤ n).

        Examples
        --------
        >>> p = AutoPlanner(n_docs=10**6, k=10, ef_base=64, ndis=((64, 1000.0), (256, 4000.0)))
        >>> round(p.distances(128)), round(p.distances(512))
        (2000, 8000)
        """
        if not self.ndis:
            return float(self.n_docs)
        efs = np.log([e for e, _ in self.ndis])
        costs = np.log([c for _, c in self.ndis])
        if ef >= self.ndis[-1][0]:  # beyond the ladder: linear in ef (conservative)
            estimate = self.ndis[-1][1] * ef / self.ndis[-1][0]
        else:
            estimate = float(np.exp(np.interp(math.log(ef), efs, costs)))
        return float(min(estimate, self.n_docs))

    def plan(self, n_allowed: int) -> Plan:
        """Choose exact-over-subset or pushdown for a principal with ``n_allowed`` documents.

        Examples
        --------
        >>> p = AutoPlanner(n_docs=10**6, k=10, ef_base=64, ndis=((64, 1200.0), (128, 2100.0)))
        >>> str(p.plan(1000)), str(p.plan(500_000))
        ('scan', 'pushdown ef=128')
        """
        cost_exact = float(n_allowed)
        if self.ef_base is None or n_allowed <= self.k:
            return Plan("exact", None, n_allowed, cost_exact, None)
        ef = self.ef_for(n_allowed)
        cost_push = self.graph_cost * self.distances(ef)
        if cost_exact <= cost_push:
            return Plan("exact", None, n_allowed, cost_exact, cost_push)
        return Plan("pushdown", ef, n_allowed, cost_exact, cost_push)


def synthetic_queries(
    vectors: npt.NDArray[np.float32], n: int, seed: int = 0
) -> npt.NDArray[np.float32]:
    """Queries drawn from a Gaussian fitted to (a sample of) the documents.

    The fallback when no held-out queries exist. Documents themselves make flattering queries:
    each is a graph node whose links were chosen as its neighbours, so HNSW finds their
    neighbourhoods far more easily than a new point's (on verity's corpus, recall 0.89 against
    0.42 at efSearch=10). A fitted Gaussian keeps the documents' mean and covariance — their
    subspace, if they have one — without that advantage; unit-norm documents give unit-norm
    queries.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> synthetic_queries(rng.normal(size=(50, 4)).astype(np.float32), 3).shape
    (3, 4)
    """
    rng = np.random.default_rng(seed)
    n_docs = vectors.shape[0]
    rows = rng.choice(n_docs, size=min(n_docs, 10_000), replace=False)
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


def _overlap(hits: Hits, truth: Hits) -> float:
    pairs = zip(hits.rows(), truth.rows(), strict=True)
    return float(np.mean([len(set(g) & set(t)) / max(1, len(t)) for g, t in pairs]))


def calibrate_auto(
    index: VectorIndex,
    k: int,
    *,
    queries: Any = None,
    target_recall: float = IndexConfig.target_recall,
    margin: float = 0.02,
    graph_cost: float = DEFAULT_GRAPH_COST,
    n_sample: int = 100,
    seed: int = 0,
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
        Graph-distance cost relative to a scan distance (module docstring).
    n_sample, seed : int
        Number and seed of the synthetic queries used when ``queries`` is omitted.

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
    if not 0.0 < target_recall <= 1.0:
        raise ArecallError(f"target_recall={target_recall!r}: must be in (0, 1]")
    if not 0.0 <= margin < 1.0:
        raise ArecallError(f"margin={margin!r}: must be in [0, 1)")
    if not graph_cost > 0:
        raise ArecallError(f"graph_cost={graph_cost!r}: must be positive")
    if index.kind == "exact":
        return AutoPlanner(
            index.n_docs, k, None, graph_cost=graph_cost, target_recall=target_recall
        )

    if queries is None:
        q = synthetic_queries(index.vectors, n_sample, seed)
    else:
        q = index.check_queries(queries)
    truth = index.exact(q, k)
    wanted = min(1.0, target_recall + margin)

    ndis: list[tuple[int, float]] = []
    recall: list[tuple[int, float]] = []
    ef_base: int | None = None
    stats = _faiss.cvar.hnsw_stats  # faiss's own distance counter
    for ef in _ladder(k, index.n_docs):
        stats.reset()
        hits = index.search(q, k, ef_search=ef)
        per_query = max(1.0, float(stats.ndis) / q.shape[0])
        r = _overlap(hits, truth)
        ndis.append((ef, per_query))
        recall.append((ef, r))
        if ef_base is None and r >= wanted:
            ef_base = ef
        if graph_cost * per_query >= index.n_docs:
            # A graph search at this ef already costs a full scan: larger ef never pays, and
            # if the target is still unmet, pushdown never pays at all.
            break
        # Past ef_base the ladder continues for the cost curve only: filtered searches run at
        # ef_base / s, and measured distance counts grow sublinearly in ef.
    return AutoPlanner(
        n_docs=index.n_docs,
        k=k,
        ef_base=ef_base,
        ndis=tuple(ndis),
        recall=tuple(recall),
        graph_cost=float(graph_cost),
        target_recall=float(target_recall),
    )


def _ladder(k: int, n: int) -> list[int]:
    efs = [k]
    ef = 16
    while ef < n:
        if ef > k:
            efs.append(ef)
        ef *= 2
    if efs[-1] < n:
        efs.append(n)
    return efs


def auto(
    index: VectorIndex, queries: Any, k: int, allowed: Any, planner: AutoPlanner
) -> tuple[Hits, Plan]:
    """Answer with the plan ``planner`` picks for this principal; exact-fill any shortfall.

    Returns
    -------
    (Hits, Plan)

    Examples
    --------
    >>> from arecall.vector.index import build_index
    >>> idx = build_index(np.eye(4, dtype=np.float32))
    >>> planner = calibrate_auto(idx, 1)
    >>> hits, plan = auto(idx, [[1, 0.5, 0, 0]], 1, np.array([False, True, True, True]), planner)
    >>> hits.rows(), str(plan)
    ([[1]], 'scan')
    """
    mask = check_mask(allowed, index.n_docs)
    k = check_k(k)
    if planner.n_docs != index.n_docs or planner.k != k:
        raise ArecallError(
            f"auto: planner calibrated for n_docs={planner.n_docs}, k={planner.k}, "
            f"used with n_docs={index.n_docs}, k={k}"
        )
    q = index.check_queries(queries)
    plan = planner.plan(int(mask.sum()))
    if plan.method == "exact":
        return index.exact(q, k, mask), plan
    hits = index.search_filtered(q, k, mask, ef_search=plan.ef_search)
    short = np.flatnonzero(hits.returned() < min(k, plan.n_allowed))
    if short.size:
        hits = hits.replace_rows(short, index.exact(q[short], k, mask))
        plan = replace(plan, n_fallback=int(short.size))
    return hits, plan


def answer(
    placement: str,
    index: VectorIndex,
    queries: Any,
    k: int,
    allowed: Any,
    *,
    ef_search: int | None = None,
    planner: AutoPlanner | None = None,
) -> tuple[Hits, str]:
    """The hits of one placement and its plan as the tables print it.

    The plan says what was run: ``scan`` for an exhaustive scan (``pre``, or any placement on
    an ``exact`` index), ``ef=N`` for a graph search at efSearch N, and for ``auto`` the plan
    it chose. ``auto`` needs a ``planner`` (from :func:`calibrate_auto`).

    Examples
    --------
    >>> from arecall.vector.index import build_index
    >>> idx = build_index(np.eye(2, dtype=np.float32), kind="hnsw", ef_search=4)
    >>> hits, plan = answer("post", idx, [[1, 0]], 1, np.array([False, True]))
    >>> hits.rows(), plan
    ([[]], 'ef=4')
    """
    if placement == "pre":
        return pre(index, queries, k, allowed), "scan"
    if placement == "auto":
        if planner is None:
            raise ArecallError("placement=auto: needs a planner from calibrate_auto()")
        hits, plan = auto(index, queries, k, allowed, planner)
        return hits, str(plan)
    if placement not in ("post", "pushdown"):
        raise ArecallError(f"placement={placement!r}: must be one of {', '.join(PLACEMENTS)}")
    search = post if placement == "post" else pushdown
    ef = index.ef_search if ef_search is None else ef_search
    label = "scan" if index.kind == "exact" else f"ef={ef}"
    return search(index, queries, k, allowed, ef_search=ef_search), label


def place(
    placement: str,
    index: VectorIndex,
    queries: Any,
    k: int,
    allowed: Any,
    *,
    ef_search: int | None = None,
    planner: AutoPlanner | None = None,
) -> Hits:
    """Dispatch on a placement name (``post``, ``pushdown``, ``pre`` or ``auto``).

    ``auto`` needs a ``planner`` (from :func:`calibrate_auto`).

    Examples
    --------
    >>> from arecall.vector.index import build_index
    >>> idx = build_index(np.eye(2, dtype=np.float32), kind="exact")
    >>> place("pre", idx, [[1, 0]], 1, np.array([False, True])).rows()
    [[1]]
    """
    return answer(placement, index, queries, k, allowed, ef_search=ef_search, planner=planner)[0]


def check_placements(placements: Sequence[str]) -> tuple[str, ...]:
    """Return ``placements`` as a tuple, or raise naming the first unknown one."""
    out = tuple(placements)
    for p in out:
        if p not in PLACEMENTS:
            raise ArecallError(f"placements: {p!r} is not one of {', '.join(PLACEMENTS)}")
    if not out:
        raise ArecallError("placements=[]: name at least one of " + ", ".join(PLACEMENTS))
    return out
