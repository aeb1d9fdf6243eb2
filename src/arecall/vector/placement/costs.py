"""The cost model: what a walk, a scan and a probe cost, in scan distances.

A scan of the authorized subset costs ``n·s`` distances; a walk at efSearch ``ef`` costs
``graph_cost(ef) × ndis(ef)``: faiss's own count of distances per query at that efSearch
(measured at calibration, interpolated log-log), times how much dearer a graph distance is
than a batched-scan distance (timed per machine by `arecall.vector.placement.machine`, or
``settings.graph_cost``). :class:`CostModel` holds these prices; the functions below price a
query's first walk from its local selectivity (:func:`first_walks`) and the probe's possible
saving (:func:`graph_pays_near`).
"""

from __future__ import annotations

import math
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
from scipy import special

from arecall.core.errors import ArecallError
from arecall.vector.placement.evidence import Plan
from arecall.vector.placement.memo import Remembering
from arecall.vector.placement.settings import DEFAULTS

if TYPE_CHECKING:
    from arecall.vector.placement.cells import Cells
    from arecall.vector.placement.planner import AutoPlanner

__all__ = ["CostModel", "first_ef", "first_walks", "graph_pays_near", "ladder"]


def ladder(
    k: int, n: int, start: int = DEFAULTS.ladder_start, steps: int = DEFAULTS.ladder_steps
) -> list[int]:
    """k, then ``start``·2^(j/``steps``) (16, 20, 23, 27, 32, 39, 46, 54, 64, …) up to n: the
    calibration's efSearch values (``settings.ladder_start``, ``ladder_steps``).

    Examples
    --------
    >>> ladder(10, 70)
    [10, 16, 20, 23, 27, 32, 39, 46, 54, 64, 70]
    """
    efs = [k]
    j = 0
    while (ef := math.ceil(start * 2 ** (j / steps) - 1e-9)) < n:
        if ef > k:
            efs.append(ef)
        j += 1
    if efs[-1] < n:
        efs.append(n)
    return efs


