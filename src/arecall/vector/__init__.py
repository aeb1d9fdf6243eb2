"""Filtered vector search against an exhaustive oracle: where should the filter go?

A principal may use only some documents. Filtering *after* an approximate search (``post``)
silently returns fewer than k; pushing the filter *into* the HNSW walk (``pushdown``) fixes that
until the filter gets so selective that the walk's candidate budget is spent on rejected nodes;
scanning the authorized subset (``pre``) is always right and costs a scan. ``auto`` picks, per
principal, the cheaper of a scan and a pushdown whose efSearch is scaled to the selectivity,
calibrated so that recall stays above a target. Every number is measured against the exact
answer computed in the same process (verity's method), reported as verity's table plus the
Authorized-Recall columns.

Modules: ``schema`` (the typed ``index`` and ``corpus=vectors`` configs, every default once),
``generator`` (verity's corpus), ``index`` (faiss exact/HNSW), ``placement`` (the four
placements and the planner), ``oracle`` (``recall_loss`` and the metrics), ``measurement`` (the
table, Markdown, plot, store audit), ``adversarial`` (corpora whose filter follows the data),
``partitions`` (one graph per group), ``stores`` (one file per store — faiss, LanceDB — and the
``STORES`` registry), ``bench`` (the 1M benchmark).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from arecall.core.registry import lazy_attributes

# faiss announces its CPU features at INFO when imported; under `arecall run` Hydra's logging
# would print that line into every run's output.
logging.getLogger("faiss").setLevel(logging.WARNING)

# Public names and the submodule defining each, imported on first use: importing
# `arecall.vector.schema` (every config check does) must not load faiss, LanceDB or matplotlib.
_LAZY = {
    "ADVERSARIAL_CORPORA": "arecall.vector.adversarial",
    "AdversarialCorpus": "arecall.vector.adversarial",
    "AutoPlanner": "arecall.vector.placement",
    "Below": "arecall.vector.stores",
    "BenchData": "arecall.vector.generator",
    "Cells": "arecall.vector.placement",
    "DEFAULT_GRAPH_COST": "arecall.vector.placement",
    "Hits": "arecall.vector.index",
    "IndexConfig": "arecall.vector.schema",
    "SEARCH_PLACEMENTS": "arecall.vector.schema",
    "PartitionedIndex": "arecall.vector.partitions",
    "PlacementScore": "arecall.vector.oracle",
    "Plan": "arecall.vector.placement",
    "STORES": "arecall.vector.stores",
    "TABLE_COLUMNS": "arecall.vector.measurement",
    "TIMING_COLUMNS": "arecall.vector.measurement",
    "VectorIndex": "arecall.vector.index",
    "VectorStore": "arecall.vector.stores",
    "VectorsCorpusConfig": "arecall.vector.schema",
    "adversarial_corpus": "arecall.vector.adversarial",
    "audit": "arecall.vector.measurement",
    "auto": "arecall.vector.placement",
    "build_index": "arecall.vector.index",
    "calibrate_auto": "arecall.vector.placement",
    "coarse_cells": "arecall.vector.placement",
    "deterministic_columns": "arecall.vector.measurement",
    "experiment": "arecall.vector.measurement",
    "generate": "arecall.vector.generator",
    "generate_lowrank": "arecall.vector.generator",
    "l2_normalise": "arecall.vector.generator",
    "make_store": "arecall.vector.stores",
    "measure_graph_cost": "arecall.vector.placement",
    "measure_placements": "arecall.vector.measurement",
    "measure_store": "arecall.vector.measurement",
    "place": "arecall.vector.placement",
    "plot_experiment": "arecall.vector.measurement",
    "post": "arecall.vector.placement",
    "pre": "arecall.vector.placement",
    "pushdown": "arecall.vector.placement",
    "recall_loss": "arecall.vector.oracle",
    "render_markdown": "arecall.vector.measurement",
    "score_hits": "arecall.vector.oracle",
    "set_threads": "arecall.vector.index",
}

if TYPE_CHECKING:
    from arecall.vector.adversarial import (
        ADVERSARIAL_CORPORA,
        AdversarialCorpus,
        adversarial_corpus,
    )
    from arecall.vector.generator import BenchData, generate, generate_lowrank, l2_normalise
    from arecall.vector.index import Hits, VectorIndex, build_index, set_threads
    from arecall.vector.measurement import (
        TABLE_COLUMNS,
        TIMING_COLUMNS,
        audit,
        deterministic_columns,
        experiment,
        measure_placements,
        measure_store,
        plot_experiment,
        render_markdown,
    )
    from arecall.vector.oracle import PlacementScore, recall_loss, score_hits
    from arecall.vector.partitions import PartitionedIndex
    from arecall.vector.placement import (
        DEFAULT_GRAPH_COST,
        AutoPlanner,
        Cells,
        Plan,
        auto,
        calibrate_auto,
        coarse_cells,
        measure_graph_cost,
        place,
        post,
        pre,
        pushdown,
    )
    from arecall.vector.schema import SEARCH_PLACEMENTS, IndexConfig, VectorsCorpusConfig
    from arecall.vector.stores import STORES, Below, VectorStore, make_store


__all__ = [
    "ADVERSARIAL_CORPORA",
    "DEFAULT_GRAPH_COST",
    "SEARCH_PLACEMENTS",
    "STORES",
    "TABLE_COLUMNS",
    "TIMING_COLUMNS",
    "AdversarialCorpus",
    "AutoPlanner",
    "Below",
    "BenchData",
    "Cells",
    "Hits",
    "IndexConfig",
    "PartitionedIndex",
    "PlacementScore",
    "Plan",
    "VectorIndex",
    "VectorStore",
    "VectorsCorpusConfig",
    "adversarial_corpus",
    "audit",
    "auto",
    "build_index",
    "calibrate_auto",
    "coarse_cells",
    "deterministic_columns",
    "experiment",
    "generate",
    "generate_lowrank",
    "l2_normalise",
    "make_store",
    "measure_graph_cost",
    "measure_placements",
    "measure_store",
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


__getattr__ = lazy_attributes(__name__, _LAZY)
