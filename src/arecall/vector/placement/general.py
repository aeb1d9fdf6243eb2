"""The general plan: per-query evidence, for a filter that follows the data (or any filter the
direct plan declined).

1. **Probe, where it can pay** (:func:`_probe`). The cells' authorized counts say where a walk
   could beat the scan at all; if those cells hold too few documents for the probe to repay
   itself (and the plan's own bookkeeping), every query is scanned. Otherwise a strided sample
   is probed first, and the rest only if the sample's walks would save more than the probe.
2. **Price each query's first walk** (`arecall.vector.placement.costs.first_walks`) from its
   local selectivity; a query whose walk costs more than what it saves the batch scan is
   scanned.
3. **A pilot, then the rest** (:func:`_pilot`). Where the filter follows the data, the most
   promising queries walk first; the rest walk only where a walk costs less than the scan
   times the pilot's certified share.
4. **Certify from the search itself** (:class:`_Answers`): each walk's unfiltered top-ef
   list, filtered, is pushdown's answer when it holds k authorized, priced by where its k-th
   authorized entry ranks and by the authorized share it met. For a filter independent of the
   cells and of the sampled lists, the rest are pushed down (:func:`_lists_then_push`).
5. **Escalate once, then scan** (:func:`_retry`, :func:`_finish`): the fewest lowest-certified
   queries are searched once more at the efSearch their evidence asks for, if still cheaper
   than scanning them; whatever still falls short of the goal is scanned.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from arecall.vector.index import Hits
from arecall.vector.placement import certification, costs
from arecall.vector.placement.batch import Batch
from arecall.vector.placement.direct import Lists
from arecall.vector.placement.evidence import Plan

__all__ = ["general"]

_I64 = npt.NDArray[np.int64]


@dataclass
class _Answers:
    """A batch's answers as the plan builds them: per query its hits, certified recall, the
    efSearch it was answered from (0: not yet, or scanned), the authorized count of its latest
    list, the authorized share that list held, and the scan distances spent on it."""

    batch: Batch
    independent: bool
    lists: Lists | None
    first: _I64
    spent: npt.NDArray[np.float64]
    ids: _I64 = field(init=False)
    scores: npt.NDArray[np.float32] = field(init=False)
    predicted: npt.NDArray[np.float64] = field(init=False)
    used: _I64 = field(init=False)
    counts: _I64 = field(init=False)
    seen: npt.NDArray[np.float64] = field(init=False)
    tail: npt.NDArray[np.bool_] = field(init=False)
    deep: npt.NDArray[np.bool_] = field(init=False)
    stuck: npt.NDArray[np.bool_] = field(init=False)
    escalated: int = 0
    shifted: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        n_q, k = self.batch.n_q, self.batch.k
        self.ids = np.full((n_q, k), -1, dtype=np.int64)
        self.scores = np.full((n_q, k), -np.inf, dtype=np.float32)
        self.predicted = np.ones(n_q)  # scanned queries are exact
        self.used = np.zeros(n_q, dtype=np.int64)
        self.counts = np.zeros(n_q, dtype=np.int64)
        self.seen = np.ones(n_q)
        self.tail = np.zeros(n_q, dtype=bool)
        self.deep = np.zeros(n_q, dtype=bool)
        self.stuck = np.zeros(n_q, dtype=bool)

    def search(self, rows: _I64, efs: _I64) -> npt.NDArray[np.float64]:
        """Search ``rows`` at ``efs``; record certified answers; return the authorized share
        each row's list held. One faiss call per distinct efSearch; the certificate arithmetic
        runs once over all rows (at 30% it used to cost a third of a scan in numpy overhead)."""
        batch, planner, k = self.batch, self.batch.planner, self.batch.k
        count = np.zeros(rows.shape[0], dtype=np.int64)
        rank_k = np.zeros(rows.shape[0], dtype=np.int64)
        plain = Hits(
            np.zeros((rows.shape[0], k), np.int64), np.zeros((rows.shape[0], k), np.float32)
        )
        for ef in np.unique(efs):
            at = np.flatnonzero(efs == ef)
            sub = rows[at]
            # Unfiltered top-ef == pushdown(ef)'s visited set in ranked order: faiss's
            # traversal ignores the selector, so its authorized prefix *is* pushdown's
            # answer, and where that prefix sits in the ranking is the evidence.
            if self.lists is not None and self.lists[0] == ef:  # read by the direct plan
                full = Hits(self.lists[1].ids[sub], self.lists[1].scores[sub])
            else:
                full = batch.index.search(batch.q[sub], int(ef), ef_search=int(ef))
            count[at], rank_k[at], kept = certification.read_lists(full, batch.mask, k)
            plain.ids[at], plain.scores[at] = full.ids[:, :k], full.scores[:, :k]
            good = count[at] >= k
            self.ids[sub[good]], self.scores[sub[good]] = kept.ids, kept.scores
        self.spent[rows] += planner.walk_costs(efs)
        self.counts[rows] = count
        good = count >= k
        # Two certificates, the better one counts: where the k-th authorized hit ranks (the
        # walk's budget per wanted result, priced by the unfiltered calibration), and the
        # authorized share the walk actually met (priced by the uniform-filter one).
        by_rank = planner.predicted_recall(efs * k / np.maximum(rank_k, 1))
        share = np.maximum(count, 0.5) / efs
        z = planner.settings.pooled_share_z
        fits = self.independent and certification.pooled_share_fits(count, efs, batch.share, z)
        if fits:
            # The filter ignores the cells and the lists hold, pooled, the share its size
            # predicts: each list's count is then Binomial(ef, s), and pricing each query by
            # its own count would charge it the noise (measured: 16 of 200 queries escalated
            # to efSearch 182 on a uniform 30% filter, at 2.2x the best fixed pushdown).
            share = np.full(rows.shape[0], batch.share)
            # one share, a few efSearch values: price each value once
            values, at_value = np.unique(efs, return_inverse=True)
            by_share = planner.filtered_recall(values, batch.share)[at_value.reshape(-1)]
        else:
            by_share = planner.filtered_recall(efs, share)
        self.predicted[rows] = np.where(good, np.maximum(by_rank, by_share), 0.0)
        self.used[rows] = np.where(good, efs, 0)
        answered = np.flatnonzero(good)
        if answered.size:
            self._audit_lists(rows[answered], efs[answered], plain, answered, fits, by_share)
        return np.asarray(share, dtype=np.float64)

    def _audit_lists(
        self,
        rows: _I64,
        efs: _I64,
        plain: Hits,
        at: _I64,
        fits: bool,
        by_share: npt.NDArray[np.float64],
    ) -> None:
        """Audit answered lists: under a filter shown independent of the cells and of the
        lists, their authorized answers against the uniform-filter calibration, as the direct
        plan does (a typical answer keeps its rank certificate); otherwise the walks
        themselves, by their unfiltered top-k, against the unfiltered calibration — a stuck
        walk is certified at the calibration's stuck-walk recall at most."""
        batch, planner = self.batch, self.batch.planner
        if fits:
            answers = Hits(self.ids[rows], self.scores[rows])
            a = certification.audit(
                planner, batch.q[rows], answers, batch.share, efs, batch.mask, test_shift=False
            )
        else:
            unfiltered = Hits(plain.ids[at], plain.scores[at])
            a = certification.audit(
                planner, batch.q[rows], unfiltered, 1.0, efs, None, test_shift=False
            )
        if a is None:
            return
        self.tail[rows], self.stuck[rows], self.deep[rows] = a.tail, a.stuck, a.deep
        if fits:
            bonus = self.predicted[rows] - by_share[at]
            self.predicted[rows] = a.value + np.where(a.tail, 0.0, bonus)
        else:
            self.predicted[rows] = np.where(
                a.stuck, np.minimum(self.predicted[rows], a.value), self.predicted[rows]
            )

    def audit_shift(self) -> None:
        """After every first walk: a batch with more answers in the calibration's tail than a
        batch drawn like the calibration queries has is not certified by it there
        (`arecall.vector.placement.certification.shift_alarm`)."""
        planner = self.batch.planner
        answered = np.flatnonzero(self.used > 0)
        if not planner.support or not answered.size:
            return
        tail, deep = self.tail[answered], self.deep[answered]
        unlike = certification.unlike_calibration(planner, tail, deep)
        if unlike is not None:
            self.shifted = (int(np.count_nonzero(tail)), int(answered.size))
            self.predicted[answered[unlike]] = 0.0

    def push(self, rows: _I64) -> None:
        """Pushdown at each row's first efSearch, priced by the uniform-filter calibration at
        the global share: the search that calibration measured (a filter shown independent of
        the cells and of the sampled lists). A row that comes back short stays unanswered."""
        batch, planner, first = self.batch, self.batch.planner, self.first
        for ef in np.unique(first[rows]):
            sub = rows[first[rows] == ef]
            got = batch.pushdown(sub, batch.index._ef(int(ef), batch.k))
            full_k = got.returned() >= batch.k
            self.ids[sub[full_k]], self.scores[sub[full_k]] = got.ids[full_k], got.scores[full_k]
            self.used[sub[full_k]] = ef
            recall = planner.filtered_recall(np.array([float(ef)]), batch.share)[0]
            self.predicted[sub[full_k]] = recall
            self.spent[sub] += planner.walk_cost(int(ef))
            done = sub[full_k]
            answers = Hits(got.ids[full_k], got.scores[full_k])
            efs = np.full(done.size, ef, dtype=np.int64)
            a = certification.audit(
                planner, batch.q[done], answers, batch.share, efs, batch.mask, test_shift=False
            )
            if a is not None:
                self.predicted[done], self.tail[done], self.stuck[done] = a.value, a.tail, a.stuck
                self.deep[done] = a.deep


