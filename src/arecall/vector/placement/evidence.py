"""The plan and its evidence: what ``auto`` decided for a batch, and why.

``str(plan)`` is the ``plan`` column of the experiment's rows and of the adversarial benchmark,
e.g. ``pushdown ef=77 x64, scan x136 (local s=0.32; pilot 5/5 certified; certified recall
0.994; cost 0.90x scan)``. Everything in a plan is deterministic (counts, not timings), so the
table is reproducible.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Plan"]


@dataclass(frozen=True)
class Plan:
    """What ``auto`` decided for one principal's batch, and the evidence it decided on.

    ``method`` is ``exact`` when every query was scanned and ``pushdown`` when any query was
    answered from the graph; ``ef_search`` is then the largest efSearch searched. The evidence
    fields are filled by the per-query planner (``auto`` with a calibrated planner) and stay at
    their defaults for a plan decided from the filter's size alone (:meth:`AutoPlanner.plan`).
    """

    method: Literal["exact", "pushdown"]
    ef_search: int | None
    n_allowed: int
    cost_exact: float
    cost_pushdown: float | None
    n_fallback: int = 0
    """Queries answered by the exact scan although the plan is ``pushdown``."""
    n_queries: int = 0
    ef_min: int | None = None
    """Smallest efSearch a query was answered from (``ef_search`` is the largest)."""
    n_escalated: int = 0
    """Queries searched a second time at a larger efSearch (evidence said the first fell short)."""
    local_selectivity: float | None = None
    """Mean over queries of the authorized share of the query's nearest coarse cells."""
    predicted_recall: float | None = None
    """Mean recall the calibration predicts from each answered query's rank evidence (1 for
    scanned queries): the certificate ``auto`` checks against ``target_recall``."""
    cost_auto: float | None = None
    """Estimated distances per query of everything ``auto`` ran, probes and fallbacks included."""
    n_probed: int | None = None
    """Set when ``auto`` probed only a sample of the queries and scanned the batch: no sampled
    query sat where a walk could pay."""
    pilot: tuple[int, int] | None = None
    """(certified, walked) of the pilot: the most promising queries, walked first when the
    filter follows the data; the rest walk only where that share says a walk pays."""
    graph_pays_near: float | None = None
    """Set when ``auto`` scanned without probing: the share of the documents in cells whose
    authorized share is high enough for a graph walk to beat the scan — too few for the probe
    (about two scan distances per cell and query, ``settings.probe_distances``) to pay for
    itself."""
    shifted: tuple[int, int] | None = None
    """Set when the batch's answers were unlike the calibration's: (answers in the
    calibration's tail, answers audited) — more than a batch drawn like the calibration queries
    puts there, so those answers were not certified by it (scanned or searched again)."""
    concentrated: tuple[float, float, int] | None = None
    """Set when the batch's answers lay in few cells, so that their recall is one draw: (the
    effective number of cells, the walked answers' recall certified by an exact check of the
    batch itself, the answers checked exactly: below what the goal asks, the rest is
    scanned). On a scan with none checked: the batch's effective cells as its sample's lists
    showed them, where walking it and checking it would have cost more than its scan."""
    n_stuck: int = 0
    """Walks that never reached their query's neighbourhood (an authorized landmark outscored
    their best answer): each searched again, and answered exactly if stuck again, but for as
    many as the calibration's curves pay for (`RecallCurves.stuck_allowance`)."""

    @classmethod
    def scanned(
        cls,
        n_allowed: int,
        n_queries: int,
        scan_cost: float,
        local_selectivity: float,
        cost_auto: float,
        *,
        shifted: tuple[int, int] | None = None,
        concentrated: tuple[float, float, int] | None = None,
    ) -> Plan:
        """The plan of a batch every query of which was scanned (certified recall 1), where no
        graph plan was cheaper or the evidence (``shifted``, ``concentrated``) said so.

        Examples
        --------
        >>> str(Plan.scanned(1000, 2, 1000.0, 1.0, 1000.0))
        'scan (local s=1.00: no graph plan cheaper)'
        """
        return cls(
            method="exact",
            ef_search=None,
            n_allowed=n_allowed,
            cost_exact=scan_cost,
            cost_pushdown=None,
            n_fallback=0,
            n_queries=n_queries,
            ef_min=None,
            n_escalated=0,
            local_selectivity=local_selectivity,
            predicted_recall=1.0,
            cost_auto=cost_auto,
            shifted=shifted,
            concentrated=concentrated,
        )

    def __str__(self) -> str:
        if self.method == "exact" and self.concentrated is not None:
            cells, bound, checked = self.concentrated
            if not checked:
                return (
                    f"scan (concentrated: a sample in {cells:.1f} cells; walks and their exact "
                    "check cost more than the scan)"
                )
            return (
                f"scan (answers in {cells:.1f} cells: {checked} checked exactly certify the "
                f"walks at {bound:.3f})"
            )
        if self.method == "exact" and self.shifted is not None:
            return (
                f"scan (batch unlike the calibration: {self.shifted[0]} of {self.shifted[1]} "
                "answers in its tail)"
            )
        if self.method == "exact":
            if self.graph_pays_near is not None:
                return (
                    f"scan (no probe: a walk beats the scan only near "
                    f"{self.graph_pays_near:.1%} of the documents)"
                )
            if self.local_selectivity is None:
                return "scan"
            if self.n_probed is not None:
                return (
                    f"scan (local s={self.local_selectivity:.2f} on {self.n_probed} probed: "
                    "no walk can pay)"
                )
            if self.pilot is not None:
                return (
                    f"scan (local s={self.local_selectivity:.2f}; pilot walks certified "
                    f"{self.pilot[0]}/{self.pilot[1]})"
                )
            return f"scan (local s={self.local_selectivity:.2f}: no graph plan cheaper)"
        if self.local_selectivity is None and self.predicted_recall is None:
            extra = f" (+{self.n_fallback} scanned)" if self.n_fallback else ""
            return f"pushdown ef={self.ef_search}{extra}"
        graph = self.n_queries - self.n_fallback
        efs = (
            f"ef={self.ef_search}"
            if self.ef_min == self.ef_search
            else f"ef={self.ef_min}..{self.ef_search}"
        )
        parts = [f"pushdown {efs} x{graph}"]
        if self.n_fallback:
            parts.append(f"scan x{self.n_fallback}")
        evidence = []
        if self.local_selectivity is not None:
            evidence.append(f"local s={self.local_selectivity:.2f}")
        if self.pilot is not None:
            evidence.append(f"pilot {self.pilot[0]}/{self.pilot[1]} certified")
        if self.shifted is not None:
            evidence.append(f"shifted: {self.shifted[0]}/{self.shifted[1]} in the tail")
        if self.concentrated is not None:
            cells, bound, checked = self.concentrated
            evidence.append(
                f"concentrated in {cells:.1f} cells, {checked} checked exactly: {bound:.3f}"
            )
        if self.n_stuck:
            evidence.append(f"{self.n_stuck} stuck")
        if self.n_escalated:
            evidence.append(f"{self.n_escalated} escalated")
        if self.predicted_recall is not None:
            evidence.append(f"certified recall {self.predicted_recall:.3f}")
        if self.cost_auto is not None:
            evidence.append(f"cost {self.cost_auto / max(self.cost_exact, 1.0):.2f}x scan")
        return ", ".join(parts) + " (" + "; ".join(evidence) + ")"
