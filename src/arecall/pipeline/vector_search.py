"""The vector-index stage: where the authorization filter sits in an approximate index.

Two uses of one measurement (`arecall.vector.measurement.measure_store`, against an exact
scan of the authorized subset):

* ``corpus=vectors`` — verity-retrieval 0.1.1's experiment on faiss: its generator, its
  selectivities, its table, with the ``auto`` planner's rows added.
* a text corpus with ``index=hnsw|exact`` and a dense retriever (``retriever=dense_lsa``) — the
  documents' embeddings in the index, each principal's ACL as the filter: one row per principal
  and placement, so any corpus can be audited through a vector index.

Deterministic columns go to the reports (byte-identical between runs); queries per second only
to MLflow and the console, since wall-clock time is not reproducible.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

import numpy as np
import pandas as pd

from arecall.core.errors import ArecallError
from arecall.vector.config import IndexConfig

__all__ = ["curve_frame", "run_text_index", "run_vector_corpus"]


def _index_config(icfg: Mapping[str, Any]) -> IndexConfig:
    """The ``index`` section, checked against its schema, as the typed `IndexConfig` both
    experiments use (options without HNSW parameters, ``exact``, take its defaults and ignore
    them): built once, not config → dict → config."""
    from arecall.core.schema import select
    from arecall.pipeline.schema import GROUPS

    section = select(GROUPS["index"], icfg, "index", "vector index")
    if section["name"] == "none":
        raise ArecallError("index.name: must be exact or hnsw here, got 'none'")
    return IndexConfig(
        **{f.name: section[f.name] for f in fields(IndexConfig) if f.name in section}
    )


def run_vector_corpus(cfg: Mapping[str, Any]) -> pd.DataFrame:
    """verity's experiment for ``corpus=vectors`` with the configured index.

    Examples
    --------
    >>> df = run_vector_corpus({"corpus": {"name": "vectors", "n_docs": 300, "dims": 8,
    ...     "n_queries": 5, "selectivities": [1.0]}, "index": {"name": "exact"}})
    >>> sorted(df["mode"])
    ['auto', 'post', 'pre', 'pushdown']
    """
    from arecall.core.schema import validate
    from arecall.vector import experiment
    from arecall.vector.config import VectorsCorpusConfig

    c = validate(VectorsCorpusConfig, cfg["corpus"], "corpus")
    if (cfg.get("index") or {}).get("name", "none") == "none":
        raise ArecallError("index: corpus=vectors needs a vector index (index=hnsw or index=exact)")
    return experiment(
        n_docs=c["n_docs"],
        dims=c["dims"],
        n_queries=c["n_queries"],
        seed=c["seed"],
        selectivities=c["selectivities"],
        k=c["k"],
        threads=1,
        **_experiment_options(_index_config(cfg["index"])),
    )


def _experiment_options(config: IndexConfig) -> dict[str, Any]:
    """`arecall.vector.experiment`'s index keywords, from the typed config."""
    return {
        "index": config.name,
        "m": config.m,
        "ef_construction": config.ef_construction,
        "ef_search": config.ef_search,
        "placements": tuple(config.placements),
        "target_recall": config.target_recall,
        "store": config.store,
    }


def run_text_index(
    cfg: Mapping[str, Any],
    retriever: Any,
    query_texts: list[str],
    acl: np.ndarray,
    principals: np.ndarray,
    k: int,
) -> pd.DataFrame:
    """Each principal's ACL as the filter of a vector index over a dense retriever's embeddings."""
    from arecall.vector import DEFAULT_GRAPH_COST, Below, build_index, measure_store
    from arecall.vector.stores import store_from_config

    # the config check refused an index over a retriever without embeddings (one rule, checked
    # once: arecall.pipeline.schema, from what the registry says each retriever answers)
    config = _index_config(cfg["index"])
    vectors = retriever.embed_documents()
    queries = retriever.embed_queries(query_texts)
    # each principal's ACL as a document attribute the store filters on: acl_i < 0.5 iff granted
    attributes = {f"acl_{i}": np.where(allowed, 0.0, 1.0) for i, allowed in enumerate(acl)}
    oracle_index = build_index(vectors, kind="exact")
    rows = []
    with store_from_config(config) as store:
        store.build(vectors, attributes)
        if "auto" in config.placements:
            # calibrated on synthetic queries drawn like the documents, never on the scored ones
            # (documents themselves as queries would flatter the graph)
            store.calibrate(
                k, None, target_recall=config.target_recall, graph_cost=DEFAULT_GRAPH_COST
            )
        unfiltered = oracle_index.exact(queries, k)
        for i, (name, allowed) in enumerate(zip(principals, acl, strict=True)):
            if int(allowed.sum()) < 1:
                continue
            for row in measure_store(
                store,
                oracle_index,
                queries,
                Below(f"acl_{i}", 0.5),
                attributes,
                k=k,
                placements=tuple(config.placements),
                unfiltered=unfiltered,
            ):
                rows.append({"principal": str(name), "selectivity": float(allowed.mean()), **row})
    frame = pd.DataFrame(rows)
    frame.attrs["k"] = k
    return frame


def curve_frame(table: pd.DataFrame) -> pd.DataFrame:
    """Wide table for the DVC plot: returned/k and recall per placement against selectivity."""
    k = int(table.attrs["k"])
    wide = table.assign(returned_k=table["returned"] / k).pivot_table(
        index="selectivity", columns="mode", values=["returned_k", "recall"], sort=True
    )
    wide.columns = pd.Index([f"{column[1]}_{column[0]}" for column in wide.columns])
    return wide.reset_index().round(6)