def general(batch: Batch, independent: bool, lists: Lists | None) -> tuple[Hits, Plan]:
    """The evidence-based plan (the module docstring's five steps) for a batch whose
    preconditions ``auto`` checked; ``lists``: every query's lists the direct plan read."""
    planner, n_q = batch.planner, batch.n_q
    assert planner.ef_base is not None
    # What walking a query saves when the others are scanned: a batch scan streams the
    # authorized vectors once whatever its size, so less than a query's mean share (at
    # 100,000 clustered vectors and 30%, a plan walking 64 queries and scanning 136, priced
    # per query at 0.98x the scan, ran 1.13x). A filter independent of the cells gives every
    # query the same plan, so there a walk is priced against the whole scan.
    saved = batch.scan_cost * planner.scan_slope(batch.share)
    local = np.full(n_q, batch.share)
    spent = np.zeros(n_q)
    floor = 0.0  # the least local selectivity at which a walk may pay (below: scan)
    if planner.cells is not None and not independent:
        floor, early = _probe(batch, saved, local, spent)
        if early is not None:
            return early
    settings = planner.settings
    first = costs.first_walks(
        planner,
        local,
        batch.scan_cost if independent else saved,
        floor=floor,
        independent=independent,
        direct=independent and n_q > 2 * settings.sample_min,
        n_queries=n_q,
    )
    answers = _Answers(batch, independent, lists, first, spent)
    rows = np.flatnonzero(first > 0)
    pilot: tuple[int, int] | None = None
    walked = np.zeros(0, dtype=np.int64)
    if not independent and rows.size > 2 * settings.pilot_min:
        rows, walked, pilot = _pilot(answers, rows, local, saved)
    _lists_then_push(answers, rows, walked)
    answers.audit_shift()
    _retry(answers, pilot)
    return _finish(answers, local, saved, pilot)


