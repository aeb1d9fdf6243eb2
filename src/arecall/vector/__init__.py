"""Filtered vector search against an exhaustive oracle: where should the filter go?

A principal may use only some documents. Filtering *after* an approximate search (``post``)
silently returns fewer than k; pushing the filter *into* the HNSW walk (``pushdown``) fixes that
until the filter gets so selective that the walk's candidate budget is spent on rejected nodes;
scanning the authorized subset (``pre``) is always right and costs a scan. ``auto`` picks, per
principal, the cheaper of a scan and a pushdown whose efSearch is scaled to the selectivity,
calibrated so that recall stays above a target. Every number is measured against the exact
answer computed in the same process (verity's method), reported as verity's table plus the
Authorized-Recall columns.

Modules: ``generator`` (verity's corpus), ``index`` (faiss exact/HNSW), ``placement`` (the four
placements and the planner), ``oracle`` (``recall_loss`` and the metrics), ``experiment`` (the
table, Markdown, plot, store audit), ``stores`` (store adapters), ``bench`` (the 1M benchmark).
"""

from __future__ import annotations

from arecall.vector.experiment import (
    TABLE_COLUMNS,
    TIMING_COLUMNS,
    audit,
    deterministic_columns,
    experiment,
    measure_placements,
    plot_experiment,
    render_markdown,
)
from arecall.vector.generator import BenchData, generate, generate_lowrank, l2_normalise
from arecall.vector.index import Hits, VectorIndex, build_index, set_threads
from arecall.vector.oracle import PlacementScore, recall_loss, score_hits
from arecall.vector.placement import (
    PLACEMENTS,
    AutoPlanner,
    Plan,
    auto,
    calibrate_auto,
    place,
    post,
    pre,
    pushdown,
)

__all__ = [
    "PLACEMENTS",
    "TABLE_COLUMNS",
    "TIMING_COLUMNS",
    "AutoPlanner",
    "BenchData",
    "Hits",
    "PlacementScore",
    "Plan",
    "VectorIndex",
    "audit",
    "auto",
    "build_index",
    "calibrate_auto",
    "deterministic_columns",
    "experiment",
    "generate",
    "generate_lowrank",
    "l2_normalise",
    "measure_placements",
    "place",
    "plot_experiment",
    "post",
    "pre",
    "pushdown",
    "recall_loss",
    "render_markdown",
    "score_hits",
    "set_threads",
]
