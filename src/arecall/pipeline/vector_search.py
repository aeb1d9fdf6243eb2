"""The vector-index stage: where the authorization filter sits in an approximate index.

Two uses of one measurement (`arecall.vector.measurement.measure_store`, against an exact
scan of the authorized subset):

* ``corpus=vectors`` — verity-retrieval 0.1.1's experiment on faiss: its generator, its
  selectivities, its table, with the ``auto`` planner's rows added.
* a text corpus with ``index=hnsw|exact`` and a dense retriever (``retriever=dense_lsa``,
  ``embeddings``, ``model2vec``) — the documents' embeddings in the index, in the retriever's
  metric, each principal's ACL as the filter: one row per principal and placement, so any
  corpus can be audited through a vector index.

Deterministic columns go to the reports (byte-identical between runs); queries per second only
to MLflow and the console, since wall-clock time is not reproducible.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from arecall.core.errors import ArecallError
from arecall.vector.schema import ExactIndexConfig, IndexConfig, as_index_config

if TYPE_CHECKING:
    from arecall.pipeline.schema import ExperimentConfig, VectorSearchSection
    from arecall.vector.schema import VectorsCorpusConfig

__all__ = ["curve_frame", "run_text_index", "run_vector_corpus"]


def run_vector_corpus(section: VectorSearchSection) -> pd.DataFrame:
    """verity's experiment for the checked ``vector_search`` section (its corpus and index).

    Examples
    --------
    >>> from arecall.pipeline.config import default_config
    >>> cfg = default_config(["vector_search.corpus.n_docs=300", "vector_search.corpus.dims=8",
    ...     "vector_search.corpus.n_queries=5", "vector_search.corpus.selectivities=[1.0]",
    ...     "index@vector_search.index=exact"])
    >>> sorted(run_vector_corpus(cfg.vector_search)["mode"])
    ['auto', 'post', 'pre', 'pushdown']
    """
    from arecall.vector import experiment

    c, index = section.corpus, as_index_config(section.index)
    if c.documents:
        return run_own_vectors(c, index)
    return experiment(
        n_docs=c.n_docs,
        dims=c.dims,
        n_queries=c.n_queries,
        seed=c.seed,
        selectivities=c.selectivities,
        k=c.k,
        threads=1,
        **_experiment_options(index),
    )


def run_own_vectors(corpus: VectorsCorpusConfig, index: IndexConfig) -> pd.DataFrame:
    """The experiment on the user's vectors, queries and ACL: one row per principal and
    placement, and per audited store (`arecall.vector.workload.principal_table`); the table's
    ``attrs["caption"]`` says what was measured."""
    from arecall.vector.workload import load_workload, principal_table

    assert corpus.documents is not None and corpus.queries is not None and corpus.acl is not None
    workload = load_workload(
        corpus.documents,
        corpus.queries,
        corpus.acl,
        groups=corpus.groups,
        metric=corpus.metric,
    )
    table = principal_table(workload, index, k=corpus.k, audit=corpus.audit)
    table.attrs["caption"] = workload.described
    return table


def _experiment_options(config: IndexConfig) -> dict[str, Any]:
    """`arecall.vector.experiment`'s index keywords, from the typed config."""
    return {
        "index": config.name,
        "m": config.m,
        "ef_construction": config.ef_construction,
        "ef_search": config.ef_search,
        "placements": tuple(config.placements),
        "target_recall": config.target_recall,
        "confidence": config.confidence,
        "store": config.store,
    }


def run_text_index(
    cfg: ExperimentConfig,
    retriever: Any,
    query_inputs: list[str],
    acl: np.ndarray,
    principals: np.ndarray,
    k: int,
) -> pd.DataFrame:
    """Each principal's ACL as the filter of a vector index over a dense retriever's embeddings.

    ``query_inputs`` are what the retriever embeds queries from (`arecall.retrievers.query_inputs`:
    texts, or a keyed retriever's ids); the index measures the retriever's ``index_metric``
    (inner product unless it says otherwise). One row per principal and placement
    (`arecall.vector.workload.principal_table`).
    """
    from arecall.vector.workload import Workload, principal_table

    if not isinstance(cfg.index, ExactIndexConfig):  # index=none has no index to measure
        raise ArecallError(f"index.name: must be exact or hnsw here, got {cfg.index.name!r}")
    # the config check refused an index over a retriever without embeddings (one rule, checked
    # once: arecall.pipeline.schema, from what the registry says each retriever answers)
    workload = Workload(
        vectors=retriever.embed_documents(),
        queries=retriever.embed_queries(query_inputs),
        principals=tuple(str(p) for p in principals),
        masks=np.asarray(acl, dtype=bool),
        metric=getattr(retriever, "index_metric", "ip"),
    )
    return principal_table(workload, as_index_config(cfg.index), k=k)


def curve_frame(table: pd.DataFrame) -> pd.DataFrame:
    """Wide table for the DVC plot: returned/k and recall per placement against selectivity."""
    k = int(table.attrs["k"])
    wide = table.assign(returned_k=table["returned"] / k).pivot_table(
        index="selectivity", columns="mode", values=["returned_k", "recall"], sort=True
    )
    wide.columns = pd.Index([f"{column[1]}_{column[0]}" for column in wide.columns])
    return wide.reset_index().round(6)
