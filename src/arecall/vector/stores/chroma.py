"""Chroma (embedded ``chromadb``) under test: its filtered HNSW search against post-filtering.

Chroma keeps one HNSW graph (hnswlib) per collection; a query with ``where=`` is answered by
Chroma's own filtered search — the metadata filter picks the admissible documents and the graph
search admits only those — which is what ``search(prefilter=True)`` (``pushdown``) asks. Chroma
has no post-filtering mode of its own, so ``search(prefilter=False)`` (``post``) is what a user
of Chroma does without ``where``: the unfiltered top-k, then the unauthorized results dropped.

The ``index`` config maps onto the collection's HNSW configuration one key each: ``m`` →
``max_neighbors`` (``hnsw:M``), ``ef_construction`` → ``ef_construction``
(``hnsw:construction_ef``), ``ef_search`` → ``ef_search`` (``hnsw:search_ef``); the space is
``ip`` (Chroma's distance is 1 − dot, converted back to a score) or, for ``metric=l2``, ``l2``
(a squared distance, negated into a score).

Embedded and offline: a ``PersistentClient`` on a private temporary directory (removed by
``close``; a private path rather than ``EphemeralClient``, which is one process-wide instance
that refuses a second set of settings), ``anonymized_telemetry=False``, no embedding function
(the vectors are given, so Chroma never loads or downloads a model). No server is started.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from arecall.core.errors import ArecallError
from arecall.vector._checks import check_matrix
from arecall.vector.index import Hits
from arecall.vector.stores import STORES
from arecall.vector.stores.base import Below, HnswStore, InSet, Predicate, check_attributes

__all__ = ["ChromaStore", "where_document"]

#: Documents per ``add`` call (below Chroma's maximum batch size).
_ADD_BATCH = 5000


def where_document(where: Predicate, dtype: npt.DTypeLike | None = None) -> dict[str, Any]:
    """A predicate as a Chroma ``where`` document, for a column of ``dtype`` (`Below.bound`).

    Examples
    --------
    >>> where_document(Below("draw", 0.03)), where_document(InSet("group", [4, 1]))
    ({'draw': {'$lt': 0.03}}, {'group': {'$in': [1, 4]}})
    """
    if isinstance(where, Below):
        return {where.column: {"$lt": where.bound(dtype)}}
    return {where.column: {"$in": list(where.values)}}


def _metadata_value(value: Any) -> int | float | str:
    """A numpy scalar as the plain Python value Chroma stores as metadata.

    Booleans are stored as 0/1 (`Below.bound`): Chroma does not order booleans.
    """
    item = value.item() if isinstance(value, np.generic) else value
    if isinstance(item, bool):
        return int(item)
    if isinstance(item, int | float | str):
        return item
    raise ArecallError(f"chroma: attribute value {value!r}: must be a number, bool or string")


class ChromaStore(HnswStore):
    """An embedded Chroma collection (HNSW, space ``ip``) on a temporary directory.

    Parameters
    ----------
    **hnsw
        `~arecall.vector.stores.base.HnswStore`'s ``m``, ``ef_construction``, ``ef_search``
        (Chroma's ``max_neighbors``, ``ef_construction``, ``ef_search``) and ``metric``.

    Examples
    --------
    >>> from arecall.vector.generator import generate
    >>> from arecall.vector.stores.base import Below
    >>> data = generate(300, 16, 2)
    >>> groups = np.arange(300) % 3
    >>> with ChromaStore() as store:
    ...     store.build(data.vectors, {"draw": data.draws, "group": groups})
    ...     below = store.search(data.queries, 5, Below("draw", 0.5), prefilter=True)
    ...     inset = store.search(data.queries, 5, InSet("group", [0, 2]), prefilter=True)
    >>> below.returned().tolist(), bool((groups[inset.ids] != 1).all())
    ([5, 5], True)
    """

    name = "chroma"
    placements = STORES["chroma"].answers

    def __init__(self, **hnsw: Any) -> None:
        super().__init__(**hnsw)  # m, ef_construction, ef_search, metric: `HnswStore`
        self._collection: Any = None

    def hnsw_configuration(self) -> dict[str, Any]:
        """The collection's ``configuration["hnsw"]``: the ``index`` config in Chroma's names.

        Examples
        --------
        >>> ChromaStore(m=8).hnsw_configuration()["max_neighbors"]
        8
        """
        return {
            "space": self.metric,
            "max_neighbors": self.m,
            "ef_construction": self.ef_construction,
            "ef_search": self.ef_search,
        }

    def build(
        self, vectors: npt.NDArray[np.float32], attributes: Mapping[str, npt.NDArray[Any]]
    ) -> None:
        """Create the collection (id = row number, attributes as metadata) and add ``vectors``."""
        import chromadb
        from chromadb.config import Settings

        matrix = check_matrix("vectors", vectors)
        n, dims = matrix.shape
        checked = check_attributes(attributes, n)
        self.close()
        self._tmp = tempfile.TemporaryDirectory(prefix="arecall-chroma-")
        settings = Settings(anonymized_telemetry=False, allow_reset=False)
        self._client = chromadb.PersistentClient(path=self._tmp.name, settings=settings)
        self._collection = self._client.create_collection(
            "docs",
            embedding_function=None,
            configuration={"hnsw": self.hnsw_configuration()},
        )
        names = list(checked)
        for start in range(0, n, _ADD_BATCH):
            stop = min(start + _ADD_BATCH, n)
            metadatas = [
                {name: _metadata_value(checked[name][i]) for name in names}
                for i in range(start, stop)
            ]
            self._collection.add(
                ids=[str(i) for i in range(start, stop)],
                embeddings=matrix[start:stop],
                metadatas=metadatas if names else None,
            )
        self._attributes = checked
        self._dims = dims

    def _query(
        self, queries: npt.NDArray[np.float32], k: int, where: dict[str, Any] | None
    ) -> Hits:
        """One batched Chroma query, as `Hits` (scores are dot products)."""
        n_results = min(k, int(self._collection.count()))
        result = self._collection.query(
            query_embeddings=queries, n_results=n_results, where=where, include=["distances"]
        )
        ids = np.full((queries.shape[0], k), -1, dtype=np.int64)
        scores = np.full((queries.shape[0], k), -np.inf, dtype=np.float32)
        for i, (got, dist) in enumerate(zip(result["ids"], result["distances"], strict=True)):
            order = np.argsort(np.asarray(dist, dtype=np.float64), kind="stable")[:k]
            ids[i, : order.size] = np.asarray(got, dtype=np.int64)[order]
            # Chroma's "ip" distance is 1 - dot, its "l2" one ‖q − d‖², both ascending
            distance = np.asarray(dist, dtype=np.float32)[order]
            scores[i, : order.size] = 1.0 - distance if self.metric == "ip" else -distance
        return Hits(ids=ids, scores=scores)

    def _built(self) -> bool:
        return self._collection is not None

    def _filtered(
        self, queries: npt.NDArray[np.float32], k: int, where: Predicate, dtype: np.dtype[Any]
    ) -> Hits:
        """Chroma's filtered search; an empty set matches nothing (Chroma refuses ``$in: []``)."""
        if isinstance(where, InSet) and not where.values:
            return Hits(
                ids=np.full((queries.shape[0], k), -1, dtype=np.int64),
                scores=np.full((queries.shape[0], k), -np.inf, dtype=np.float32),
            )
        return self._query(queries, k, where_document(where, dtype))

    def close(self) -> None:
        """Close the client and remove its temporary directory."""
        self._collection = None
        super().close()