class CostModel(Remembering):
    """The prices of an `~arecall.vector.placement.planner.AutoPlanner` (a mixin: the
    planner's fields are declared here for the type checker only)."""

    n_docs: int
    k: int
    ef_base: int | None
    ndis: tuple[tuple[int, float], ...]
    graph_cost: float
    graph_costs: tuple[tuple[int, float], ...]
    scan_slopes: tuple[tuple[float, float], ...]
    list_costs: tuple[tuple[int, float], ...]
    cells: Cells | None
    plan_overhead: float
    query_overhead: float
    cost_batch: int
    scan_pass: float

    if TYPE_CHECKING:

        def ef_needed(
            self, share: npt.ArrayLike, *, between: bool = False, wanted: float | None = None
        ) -> npt.NDArray[np.float64]: ...

    def lists_pay(self, ef: int, share: float) -> bool:
        """Whether, under a filter independent of the data authorizing ``share``, reading every
        query's top-``ef`` list costs less than a sample's lists and a pushdown of the rest at
        ``ef``: the measured :attr:`list_costs` ratio at ``ef`` (interpolated in log
        efSearch; never past the last measurement, where the deeper heap costs more than the
        selector saves), plus the chance that a list holds fewer than k authorized and is
        pushed down as well (``Binomial(ef, share) < k``, normal tail), plus ``settings.list_read``
        for reading them — below 1. Cached per efSearch and share.

        The list's answer is the pushdown's (:func:`_read_lists`), so this decides the cost,
        never the result; and it certifies by rank too (`arecall.vector.placement.general`).

        Examples
        --------
        >>> from arecall.vector.placement import AutoPlanner
        >>> p = AutoPlanner(n_docs=10**6, k=10, ef_base=16, list_costs=((32, 0.9), (96, 1.0)))
        >>> p.lists_pay(38, 0.5), p.lists_pay(38, 0.25), p.lists_pay(128, 0.5)
        (True, False, False)
        """

        def compute() -> bool:
            if not self.list_costs or ef > self.list_costs[-1][0]:
                return False
            at = np.log([e for e, _ in self.list_costs])
            ratio = float(np.interp(math.log(max(ef, 1)), at, [c for _, c in self.list_costs]))
            mean = ef * share
            sd = math.sqrt(max(mean * (1.0 - share), 1e-12))
            p_short = float(special.ndtr((self.k - 0.5 - mean) / sd))
            return ratio + p_short + self.settings.list_read < 1.0

        return bool(self._remember(("lists", int(ef), float(share)), compute))

    def ef_at_least(self, ef: float) -> int:
        """The smallest efSearch on the planner's ladder that is ≥ ``ef``: ``ef_base``, then the
        calibration ladder ``ceil(16·2^(j/4))`` above it (so a calibrated efSearch maps to
        itself), clipped to [k, n].

        Examples
        --------
        >>> from arecall.vector.placement import AutoPlanner
        >>> p = AutoPlanner(n_docs=10**6, k=10, ef_base=64)
        >>> p.ef_at_least(64), p.ef_at_least(65), p.ef_at_least(100), p.ef_at_least(108)
        (64, 77, 108, 108)
        """
        return int(self.ef_at_least_many(np.array([float(ef)]))[0])

    def ef_for(self, n_allowed: int) -> int:
        """efSearch for a principal with ``n_allowed`` documents: ``ceil(ef_base / s)``.

        Examples
        --------
        >>> from arecall.vector.placement import AutoPlanner
        >>> AutoPlanner(n_docs=1000, k=10, ef_base=64).ef_for(100)  # s = 10%
        640
        """
        if self.ef_base is None:
            raise ArecallError("auto: this planner never pushes down (ef_base is None)")
        s = max(n_allowed, 1) / self.n_docs
        return int(min(self.n_docs, max(self.k, math.ceil(self.ef_base / s))))

    def distances_many(self, efs: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """:meth:`distances` for an array of efSearch values (vectorised, same numbers)."""
        efs = np.asarray(efs, dtype=np.float64)
        if not self.ndis:
            return np.full(efs.shape, float(self.n_docs))
        ladder, costs = self._ndis_curve
        last_ef, last_cost = self.ndis[-1]
        inside = np.exp(np.interp(np.log(np.maximum(efs, 1.0)), ladder, costs))
        estimate = np.where(efs >= last_ef, last_cost * efs / last_ef, inside)
        return np.minimum(estimate, float(self.n_docs))

    def ef_at_least_many(self, efs: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """:meth:`ef_at_least` for an array (vectorised, same numbers)."""
        base = float(self.ef_base or self.k)
        want = np.maximum(np.asarray(efs, dtype=np.float64), 1.0)
        start, steps = float(self.settings.ladder_start), self.settings.ladder_steps
        j = np.ceil(steps * np.log2(want / start) - 1e-9)
        # ceil() lifts each rung a little above 16·2^(j/4): the rung below may still reach.
        below = np.ceil(start * 2 ** ((j - 1) / steps) - 1e-9)
        out = np.where(below >= want, below, np.ceil(start * 2 ** (j / steps) - 1e-9))
        out = np.where(want <= base, base, out)
        return np.clip(out, self.k, self.n_docs).astype(np.int64)

    def walk_costs(self, efs: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """A graph search's cost at each efSearch, in scan distances: graph cost × distances.

        The graph cost is ``graph_cost``, or interpolated in log efSearch between the
        measured ``graph_costs`` (held constant past either end).

        Examples
        --------
        >>> from arecall.vector.placement import AutoPlanner
        >>> p = AutoPlanner(n_docs=10**6, k=10, ef_base=64, ndis=((64, 1000.0), (256, 4000.0)),
        ...                 graph_cost=20.0, graph_costs=((64, 20.0), (256, 40.0)))
        >>> [round(c) for c in p.walk_costs([64, 128, 256])]
        [20000, 60000, 160000]
        """
        efs = np.asarray(efs, dtype=np.float64)
        if self.graph_costs:
            at, values = self._graph_cost_curve
            per = np.interp(np.log(np.maximum(efs, 1.0)), at, values)
        else:
            per = np.full(efs.shape, self.graph_cost)
        return np.asarray(per * self.distances_many(efs), dtype=np.float64)

    @cached_property
    def _ndis_curve(self) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """(log efSearch, log distances) of ``ndis``, built once: every walk is priced by it,
        and building it took a tenth of a one-query call's planning."""
        return np.log([e for e, _ in self.ndis]), np.log([c for _, c in self.ndis])

    @cached_property
    def _graph_cost_curve(self) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """(log efSearch, graph cost) of ``graph_costs``, built once."""
        at = np.log([e for e, _ in self.graph_costs])
        return at, np.array([c for _, c in self.graph_costs], dtype=np.float64)

    def walk_cost(self, ef: int) -> float:
        """:meth:`walk_costs` of one efSearch (cached: ``auto`` prices a few values per call)."""
        return float(
            self._remember(("walk", float(ef)), lambda: self.walk_costs(np.array([float(ef)]))[0])
        )

    def scan_slope(self, share: float) -> float:
        """:attr:`scan_slopes` at ``share``, interpolated in log share (held flat past either
        end; 1 where none were measured).

        Examples
        --------
        >>> from arecall.vector.placement import AutoPlanner
        >>> p = AutoPlanner(n_docs=1000, k=10, ef_base=16, scan_slopes=((0.1, 0.9), (0.4, 0.7)))
        >>> p.scan_slope(0.05), p.scan_slope(0.2), p.scan_slope(1.0)
        (0.9, 0.8, 0.7)
        >>> AutoPlanner(n_docs=1000, k=10, ef_base=16).scan_slope(0.2)  # nothing measured
        1.0
        """
        if not self.scan_slopes:
            return 1.0
        at = np.log([g for g, _ in self.scan_slopes])
        slope = np.interp(np.log(max(share, 1e-12)), at, [v for _, v in self.scan_slopes])
        return float(slope)

    def distances(self, ef: int) -> float:
        """Estimated distance computations per query at ``ef`` (log-log interpolation, ≤ n).

        Examples
        --------
        >>> from arecall.vector.placement import AutoPlanner
        >>> p = AutoPlanner(n_docs=10**6, k=10, ef_base=64, ndis=((64, 1000.0), (256, 4000.0)))
        >>> round(p.distances(128)), round(p.distances(512))
        (2000, 8000)
        """
        return float(self.distances_many(np.array([float(ef)]))[0])

    @cached_property
    def walk_cost_by_share(self) -> npt.NDArray[np.float64]:
        """The cost of a walk at the efSearch each local selectivity of :attr:`share_grid` (1
        down to 2^-16) needs; cached, since ``auto`` compares it with every principal's scan."""
        return self.walk_costs(self.ef_at_least_many(self.ef_needed(self.share_grid)))

    @cached_property
    def scan_below(self) -> float:
        """Principals with at most this many documents are always scanned: the cost of an
        unfiltered-quality graph search, ``graph_cost × ndis(ef_base)`` (∞ when ``ef_base`` is
        None). Cached: ``auto`` checks it on every call, and at 0.1% a scan takes < 1 ms.

        Examples
        --------
        >>> from arecall.vector.placement import AutoPlanner
        >>> AutoPlanner(n_docs=10**6, k=10, ef_base=64, ndis=((64, 1000.0),)).scan_below
        16000.0
        """
        if self.ef_base is None:
            return math.inf
        return self.walk_cost(self.ef_base)

    def plan(self, n_allowed: int) -> Plan:
        """Choose exact-over-subset or pushdown for a principal with ``n_allowed`` documents.

        Examples
        --------
        >>> from arecall.vector.placement import AutoPlanner
        >>> p = AutoPlanner(n_docs=10**6, k=10, ef_base=64, ndis=((64, 1200.0), (128, 2100.0)))
        >>> str(p.plan(1000)), str(p.plan(500_000))
        ('scan', 'pushdown ef=128')
        """
        cost_exact = float(n_allowed)
        if self.ef_base is None or n_allowed <= self.k:
            return Plan("exact", None, n_allowed, cost_exact, None)
        ef = self.ef_for(n_allowed)
        cost_push = self.walk_cost(ef)
        if cost_exact <= cost_push:
            return Plan("exact", None, n_allowed, cost_exact, cost_push)
        return Plan("pushdown", ef, n_allowed, cost_exact, cost_push)

    def scan_each(self, n_allowed: int, n_queries: int) -> float:
        """What each of ``n_queries`` queries scanned together over ``n_allowed`` documents
        costs, in scan distances: its share, plus its share of the pass over the authorized
        vectors (``scan_pass`` query-shares), relative to the batch the prices were timed at
        (``cost_batch``: there, exactly ``n_allowed``).

        Examples
        --------
        >>> from arecall.vector.placement import AutoPlanner
        >>> p = AutoPlanner(n_docs=1000, k=10, ef_base=16, cost_batch=200, scan_pass=8.0)
        >>> p.scan_each(100, 200), round(p.scan_each(100, 1), 1)
        (100.0, 865.4)
        """
        timed = self.scan_pass / self.cost_batch if self.cost_batch > 0 else 0.0
        return n_allowed * (1.0 + self.scan_pass / max(n_queries, 1)) / (1.0 + timed)

    def scan_share(self, n_allowed: int, n_queries: int) -> float:
        """A query's share of a batch scan of ``n_queries`` over ``n_allowed`` documents, the
        price a walk competes with: :meth:`scan_each` where the prices were timed on a batch,
        else ``n_allowed`` (every batch priced as the one timed).

        Examples
        --------
        >>> from arecall.vector.placement import AutoPlanner
        >>> AutoPlanner(n_docs=1000, k=10, ef_base=16).scan_share(100, 1)
        100.0
        """
        if self.cost_batch <= 0:
            return float(n_allowed)
        return self.scan_each(n_allowed, n_queries)

    def upkeep(self, n_queries: int) -> float:
        """The plan's own bookkeeping per query for a batch of ``n_queries``, in scan
        distances: the per-call ``plan_overhead`` over the batch, plus ``query_overhead``.

        Examples
        --------
        >>> from arecall.vector.placement import AutoPlanner
        >>> p = AutoPlanner(n_docs=10, k=1, ef_base=2, plan_overhead=1000.0, query_overhead=5.0)
        >>> p.upkeep(200), p.upkeep(1)
        (10.0, 1005.0)
        """
        return self.plan_overhead / max(n_queries, 1) + self.query_overhead

    @cached_property
    def share_grid(self) -> npt.NDArray[np.float64]:
        """Local selectivities at which :func:`graph_pays_near` prices a walk: 1 down to
        2^-``share_grid_halvings`` on the ladder's steps."""
        steps, halvings = self.settings.ladder_steps, self.settings.share_grid_halvings
        return np.asarray(2.0 ** (-np.arange(0, halvings * steps + 1) / steps), dtype=np.float64)


def graph_pays_near(
    planner: AutoPlanner, authorized: npt.NDArray[np.int64], scan_cost: float
) -> tuple[float, float]:
    """The share of the documents in cells where a graph walk can beat the scan, and the
    least local selectivity ℓ_min at which one can (1.0 past every share: never).

    A walk at the efSearch a local selectivity ℓ needs is cheaper than the scan only above some
    ℓ_min, and a query's ℓ (the authorized share of its nearest cells) exceeds ℓ_min only near a
    cell whose own share does. Taking the documents as the prior for where queries fall, the
    probe saves at most this share × (scan − cheapest walk) per query, and costs about two
    distances per cell (``settings.probe_distances``): at a million vectors and 1% it had cost
    8–13% of ``auto``'s time to learn that every query of a half-space filter's opposite tail
    had ℓ = 0.

    Examples
    --------
    >>> from arecall.vector.placement import AutoPlanner, Cells
    >>> cells = Cells(np.eye(2, dtype=np.float32), np.array([0, 0, 1, 1]), np.array([2, 2]))
    >>> p = AutoPlanner(n_docs=4, k=1, ef_base=2, ndis=((2, 1.0),), graph_cost=1.0, cells=cells)
    >>> graph_pays_near(p, np.array([2, 0]), 2.0), graph_pays_near(p, np.array([2, 0]), 0.5)
    ((0.5, 0.7071067811865476), (0.0, 1.0))
    """
    assert planner.cells is not None
    grid = planner.share_grid
    paying = grid[planner.walk_cost_by_share < scan_cost]
    if paying.size == 0:
        return 0.0, 1.0
    ell_min = float(paying.min())
    sizes = planner.cells.sizes
    share = authorized / np.maximum(sizes, 1)
    return float(sizes[share >= ell_min].sum() / max(1, int(sizes.sum()))), ell_min


def first_walks(
    planner: AutoPlanner,
    local: npt.NDArray[np.float64],
    scan_cost: float,
    *,
    floor: float = 0.0,
    independent: bool = False,
    direct: bool = False,
    n_queries: int | None = None,
) -> npt.NDArray[np.int64]:
    """Each query's first efSearch (:func:`first_ef`) where a walk there costs less than the
    scan, else 0 (scan). Priced only above ``floor``: under a filter that follows the data a
    query a grid step below ℓ_min cannot pay (pricing all 200 queries had cost 2.6 ms at
    100,000 and 50%, 3% of the scan). ``n_queries``: the batch's size, for ``direct``.

    Examples
    --------
    >>> from arecall.vector.placement import AutoPlanner
    >>> p = AutoPlanner(n_docs=10**6, k=10, ef_base=64, ndis=((64, 1000.0), (1024, 9000.0)))
    >>> first_walks(p, np.array([1.0, 0.5, 0.01]), 50_000.0, floor=0.02).tolist()
    [64, 128, 0]
    """
    first = np.zeros(local.shape[0], dtype=np.int64)
    able = np.flatnonzero(local > floor)
    if able.size:
        ef = first_ef(planner, local[able], independent, direct=direct, n_queries=n_queries)
        first[able] = np.where(planner.walk_costs(ef) < scan_cost, ef, 0)
    return first


def first_ef(
    planner: AutoPlanner,
    local: npt.NDArray[np.float64],
    independent: bool = False,
    *,
    direct: bool = False,
    n_queries: int | None = None,
) -> npt.NDArray[np.int64]:
    """Each query's first efSearch: the cheapest in expectation of the ladder values from what
    the uniform calibration needs at its local selectivity ℓ (:meth:`AutoPlanner.ef_needed`)
    upwards.

    A first search at efSearch e certifies only if its top-e list holds k authorized, which
    for ℓ·e near k is a coin flip; an uncertified query is searched again at 2e. So e costs
    ``D(e) + P[Binomial(e, ℓ) < k]·D(2e)`` distances (``D``: the calibrated cost curve,
    the binomial tail by its normal approximation). A fixed floor of (k + 2√k)/ℓ did the same
    job with more distances: at ℓ = 0.49 it moved 55% of the queries of a uniform 50% filter
    from efSearch 33 to 39. For a filter ``independent`` of the cells a short list is answered
    by pushdown at the same efSearch (`arecall.vector.placement.general`), so the second walk
    costs ``D(e)``. With ``direct``, most queries go straight to pushdown, which has no short
    lists to pay for: the first efSearch is then just the one the calibration needs for a
    batch of ``n_queries`` (:meth:`AutoPlanner.ef_direct`).
    """
    ell, back = np.unique(np.clip(local, 1e-12, 1.0), return_inverse=True)
    if direct:
        direct_ef = np.array([planner.ef_direct(float(x), n_queries) for x in ell], dtype=np.int64)
        return np.asarray(direct_ef[back.reshape(-1)], dtype=np.int64)
    # Remembered per ℓ: a one-cell probe gives few distinct values (a clustered filter's cells
    # are 0 or 1), and the arithmetic below cost 0.7 ms a call whatever their number.
    best = planner._remember_many(
        "first independent" if independent else "first",
        ell,
        lambda values: _cheapest_first_ef(planner, values, independent),
    )
    return np.asarray(best[back.reshape(-1)], dtype=np.int64)


def _cheapest_first_ef(
    planner: AutoPlanner, ell: npt.NDArray[np.float64], independent: bool
) -> npt.NDArray[np.int64]:
    """:func:`first_ef` for distinct local selectivities ``ell``, computed."""
    k = planner.k
    start = planner.ef_at_least_many(planner.ef_needed(ell))
    # The ladder's rungs from the start up to 8× it, past any useful floor.
    per, base = planner.settings.ladder_steps, float(planner.settings.ladder_start)
    j0 = np.floor(per * np.log2(np.maximum(start, 1.0) / base) + 1e-9)
    steps = np.arange(planner.settings.first_ef_rungs)
    cand = planner.ef_at_least_many(base * 2 ** ((j0[:, None] + steps[None, :]) / per))
    cand = np.maximum(cand, start[:, None])
    mean = cand * ell[:, None]
    sd = np.sqrt(np.maximum(cand * ell[:, None] * (1.0 - ell[:, None]), 1e-12))
    # P[count < k] = P[count ≤ k - 1], continuity-corrected normal tail
    z = (k - 0.5 - mean) / sd
    p_short = special.ndtr(z)
    # Independent filter: a short list is answered by pushdown at the same efSearch.
    again = cand if independent else planner.ef_at_least_many(2 * cand)
    cost = planner.walk_costs(cand) + p_short * planner.walk_costs(again)
    return np.asarray(cand[np.arange(cand.shape[0]), np.argmin(cost, axis=1)], dtype=np.int64)


#: Queries whose top-ef lists check a filter independent of the cells against the queries
