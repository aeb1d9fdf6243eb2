"""Settling a batch's certificate: search again, then scan, what the answers did not certify.

Shared by the plans that answer a whole batch in one or two faiss calls (a batch with no filter,
`arecall.vector.placement.plan.unfiltered`, and the direct plan,
`arecall.vector.placement.direct`): once their answers are audited
(`arecall.vector.placement.certification.audit`), the fewest lowest-certified queries that
lift the batch to its goal are searched once more at ``escalate_factor`` times their efSearch
(where that is cheaper than scanning them, and the batch is not shifted: a query unlike the
calibration's is no better certified at a larger efSearch), and whatever is still short of the
goal is scanned. A walk found stuck is searched again (and scanned if stuck again) whatever the
goal asks, but for the few the calibration's curves pay for. The general plan does the same
with its own evidence (`arecall.vector.placement.general`), and scans a stuck walk outright.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from arecall.vector.index import Hits
from arecall.vector.oracle import tie_aware_recall
from arecall.vector.placement import certification
from arecall.vector.placement.certification import (
    Audit,
    below_goal,
    effective_cells,
    fewest_exact,
)
from arecall.vector.placement.planner import AutoPlanner

__all__ = ["Answers", "check_concentration", "settle", "walk_rows"]

_Rows = npt.NDArray[np.int64]


@dataclass
class Answers:
    """A batch's answers being settled: hits, each query's certified recall, the efSearch it
    was answered from (0: scanned), whether it is in the calibration's tail and stuck, the
    scan distances spent, and how many walks the first audit found stuck."""

    ids: npt.NDArray[np.int64]
    scores: npt.NDArray[np.float32]
    value: npt.NDArray[np.float64]
    efs: _Rows
    tail: npt.NDArray[np.bool_]
    stuck: npt.NDArray[np.bool_]
    spent: float
    escalated: int = 0
    scanned: _Rows = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    n_stuck: int = 0

    def take(self, rows: _Rows, hits: Hits) -> None:
        """Answer ``rows`` with ``hits``."""
        self.ids[rows], self.scores[rows] = hits.ids, hits.scores

    def note(self, rows: _Rows, audited: Audit) -> None:
        """Record an audit of ``rows``' answers."""
        self.value[rows] = audited.value
        self.tail[rows], self.stuck[rows] = audited.tail, audited.stuck


def walk_rows(walk: Callable[[_Rows, int], Hits], rows: _Rows, efs: _Rows, k: int) -> Hits:
    """``walk(rows, ef)`` for each distinct efSearch of ``efs``, gathered back in ``rows``'
    order."""
    ids = np.full((rows.size, k), -1, dtype=np.int64)
    scores = np.full((rows.size, k), -np.inf, dtype=np.float32)
    for ef in np.unique(efs):
        at = np.flatnonzero(efs == ef)
        got = walk(rows[at], int(ef))
        ids[at], scores[at] = got.ids, got.scores
    return Hits(ids, scores)


def settle(
    planner: AutoPlanner,
    answers: Answers,
    shifted: bool,
    again: Callable[[_Rows, _Rows], None],
    scan: Callable[[_Rows], Hits],
    n_allowed: int,
    allowance: int = 0,
) -> None:
    """Lift ``answers`` to the planner's goal: ``again(rows, efs)`` searches rows once more
    (and records their answers and audit), ``scan(rows)`` answers rows exactly over
    ``n_allowed`` documents.

    A walk the audit found stuck is searched again, and scanned if stuck again, whatever the
    goal asks — all but ``allowance`` of them, which the curves the plan was aimed by pay for
    already (`~arecall.vector.placement.curves.RecallCurves.stuck_allowance`): the
    calibration's spread, which the aim keeps ``z`` of, is that of the recall delivered so
    (`arecall.vector.placement.calibration`)."""
    settings = planner.settings
    answers.n_stuck = int(np.count_nonzero(answers.stuck))
    stuck = np.flatnonzero(answers.stuck & (answers.efs > 0))[allowance:]
    short = below_goal(answers.value, planner.goal)
    if not short.size and not stuck.size:
        return  # the batch's certificate holds already: nothing to retry, nothing to scan
    retry = np.union1d(short[answers.efs[short] > 0], stuck)
    if shifted:  # a query unlike the calibration's is no better certified at a larger efSearch
        retry = retry[~answers.tail[retry]]
    if retry.size:
        # Priced against scanning them: a scan of m queries also reads the authorized vectors
        # once, ``scan_pass`` query-shares, shared by the m.
        scan_each = planner.scan_each(n_allowed, retry.size)
        deeper = planner.ef_at_least_many(settings.escalate_factor * answers.efs[retry])
        ok = (deeper > answers.efs[retry]) & (planner.walk_costs(deeper) < scan_each)
        if ok.any():
            again(retry[ok], deeper[ok])
            answers.escalated = int(ok.sum())
            answers.spent += float(np.sum(planner.walk_costs(deeper[ok])))
    # Stuck still (again, or never searched again) beyond the allowance, or short of the goal:
    # scanned.
    stuck = np.flatnonzero(answers.stuck & (answers.efs > 0))[allowance:]
    scanned = np.union1d(stuck, below_goal(answers.value, planner.goal))
    if scanned.size:
        answers.take(scanned, scan(scanned))
        answers.value[scanned], answers.efs[scanned] = 1.0, 0
        answers.spent += scanned.size * planner.scan_each(n_allowed, scanned.size)
        answers.scanned = scanned


