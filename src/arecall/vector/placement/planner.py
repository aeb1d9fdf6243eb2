"""The calibrated planner: what ``auto`` knows about an index before it sees a batch.

:class:`AutoPlanner` holds the calibration's measurements (recall and distances per efSearch,
unfiltered and under uniform filters, their per-query spread, the cells) and the machine's
prices (graph and scan costs, list walks, the plan's own bookkeeping). Its methods come from
two mixins, one per concern: `arecall.vector.placement.curves.RecallCurves` (what a walk
recalls) and `arecall.vector.placement.costs.CostModel` (what it costs). Build one with
`arecall.vector.placement.calibration.calibrate_auto`; price it on this machine with
`arecall.vector.placement.machine.measure_graph_costs`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from arecall.vector.placement.cells import Cells
from arecall.vector.placement.costs import CostModel
from arecall.vector.placement.curves import RecallCurves
from arecall.vector.placement.settings import DEFAULTS, PlannerSettings
from arecall.vector.schema import IndexConfig

__all__ = ["AutoPlanner"]


@dataclass(frozen=True)
class AutoPlanner(RecallCurves, CostModel):
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
    graph_cost: float = DEFAULTS.graph_cost
    target_recall: float = IndexConfig.target_recall
    margin: float = DEFAULTS.margin
    graph_costs: tuple[tuple[int, float], ...] = field(default=())
    """Measured (efSearch, graph_cost) pairs, ascending (:func:`measure_graph_costs`): one graph
    distance costs more at a large efSearch (bigger heaps, a walk that leaves the cache) — at a
    million vectors 21 scan distances at efSearch 64, 70–87 at 9,742. Empty: ``graph_cost`` at
    every efSearch (the reproducible default)."""
    cells: Cells | None = field(default=None, repr=False, compare=False)
    """Coarse cells for the local-selectivity probe (``None``: assume the global selectivity)."""
    filtered: tuple[tuple[float, int, float], ...] = field(default=())
    """Measured (share, efSearch, recall@k) of pushdown under *uniform* filters of that share
    (1/2, 1/4, …) on the calibration queries: what a search at efSearch delivers when a given
    share of its neighbourhood is authorized."""
    spread: tuple[tuple[float, int, float], ...] = field(default=())
    """Measured (share, efSearch, standard deviation of the per-query recall@k) at each point of
    ``recall`` (share 1.0) and ``filtered``, of the recall the plans deliver (a walk the audit
    finds stuck searched again, `arecall.vector.placement.calibration`): how far a batch's
    mean can fall from the calibration's (:meth:`aim`). Empty: unknown, and a direct pushdown
    keeps the whole margin."""
    stuck_deficit: tuple[tuple[float, int, float], ...] = field(default=())
    """Measured (share, efSearch, deficit) at each point of ``recall`` and ``filtered``: how far
    the calibration queries' mean recall as the walks came back (the curves) falls below their
    mean as the plans deliver it, each stuck walk searched again (``spread`` is this recall's).
    The curves pay for that many stuck walks per query already, so a batch may leave as many
    unsearched (:meth:`stuck_allowance`). Empty: none."""
    n_calibration: int = 0
    """How many held-out queries the calibration measured (0: unknown)."""
    scan_slopes: tuple[tuple[float, float], ...] = field(default=())
    """Measured (share, slope), ascending (:func:`measure_graph_costs`): what one more query
    adds to a batch scan of that share of the documents, as a share of the batch's mean
    per-query cost. A scan streams the authorized vectors through memory once whatever the
    batch, so a query taken out of it to walk saves less than its mean share — with 200
    queries, 0.70–0.86 at 1/8 to 1/2 of 100,000 vectors, and 0.55–0.61 at a million (100
    queries). Empty: 1."""
    list_costs: tuple[tuple[int, float], ...] = field(default=())
    """Measured (efSearch, ratio), ascending (:func:`measure_graph_costs`): a batch's top-
    efSearch lists read in one unfiltered call, timed against a sample's lists and a pushdown
    of the rest at the same efSearch (`arecall.vector.placement.direct`) under a uniform half.
    The walks score the same nodes; the lists skip the selector's check at each and a second
    faiss call, and pay for a result heap efSearch deep — one list walk alone took 0.90x a
    pushdown at a million vectors and efSearch 32, 1.00x at 96, 1.03x at 384; 0.96x at 100,000
    and 32 (:meth:`lists_pay`). Empty: unknown, and only a sample reads its list."""
    plan_overhead: float = 0.0
    """Measured scan distances a plan for a filter that follows the data spends per call on its
    own bookkeeping — counting each cell's authorized documents, pricing, certifying, merging —
    beside its probes, walks and scans (:func:`measure_graph_costs`). At 100,000 vectors it
    measured about a million (3-4 ms) for 200 queries, a seventh of a 30% scan; left out of
    the price, a plan walking 64 queries and scanning 136 came to 0.99x the scan and ran
    1.35x. Bookkeeping is numpy on arrays of a batch's size, so it is priced per call, not
    per query. 0: unknown (the reproducible default)."""
    query_overhead: float = 0.0
    """Measured scan distances the plan's bookkeeping adds per query, beside the per-call
    ``plan_overhead`` (:func:`measure_graph_costs` times it at two batch sizes): a one-query call
    had been charged a whole 200-query batch's bookkeeping, and always scanned. 0: unknown."""
    cost_batch: int = 0
    """The batch size the machine's prices were timed at (:func:`measure_graph_costs`): a scan
    of a smaller batch pays its pass over the vectors (``scan_pass`` query-shares) over fewer
    queries, so each costs more than its share (:meth:`scan_each`). 0: unknown, and every batch
    is priced as the one timed."""
    scan_pass: float = DEFAULTS.scan_pass
    """What a scan's pass over the authorized vectors costs, in query-shares of a batch scan
    (timed by :func:`measure_graph_costs`, else ``settings.scan_pass``)."""
    second_look: tuple[int, float, int, float, float, float, float] | None = field(default=None)
    """The unfiltered plan's second look (:func:`_second_look`): (efSearch first, k-th score
    threshold, efSearch again, share of the calibration queries below the threshold, recall of
    those above it at the first efSearch, recall of those below it at the second, and the
    share of a batch's answers that may stay stuck: 1 where it is certified counting stuck
    walks as they came back, else its ``stuck_deficit``). ``None``: one plain search at
    ``ef_base``."""

    support: tuple[tuple[float, int, float, float, float, float, float], ...] = field(default=())
    """Per calibration point, how the certificate reads a batch's answers: (share, efSearch,
    the k-th scores below which an answer is in the tail's deepest part and in the tail, then
    the recall of typical, tail and deep answers; `arecall.vector.placement.curves.Stratum`).
    Empty: the calibration's mean certifies every answer, as before the audit (a planner built
    by hand)."""
    confidence: float = IndexConfig.confidence
    """The per-batch confidence of the promise (``index.confidence``): a batch's mean recall
    stays at or above ``target_recall`` with this probability, for the calibration at hand
    unless it is among the unluckiest ``1 - confidence`` (the aim keeps ``z`` standard errors
    of the batch and ``z`` of the calibration,
    :meth:`~arecall.vector.placement.curves.RecallCurves.aim`)."""
    settings: PlannerSettings = field(default=DEFAULTS, repr=False, compare=False)
    """The planner's tuned numbers (`arecall.vector.placement.settings`)."""
