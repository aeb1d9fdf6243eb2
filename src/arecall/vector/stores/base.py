"""The one interface a vector store implements to be audited: ``build`` and ``search``.

An audit asks a real store the question the experiment asks faiss — the k nearest documents
a filter admits — once with the store's post-filter and once with its pre-filter, and scores
both against the same exhaustive oracle. The interface is deliberately tiny so that a store is
one file (``faiss.py``, ``lancedb.py``, ``chroma.py``; Qdrant local mode or pgvector would be
the same): load vectors with scalar attributes, answer a
batch of queries under one attribute predicate, say whether the filter is applied before or
after the ANN search.

The experiment (``arecall run corpus=vectors index.store=NAME``) asks more of a store: each
placement it answers. By default a store answers ``post`` with ``search(prefilter=False)`` and
``pushdown`` with ``search(prefilter=True)``; ``pre`` is the exact scan of the authorized subset
(the oracle), the same for every store. A store that can do more (faiss answers ``auto``)
lists it in ``placements`` and overrides ``place`` and ``calibrate``. ``from_config`` maps the
``index`` config (``m``, ``ef_construction``, ``ef_search``) onto the store's parameters.

Two predicates (``Predicate``). Each is evaluated by ``mask`` (numpy: the oracle and faiss) and
written in a store's own filter language by that store's module (SQL for LanceDB, a ``where``
document for Chroma), from the predicate's fields, so store and oracle filter identically and a
new store's dialect lives in its own file:

- ``Below(column, threshold)``, "attribute < threshold": how the verity corpus expresses
  selectivity (a document matches s iff its draw is < s);
- ``InSet(column, values)``, "attribute ∈ values" on an integer attribute: authorization by
  group — a team, a tenant, a topic cluster — which is how a correlated ACL looks (the
  authorized documents are whole clusters of the embedding space, not a uniform sample).
"""

from __future__ import annotations

import math
import re
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from arecall.core.errors import ArecallError
from arecall.vector._checks import check_k, check_matrix, check_positive_int
from arecall.vector.index import Hits
from arecall.vector.schema import IndexConfig

__all__ = ["Below", "HnswStore", "InSet", "Predicate", "VectorStore", "check_attributes"]

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Below:
    """The predicate ``column < threshold`` on a numeric document attribute.

    Examples
    --------
    >>> Below("draw", 0.5).mask({"draw": np.array([0.2, 0.7])}).tolist()
    [True, False]
    """

    column: str
    threshold: float

    def __post_init__(self) -> None:
        if not _IDENTIFIER.match(self.column):
            raise ArecallError(f"filter column={self.column!r}: must be a plain identifier")
        if not np.isfinite(self.threshold):
            raise ArecallError(f"filter threshold={self.threshold!r}: must be finite")

    def mask(self, attributes: Mapping[str, npt.NDArray[Any]]) -> npt.NDArray[np.bool_]:
        """Evaluate the predicate with numpy, as the oracle does."""
        if self.column not in attributes:
            raise ArecallError(f"filter column={self.column!r}: no such attribute")
        return np.asarray(attributes[self.column] < self.threshold, dtype=np.bool_)

    def bound(self, dtype: npt.DTypeLike | None = None) -> int | float:
        """The threshold as a literal for a column of ``dtype``.

        Stores compare an integer column with a float literal badly (LanceDB refuses
        ``group < 0.0``; Chroma drops ``group == 3`` from ``group < 3.5``), so for an integer
        column the bound is the equivalent integer ``ceil(threshold)``: ``x < t`` iff
        ``x < ceil(t)`` for integer ``x`` (clipped to the int64 range).

        Examples
        --------
        >>> Below("group", 2.5).bound(np.int64), Below("draw", 2.5).bound(np.float64)
        (3, 2.5)
        """
        if dtype is not None and np.dtype(dtype).kind in "biu":
            info = np.iinfo(np.int64)
            return int(min(max(math.ceil(self.threshold), info.min), info.max))
        return float(self.threshold)


def _integers(values: Iterable[Any]) -> tuple[int, ...]:
    """``values`` as a sorted tuple of distinct ints, refusing anything that is not an integer."""
    out = set()
    for value in values:
        if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
            raise ArecallError(f"filter value={value!r}: InSet takes integers (group ids)")
        out.add(int(value))
    return tuple(sorted(out))