def _probe(
    batch: Batch, saved: float, local: npt.NDArray[np.float64], spent: npt.NDArray[np.float64]
) -> tuple[float, tuple[Hits, Plan] | None]:
    """Probe the queries' local selectivity where it can pay (filling ``local`` and charging
    ``spent``), and return the least local selectivity a walk may pay at — or the scan, where
    the probe, or the walks it could lead to, would not repay the probe and the plan's own
    bookkeeping."""
    planner, n_q, settings = batch.planner, batch.n_q, batch.planner.settings
    cells = planner.cells
    assert cells is not None and planner.ef_base is not None
    if batch.ids is None and batch.n_allowed < settings.gather_below * batch.index.n_docs:
        # Few enough that the cell counts, and any scan, read them rather than the mask.
        batch.ids = np.flatnonzero(batch.mask)
    # Remembered across a principal's calls.
    authorized = cells.counts(batch.mask, batch.ids, batch.bitmap)
    near, ell_min = costs.graph_pays_near(planner, authorized, saved)
    # A query whose ℓ is a grid step below ℓ_min cannot walk for less than the scan.
    floor = ell_min * 2.0 ** (-1.0 / settings.ladder_steps)
    saving = saved - settings.walk_doubt * planner.walk_cost(planner.ef_base)
    probe_cost = settings.probe_distances * cells.n_cells
    # The plan's own bookkeeping, per query: paid once the probe says walks may pay.
    upkeep = planner.upkeep(n_q)
    if near * saving < probe_cost or saving < probe_cost + upkeep:
        # Scan without probing: the probe would cost more than it could save were the queries
        # where the documents are, or the bookkeeping more were every query where walks pay.
        # (The documents are a prior for where queries fall, not a fact: queries from inside
        # authorized clusters, one call each, priced by the documents with the bookkeeping too,
        # were scanned at 20x a fixed pushdown's time. The sample's probe repays it or scans.)
        plan = Plan("exact", None, batch.n_allowed, batch.scan_cost, None, graph_pays_near=near)
        return floor, (batch.scan(), plan)
    # Probe a strided sample first: the documents are only the prior for where the queries
    # fall, and queries from a region the filter avoids (a half-space's opposite tail) all
    # come back with ℓ = 0 — at 1M and 5% the probe was 6% of the time of a plan that scanned
    # every query.
    probed = certification.sample_rows(n_q, settings.sample_min, settings.sample_share)
    local[probed] = cells.local_selectivity(batch.q[probed], batch.mask, authorized)
    spent[probed] += probe_cost
    unprobed = np.ones(n_q, dtype=bool)
    unprobed[probed] = False
    rest = np.flatnonzero(unprobed)
    # What the sample's own first walks, priced as the plan prices them, would save a query on
    # average: probing the rest must be worth that much. (Counting the sampled queries with
    # ℓ ≥ ℓ_min priced a walk at 0.9× the scan like one at 0.1×. It cannot see a walk that
    # fails to certify: at 100,000 and 50% of the clustered corpus two sampled walks would
    # each save a third of a scan, and all six the probe led to failed, 1.14× the scan.) And
    # the plan's own bookkeeping: unpriced, at 100,000 clustered vectors and 50% a plan
    # walking 103 queries and scanning 97, priced at 0.82-0.93x the scan, ran 1.01-1.12x.
    sampled_first = costs.first_walks(planner, local[probed], saved, floor=floor)
    paying = sampled_first[sampled_first > 0]
    doubt = settings.walk_doubt
    gain = float(np.sum(saved - doubt * planner.walk_costs(paying))) / probed.size
    if gain < (probe_cost if rest.size else 0.0) + upkeep:
        plan = Plan(
            "exact",
            None,
            batch.n_allowed,
            batch.scan_cost,
            None,
            n_queries=n_q,
            local_selectivity=float(local[probed].mean()),
            n_probed=int(probed.size),
        )
        return floor, (batch.scan(), plan)
    if rest.size:
        local[rest] = cells.local_selectivity(batch.q[rest], batch.mask, authorized)
        spent[rest] += probe_cost
    spent += upkeep
    return floor, None


