"""``auto``: the plan, in the order it runs, and the dispatch over every placement.

1. **Check and count** the filter (`arecall.vector.placement.batch.count_allowed`). A
   principal with so few documents that even an unfiltered-quality walk costs more than
   scanning them is scanned outright.
2. **No filter**: one plain search where the unfiltered calibration curve crosses the batch's
   aim, or a smaller one with a second look at the queries whose k-th hit lies far
   (:func:`unfiltered`).
3. **A filter independent of the cells**: the direct plan (`arecall.vector.placement.direct`).
4. **Anything else**, or where the direct plan declines: the general plan
   (`arecall.vector.placement.general`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np
import numpy.typing as npt

from arecall.core.errors import ArecallError
from arecall.vector._checks import check_k, check_mask
from arecall.vector.index import Hits, VectorIndex
from arecall.vector.placement import certification, direct
from arecall.vector.placement.batch import Batch, count_allowed
from arecall.vector.placement.evidence import Plan
from arecall.vector.placement.fixed import post, pre, pushdown
from arecall.vector.placement.general import general
from arecall.vector.placement.planner import AutoPlanner
from arecall.vector.placement.settle import Answers, settle_audited
from arecall.vector.schema import SEARCH_PLACEMENTS

__all__ = ["answer", "auto", "certified", "check_placements", "place", "unfiltered"]


def auto(
    index: VectorIndex, queries: Any, k: int, allowed: Any, planner: AutoPlanner
) -> tuple[Hits, Plan]:
    """Answer each query by a certified graph search or the exact scan, whichever is cheaper.

    The per-query planner (`arecall.vector.placement`): estimate each query's local
    selectivity, search the graph at the efSearch it implies when that is cheaper than a
    scan, certify each answer from the evidence the search itself returns, search again
    (once) at a larger efSearch or scan what the evidence cannot certify.

    Returns
    -------
    (Hits, Plan)

    Examples
    --------
    >>> from arecall.vector.index import build_index
    >>> from arecall.vector.placement import calibrate_auto
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
    few = max(planner.scan_below, k)
    settings = planner.settings
    n_allowed, ids = count_allowed(mask, few, settings.count_stride, settings.count_looks)
    scanned_cheaper = planner.scan_share(n_allowed, q.shape[0]) <= planner.scan_below
    if scanned_cheaper or n_allowed <= k or index.kind == "exact":
        # Even an unfiltered-quality graph search costs more than a scan (or the graph never
        # pays): scan, without the probe — at 0.1% the scan itself takes well under 1 ms.
        hits = index.exact(q, k, mask) if ids is None else index._scan_ids(q, k, ids)
        return hits, Plan("exact", None, n_allowed, float(n_allowed), None)
    if n_allowed == index.n_docs:
        # No filter: the unfiltered calibration certifies a plain search directly.
        return unfiltered(index, q, k, planner)
    return certified(Batch(index, q, k, mask, n_allowed, ids, planner))


def certified(batch: Batch) -> tuple[Hits, Plan]:
    """The evidence-based plan of a filtered batch: the direct plan for a filter independent
    of the cells (first, before any other arithmetic: it must match a plain pushdown's cost),
    else, or where it declines, the general plan with any lists it read."""
    planner = batch.planner
    cells = planner.cells
    independent = cells is None or cells.looks_independent(batch.mask, batch.bitmap)
    lists = None
    if cells is not None and independent and batch.n_q > 2 * planner.settings.sample_min:
        done, lists = direct.direct(batch)
        if done is not None:
            return done
    return general(batch, independent, lists)


