"""The vector-index stage: where the authorization filter sits in an approximate index.

Two uses of one measurement (`arecall.vector.experiment.measure_placements`, against an exact
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
from typing import Any

import numpy as np
import pandas as pd

from arecall.core.errors import ArecallError

__all__ = ["curve_frame", "run_text_index", "run_vector_corpus"]


def _index_options(icfg: Mapping[str, Any]) -> dict[str, Any]:
    name = icfg.get("name")
    if name not in ("exact", "hnsw"):
        raise ArecallError(f"index.name: must be exact or hnsw here, got {name!r}")
    return {
        "index": name,
        "m": int(icfg.get("m", 16)),
        "ef_construction": int(icfg.get("ef_construction", 40)),
        "ef_search": int(icfg.get("ef_search", 64)),
        "placements": tuple(icfg.get("placements") or ("post", "pushdown", "pre", "auto")),
        "target_recall": float(icfg.get("target_recall", 0.95)),
    }


def run_vector_corpus(cfg: Mapping[str, Any]) -> pd.DataFrame:
    """verity's experiment for ``corpus=vectors`` with the configured index.

    Examples
    --------
    >>> df = run_vector_corpus({"corpus": {"name": "vectors", "n_docs": 300, "dims": 8,
    ...     "n_queries": 5, "selectivities": [1.0]}, "index": {"name": "exact"}})
    >>> sorted(df["mode"])
    ['auto', 'post', 'pre', 'pushdown']
    """
    from arecall.vector import experiment

    c = cfg["corpus"]
    if (cfg.get("index") or {}).get("name", "none") == "none":
        raise ArecallError("index: corpus=vectors needs a vector index (index=hnsw or index=exact)")
    return experiment(
        n_docs=int(c.get("n_docs", 2000)),
        dims=int(c.get("dims", 128)),
        n_queries=int(c.get("n_queries", 50)),
        seed=int(c.get("seed", 42)),
        selectivities=[float(s) for s in c.get("selectivities", (0.01, 0.03, 0.1, 0.3, 1.0))],
        k=int(c.get("k", 10)),
        threads=1,
        **_index_options(cfg["index"]),
    )


def run_text_index(
    cfg: Mapping[str, Any],
    retriever: Any,
    query_texts: list[str],
    acl: np.ndarray,
    principals: np.ndarray,
    k: int,
) -> pd.DataFrame:
    """Each principal's ACL as the filter of a vector index over a dense retriever's embeddings."""
    from arecall.vector import build_index, calibrate_auto, measure_placements

    if not hasattr(retriever, "embed_documents"):
        raise ArecallError(
            f"index={cfg['index']['name']}: needs a dense retriever with embeddings "
            f"(retriever=dense_lsa), not retriever={cfg['retriever']['name']}"
        )
    options = _index_options(cfg["index"])
    vectors = retriever.embed_documents()
    queries = retriever.embed_queries(query_texts)
    index = build_index(
        vectors,
        kind=options["index"],
        m=options["m"],
        ef_construction=options["ef_construction"],
        ef_search=options["ef_search"],
    )
    planner = None
    if "auto" in options["placements"]:
        # calibrated on synthetic queries drawn like the documents, never on the scored ones
        # (documents themselves as queries would flatter the graph)
        planner = calibrate_auto(index, k, target_recall=options["target_recall"])
    unfiltered = index.exact(queries, k)
    rows = []
    for name, allowed in zip(principals, acl, strict=True):
        if int(allowed.sum()) < 1:
            continue
        for row in measure_placements(
            index,
            queries,
            allowed,
            k=k,
            placements=options["placements"],
            planner=planner,
            unfiltered=unfiltered,
        ):
            rows.append({"principal": str(name), "selectivity": float(allowed.mean()), **row})
    frame = pd.DataFrame(rows)
    frame.attrs["k"] = k
    return frame


def curve_frame(table: pd.DataFrame) -> pd.DataFrame:
    """Wide table for the DVC plot: returned/k and recall per placement against selectivity."""
    k = int(table.attrs.get("k", 10))
    wide = table.assign(returned_k=table["returned"] / k).pivot_table(
        index="selectivity", columns="mode", values=["returned_k", "recall"], sort=True
    )
    wide.columns = pd.Index([f"{column[1]}_{column[0]}" for column in wide.columns])
    return wide.reset_index().round(6)