def _pilot(
    answers: _Answers, rows: _I64, local: npt.NDArray[np.float64], saved: float
) -> tuple[_I64, _I64, tuple[int, int]]:
    """Walk the most promising queries first (highest ℓ, so cheapest walks): the cells average
    over thousands of documents, and a query can sit in the part of its cells the filter
    avoids. If even these fail to certify, the rest would walk and then be scanned anyway (at
    1M and 50% of a half-space, 57 walks at efSearch 91-2,048 then 100 scans: 2.8x the scan).
    A query walks on only where its walk costs less than the scan times the pilot's certified
    share — the walk's expected saving. Returns the rows still to walk, the pilot's rows, and
    (certified, walked) of the pilot."""
    planner, first = answers.batch.planner, answers.first
    settings = planner.settings
    m = max(settings.pilot_min, math.ceil(rows.size * settings.pilot_share))
    lead = rows[np.argsort(-local[rows], kind="stable")[:m]]
    answers.seen[lead] = answers.search(lead, first[lead])
    certified = float(np.mean(answers.used[lead] > 0))
    pilot = (int(np.count_nonzero(answers.used[lead])), int(lead.size))
    rest = np.setdiff1d(rows, lead)
    first[rest] = np.where(planner.walk_costs(first[rest]) < certified * saved, first[rest], 0)
    return np.union1d(lead, rest[first[rest] > 0]), lead, pilot