def unfiltered(
    index: VectorIndex, q: npt.NDArray[np.float32], k: int, planner: AutoPlanner
) -> tuple[Hits, Plan]:
    """``auto`` when every document is authorized: a graph search where the unfiltered
    calibration curve crosses the batch's aim (:meth:`AutoPlanner.ef_direct` at share 1, the
    aim a pushdown under a filter keeps; no probe) — or, where the calibration found it
    cheaper, a smaller one with a second look at the queries whose k-th hit scores below the
    calibration's quantile (``AutoPlanner.second_look``) — then the answers' audit
    (:func:`_settled`).

    At 100,000 low-rank vectors and 200 queries the aim is 0.963 for the batch and 0.008 more
    for the calibration's own error, crossed at efSearch 26 (1.21x the cheapest fixed efSearch
    that kept 0.95 on every fresh batch). Aimed at the two errors pooled (0.965), efSearch 24
    ran 1.12-1.14x, and held over calibrations but not for each one."""
    assert planner.ef_base is not None
    n_q = q.shape[0]
    ef = ef_min = planner.ef_direct(1.0, n_q)
    cost = planner.walk_cost(ef)
    look = planner.second_look
    looked = (
        None if look is None else planner.walk_cost(look[0]) + look[3] * planner.walk_cost(look[2])
    )
    cheapest = cost if looked is None else min(cost, looked)
    outright = _dearer_than_the_scan(index, q, k, planner, cheapest) or _concentrated_first(
        index, q, k, planner, cheapest
    )
    if outright is not None:
        return outright
    again = np.zeros(0, dtype=np.int64)
    may_stay = None  # a second look's share of stuck walks that may stay: its own
    if look is not None and looked is not None and looked < cost:
        ef_min, threshold, ef, _, r_near, r_far, may_stay = look
        hits = index.search(q, k, ef_search=ef_min)
        again = np.flatnonzero(hits.scores[:, -1] < threshold)
        if again.size:
            hits = hits.replace_rows(again, index.search(q[again], k, ef_search=ef))
        cost = planner.walk_cost(ef_min) + again.size / n_q * planner.walk_cost(ef)
        predicted = (again.size * r_far + (n_q - again.size) * r_near) / n_q
    else:
        hits = index.search(q, k, ef_search=ef)
        predicted = planner.predicted_at(ef)
    # A walk can miss nodes HNSW left unlinked (duplicates): a short answer is scanned.
    short = np.flatnonzero(hits.short(index.n_docs))
    if short.size:
        hits = hits.replace_rows(short, index.exact(q[short], k))
        predicted += short.size * (1.0 - predicted) / n_q
    efs = np.full(n_q, ef_min, dtype=np.int64)
    efs[again] = ef
    efs[short] = 0
    spent = cost * n_q + short.size * index.n_docs
    # The search's own arrays (fresh from faiss: nothing else holds them); no flag raised yet.
    tail, stuck = np.zeros((2, n_q), dtype=bool)
    answers = Answers(hits.ids, hits.scores, np.full(n_q, predicted), efs, tail, stuck, spent)
    allowance = planner.stuck_allowance(1.0, ef_min, n_q, deficit=may_stay)
    one_ef = None if again.size else int(ef_min)  # every walk at one efSearch, or not
    shifted, concentrated = _settled(index, q, k, planner, answers, allowance, one_ef)
    graph = efs[efs > 0]
    plan = Plan(
        method="pushdown" if graph.size else "exact",
        ef_search=int(graph.max()) if graph.size else None,
        n_allowed=index.n_docs,
        cost_exact=float(index.n_docs),
        cost_pushdown=cost if graph.size else None,
        n_fallback=int(np.count_nonzero(efs == 0)) if graph.size else 0,
        n_queries=n_q,
        ef_min=int(graph.min()) if graph.size else None,
        local_selectivity=1.0,
        predicted_recall=float(answers.value.mean()),
        n_escalated=int(again.size) + answers.escalated,
        cost_auto=answers.spent / n_q,
        shifted=shifted,
        concentrated=concentrated,
        n_stuck=answers.n_stuck,
    )
    return Hits(answers.ids, answers.scores), plan


def _dearer_than_the_scan(
    index: VectorIndex, q: npt.NDArray[np.float32], k: int, planner: AutoPlanner, cost: float
) -> tuple[Hits, Plan] | None:
    """The batch scanned, where its cheapest plain search (``cost`` scan distances a query)
    costs at least the scan; else ``None``.

    Keeping the calibration's own error can lift the aim to where the unfiltered curve
    crosses it only at a walk that costs the scan: with heavy-tailed recall the error is wide,
    and at 100,000 clustered vectors one calibration's aim, 0.990, was crossed at efSearch
    1,294, where the plain search ran 3.2x the scan."""
    n_q = q.shape[0]
    scan_cost = planner.scan_share(index.n_docs, n_q)
    if cost < scan_cost:
        return None
    return index.exact(q, k), Plan.scanned(index.n_docs, n_q, scan_cost, 1.0, scan_cost)


