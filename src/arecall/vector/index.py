"""Indexes over any float32 embedding matrix: ``exact`` (a flat inner-product scan) and ``hnsw``.

One class, ``VectorIndex``, answers the three questions a filtered-search experiment asks:

* ``search`` — the index's own unfiltered top-k (exact for ``exact``, approximate for ``hnsw``);
* ``search_filtered`` — the index's own filtered top-k: for ``hnsw`` this is *pushdown*
  (``SearchParametersHNSW(sel=IDSelectorBitmap(...))``: rejected nodes are traversed but never
  collected); for ``exact`` it is a scan of the authorized subset;
* ``exact`` — a brute-force scan restricted to the authorized subset, whatever the index kind.
  This is the oracle every placement is scored against, and the ``pre`` placement itself.

Scores are similarities, higher first, under the index's ``metric``: ``ip``, the inner product
of what you give it, or ``l2``, the negated squared Euclidean distance ``−‖q − d‖²`` (faiss's
``METRIC_L2`` graph; its distances are negated into scores). The verity generator returns unit
vectors, so its inner product is the cosine, as in verity; cosine on other vectors is the inner
product of their normalised rows (``arecall.vector.generator.l2_normalise``), as
``retriever=embeddings`` does for ``retriever.metric=cosine``.

HNSW construction in faiss is parallel and, with more than one thread, not deterministic: two
builds can link different neighbours and so report different recall. ``build_index`` therefore
builds single-threaded by default (``deterministic=True``), which costs nothing at verity's
2,000 documents; the million-vector benchmark passes ``deterministic=False``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import faiss
import numpy as np
import numpy.typing as npt

from arecall.core.errors import ArecallError
from arecall.vector._checks import (
    check_ef_search,
    check_k,
    check_mask,
    check_matrix,
    check_positive_int,
)
from arecall.vector.schema import IndexConfig

__all__ = [
    "INDEX_KINDS",
    "METRICS",
    "Hits",
    "VectorIndex",
    "build_index",
    "packed_mask",
    "set_threads",
]

IndexKind = Literal["exact", "hnsw"]
INDEX_KINDS: tuple[str, ...] = ("exact", "hnsw")
#: What an index can measure: ``ip`` (inner product) or ``l2`` (negated squared distance).
METRICS: tuple[str, ...] = ("ip", "l2")

# faiss's bundled stubs omit some SWIG classes (SearchParametersHNSW); reach them untyped.
_faiss: Any = faiss

# Rows of scores per exact-scan block are capped so a block's score matrix stays near 256 MB.
_BLOCK_BYTES = 256 * 2**20


def set_threads(n: int | None) -> None:
    """Set the number of OpenMP threads faiss uses (``None`` leaves it alone).

    Examples
    --------
    >>> set_threads(None)
    """
    if n is not None:
        faiss.omp_set_num_threads(check_positive_int("threads", n))


@contextmanager
def _single_thread() -> Iterator[None]:
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


@dataclass(frozen=True)
class Hits:
    """Top-k results for a batch of queries, best first, padded with id −1 / score −inf.

    Attributes
    ----------
    ids : ndarray of int64, shape (n_queries, k)
    scores : ndarray of float32, shape (n_queries, k)

    Examples
    --------
    >>> h = Hits(np.array([[3, -1]]), np.array([[0.5, -np.inf]], dtype=np.float32))
    >>> h.returned().tolist(), h.rows()
    ([1], [[3]])
    """

    ids: npt.NDArray[np.int64]
    scores: npt.NDArray[np.float32]

    @property
    def k(self) -> int:
        """Result slots per query."""
        return int(self.ids.shape[1])

    def returned(self) -> npt.NDArray[np.int64]:
        """Number of real results per query."""
        return np.asarray((self.ids >= 0).sum(axis=1), dtype=np.int64)

    def short(self, n_allowed: int) -> npt.NDArray[np.bool_]:
        """Per query, whether it returned fewer than ``min(k, n_allowed)`` results (a walk that
        missed nodes HNSW left unreachable). Where ``n_allowed`` ≥ k, any padding at all: one
        comparison and one reduction, not :meth:`returned`'s count and its comparison (a plan
        asks this of every answer after its walk, when each numpy call is cold).

        Examples
        --------
        >>> hits = Hits(np.array([[3, -1], [4, 5]]), np.zeros((2, 2), np.float32))
        >>> hits.short(10).tolist(), hits.short(1).tolist()
        ([True, False], [False, False])
        """
        if n_allowed < self.k:
            return self.returned() < n_allowed
        return np.asarray((self.ids < 0).any(axis=1), dtype=bool)

    def rows(self) -> list[list[int]]:
        """Per query, the returned document indices best first (padding dropped)."""
        return [[int(i) for i in row if i >= 0] for row in self.ids]

    @staticmethod
    def from_faiss(distances: npt.NDArray[Any], labels: npt.NDArray[Any]) -> Hits:
        """Wrap faiss output, normalising the padding to −1 / −inf (the scores are copied,
        not overwritten, and only when there is padding).

        Examples
        --------
        >>> d = np.array([[0.5, 9.0]], dtype=np.float32)
        >>> Hits.from_faiss(d, np.array([[4, -1]])).scores.tolist(), d.tolist()
        ([[0.5, -inf]], [[0.5, 9.0]])
        """
        ids = np.asarray(labels, dtype=np.int64)
        scores = np.asarray(distances, dtype=np.float32)
        padded = ids < 0
        if padded.any():
            scores = np.where(padded, np.float32(-np.inf), scores)
        return Hits(ids=ids, scores=scores)

    def select(self, keep: npt.NDArray[np.bool_]) -> Hits:
        """Keep the entries where ``keep`` is true, compacted to the front in their order.

        Examples
        --------
        >>> h = Hits(np.array([[4, 7, 9]]), np.array([[3, 2, 1]], dtype=np.float32))
        >>> h.select(np.array([[False, True, True]])).ids.tolist()
        [[7, 9, -1]]
        """
        keep = keep & (self.ids >= 0)
        order = np.argsort(~keep, axis=1, kind="stable")
        ids = np.take_along_axis(np.where(keep, self.ids, -1), order, axis=1)
        scores = np.take_along_axis(np.where(keep, self.scores, -np.inf), order, axis=1)
        return Hits(ids=ids, scores=scores.astype(np.float32))

    def replace_rows(self, rows: npt.NDArray[np.intp], other: Hits) -> Hits:
        """A copy with query rows ``rows`` taken from ``other`` (same k, same row order)."""
        ids, scores = self.ids.copy(), self.scores.copy()
        ids[rows], scores[rows] = other.ids, other.scores
        return Hits(ids=ids, scores=scores)


class VectorIndex:
    """An ``exact`` or ``hnsw`` index over a float32 matrix, metric ``ip`` or ``l2``.

    Build with :func:`build_index`. The matrix is kept (faiss's HNSW keeps its own copy too),
    because ``exact`` scans the authorized subset of it; ``faiss_index`` is ``None`` for
    ``exact``.
    """

    def __init__(
        self,
        vectors: npt.NDArray[np.float32],
        index: Any,
        *,
        kind: IndexKind,
        m: int | None,
        ef_construction: int | None,
        ef_search: int | None,
        metric: str = "ip",
    ) -> None:
        self.vectors = vectors
        self.faiss_index = index
        self.kind: IndexKind = kind
        self.m = m
        self.ef_construction = ef_construction
        self.ef_search = ef_search
        self.metric = check_metric(metric)
        # ‖d‖² per document, for l2 scans: −‖q − d‖² = 2 q·d − ‖q‖² − ‖d‖²
        self._squared_norms = (
            np.einsum("ij,ij->i", vectors, vectors, dtype=np.float32) if metric == "l2" else None
        )

    def similarities(
        self, q: npt.NDArray[np.float32], ids: npt.NDArray[np.int64] | None = None
    ) -> npt.NDArray[np.float32]:
        """Scores of checked queries ``q`` against the documents ``ids`` (all when ``None``),
        queries × documents, higher first: the inner product, or ``−‖q − d‖²`` for ``l2``.

        Examples
        --------
        >>> idx = build_index(np.array([[0, 0], [3, 4]], np.float32), kind="exact", metric="l2")
        >>> idx.similarities(np.array([[3, 0]], np.float32)).tolist()
        [[-9.0, -16.0]]
        """
        base = self.vectors if ids is None else np.take(self.vectors, ids, axis=0)
        scores = q @ base.T
        if self._squared_norms is None:
            return scores
        norms = self._squared_norms if ids is None else self._squared_norms[ids]
        scores *= 2.0
        scores -= np.einsum("ij,ij->i", q, q, dtype=np.float32)[:, None]
        scores -= norms[None, :]
        return scores

    @property
    def n_docs(self) -> int:
        """Number of indexed vectors."""
        return int(self.vectors.shape[0])

    @property
    def dims(self) -> int:
        """Vector dimension."""
        return int(self.vectors.shape[1])

    def __repr__(self) -> str:
        params = "" if self.kind == "exact" else f", m={self.m}, ef_search={self.ef_search}"
        if self.metric != "ip":
            params += f", metric={self.metric}"
        return f"VectorIndex({self.kind}, n_docs={self.n_docs}, dims={self.dims}{params})"

    def check_queries(self, queries: Any) -> npt.NDArray[np.float32]:
        """Validate ``queries`` against this index: (n, dims), finite, float32.

        Examples
        --------
        >>> build_index(np.eye(2, dtype=np.float32), kind="exact").check_queries([1, 0]).shape
        (1, 2)
        """
        return check_matrix("queries", queries, dims=self.dims)

    def _ef(self, ef_search: int | None, k: int) -> int:
        ef = self.ef_search if ef_search is None else ef_search
        return check_ef_search(ef, k)

    def search(self, queries: Any, k: int, *, ef_search: int | None = None) -> Hits:
        """The index's own unfiltered top-``k`` (approximate for ``hnsw``).

        Examples
        --------
        >>> idx = build_index(np.eye(3, dtype=np.float32), kind="exact")
        >>> idx.search(np.array([[0, 1, 0]], dtype=np.float32), 1).ids.tolist()
        [[1]]
        """
        q = self.check_queries(queries)
        k = check_k(k)
        if self.kind == "exact":
            return self.exact(q, k)
        return self._walk(q, k, self._ef(ef_search, k))

    def search_filtered(
        self, queries: Any, k: int, allowed: Any, *, ef_search: int | None = None
    ) -> Hits:
        """The index's own filtered top-``k``: HNSW pushdown, or a subset scan for ``exact``.

        For ``hnsw``, ``efSearch`` bounds the candidate list *including* rejected nodes, so with
        a selective mask this can return fewer than ``k`` (that is the point of measuring it).

        Examples
        --------
        >>> idx = build_index(np.eye(3, dtype=np.float32), kind="hnsw", ef_search=4)
        >>> allowed = np.array([True, False, True])
        >>> idx.search_filtered(np.array([[0, 1, 0.5]], dtype=np.float32), 1, allowed).ids
        array([[2]])
        """
        q = self.check_queries(queries)
        k = check_k(k)
        mask = check_mask(allowed, self.n_docs)
        if self.kind == "exact":
            return self.exact(q, k, mask)
        return self._walk(q, k, self._ef(ef_search, k), mask)

    def _walk(
        self,
        q: npt.NDArray[np.float32],
        k: int,
        ef: int,
        mask: npt.NDArray[np.bool_] | None = None,
        bitmap: npt.NDArray[np.uint8] | None = None,
    ) -> Hits:
        """The HNSW search itself — unfiltered, or pushed down under ``mask`` — for callers
        whose ``q``, ``k``, ``ef`` and ``mask`` are checked already: :meth:`search` and
        :meth:`search_filtered`, and ``auto``'s plans, which checked their batch once and
        whose every step beside faiss's own costs them against the plain pushdown they must
        match (at 100,000 vectors the checks of two searches were 1.5% of the batch).
        ``bitmap``: ``mask`` packed already (:func:`packed_mask`), by a caller that walks
        under one mask more than once (at a million documents a packing is 70 µs)."""
        if mask is None:
            params = _faiss.SearchParametersHNSW(efSearch=ef)
            distances, labels = self.faiss_index.search(q, k, params=params)
            return self._hits(distances, labels)
        if bitmap is None:
            bitmap = packed_mask(mask)
        selector = faiss.IDSelectorBitmap(self.n_docs, faiss.swig_ptr(bitmap))
        params = _faiss.SearchParametersHNSW(sel=selector, efSearch=ef)
        distances, labels = self.faiss_index.search(q, k, params=params)
        del selector, bitmap  # kept alive until faiss has returned
        return self._hits(distances, labels)

    def _hits(self, distances: npt.NDArray[Any], labels: npt.NDArray[Any]) -> Hits:
        """faiss's answer as scores: inner products as they are, L2 distances negated."""
        return Hits.from_faiss(-distances if self.metric == "l2" else distances, labels)

    def exact(self, queries: Any, k: int, allowed: Any = None) -> Hits:
        """Exhaustive top-``k`` over the documents ``allowed`` permits (all when ``None``).

        Correct by construction — every authorized document is scored — so this is the oracle
        and the ``pre`` placement. A numpy scan (BLAS matrix product in blocks of about 256 MB of
        scores, then a one-pass top-k, :func:`_top_k`) rather than faiss's ``knn``: as fast or
        faster on this box, and it breaks ties canonically — score descending, then id
        ascending — including which of several documents tied at the k-th score makes the cut.

        Examples
        --------
        >>> idx = build_index(np.eye(3, dtype=np.float32), kind="hnsw")
        >>> idx.exact(np.ones((1, 3), dtype=np.float32), 5, np.array([1, 0, 1], bool)).rows()
        [[0, 2]]
        """
        q = self.check_queries(queries)
        k = check_k(k)
        if allowed is None:
            return self._scan_ids(q, k, None)
        mask = check_mask(allowed, self.n_docs)
        return self._scan_ids(q, k, None if mask.all() else np.flatnonzero(mask))

    def _scan_masked(self, q: npt.NDArray[np.float32], k: int, mask: npt.NDArray[np.bool_]) -> Hits:
        """:func:`_scan_masked` on this index, for checked callers (a plan's fallback scan of a
        few queries), as :meth:`_scan_ids` is the gathering one."""
        if self.metric != "ip":  # scores as the index measures them (−‖q − d‖² for l2)
            scores = self.similarities(q)
            scores[:, ~mask] = -np.inf
            return Hits(*_top_k(scores, k))
        ids, top = _scan_masked(self.vectors, q, k, mask)
        return Hits(ids, top)

    def _scan_ids(
        self, q: npt.NDArray[np.float32], k: int, ids: npt.NDArray[np.int64] | None
    ) -> Hits:
        """:meth:`exact` over the documents ``ids`` (ascending; ``None``: all), for callers in
        this package whose ``q`` and ``k`` are checked and who hold the ids already — ``auto``
        lists them to decide on a scan, and listing them twice was 5% of a 0.1% scan at 10⁶."""
        if ids is None or ids.size == self.n_docs:
            ids, base = None, self.vectors
        else:
            base = np.take(self.vectors, ids, axis=0)  # contiguous; 25% faster than [ids]
        n_q = q.shape[0]
        out_ids = np.full((n_q, k), -1, dtype=np.int64)
        out_scores = np.full((n_q, k), -np.inf, dtype=np.float32)
        n_base = base.shape[0]
        if n_base == 0:
            return Hits(out_ids, out_scores)
        kk = min(k, n_base)
        block = max(1, _BLOCK_BYTES // (4 * n_base))
        norms = self._squared_norms
        if norms is not None and ids is not None:
            norms = norms[ids]
        for start in range(0, n_q, block):
            stop = min(n_q, start + block)
            similarity = q[start:stop] @ base.T
            if norms is not None:  # l2: 2 q·d − ‖q‖² − ‖d‖² = −‖q − d‖²
                similarity *= 2.0
                part = q[start:stop]
                similarity -= np.einsum("ij,ij->i", part, part, dtype=np.float32)[:, None]
                similarity -= norms[None, :]
            local, scores = _top_k(similarity, kk)
            out_ids[start:stop, :kk] = local if ids is None else ids[local]
            out_scores[start:stop, :kk] = scores
        return Hits(out_ids, out_scores)


def packed_mask(mask: npt.NDArray[np.bool_]) -> npt.NDArray[np.uint8]:
    """``mask`` as the bitmap faiss's ``IDSelectorBitmap`` reads (bit ``i % 8`` of byte
    ``i // 8``): packed once, a caller may walk under it again and key the mask by it.

    Examples
    --------
    >>> packed_mask(np.array([True, False, False, True])).tolist()
    [9]
    """
    return np.packbits(mask, bitorder="little")


def _scan_masked(
    vectors: npt.NDArray[np.float32],
    q: npt.NDArray[np.float32],
    k: int,
    mask: npt.NDArray[np.bool_],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """Exact top-``k`` of ``mask``'s documents by scoring every document and masking the rest:
    for a few queries, cheaper than gathering the authorized vectors first (same canonical
    order as :meth:`VectorIndex.exact`)."""
    scores = q @ vectors.T
    scores[:, ~mask] = -np.inf
    return _top_k(scores, k)


def _top_k(
    scores: npt.NDArray[np.float32], k: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """Row-wise top-k of a score matrix by (score descending, column ascending), exactly.

    A wide row (at least 100·k columns) goes through :func:`_top_k_threshold`, which reads the
    matrix once; a narrow one through :func:`_top_k_partition`. Both return the one canonical
    list, ties included.
    """
    n = scores.shape[1]
    if k >= n:
        part = np.broadcast_to(np.arange(n), scores.shape).copy()
        return _ordered(scores, part)
    if n < 100 * k:
        return _top_k_partition(scores, k)
    # Group width ≈ √(n/k)/2 balances the pass over the group maxima (n/width per row) against
    # sorting the about k·width candidates; measured best within 15% from 1,000 to 10⁶ columns.
    return _top_k_threshold(scores, k, min(64, max(4, math.isqrt(n // k) // 2)))


def _top_k_partition(
    scores: npt.NDArray[np.float32], k: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """Top-k by ``argpartition``: O(n) per row but several passes over it.

    ``argpartition`` finds k columns at or above each row's k-th score; when more columns tie
    at that score than fit, the lowest-numbered tied columns are taken, so the answer is one
    canonical list, not whichever tied column the selection happened to keep.
    """
    n = scores.shape[1]
    part = np.argpartition(scores, n - k, axis=1)[:, n - k :]
    kth = np.take_along_axis(scores, part, axis=1).min(axis=1, keepdims=True)
    tied_total = (scores == kth).sum(axis=1)
    tied_kept = (np.take_along_axis(scores, part, axis=1) == kth).sum(axis=1)
    for row in np.flatnonzero(tied_total > tied_kept):
        above = np.flatnonzero(scores[row] > kth[row, 0])
        tied = np.flatnonzero(scores[row] == kth[row, 0])[: k - above.size]
        part[row] = np.concatenate([above, tied])
    return _ordered(scores, part)


def _top_k_threshold(
    scores: npt.NDArray[np.float32], k: int, width: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """Top-k from a lower bound on the k-th score, in one pass over the matrix.

    The columns are split into groups of ``width`` (column j joins group j mod g), plus the
    ragged tail as groups of one. The k-th largest group maximum ``t`` is at most the k-th
    score — k groups each hold a score ≥ ``t`` — so every top-k column and every column tied
    at the k-th score lies in a group whose maximum is ≥ ``t``. Only those groups, about k per
    row, are read again and sorted. The maxima are an elementwise ``maximum`` of contiguous
    slices (SIMD, one read of the matrix); ``argpartition`` reads it several times, which made
    it the slowest part of a scan (``benchmarks/bench_scan.py``, 100 queries over 50,000 of a
    million documents: 34 ms of top-k after a 27 ms matrix product, now 3 ms).
    """
    rows, n = scores.shape
    groups = n // width
    body = scores[:, : groups * width].reshape(rows, width, groups)
    maxima = np.concatenate([body.max(axis=1), scores[:, groups * width :]], axis=1)
    m = maxima.shape[1]
    bound = np.partition(maxima, m - k, axis=1)[:, m - k]
    row, group = np.nonzero(maxima >= bound[:, None])
    grouped = group < groups
    cols = np.concatenate(
        [
            (group[grouped, None] + groups * np.arange(width)).ravel(),
            group[~grouped] - groups + groups * width,
        ]
    )
    row = np.concatenate([np.repeat(row[grouped], width), row[~grouped]])
    vals = scores[row, cols]
    keep = vals >= bound[row]
    row, cols, vals = row[keep], cols[keep], vals[keep]
    if (np.bincount(row, minlength=rows) < k).any():  # NaN scores: no bound holds
        return _top_k_partition(scores, k)
    order = np.lexsort((cols, -vals, row))
    first = np.searchsorted(row[order], np.arange(rows))
    chosen = order[(first[:, None] + np.arange(k)).ravel()]
    return (
        cols[chosen].reshape(rows, k).astype(np.int64),
        vals[chosen].reshape(rows, k).astype(np.float32),
    )


def _ordered(
    scores: npt.NDArray[np.float32], part: npt.NDArray[np.intp]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """The columns ``part`` of each row, sorted by (score descending, column ascending)."""
    top = np.take_along_axis(scores, part, axis=1)
    order = np.lexsort((part, -top.astype(np.float64)), axis=1)
    return (
        np.take_along_axis(part, order, axis=1).astype(np.int64),
        np.take_along_axis(top, order, axis=1).astype(np.float32),
    )


def check_metric(metric: str) -> str:
    """``metric`` if an index can measure it (`METRICS`), else the one-line error.

    Examples
    --------
    >>> check_metric("cosine")
    Traceback (most recent call last):
    ...
    arecall.core.errors.ArecallError: index metric='cosine': must be one of ip, l2 (cosine is ip \
on normalised vectors)
    """
    if metric not in METRICS:
        raise ArecallError(
            f"index metric={metric!r}: must be one of {', '.join(METRICS)} (cosine is ip on "
            "normalised vectors)"
        )
    return metric


def build_index(
    vectors: Any,
    *,
    kind: str = IndexConfig.name,
    m: int = IndexConfig.m,
    ef_construction: int = IndexConfig.ef_construction,
    ef_search: int = IndexConfig.ef_search,
    deterministic: bool = True,
    metric: str = "ip",
) -> VectorIndex:
    """Build an ``exact`` (flat scan, as IndexFlatIP) or ``hnsw`` (IndexHNSWFlat) index.

    Parameters
    ----------
    vectors : array_like, shape (n, d)
        Any finite float matrix: the verity corpus, or a text corpus's dense LSA vectors.
    kind : {"hnsw", "exact"}
    m : int
        HNSW links per node (``M``; level 0 keeps ``2*M``). verity uses 16.
    ef_construction : int
        Candidate-list size while linking (faiss default 40).
    ef_search : int
        Default candidate-list size while searching (verity: 64). Per-call overrides exist.
    deterministic : bool
        Build single-threaded, so equal inputs give an identical graph.
    metric : {"ip", "l2"}
        Inner product, or Euclidean (the graph is linked and searched by L2 distance; scores
        are ``−‖q − d‖²``).

    Returns
    -------
    VectorIndex

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> build_index(rng.normal(size=(100, 8)).astype(np.float32), m=8)
    VectorIndex(hnsw, n_docs=100, dims=8, m=8, ef_search=64)
    """
    matrix = check_matrix("vectors", vectors)
    if kind not in INDEX_KINDS:
        raise ArecallError(f"index kind={kind!r}: must be one of {', '.join(INDEX_KINDS)}")
    metric = check_metric(metric)
    dims = matrix.shape[1]
    if kind == "exact":
        flat = faiss.IndexFlatIP(dims) if metric == "ip" else faiss.IndexFlatL2(dims)
        flat.add(matrix)
        return VectorIndex(
            matrix, flat, kind="exact", m=None, ef_construction=None, ef_search=None, metric=metric
        )
    m = check_positive_int("m", m, minimum=2)
    ef_construction = check_positive_int("ef_construction", ef_construction)
    ef_search = check_positive_int("ef_search", ef_search)
    faiss_metric = faiss.METRIC_INNER_PRODUCT if metric == "ip" else faiss.METRIC_L2
    hnsw = faiss.IndexHNSWFlat(dims, m, faiss_metric)
    hnsw.hnsw.efConstruction = ef_construction
    hnsw.hnsw.efSearch = ef_search
    if deterministic:
        with _single_thread():
            hnsw.add(matrix)
    else:
        hnsw.add(matrix)
    return VectorIndex(
        matrix,
        hnsw,
        kind="hnsw",
        m=m,
        ef_construction=ef_construction,
        ef_search=ef_search,
        metric=metric,
    )
