"""Milvus Lite (pymilvus's embedded mode) under audit: its filtered search against post-filtering.

``MilvusClient("<dir>/arecall.db")`` runs Milvus Lite inside this process on a local file — no
server to start or stop; its gRPC endpoint listens on 127.0.0.1 only, for this client. The
adapter creates one collection (``id`` primary key = row number, ``vector``, one scalar field
per attribute), asks for an ``HNSW`` index with the ``index`` config's ``m`` →
``M``, ``ef_construction`` → ``efConstruction``, searches with ``ef_search`` → ``ef``, metric
``IP`` (or ``L2``), then inserts, flushes and loads, so every row is in a sealed, indexed
segment before the first search.

``search(prefilter=True)`` (``pushdown``) is Milvus's own filtered search, ``filter=`` with the
predicate as a Milvus expression (`~arecall.vector.stores.base.Below.milvus`);
``search(prefilter=False)`` (``post``) is what a user of Milvus does without ``filter=``: the
unfiltered top-k, then the unauthorized dropped. What Milvus Lite does inside is measured, not
assumed: the benchmarks page records its recall against the oracle at small ``ef`` — it reports
the HNSW index as built, yet answers as an exhaustive scan would.

The database lives in a private temporary directory, removed by ``close``.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from arecall.core.errors import ArecallError
from arecall.vector._checks import check_k, check_matrix
from arecall.vector.index import Hits
from arecall.vector.stores import STORES
from arecall.vector.stores.base import Below, HnswStore, Predicate, check_attributes

__all__ = ["MILVUS_LIMIT", "MilvusStore", "where_milvus"]

#: Milvus's largest ``limit`` (top-k) per search.
MILVUS_LIMIT = 16384
#: Rows per ``insert`` call.
_INSERT_BATCH = 5000
_COLLECTION = "docs"


def where_milvus(where: Predicate, dtype: npt.DTypeLike | None = None) -> str:
    """A predicate as a Milvus boolean expression, for a column of ``dtype`` (`Below.bound`):
    the SQL comparison, or ``in [...]`` (``false`` for the empty set).

    Examples
    --------
    >>> from arecall.vector.stores.base import InSet
    >>> where_milvus(Below("draw", 0.03)), where_milvus(Below("group", 2.5), np.int64)
    ('draw < 0.03', 'group < 3')
    >>> where_milvus(InSet("group", [4, 1])), where_milvus(InSet("group", []))
    ('group in [1, 4]', 'false')
    """
    if isinstance(where, Below):
        return f"{where.column} < {where.bound(dtype)!r}"
    if not where.values:
        return "false"
    return f"{where.column} in [{', '.join(str(v) for v in where.values)}]"


def _import_client() -> Any:
    """pymilvus's ``MilvusClient`` and ``DataType``, or one line saying how to install them."""
    try:
        from pymilvus import DataType, MilvusClient
    except ImportError:
        raise ArecallError(
            "index.store=milvus: needs pymilvus and milvus-lite (pip install 'arecall[milvus]'; "
            "make install includes them)"
        ) from None
    logging.getLogger("pymilvus").setLevel(logging.WARNING)
    return MilvusClient, DataType


def _unimplemented(record: logging.LogRecord) -> bool:
    """False for the record of a gRPC method Milvus Lite does not implement (to drop it)."""
    return not (record.exc_info and isinstance(record.exc_info[1], NotImplementedError))


@contextmanager
def _quiet_unimplemented() -> Iterator[None]:
    """Drop the traceback Milvus Lite's in-process gRPC server logs when ``create_collection``
    asks it for ``AllocTimestamp``, a method Lite does not implement: the client carries on
    without it (measured with pymilvus 3.0, milvus-lite 3.2), so the traceback only alarms."""
    server = logging.getLogger("grpc._server")
    server.addFilter(_unimplemented)
    try:
        yield
    finally:
        server.removeFilter(_unimplemented)