def check_concentration(
    planner: AutoPlanner,
    answers: Answers,
    walked: _Rows,
    scan: Callable[[_Rows], Hits],
    judge: Callable[[_Rows, Hits, Hits], npt.NDArray[np.float64]],
    n_allowed: int,
) -> tuple[tuple[float, float, int] | None, bool]:
    """Where a batch's answers are concentrated (fewer effective cells than
    ``settings.concentrated_cells``: one neighbourhood's graph, so one draw of recall for all,
    which the calibration's margin for independent queries does not cover), certify the walks
    by an exact check of the batch itself: answers in a random order are scanned
    (``scan(rows)``, then kept: a checked query is answered exactly) and their walks' recall
    measured (``judge(rows, walked, exact)``), in up to ``settings.exact_rounds`` rounds, until
    :func:`~arecall.vector.placement.certification.mean_lower_bound` — valid for any
    [0, 1]-valued recall, at the planner's confidence, and at every round at once — lifts the
    walked answers to what the batch's goal asks of them. The first round is the fewest checks
    with which a perfect sample could certify (:func:`fewest_exact`); each next one checks half
    of what is left. Uncertified after the last, the walked answers left keep value 0 (and are
    scanned by :func:`settle`).

    Returns ((effective cells, the walks' certified recall, answers checked) or ``None`` where
    the batch is not concentrated, whether it stayed uncertified).

    A batch of 43 queries from one tight cluster of 20,000 vectors returned recall 0.941, every
    answer's score typical of the calibration's (certified 0.974): that cluster's graph is
    worse than the average the calibration measured, and nothing per query shows it."""
    settings = planner.settings
    if walked.size <= 2 * settings.sample_min:
        return None, False
    cells = effective_cells(planner, answers.ids[walked, 0])
    if not cells < settings.concentrated_cells:
        return None, False
    n, delta = walked.size, 1.0 - planner.confidence
    others = np.ones(answers.value.shape[0], dtype=bool)
    others[walked] = False
    need = (planner.goal * others.size - float(answers.value[others].sum())) / n
    need = min(1.0, math.ceil(max(need, 0.0) * 1000) / 1000)
    # A random order (seeded by the answers: the same batch is checked the same way) makes
    # the checked answers a sample without replacement, whatever order the caller chose.
    seed = int.from_bytes(hashlib.blake2b(answers.ids[walked].tobytes(), digest_size=8).digest())
    order = walked[np.random.default_rng(seed).permutation(n)]
    recall = np.zeros(0)
    done, upto, bound = 0, min(n, fewest_exact(n, need, delta)), 0.0
    for _ in range(settings.exact_rounds):
        rows = order[done:upto]
        exact = scan(rows)
        recall = np.concatenate(
            [recall, judge(rows, Hits(answers.ids[rows], answers.scores[rows]), exact)]
        )
        answers.take(rows, exact)
        answers.value[rows], answers.efs[rows] = 1.0, 0
        answers.spent += rows.size * planner.scan_each(n_allowed, rows.size)
        done = upto
        rest = order[done:]
        if not rest.size:
            return (cells, 1.0, done), False
        low = certification.mean_lower_bound(recall, n, delta)
        left = max(0.0, (n * low - float(recall.sum())) / rest.size)  # the unchecked's mean
        bound = (done + rest.size * left) / n
        if bound >= need:
            answers.value[rest] = np.minimum(answers.value[rest], left)
            return (cells, bound, done), False
        upto = done + max(settings.sample_min, math.ceil(rest.size / 2))
    answers.value[rest] = 0.0
    answers.tail[rest] = True
    return (cells, bound, done), True


def settle_audited(
    planner: AutoPlanner,
    answers: Answers,
    audited: certification.Audit,
    walked: _Rows,
    q: npt.NDArray[np.float32],
    *,
    walk: Callable[[_Rows, int], Hits],
    scan: Callable[[_Rows], Hits],
    vectors: npt.NDArray[np.float32],
    share: float,
    mask: npt.NDArray[np.bool_] | None,
    n_allowed: int,
    allowance: int = 0,
) -> tuple[tuple[int, int] | None, tuple[float, float, int] | None]:
    """After the audit of the walked answers (``audited``, noted in ``answers``): check a
    concentrated batch exactly, settle the batch to its goal (walks again re-audited, or scans;
    ``allowance``: stuck walks that may stay, :func:`settle`), and return the shift and
    concentration evidence, if any. One sequence for the direct plan (filtered walks, ``share``
    and ``mask``) and a plain search (``1.0``, ``None``)."""
    k = answers.ids.shape[1]

    def judge(rows: _Rows, got: Hits, exact: Hits) -> npt.NDArray[np.float64]:
        return tie_aware_recall(got, exact, vectors, q[rows])

    concentrated, uncertified = check_concentration(
        planner, answers, walked, scan, judge, n_allowed
    )

    def again(rows: _Rows, efs: _Rows) -> None:
        got = walk_rows(walk, rows, efs, k)
        full = ~got.short(n_allowed)
        rows, efs, got = rows[full], efs[full], Hits(got.ids[full], got.scores[full])
        answers.take(rows, got)
        answers.efs[rows] = efs
        redone = certification.audit(planner, q[rows], got, share, efs, mask, test_shift=False)
        assert redone is not None
        answers.note(rows, redone)

    settle(planner, answers, audited.shifted or uncertified, again, scan, n_allowed, allowance)
    shifted = (int(np.count_nonzero(audited.tail)), int(walked.size)) if audited.shifted else None
    return shifted, concentrated