def _lists_then_push(answers: _Answers, rows: _I64, walked: _I64) -> None:
    """Walk ``rows`` (less the pilot's, ``walked``) and read their lists — for a filter
    independent of the cells, only a strided sample's, pushing the rest down once the sample's
    lists hold the filter's share."""
    batch, planner, first = answers.batch, answers.batch.planner, answers.first
    settings, s_global = planner.settings, batch.share
    listed, direct_rows = rows, np.zeros(0, dtype=np.int64)
    if answers.independent and rows.size > 2 * settings.sample_min:
        # A filter independent of the cells: the certificate's one job left is to check, on
        # the lists' own scale, that it is independent of the queries too (pooled share). A
        # strided sample does that; the rest go straight to pushdown, which needs no second
        # walk when a top-ef list holds fewer than k authorized (at 1M and 10%, a fifth of the
        # queries did, and auto ran 1.2-1.4x the fixed pushdown at the same efSearch).
        picked = np.zeros(rows.size, dtype=bool)
        picked[certification.sample_rows(rows.size, settings.sample_min, settings.sample_share)] = (
            True
        )
        listed, direct_rows = rows[picked], rows[~picked]
    todo = listed if walked.size == 0 else np.setdiff1d(listed, walked)
    if todo.size:  # nothing walks when every query is scanned: 0.15 ms of numpy on nothing
        answers.seen[todo] = answers.search(todo, first[todo])
    z = settings.pooled_share_z
    fits = answers.independent and certification.pooled_share_fits(
        answers.counts[listed], first[listed], s_global, z
    )
    pending = np.zeros(0, dtype=np.int64)  # rows for pushdown, in one search per efSearch
    if direct_rows.size:
        if fits:
            # Where a list walk was measured cheaper than pushdown, the direct rows read
            # their lists too (the direct plan): the same answers, certified by rank as well.
            values, at_value = np.unique(first[direct_rows], return_inverse=True)
            pays = np.array([planner.lists_pay(int(e), s_global) for e in values], dtype=bool)
            paying = pays[at_value.reshape(-1)]
            by_list, pending = direct_rows[paying], direct_rows[~paying]
            if by_list.size:
                answers.seen[by_list] = answers.search(by_list, first[by_list])
                listed = np.union1d(listed, by_list)
            answers.seen[pending] = s_global
        else:  # the sample's lists are short of authorized documents: certify every query
            answers.seen[direct_rows] = answers.search(direct_rows, first[direct_rows])
            listed = rows
            fits = certification.pooled_share_fits(answers.counts[rows], first[rows], s_global, z)
    short = listed[answers.used[listed] == 0]
    if fits and (short.size or pending.size):
        # Lists too short to certify, under a filter shown independent of the cells and of the
        # lists: pushdown at the same efSearch collects from every node the walk scored, not
        # only the top ef, and the uniform-filter calibration measured exactly that search —
        # it certifies these queries without a second, larger walk. Pushed down together
        # with the direct rows: one faiss call, not two.
        answers.push(np.union1d(pending, short))