@dataclass(frozen=True)
class InSet:
    """The predicate ``column ∈ values`` on an integer (or 0/1 boolean) attribute: group membership.

    ``values`` is kept sorted and deduplicated, so equal sets give equal predicates and the
    same filter in every store's language. An empty set admits nothing.

    Examples
    --------
    >>> groups = {"group": np.array([3, 1, 4, 1, 5])}
    >>> InSet("group", [4, 1]).mask(groups).tolist()
    [False, True, True, True, False]
    >>> InSet("group", [4, 1, 1]).values
    (1, 4)
    """

    column: str
    values: tuple[int, ...]

    def __init__(self, column: str, values: Iterable[Any]) -> None:
        if not _IDENTIFIER.match(column):
            raise ArecallError(f"filter column={column!r}: must be a plain identifier")
        object.__setattr__(self, "column", column)
        object.__setattr__(self, "values", _integers(values))

    def mask(self, attributes: Mapping[str, npt.NDArray[Any]]) -> npt.NDArray[np.bool_]:
        """Evaluate the predicate with numpy, as the oracle does."""
        if self.column not in attributes:
            raise ArecallError(f"filter column={self.column!r}: no such attribute")
        column = np.asarray(attributes[self.column])
        if column.dtype.kind not in "biu":
            raise ArecallError(
                f"filter column={self.column!r}: InSet needs an integer attribute, "
                f"got dtype {column.dtype}"
            )
        return np.isin(column, np.asarray(self.values, dtype=np.int64))


#: A filter every store answers: ``Below`` (a threshold) or ``InSet`` (group membership).
Predicate = Below | InSet


def check_attributes(
    attributes: Mapping[str, npt.NDArray[Any]], n_docs: int
) -> dict[str, npt.NDArray[Any]]:
    """Check per-document attributes: plain identifiers as names, one value per document.

    Examples
    --------
    >>> check_attributes({"draw": [0.1, 0.2]}, 3)
    Traceback (most recent call last):
    ...
    arecall.core.errors.ArecallError: attribute 'draw': shape (2,), expected (3,)
    """
    out: dict[str, npt.NDArray[Any]] = {}
    for name, values in attributes.items():
        Below(name, 0.0)  # validates the column name
        array = np.asarray(values)
        if array.shape != (n_docs,):
            raise ArecallError(f"attribute {name!r}: shape {array.shape}, expected ({n_docs},)")
        out[name] = array
    return out


