"""The direct plan: a filter independent of the cells, answered in one to three faiss calls.

Where the cells' counts show the filter ignoring the geometry (`Cells.looks_independent`),
every query's local selectivity is the global share, and the plan is the one the general path
(`arecall.vector.placement.general`) would reach for such a filter, without its per-query
bookkeeping: a strided sample reads its top-ef lists at
:meth:`~arecall.vector.placement.curves.RecallCurves.ef_direct` (the efSearch where the
calibrated curve crosses the batch's aim), and if those lists hold, pooled, the share the
filter's size predicts, every other query is pushed down at that efSearch in one call,
certified by the uniform-filter calibration. Where the planner measured one list walk for the
whole batch cheaper than that sample and pushdown
(:meth:`~arecall.vector.placement.costs.CostModel.lists_pay`), every query reads its list in
one call instead, and only the lists holding fewer than k go to pushdown.

Between and before its faiss calls it does as little as it can, and the rest after: at
100,000 vectors, a hundred microseconds of numpy between the sample's walk and the pushdown
cost the pushdown three times that (the graph it had cached was evicted), and this plan must
run within 10% of a plain pushdown of the batch.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from arecall.vector.index import Hits
from arecall.vector.placement import certification
from arecall.vector.placement.batch import Batch
from arecall.vector.placement.evidence import Plan
from arecall.vector.placement.settle import Answers, settle_audited

__all__ = ["direct", "scan_all"]

Lists = tuple[int, Hits]
"""(efSearch, every query's unfiltered top-efSearch list): lists the direct plan read and hands
to the general plan when it declines, so that no query walks twice at the same efSearch."""


def direct(batch: Batch) -> tuple[tuple[Hits, Plan] | None, Lists | None]:
    """The direct plan's answer and plan — or ``None`` (nothing answered) where the general
    plan must decide, with the lists it read if it read every query's.

    ``None`` before any search where the calibration does not reach the goal at this share,
    and after the lists where they fall short of the filter's share; every query scanned
    where no walk at the global share beats the scan (:func:`scan_all`), or where the lists'
    answers show a batch unlike the calibration's queries (:func:`_sample_shifted`).
    """
    planner, n_q, s_global = batch.planner, batch.n_q, batch.share
    ef = planner.ef_direct(s_global, n_q)
    if not planner.walk_cost(ef) < batch.scan_cost:
        # Every query has the global share, and no walk at it beats the scan: the general
        # plan would scan them all too, after 0.3-0.5 ms of numpy (10% of a 10% scan at
        # 100,000 vectors). The same answer and the same plan, without it.
        return scan_all(batch), None
    if planner.direct_recall(s_global, n_q) < planner.goal:
        return None, None
    every = planner.lists_pay(ef, s_global)
    settings = planner.settings
    # The rows whose lists are read: every row, or the sample.
    read = (
        np.arange(n_q)
        if every
        else certification.sample_rows(n_q, settings.sample_min, settings.sample_share)
    )
    full = batch.index._walk(batch.q if every else batch.q[read], ef, ef)
    ok = batch.mask[full.ids] & (full.ids >= 0)  # faiss pads with -1: mask[-1], masked out
    count = np.count_nonzero(ok, axis=1)
    if not certification.pooled_share_fits(count, ef, s_global, settings.pooled_share_z):
        return None, ((ef, full) if every else None)
    shifted = _sample_shifted(batch, ef, full, ok, count)
    if shifted is not None:
        # Answers unlike any the calibration saw: its recall says nothing about the rest.
        return scan_all(batch, shifted, spent=planner.walk_cost(ef) * read.size), None
    cells = None if every else _sample_concentrated(batch, ef, read.size, full, ok, count)
    if cells is not None:
        # One neighbourhood's batch, whose walks and exact check cost more than its scan.
        spent = planner.walk_cost(ef) * read.size
        return scan_all(batch, spent=spent, concentrated=(cells, 0.0, 0)), None
    short = count < batch.k  # lists that cannot answer: pushed down with the rows not read
    if every:
        pushed = np.flatnonzero(short)
    else:
        rest = certification.unsampled_rows(n_q, settings.sample_min, settings.sample_share)
        # ``rest`` and the sample are disjoint: their union is the two sorted together (union1d
        # took 8% of the plan's numpy at 100,000 vectors and 30%, finding no duplicate).
        pushed = np.sort(np.concatenate((rest, read[short]))) if short.any() else rest
    got = batch.pushdown(pushed, ef) if pushed.size else None
    return _answered(batch, ef, read, full, (ok, count), short, pushed, got), None


def _sample_shifted(
    batch: Batch, ef: int, full: Hits, ok: npt.NDArray[np.bool_], count: npt.NDArray[np.int64]
) -> tuple[int, int] | None:
    """(answers below the calibration's tail threshold, answers) where the lists read show a
    batch unlike the calibration's queries
    (`arecall.vector.placement.certification.unlike_calibration`), else ``None``. Only a
    comparison per list, between the two faiss calls: each answering list's k-th authorized
    score against the calibration's thresholds."""
    stratum = batch.planner.stratum(batch.share, float(ef))
    answering = np.flatnonzero(count >= batch.k)
    if stratum is None or not answering.size:
        return None
    kth_at = np.argmax(np.cumsum(ok[answering], axis=1) >= batch.k, axis=1)
    kth = full.scores[answering, kth_at]
    tail = kth < stratum.tail_below
    if certification.unlike_calibration(batch.planner, tail, kth < stratum.deep_below) is None:
        return None
    return int(np.count_nonzero(tail)), int(answering.size)


def _sample_concentrated(
    batch: Batch,
    ef: int,
    n_read: int,
    full: Hits,
    ok: npt.NDArray[np.bool_],
    count: npt.NDArray[np.int64],
) -> float | None:
    """The batch's effective cells as the sample's lists estimate them
    (:func:`~arecall.vector.placement.certification.cells_estimated` of their best authorized
    answers' cells), where the batch is concentrated and its walks and exact check cost more
    than its scan (:func:`~arecall.vector.placement.certification.checking_costs_more`: asked
    first, so that a batch whose walks are cheap spends nothing on this); else ``None``."""
    planner = batch.planner
    walks = (batch.n_q - n_read) * planner.walk_cost(ef)
    if planner.cells is None or not certification.checking_costs_more(
        planner, batch.n_q, walks, batch.n_allowed
    ):
        return None
    rows = np.flatnonzero(count > 0)
    best = full.ids[rows, np.argmax(ok[rows], axis=1)]
    cells = certification.cells_estimated(planner.cells.assignment[best], planner.cells.n_cells)
    return cells if cells < planner.settings.concentrated_cells else None


def _answered(
    batch: Batch,
    ef: int,
    read: npt.NDArray[np.int64],
    full: Hits,
    read_out: tuple[npt.NDArray[np.bool_], npt.NDArray[np.int64]],
    short: npt.NDArray[np.bool_],
    pushed: npt.NDArray[np.int64],
    got: Hits | None,
) -> tuple[Hits, Plan]:
    """Everything after the searches: each read list's answer and evidence (``read_out``: the
    mask at the lists' entries and its count per list), the pushed rows' answers, a scan of
    any pushdown that came back short, the audit and what it settles (:func:`_audited`), and
    the plan."""
    planner, n_q, k = batch.planner, batch.n_q, batch.k
    certified = planner.direct_recall(batch.share, n_q)
    walk = planner.walk_cost(ef)
    ids = np.empty((n_q, k), dtype=np.int64)
    scores = np.empty((n_q, k), dtype=np.float32)
    _, rank_k, kept = certification.read_lists(full, batch.mask, k, *read_out)
    answered = read[~short]
    ids[answered], scores[answered] = kept.ids, kept.scores
    # A list's rank certificate can only raise its recall above the uniform calibration's.
    by_rank = planner.predicted_recall(float(ef * k) / rank_k[~short])
    spent = walk * (n_q + int(np.count_nonzero(short)))  # a short list is walked twice
    scanned = np.zeros(0, dtype=np.int64)
    if got is not None:
        ids[pushed], scores[pushed] = got.ids, got.scores
        # A pushdown that comes back short (nodes HNSW left unreachable) is scanned.
        scanned = pushed[got.short(batch.n_allowed)]
    if scanned.size:
        exact = batch.scan(scanned)
        ids[scanned], scores[scanned] = exact.ids, exact.scores
        spent += scanned.size * batch.scan_cost
    rank_bonus = np.zeros(n_q)
    rank_bonus[answered] = np.maximum(by_rank, certified) - certified
    answers = Answers(
        ids, scores, np.full(n_q, certified), np.full(n_q, ef), *_no_flags(n_q), spent
    )
    answers.value += rank_bonus
    answers.value[scanned], answers.efs[scanned] = 1.0, 0
    shifted, concentrated = _audited(batch, answers, rank_bonus, ef)
    graph = answers.efs[answers.efs > 0]
    plan = Plan(
        method="pushdown" if graph.size else "exact",
        ef_search=int(graph.max()) if graph.size else None,
        n_allowed=batch.n_allowed,
        cost_exact=batch.scan_cost,
        cost_pushdown=walk if graph.size else None,
        n_fallback=int(np.count_nonzero(answers.efs == 0)) if graph.size else 0,
        n_queries=n_q,
        ef_min=int(graph.min()) if graph.size else None,
        n_escalated=answers.escalated,
        local_selectivity=batch.share,
        predicted_recall=float(answers.value.mean()),
        cost_auto=answers.spent / n_q,
        shifted=shifted,
        concentrated=concentrated,
        n_stuck=answers.n_stuck,
    )
    return Hits(answers.ids, answers.scores), plan


def _no_flags(n: int) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """No answer in the tail, none stuck: (tail, stuck) before an audit."""
    return np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)


def _audited(
    batch: Batch, answers: Answers, rank_bonus: npt.NDArray[np.float64], ef: int
) -> tuple[tuple[int, int] | None, tuple[float, float, int] | None]:
    """Audit the walked answers (at efSearch ``ef``) against the calibration (typical ones keep
    their rank certificate), check a concentrated batch's sample deeper, settle the batch to
    its goal, and return the shift and concentration evidence, if any."""
    planner = batch.planner
    walked = np.flatnonzero(answers.efs > 0)
    # Every row walked (the common case): the batch's own arrays, not copies of them. Every
    # walk here is at ``ef`` (a short list is walked again at it): one efSearch for the audit.
    every = walked.size == batch.n_q
    a = certification.audit(
        planner,
        batch.q if every else batch.q[walked],
        Hits(answers.ids, answers.scores)
        if every
        else Hits(answers.ids[walked], answers.scores[walked]),
        batch.share,
        ef,
        batch.mask,
    )
    if a is None:
        return None, None  # no support table: the calibration's mean certifies, as it always did
    answers.note(walked, a)
    answers.value[walked] += np.where(a.tail, 0.0, rank_bonus[walked])

    def walk(rows: npt.NDArray[np.int64], ef: int) -> Hits:
        return batch.pushdown(rows, ef)

    return settle_audited(
        planner,
        answers,
        a,
        walked,
        batch.q,
        walk=walk,
        scan=batch.scan,
        vectors=batch.index.vectors,
        share=batch.share,
        mask=batch.mask,
        n_allowed=batch.n_allowed,
        allowance=planner.stuck_allowance(batch.share, ef, batch.n_q),
    )


def scan_all(
    batch: Batch,
    shifted: tuple[int, int] | None = None,
    *,
    spent: float = 0.0,
    concentrated: tuple[float, float, int] | None = None,
) -> tuple[Hits, Plan]:
    """Every query of a filter independent of the cells scanned, and the plan the general path
    states for it (no query walked or probed: each query's local selectivity is the global
    share, its certified recall 1, its cost the scan's) — or, with ``shifted`` or
    ``concentrated``, the evidence that the lists read (``spent`` scan distances) showed a
    batch the calibration does not describe, or one whose walks and exact check cost more.

    Examples
    --------
    >>> from arecall.vector.index import build_index
    >>> from arecall.vector.placement import AutoPlanner
    >>> idx = build_index(np.eye(4, dtype=np.float32), kind="exact")
    >>> q, mask = np.eye(4, dtype=np.float32)[:2], np.ones(4, bool)
    >>> batch = Batch(idx, q, 1, mask, 4, None, AutoPlanner(n_docs=4, k=1, ef_base=None))
    >>> hits, plan = scan_all(batch)
    >>> hits.rows(), str(plan)
    ([[0], [1]], 'scan (local s=1.00: no graph plan cheaper)')
    """
    n_q, scan_cost = batch.n_q, batch.scan_cost
    hits = batch.scan()
    plan = Plan.scanned(
        batch.n_allowed,
        n_q,
        scan_cost,
        float(np.full(n_q, batch.share).mean()),
        float(np.full(n_q, n_q * scan_cost / n_q).mean()) + spent / n_q,
        shifted=shifted,
        concentrated=concentrated,
    )
    return hits, plan