def _retry(answers: _Answers, pilot: tuple[int, int] | None) -> None:
    """Search once more the fewest lowest-certified queries that bring the batch to its goal,
    and every searched query whose list held fewer than k authorized (it has no answer yet):
    at the efSearch the evidence asks for and at least ``escalate_factor`` times the first,
    where that is still cheaper than scanning them.

    A scan of m queries also reads all n·s authorized vectors once, priced at ``scan_pass``
    query-shares, shared by the m — unless the plan scans other queries anyway, and the pass
    is paid already (at 100,000 clustered vectors and 50%, one retry walked at efSearch 1,723
    for 3.4 ms, the price of scanning 12 queries, beside 96 queries scanned anyway)."""
    planner, first, used = answers.batch.planner, answers.first, answers.used
    retry = np.union1d(
        certification.below_goal(answers.predicted, planner.goal),
        np.flatnonzero((first > 0) & (used == 0)),
    )
    retry = retry[~answers.stuck[retry]]  # answered exactly (:func:`_finish`)
    if answers.shifted is not None:
        # Unlike the calibration's queries: a larger efSearch is no better certified.
        retry = retry[~answers.tail[retry]]
    if not retry.size:
        return
    batch = answers.batch
    # The pass is paid already where the plan scans other queries anyway.
    scan_each = (
        batch.scan_cost
        if bool(np.any(first == 0))
        else planner.scan_each(batch.n_allowed, retry.size)
    )
    base = np.where(used[retry] > 0, used[retry], first[retry])
    # The efSearch the calibration needs at the authorized share the first list held.
    need = np.where(first[retry] > 0, np.ceil(planner.ef_needed(answers.seen[retry])), 0.0)
    again_ef = planner.ef_at_least_many(np.maximum(planner.settings.escalate_factor * base, need))
    # After a pilot, a second walk is worth it only in proportion to how often walks certified.
    trust = 1.0 if pilot is None else pilot[0] / pilot[1]
    ok = (
        (first[retry] > 0)
        & (again_ef > used[retry])
        & (planner.walk_costs(again_ef) < trust * scan_each)
    )
    if ok.any():
        answers.escalated = int(ok.sum())
        answers.search(retry[ok], again_ef[ok])


def _finish(
    answers: _Answers, local: npt.NDArray[np.float64], saved: float, pilot: tuple[int, int] | None
) -> tuple[Hits, Plan]:
    """Scan every query still unanswered, whose walk was stuck (as every plan does:
    `arecall.vector.placement.settle.settle`) or needed for the goal, and state the plan."""
    batch, planner, used = answers.batch, answers.batch.planner, answers.used
    n_q, spent = batch.n_q, answers.spent
    scan = np.union1d(
        np.flatnonzero((used == 0) | answers.stuck),
        certification.below_goal(answers.predicted, planner.goal),
    )
    if scan.size:
        exact = batch.scan(scan)
        answers.ids[scan], answers.scores[scan] = exact.ids, exact.scores
        answers.predicted[scan], used[scan] = 1.0, 0
        # The batch scan less what each query not in it saved.
        spent[scan] += (n_q * batch.scan_cost - (n_q - scan.size) * saved) / scan.size
    graph = used[used > 0]
    plan = Plan(
        method="pushdown" if graph.size else "exact",
        ef_search=int(graph.max()) if graph.size else None,
        n_allowed=batch.n_allowed,
        cost_exact=batch.scan_cost,
        cost_pushdown=planner.walk_cost(int(graph.max())) if graph.size else None,
        n_fallback=int(scan.size) if graph.size else 0,
        n_queries=n_q,
        ef_min=int(graph.min()) if graph.size else None,
        n_escalated=answers.escalated,
        local_selectivity=float(local.mean()),
        predicted_recall=float(answers.predicted.mean()),
        cost_auto=float(spent.mean()),
        pilot=pilot,
        shifted=answers.shifted,
        n_stuck=int(np.count_nonzero(answers.stuck)),
    )
    return Hits(answers.ids, answers.scores), plan