class VectorStore(ABC):
    """A vector store under audit. Subclasses set ``name`` and implement two methods.

    Documents are identified by their row number in the ``vectors`` passed to ``build``; the
    metric is the store's ``metric`` attribute, the inner product unless a store that lists
    ``l2`` in ``metrics`` is built for it (``from_config`` passes the vectors' metric);
    scores are always higher-first (an L2 distance is negated). Use as a context manager, or
    call ``close`` to release temporary storage.

    Adding a store is one file with a subclass (writing `Below` and `InSet` in the store's own
    filter language there) plus one line in `arecall.vector.stores.STORES` (its class, the
    placements it answers, its libraries); both ``audit`` and ``experiment`` then reach it by
    name, and a config naming it is checked without importing it.
    """

    name: ClassVar[str] = "store"
    #: Placements ``place`` answers (``pre``, the oracle scan, is answered for every store).
    placements: ClassVar[tuple[str, ...]] = ("post", "pushdown")
    #: Metrics the store can be built for (``ip``: inner product; ``l2``: Euclidean).
    metrics: ClassVar[tuple[str, ...]] = ("ip",)
    #: The metric this store measures (a subclass's ``__init__`` sets it from ``metrics``).
    metric: str = "ip"

    @classmethod
    def from_config(cls, index: IndexConfig, metric: str = "ip") -> VectorStore:
        """The store the experiment's ``index`` config describes, for ``metric`` (default: no
        parameters, inner product only)."""
        cls.check_metric(metric)
        return cls()

    @classmethod
    def check_metric(cls, metric: str) -> str:
        """``metric`` if this store measures it, else the one-line error naming the store.

        Examples
        --------
        >>> VectorStore.check_metric("l2")
        Traceback (most recent call last):
        ...
        arecall.core.errors.ArecallError: metric l2: store store measures ip only
        """
        if metric not in cls.metrics:
            raise ArecallError(
                f"metric {metric}: store {cls.name} measures {', '.join(cls.metrics)} only"
            )
        return metric

    @abstractmethod
    def build(
        self, vectors: npt.NDArray[np.float32], attributes: Mapping[str, npt.NDArray[Any]]
    ) -> None:
        """Load ``vectors`` (row i = document i) with per-document scalar ``attributes``."""

    @abstractmethod
    def search(
        self, queries: npt.NDArray[np.float32], k: int, where: Predicate, *, prefilter: bool
    ) -> Hits:
        """Top-``k`` documents satisfying ``where`` for each query, the store's way.

        ``prefilter=False`` asks the store to filter after its ANN search (post-filtering);
        ``prefilter=True`` to restrict the search to matching documents first.
        """

    def place(
        self, placement: str, queries: npt.NDArray[np.float32], k: int, where: Predicate
    ) -> tuple[Hits, str]:
        """Answer one placement of the experiment: its hits and the plan the table prints.

        The default answers ``post`` with ``search(prefilter=False)`` and ``pushdown`` with
        ``search(prefilter=True)``; the plan is ``prefilter=False`` / ``prefilter=True``.
        """
        if placement not in self.placements or placement not in ("post", "pushdown"):
            raise ArecallError(
                f"placement={placement!r}: store {self.name} answers "
                f"{', '.join(self.placements)} (and pre, the exact scan)"
            )
        prefilter = placement == "pushdown"
        return self.search(queries, k, where, prefilter=prefilter), f"prefilter={prefilter}"

    def calibrate(  # noqa: B027 - optional hook, a no-op by default
        self,
        k: int,
        queries: npt.NDArray[np.float32] | None,
        *,
        target_recall: float,
        graph_cost: float,
        confidence: float = IndexConfig.confidence,
    ) -> None:
        """Prepare the ``auto`` placement on held-out ``queries`` (stores that answer it)."""

    def close(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Release resources (temporary directories, connections)."""

    def __enter__(self) -> VectorStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class HnswStore(VectorStore):
    """A store that builds its own HNSW graph from the ``index`` config (Chroma, Milvus Lite):
    ``m``, ``ef_construction`` and ``ef_search`` checked once here, ``ip`` or ``l2``.

    Such a store runs embedded on a temporary directory, with a client: `search` and `close`
    are theirs in common. A subclass's ``build`` fills ``_tmp``, ``_client``, ``_attributes``
    and ``_dims``; it answers a query batch with ``_query(queries, k, None)`` (unfiltered) and
    ``_filtered(queries, k, where, dtype)`` (its own filter).

    Examples
    --------
    >>> class Toy(HnswStore):
    ...     name = "toy"
    ...     def build(self, vectors, attributes): ...
    ...     def search(self, queries, k, predicate, *, prefilter): ...
    >>> Toy.from_config(IndexConfig(m=8, ef_search=100)).ef_search
    100
    >>> Toy.from_config(IndexConfig(name="exact"))
    Traceback (most recent call last):
    ...
    arecall.core.errors.ArecallError: index.name='exact': store toy builds an HNSW index only \
(index=hnsw, or index.store=faiss)
    """

    metrics: ClassVar[tuple[str, ...]] = ("ip", "l2")

    def __init__(
        self,
        *,
        m: int = IndexConfig.m,
        ef_construction: int = IndexConfig.ef_construction,
        ef_search: int = IndexConfig.ef_search,
        metric: str = "ip",
    ) -> None:
        self.m = check_positive_int("m", m, minimum=2)
        self.ef_construction = check_positive_int("ef_construction", ef_construction)
        self.ef_search = check_positive_int("ef_search", ef_search)
        self.metric = self.check_metric(metric)
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._client: Any = None
        self._attributes: dict[str, npt.NDArray[Any]] = {}
        self._dims = 0

    @classmethod
    def from_config(cls, index: IndexConfig, metric: str = "ip") -> Any:
        """``index=hnsw`` with the config's HNSW parameters, for ``metric``."""
        if index.name != "hnsw":
            raise ArecallError(
                f"index.name={index.name!r}: store {cls.name} builds an HNSW index only "
                "(index=hnsw, or index.store=faiss)"
            )
        return cls(
            m=index.m,
            ef_construction=index.ef_construction,
            ef_search=index.ef_search,
            metric=metric,
        )

    def _built(self) -> bool:
        return self._client is not None

    def _check_k(self, k: int) -> int:
        """``k`` checked as the store can answer it."""
        return check_k(k)

    def _query(self, queries: npt.NDArray[np.float32], k: int, where: Any) -> Hits:
        raise NotImplementedError

    def _filtered(
        self, queries: npt.NDArray[np.float32], k: int, where: Predicate, dtype: np.dtype[Any]
    ) -> Hits:
        raise NotImplementedError

    def search(
        self, queries: npt.NDArray[np.float32], k: int, where: Predicate, *, prefilter: bool
    ) -> Hits:
        """The store's filtered search (``prefilter=True``) or its unfiltered top-k,
        post-filtered."""
        if not self._built():
            raise ArecallError(f"{self.name}: search() before build()")
        q = check_matrix("queries", queries, dims=self._dims)
        k = self._check_k(k)
        mask = where.mask(self._attributes)  # validates the column (and evaluates post)
        if prefilter:
            column = self._attributes[where.column]  # present: mask() checked it
            return self._filtered(q, k, where, column.dtype)
        hits = self._query(q, k, None)
        return hits.select(mask[np.maximum(hits.ids, 0)])

    def close(self) -> None:
        """Close the client and remove its temporary directory."""
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