class MilvusStore(HnswStore):
    """A Milvus Lite collection with an HNSW index request, metric ``IP`` (or ``L2``).

    Parameters
    ----------
    m : int
        Milvus's ``M`` (checked by `~arecall.vector.stores.base.HnswStore`, as the others).
    ef_construction : int
        Milvus's ``efConstruction``.
    ef_search : int
        Milvus's search ``ef``.
    metric : str
        ``ip`` (Milvus's ``IP``) or ``l2`` (``L2``).

    Examples
    --------
    >>> from arecall.vector.generator import generate
    >>> from arecall.vector.stores.base import Below, InSet
    >>> data = generate(300, 16, 2)
    >>> groups = np.arange(300) % 3
    >>> with MilvusStore() as store:
    ...     store.build(data.vectors, {"draw": data.draws, "group": groups})
    ...     below = store.search(data.queries, 5, Below("draw", 0.5), prefilter=True)
    ...     inset = store.search(data.queries, 5, InSet("group", [0, 2]), prefilter=True)
    >>> below.returned().tolist(), bool((groups[inset.ids] != 1).all())
    ([5, 5], True)
    """

    name = "milvus"
    placements = STORES["milvus"].answers

    @property
    def database(self) -> Path | None:
        """The Milvus Lite file (``None`` before ``build`` and after ``close``)."""
        return None if self._tmp is None else Path(self._tmp.name) / "arecall.db"

    @property
    def _metric_type(self) -> str:
        return "IP" if self.metric == "ip" else "L2"

    def index_params(self) -> dict[str, Any]:
        """The index request: the ``index`` config in Milvus's names.

        Examples
        --------
        >>> MilvusStore(m=8).index_params()["params"]
        {'M': 8, 'efConstruction': 40}
        """
        return {
            "index_type": "HNSW",
            "metric_type": self._metric_type,
            "params": {"M": self.m, "efConstruction": self.ef_construction},
        }

    def build(
        self, vectors: npt.NDArray[np.float32], attributes: Mapping[str, npt.NDArray[Any]]
    ) -> None:
        """Create the collection and index, insert ``vectors`` with their attributes, load."""
        milvus_client, data_type = _import_client()
        matrix = check_matrix("vectors", vectors)
        n, dims = matrix.shape
        checked = check_attributes(attributes, n)
        self.close()
        self._tmp = tempfile.TemporaryDirectory(prefix="arecall-milvus-")
        self._client = milvus_client(str(self.database))
        schema = milvus_client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("id", data_type.INT64, is_primary=True)
        schema.add_field("vector", data_type.FLOAT_VECTOR, dim=dims)
        columns: dict[str, npt.NDArray[Any]] = {}
        for name, values in checked.items():
            if values.dtype.kind in "biu":  # booleans as 0/1, as `Below.bound` renders them
                schema.add_field(name, data_type.INT64)
                columns[name] = values.astype(np.int64)
            elif values.dtype.kind == "f":
                schema.add_field(name, data_type.DOUBLE)
                columns[name] = values.astype(np.float64)
            else:
                raise ArecallError(
                    f"milvus: attribute {name!r}: dtype {values.dtype}, expected numbers"
                )
        with _quiet_unimplemented():
            self._client.create_collection(_COLLECTION, schema=schema)
        for start in range(0, n, _INSERT_BATCH):
            stop = min(start + _INSERT_BATCH, n)
            rows = [
                {
                    "id": i,
                    "vector": matrix[i],
                    **{name: values[i].item() for name, values in columns.items()},
                }
                for i in range(start, stop)
            ]
            self._client.insert(_COLLECTION, rows)
        # Index the sealed segments, then load: a collection loaded before its index exists is
        # searched by brute force until Milvus Lite swaps the indexed segments in, seconds later
        # (measured: recall 1.0, then the graph's), so the audit would not measure the index.
        self._client.flush(_COLLECTION)
        request = self._client.prepare_index_params()
        request.add_index(field_name="vector", **self.index_params())
        self._client.create_index(_COLLECTION, request, sync=True)
        self._client.load_collection(_COLLECTION)
        self._attributes = checked
        self._dims = dims

    def describe_index(self) -> dict[str, Any]:
        """What Milvus says of its index (type, metric, rows indexed)."""
        if self._client is None:
            raise ArecallError("milvus: describe_index() before build()")
        return dict(self._client.describe_index(_COLLECTION, "vector"))

    def _query(self, queries: npt.NDArray[np.float32], k: int, expression: str | None) -> Hits:
        """One batched Milvus search, as `Hits` (scores higher first)."""
        limit = min(k, MILVUS_LIMIT)
        params = {"metric_type": self._metric_type, "params": {"ef": max(self.ef_search, limit)}}
        result = self._client.search(
            _COLLECTION,
            data=queries,
            limit=limit,
            filter=expression or "",
            search_params=params,
            output_fields=[],
        )
        ids = np.full((queries.shape[0], k), -1, dtype=np.int64)
        scores = np.full((queries.shape[0], k), -np.inf, dtype=np.float32)
        for i, found in enumerate(result):
            got = np.asarray([hit["id"] for hit in found], dtype=np.int64)
            distance = np.asarray([hit["distance"] for hit in found], dtype=np.float32)
            # IP is a similarity (higher first), L2 a distance (lower first): to scores
            score = distance if self.metric == "ip" else -distance
            order = np.argsort(-score, kind="stable")[:k]
            ids[i, : order.size] = got[order]
            scores[i, : order.size] = score[order]
        return Hits(ids=ids, scores=scores)

    def _check_k(self, k: int) -> int:
        k = check_k(k)
        if k > MILVUS_LIMIT:
            raise ArecallError(f"k={k}: Milvus answers at most {MILVUS_LIMIT} results a query")
        return k

    def _filtered(
        self, queries: npt.NDArray[np.float32], k: int, where: Predicate, dtype: np.dtype[Any]
    ) -> Hits:
        """Milvus's filtered search: the predicate as a filter expression."""
        return self._query(queries, k, where_milvus(where, dtype))
