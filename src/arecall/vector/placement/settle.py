"""Settling a batch's certificate: search again, then scan, what the answers did not certify.

Shared by the plans that answer a whole batch in one or two faiss calls (a batch with no filter,
`arecall.vector.placement.plan.unfiltered`, and the direct plan,
`arecall.vector.placement.direct`): once their answers are audited
(`arecall.vector.placement.certification.audit`), the fewest lowest-certified queries that
lift the batch to its goal are searched once more at ``escalate_factor`` times their efSearch
(where that is cheaper than scanning them, and the batch is not shifted: a query unlike the
calibration's is no better certified at a larger efSearch), and whatever is still short of the
goal is scanned. The general plan does the same with its own evidence
(`arecall.vector.placement.general`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from arecall.vector.index import Hits
from arecall.vector.placement.certification import (
    Audit,
    below_goal,
    effective_cells,
    recall_bound,
    strided,
)
from arecall.vector.placement.planner import AutoPlanner

__all__ = ["Answers", "check_concentration", "settle", "walk_rows"]

_Rows = npt.NDArray[np.int64]


@dataclass
class Answers:
    """A batch's answers being settled: hits, each query's certified recall, the efSearch it
    was answered from (0: scanned), whether it is in the calibration's tail and stuck, and the
    scan distances spent."""

    ids: npt.NDArray[np.int64]
    scores: npt.NDArray[np.float32]
    value: npt.NDArray[np.float64]
    efs: _Rows
    tail: npt.NDArray[np.bool_]
    stuck: npt.NDArray[np.bool_]
    spent: float
    escalated: int = 0
    scanned: _Rows = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

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
) -> None:
    """Lift ``answers`` to the planner's goal: ``again(rows, efs)`` searches rows once more
    (and records their answers and audit), ``scan(rows)`` answers rows exactly over
    ``n_allowed`` documents."""
    settings = planner.settings
    short = below_goal(answers.value, planner.goal)
    retry = short if not shifted else short[~answers.tail[short]]
    retry = retry[answers.efs[retry] > 0]
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
    scanned = below_goal(answers.value, planner.goal)
    if scanned.size:
        answers.take(scanned, scan(scanned))
        answers.value[scanned], answers.efs[scanned] = 1.0, 0
        answers.spent += scanned.size * planner.scan_each(n_allowed, scanned.size)
        answers.scanned = scanned


def check_concentration(
    planner: AutoPlanner,
    answers: Answers,
    walked: _Rows,
    deeper: Callable[[_Rows, _Rows], Hits],
    k: int,
) -> tuple[float, float] | None:
    """Where a batch's answers are concentrated (fewer effective cells than
    ``settings.concentrated_cells``: one neighbourhood's graph, so one draw of recall for all,
    which the calibration's margin for independent queries does not cover), search a strided
    sample again ``spot_factor`` times deeper (``deeper(rows, efs)``) and bound the first
    answers' recall from above (:func:`recall_bound`). Unless the sample shows the goal with
    ``z`` standard errors to spare, the batch's walked answers stay uncertified (value 0) and
    are scanned. Returns (effective cells, the sample's lower bound) where it checked.

    A batch of 43 queries from one tight cluster of 20,000 vectors returned recall 0.941, every
    answer's score typical of the calibration's (certified 0.974): that cluster's graph is
    worse than the average the calibration measured, and nothing per query shows it."""
    settings = planner.settings
    if walked.size <= 2 * settings.sample_min:
        return None
    cells = effective_cells(planner, answers.ids[walked, 0])
    if not cells < settings.concentrated_cells:
        return None
    sample = walked[strided(walked.size, settings.sample_min)]
    efs = planner.ef_at_least_many(settings.spot_factor * answers.efs[sample])
    again = deeper(sample, efs)
    answers.spent += float(np.sum(planner.walk_costs(efs)))
    bound = recall_bound(Hits(answers.ids[sample], answers.scores[sample]), again, k)
    spread = float(np.std(bound, ddof=1)) if bound.size > 1 else 1.0
    lower = float(bound.mean()) - planner.z * spread / np.sqrt(bound.size)
    if lower < planner.goal:
        answers.value[walked] = 0.0
        answers.tail[walked] = True
    return cells, lower
