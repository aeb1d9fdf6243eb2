"""Where the authorization filter goes: ``post``, ``pushdown``, ``pre`` — and ``auto``.

The fixed placements are `arecall.vector.placement.fixed`'s. ``auto`` chooses, per batch and
per query, between a certified graph search and the exact scan; its modules follow the plan's
own steps (``docs/concepts/planner.md`` walks through one batch):

``settings``
    Every tuned number, each with what it trades and how it was measured.
``cells``
    The coarse k-means cells: a query's local selectivity, and the test that a filter is
    independent of the geometry.
``calibration``
    Recall and distances against efSearch on held-out queries, unfiltered and under uniform
    filters (:func:`calibrate_auto`).
``curves`` and ``costs``
    What the calibration says a walk recalls (the aim a batch keeps) and what walks, scans and
    probes cost; together the :class:`AutoPlanner` (``planner``). ``machine`` times the costs on
    this machine (:func:`measure_graph_costs`).
``certification``
    What a batch's own searches say about the recall they delivered.
``plan``, ``direct`` and ``general``
    :func:`auto` itself: the direct plan for a filter independent of the cells, the general
    plan for one that follows the data; ``evidence`` is the :class:`Plan` they report.
"""

from __future__ import annotations

from arecall.vector.placement.calibration import calibrate_auto, synthetic_queries
from arecall.vector.placement.cells import Cells, coarse_cells
from arecall.vector.placement.evidence import Plan
from arecall.vector.placement.fixed import post, pre, pushdown
from arecall.vector.placement.machine import measure_graph_cost, measure_graph_costs
from arecall.vector.placement.plan import answer, auto, check_placements, place
from arecall.vector.placement.planner import AutoPlanner
from arecall.vector.placement.settings import DEFAULTS, PlannerSettings

__all__ = [
    "DEFAULTS",
    "DEFAULT_CALIBRATION_QUERIES",
    "DEFAULT_GRAPH_COST",
    "AutoPlanner",
    "Cells",
    "Plan",
    "PlannerSettings",
    "answer",
    "auto",
    "calibrate_auto",
    "check_placements",
    "coarse_cells",
    "measure_graph_cost",
    "measure_graph_costs",
    "place",
    "post",
    "pre",
    "pushdown",
    "synthetic_queries",
]

#: Cost of one graph-traversal distance relative to one batched-scan distance, where nothing
#: was timed (``DEFAULTS.graph_cost``).
DEFAULT_GRAPH_COST = DEFAULTS.graph_cost

#: Held-out queries ``auto`` is calibrated on (``DEFAULTS.calibration_queries``).
DEFAULT_CALIBRATION_QUERIES = DEFAULTS.calibration_queries