def _concentrated_first(
    index: VectorIndex, q: npt.NDArray[np.float32], k: int, planner: AutoPlanner, cost: float
) -> tuple[Hits, Plan] | None:
    """The batch scanned, where a strided sample of its queries' nearest cells shows it
    concentrated (:func:`~arecall.vector.placement.certification.cells_estimated` below
    ``settings.concentrated_cells``) and walking it (``cost`` scan distances a query) and
    checking it would cost more than scanning it
    (:func:`~arecall.vector.placement.certification.checking_costs_more`, asked first: where
    walks are cheap, nothing is spent on this); else ``None``.

    One tight cluster's 200 queries at 100,000 vectors were walked at efSearch 91 and 151 of
    them checked exactly: 0.79x the scan's speed."""
    settings, n_q = planner.settings, q.shape[0]
    if planner.cells is None or n_q <= 2 * settings.sample_min:
        return None
    if not certification.checking_costs_more(planner, n_q, n_q * cost, index.n_docs):
        return None
    rows = certification.sample_rows(n_q, settings.sample_min, settings.sample_share)
    cells = certification.cells_estimated(planner.cells.nearest(q[rows]), planner.cells.n_cells)
    if not cells < settings.concentrated_cells:
        return None
    plan = Plan(
        "exact",
        None,
        index.n_docs,
        float(index.n_docs),
        None,
        n_queries=n_q,
        local_selectivity=1.0,
        predicted_recall=1.0,
        cost_auto=planner.scan_share(index.n_docs, n_q),
        concentrated=(cells, 0.0, 0),
    )
    return index.exact(q, k), plan


def _settled(
    index: VectorIndex,
    q: npt.NDArray[np.float32],
    k: int,
    planner: AutoPlanner,
    answers: Answers,
    allowance: int,
    one_ef: int | None = None,
) -> tuple[tuple[int, int] | None, tuple[float, float, int] | None]:
    """Audit a plain search's walked answers (``one_ef``: the efSearch of every walk, where
    they share one), check a concentrated batch's sample deeper, settle the batch to its goal
    (``allowance``: the stuck walks that may stay, `arecall.vector.placement.settle.settle`),
    and return the shift and concentration evidence, if any (nothing to audit without a
    support table: the calibration's value stands, as it always did)."""
    walked = np.flatnonzero(answers.efs > 0)
    mine = Hits(answers.ids[walked], answers.scores[walked])
    efs = answers.efs[walked] if one_ef is None else one_ef
    a = certification.audit(planner, q[walked], mine, 1.0, efs, None)
    if a is None:
        return None, None
    answers.note(walked, a)

    def walk(rows: npt.NDArray[np.int64], ef: int) -> Hits:
        return index.search(q[rows], k, ef_search=ef)

    return settle_audited(
        planner,
        answers,
        a,
        walked,
        q,
        walk=walk,
        scan=partial(_exact_rows, index, q, k),
        vectors=index.vectors,
        share=1.0,
        mask=None,
        n_allowed=index.n_docs,
        allowance=allowance,
    )


def _exact_rows(
    index: VectorIndex, q: npt.NDArray[np.float32], k: int, rows: npt.NDArray[np.int64]
) -> Hits:
    """The exact unfiltered top-k of ``rows``."""
    return index.exact(q[rows], k)


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
    it chose. ``auto`` needs a ``planner`` (from ``calibrate_auto``).

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
        raise ArecallError(
            f"placement={placement!r}: must be one of {', '.join(SEARCH_PLACEMENTS)}"
        )
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

    ``auto`` needs a ``planner`` (from ``calibrate_auto``).

    Examples
    --------
    >>> from arecall.vector.index import build_index
    >>> idx = build_index(np.eye(2, dtype=np.float32), kind="exact")
    >>> place("pre", idx, [[1, 0]], 1, np.array([False, True])).rows()
    [[1]]
    """
    return answer(placement, index, queries, k, allowed, ef_search=ef_search, planner=planner)[0]


def check_placements(placements: Sequence[str]) -> tuple[str, ...]:
    """Return ``placements`` as a tuple, or raise naming the first unknown one.

    Examples
    --------
    >>> check_placements(["pre", "auto"])
    ('pre', 'auto')
    """
    out = tuple(placements)
    for p in out:
        if p not in SEARCH_PLACEMENTS:
            raise ArecallError(f"placements: {p!r} is not one of {', '.join(SEARCH_PLACEMENTS)}")
    if not out:
        raise ArecallError("placements=[]: name at least one of " + ", ".join(SEARCH_PLACEMENTS))
    return out
