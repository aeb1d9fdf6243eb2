"""LanceDB (embedded) under audit: ``where(expr, prefilter=False)`` against ``prefilter=True``.

A LanceDB table without a vector index answers by a flat scan, which filters correctly either
way — an audit of that would prove nothing. So the adapter builds an ANN index first; the
default is ``IVF_HNSW_FLAT`` with one partition, i.e. an HNSW graph over unquantised vectors,
built with the same ``m``/``ef_construction`` and searched with the same ``ef`` as the faiss
index, so the two stores differ only in how they place the filter. ``IVF_HNSW_SQ`` and
``IVF_PQ`` are available too (quantised: lower recall even unfiltered). Measured with lancedb
0.40 on verity's corpus: post-filtering returns well under 1 of 10 at 1–3% selectivity;
prefiltering returns 10.

Not byte-reproducible: lance draws its HNSW levels from an unseeded generator (and builds in
parallel), so two builds of the same data link different graphs, even with
``LANCE_CPU_THREADS=1``. Between runs the post-filter rows move by a few hundredths of a result
(0.36 vs 0.34 of 10 at 3%); the shape — post under-returns, prefilter returns k — does not.
Treat an audit table like a timing: log it, do not pin its bytes.

The table lives in a temporary directory removed by ``close``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from arecall.core.errors import ArecallError
from arecall.vector._checks import check_k, check_matrix, check_positive_int
from arecall.vector.index import Hits
from arecall.vector.schema import IndexConfig
from arecall.vector.stores import STORES
from arecall.vector.stores.base import Below, Predicate, VectorStore, check_attributes

__all__ = ["LANCEDB_INDEX_TYPES", "LanceDBStore", "where_sql"]

LANCEDB_INDEX_TYPES: tuple[str, ...] = ("IVF_HNSW_FLAT", "IVF_HNSW_SQ", "IVF_PQ")


def where_sql(where: Predicate, dtype: npt.DTypeLike | None = None) -> str:
    """A predicate as LanceDB's SQL filter, for a column of ``dtype`` (`Below.bound`).

    ``repr`` of a float round-trips exactly; the empty set, which SQL cannot write as ``IN``,
    is ``false``.

    Examples
    --------
    >>> from arecall.vector.stores.base import InSet
    >>> where_sql(Below("draw", 0.03)), where_sql(Below("group", 2.5), np.int32)
    ('draw < 0.03', 'group < 3')
    >>> where_sql(InSet("group", [4, 1, 1])), where_sql(InSet("group", []))
    ('group IN (1, 4)', 'false')
    """
    if isinstance(where, Below):
        return f"{where.column} < {where.bound(dtype)!r}"
    if not where.values:
        return "false"
    return f"{where.column} IN ({', '.join(str(v) for v in where.values)})"


class LanceDBStore(VectorStore):
    """An embedded LanceDB table with an ANN index, metric ``dot`` (or ``l2``).

    Parameters
    ----------
    index_type : {"IVF_HNSW_FLAT", "IVF_HNSW_SQ", "IVF_PQ"}
    m, ef_construction, ef_search : int
        HNSW parameters (ignored by ``IVF_PQ``).
    num_partitions : int
        IVF partitions (1 for the HNSW types: one graph over everything).

    Examples
    --------
    >>> from arecall.vector.generator import generate
    >>> from arecall.vector.stores.base import Below
    >>> data = generate(300, 16, 2)
    >>> with LanceDBStore() as store:
    ...     store.build(data.vectors, {"draw": data.draws})
    ...     hits = store.search(data.queries, 5, Below("draw", 0.5), prefilter=True)
    >>> hits.returned().tolist()
    [5, 5]
    """

    name = "lancedb"
    placements = STORES["lancedb"].answers
    metrics = ("ip", "l2")

    def __init__(
        self,
        *,
        index_type: str = "IVF_HNSW_FLAT",
        m: int = IndexConfig.m,
        ef_construction: int = IndexConfig.ef_construction,
        ef_search: int = IndexConfig.ef_search,
        num_partitions: int = 1,
        metric: str = "ip",
    ) -> None:
        if index_type not in LANCEDB_INDEX_TYPES:
            known = ", ".join(LANCEDB_INDEX_TYPES)
            raise ArecallError(f"lancedb index_type={index_type!r}: must be one of {known}")
        self.index_type = index_type
        self.m = check_positive_int("m", m, minimum=2)
        self.ef_construction = check_positive_int("ef_construction", ef_construction)
        self.ef_search = check_positive_int("ef_search", ef_search)
        self.num_partitions = check_positive_int("num_partitions", num_partitions)
        self.metric = self.check_metric(metric)
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._table: Any = None
        self._dims = 0
        self._dtypes: dict[str, np.dtype[Any]] = {}

    @classmethod
    def from_config(cls, index: IndexConfig, metric: str = "ip") -> LanceDBStore:
        """``index=hnsw``: an ``IVF_HNSW_FLAT`` graph with the config's HNSW parameters.

        Examples
        --------
        >>> LanceDBStore.from_config(IndexConfig(m=8)).m
        8
        """
        if index.name != "hnsw":
            raise ArecallError(
                f"index.name={index.name!r}: store lancedb builds an HNSW index only "
                "(index=hnsw, or index.store=faiss)"
            )
        return cls(
            m=index.m,
            ef_construction=index.ef_construction,
            ef_search=index.ef_search,
            metric=metric,
        )

    @property
    def _distance(self) -> Literal["dot", "l2"]:
        """LanceDB's name for the metric: ``dot`` (its distance 1 − q·d) or ``l2`` (‖q − d‖²)."""
        return "dot" if self.metric == "ip" else "l2"

    def _config(self) -> Any:
        from lancedb.index import HnswFlat, HnswSq, IvfPq

        if self.index_type == "IVF_HNSW_FLAT":
            return HnswFlat(
                distance_type=self._distance,
                num_partitions=self.num_partitions,
                m=self.m,
                ef_construction=self.ef_construction,
            )
        if self.index_type == "IVF_HNSW_SQ":
            return HnswSq(
                distance_type=self._distance,
                num_partitions=self.num_partitions,
                m=self.m,
                ef_construction=self.ef_construction,
            )
        return IvfPq(distance_type=self._distance, num_partitions=self.num_partitions)

    def build(
        self, vectors: npt.NDArray[np.float32], attributes: Mapping[str, npt.NDArray[Any]]
    ) -> None:
        """Create the table (``id``, the attributes, ``vector``) and its ANN index."""
        import lancedb
        import pyarrow as pa

        matrix = check_matrix("vectors", vectors)
        n, dims = matrix.shape
        columns: dict[str, Any] = {"id": pa.array(np.arange(n, dtype=np.int64))}
        checked = check_attributes(attributes, n)
        for name, values in checked.items():
            # booleans as 0/1, as `Below.bound` renders them (SQL does not order booleans)
            columns[name] = pa.array(values.astype(np.int8) if values.dtype == bool else values)
        columns["vector"] = pa.FixedSizeListArray.from_arrays(pa.array(matrix.ravel()), dims)
        self.close()
        self._tmp = tempfile.TemporaryDirectory(prefix="arecall-lancedb-")
        db = lancedb.connect(self._tmp.name)
        self._table = db.create_table("docs", data=pa.table(columns))
        self._table.create_index("vector", config=self._config())
        self._dims = dims
        self._dtypes = {name: values.dtype for name, values in checked.items()}

    def search(
        self, queries: npt.NDArray[np.float32], k: int, where: Predicate, *, prefilter: bool
    ) -> Hits:
        """One batched LanceDB query: ``search(...).where(where_sql(where), prefilter=...)``."""
        if self._table is None:
            raise ArecallError("lancedb: search() before build()")
        q = check_matrix("queries", queries, dims=self._dims)
        k = check_k(k)
        builder = (
            self._table.search(q.tolist(), vector_column_name="vector")
            .distance_type(self._distance)
            .where(where_sql(where, self._dtypes.get(where.column)), prefilter=prefilter)
            .limit(k)
        )
        if self.index_type != "IVF_PQ":
            builder = builder.ef(max(self.ef_search, k))
        result = builder.select(["id", "_distance"]).to_arrow()
        ids = np.full((q.shape[0], k), -1, dtype=np.int64)
        scores = np.full((q.shape[0], k), -np.inf, dtype=np.float32)
        if "query_index" in result.column_names:
            qidx = result["query_index"].to_numpy()
        else:  # a single query comes back without query_index
            qidx = np.zeros(result.num_rows, dtype=np.int64)
        got = result["id"].to_numpy()
        # LanceDB's "dot" distance is 1 - dot, its "l2" one ‖q − d‖², ascending: to a score
        dist = result["_distance"].to_numpy()
        for i in range(q.shape[0]):
            rows = np.flatnonzero(qidx == i)
            order = rows[np.argsort(dist[rows], kind="stable")][:k]
            ids[i, : order.size] = got[order]
            scores[i, : order.size] = 1.0 - dist[order] if self.metric == "ip" else -dist[order]
        return Hits(ids=ids, scores=scores)

    def close(self) -> None:
        """Drop the table and remove its temporary directory."""
        self._table = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
