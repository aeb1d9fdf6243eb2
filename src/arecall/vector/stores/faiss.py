"""faiss (the reference store): an ``exact`` or ``hnsw`` `~arecall.vector.index.VectorIndex`.

The experiment's own index behind the store interface, so faiss, LanceDB and any other store
reach ``experiment`` and ``audit`` by name alike. ``search(prefilter=False)`` is post-filtering
(`~arecall.vector.placement.post`), ``search(prefilter=True)`` faiss's own filtered search
(`~arecall.vector.placement.pushdown`, an ``IDSelectorBitmap``); faiss also answers ``auto``,
calibrated by ``calibrate``. Built single-threaded by default, so the graph — and every table
measured on it — is reproducible (``arecall.vector.index``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from arecall.core.errors import ArecallError
from arecall.vector.index import INDEX_KINDS, METRICS, Hits, VectorIndex, build_index
from arecall.vector.placement import AutoPlanner, answer, calibrate_auto
from arecall.vector.schema import IndexConfig
from arecall.vector.stores import STORES
from arecall.vector.stores.base import Predicate, VectorStore, check_attributes

__all__ = ["FaissStore"]


class FaissStore(VectorStore):
    """A faiss index (``IndexHNSWFlat`` or a flat scan), metric inner product.

    Parameters
    ----------
    kind : {"hnsw", "exact"}
    m, ef_construction, ef_search : int
        HNSW parameters (ignored by ``exact``).
    deterministic : bool
        Build single-threaded, so equal inputs give an identical graph.

    Examples
    --------
    >>> from arecall.vector.generator import generate
    >>> from arecall.vector.stores.base import Below
    >>> data = generate(300, 16, 2)
    >>> with FaissStore() as store:
    ...     store.build(data.vectors, {"draw": data.draws})
    ...     hits = store.search(data.queries, 5, Below("draw", 0.5), prefilter=True)
    >>> hits.returned().tolist()
    [5, 5]
    """

    name = "faiss"
    placements = STORES["faiss"].answers
    metrics = METRICS

    def __init__(
        self,
        *,
        kind: str = IndexConfig.name,
        m: int = IndexConfig.m,
        ef_construction: int = IndexConfig.ef_construction,
        ef_search: int = IndexConfig.ef_search,
        deterministic: bool = True,
        metric: str = "ip",
    ) -> None:
        if kind not in INDEX_KINDS:
            raise ArecallError(f"index kind={kind!r}: must be one of {', '.join(INDEX_KINDS)}")
        self.kind = kind
        self.m = m
        self.ef_construction = ef_construction
        self.ef_search = ef_search
        self.deterministic = deterministic
        self.metric = self.check_metric(metric)
        self.planner: AutoPlanner | None = None
        self._index: VectorIndex | None = None
        self._attributes: dict[str, npt.NDArray[Any]] = {}

    @classmethod
    def from_config(cls, index: IndexConfig, metric: str = "ip") -> FaissStore:
        """``index=hnsw`` or ``index=exact`` with the config's HNSW parameters.

        Examples
        --------
        >>> FaissStore.from_config(IndexConfig(name="exact")).kind
        'exact'
        """
        return cls(
            kind=index.name,
            m=index.m,
            ef_construction=index.ef_construction,
            ef_search=index.ef_search,
            metric=metric,
        )

    @property
    def index(self) -> VectorIndex:
        """The built index (``build`` first)."""
        if self._index is None:
            raise ArecallError("faiss: search() before build()")
        return self._index

    def build(
        self, vectors: npt.NDArray[np.float32], attributes: Mapping[str, npt.NDArray[Any]]
    ) -> None:
        """Build the index over ``vectors``; keep ``attributes`` to evaluate filters with."""
        self._index = build_index(
            vectors,
            kind=self.kind,
            m=self.m,
            ef_construction=self.ef_construction,
            ef_search=self.ef_search,
            deterministic=self.deterministic,
            metric=self.metric,
        )
        self._attributes = check_attributes(attributes, self._index.n_docs)
        self.planner = None

    def search(
        self, queries: npt.NDArray[np.float32], k: int, where: Predicate, *, prefilter: bool
    ) -> Hits:
        """Post-filtering (``prefilter=False``) or faiss's filtered search (``True``)."""
        return self.place("pushdown" if prefilter else "post", queries, k, where)[0]

    def place(
        self, placement: str, queries: npt.NDArray[np.float32], k: int, where: Predicate
    ) -> tuple[Hits, str]:
        """``post``, ``pushdown`` or ``auto`` on the index (`arecall.vector.placement.answer`).

        Examples
        --------
        >>> from arecall.vector.stores.base import Below
        >>> store = FaissStore(kind="exact")
        >>> store.build(np.eye(2, dtype=np.float32), {"draw": np.array([0.9, 0.1])})
        >>> hits, plan = store.place("post", np.array([[1, 0]], np.float32), 1, Below("draw", 0.5))
        >>> hits.rows(), plan
        ([[]], 'scan')
        """
        if placement not in self.placements:
            raise ArecallError(
                f"placement={placement!r}: store faiss answers {', '.join(self.placements)} "
                "(and pre, the exact scan)"
            )
        mask = where.mask(self._attributes)
        return answer(placement, self.index, queries, k, mask, planner=self.planner)

    def calibrate(
        self,
        k: int,
        queries: npt.NDArray[np.float32] | None,
        *,
        target_recall: float,
        graph_cost: float,
        confidence: float = IndexConfig.confidence,
    ) -> None:
        """Calibrate the ``auto`` planner (`arecall.vector.placement.calibrate_auto`)."""
        self.planner = calibrate_auto(
            self.index,
            k,
            queries=queries,
            target_recall=target_recall,
            graph_cost=graph_cost,
            confidence=confidence,
        )

    def close(self) -> None:
        """Drop the index."""
        self._index = None
        self.planner = None
