"""Partitioned indexes for coarse (group) authorization: one HNSW graph per group.

When authorization is granted a group at a time — a team, a tenant, a topic cluster — the
filter is exactly a union of groups, and a graph per group answers it with no filter in the
walk at all: search each authorized group's own graph unfiltered, merge the k best. That is
what Milvus partition keys and Qdrant's tenant indexes do, and it is exact under any
correlation between the filter and the vectors, because no graph ever holds a document the
principal may not see. Its costs: one search per authorized group (a principal with 60 groups
pays 60 small walks), and memory — each group's graph and its copy of the vectors, on top of
(or instead of) the global index; ``memory_bytes`` measures it.

A group the filter authorizes only partly (the boundary of a growing grant) and a group too
small for a graph (``min_size``) are scanned exactly over their authorized members.
"""

from __future__ import annotations

from typing import Any

import faiss
import numpy as np
import numpy.typing as npt

from arecall.core.errors import ArecallError
from arecall.vector._checks import check_k, check_mask, check_matrix, check_positive_int
from arecall.vector.index import Hits, VectorIndex, _top_k, build_index
from arecall.vector.schema import IndexConfig

__all__ = ["PartitionedIndex"]


class PartitionedIndex:
    """One HNSW index per group of at least ``min_size`` documents; smaller groups scanned.

    Parameters
    ----------
    vectors : array_like, shape (n, d)
    groups : array_like of int, shape (n,)
        Group id per document.
    min_size : int
        Groups below this size get no graph (a scan of them is cheaper than a walk).
    m, ef_construction, ef_search : int
        HNSW parameters of every group's graph.
    deterministic : bool
        Build single-threaded (reproducible graphs).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(300, 8)).astype(np.float32)
    >>> part = PartitionedIndex(x, np.arange(300) % 3, min_size=50)
    >>> allowed = np.arange(300) % 3 == 1
    >>> hits = part.search(x[:2], 5, allowed, ef_search=300)
    >>> bool(allowed[hits.ids].all()), hits.returned().tolist()
    (True, [5, 5])
    """

    def __init__(
        self,
        vectors: Any,
        groups: Any,
        *,
        min_size: int = 1000,
        m: int = IndexConfig.m,
        ef_construction: int = IndexConfig.ef_construction,
        ef_search: int = IndexConfig.ef_search,
        deterministic: bool = True,
    ) -> None:
        self.vectors = check_matrix("vectors", vectors)
        labels = np.asarray(groups)
        if labels.shape != (self.vectors.shape[0],) or not np.issubdtype(labels.dtype, np.integer):
            raise ArecallError(
                f"groups: expected one integer per document ({self.vectors.shape[0]}), "
                f"got shape {labels.shape} of {labels.dtype}"
            )
        self.min_size = check_positive_int("min_size", min_size)
        self.ef_search = check_positive_int("ef_search", ef_search)
        self.groups = labels.astype(np.int64)
        order = np.argsort(self.groups, kind="stable")
        names, starts = np.unique(self.groups[order], return_index=True)
        bounds = [*starts.tolist(), order.shape[0]]
        self.members: dict[int, npt.NDArray[np.int64]] = {
            int(g): order[bounds[i] : bounds[i + 1]] for i, g in enumerate(names)
        }
        self.graphs: dict[int, VectorIndex] = {}
        for g, ids in self.members.items():
            if ids.shape[0] >= self.min_size:
                self.graphs[g] = build_index(
                    self.vectors[ids],
                    m=m,
                    ef_construction=ef_construction,
                    ef_search=ef_search,
                    deterministic=deterministic,
                )

    @property
    def n_docs(self) -> int:
        """Number of documents over all groups."""
        return int(self.vectors.shape[0])

    def memory_bytes(self) -> int:
        """Bytes of every group graph (faiss's serialised size: vectors and links) and id map.

        Examples
        --------
        >>> x = np.random.default_rng(0).normal(size=(200, 4)).astype(np.float32)
        >>> PartitionedIndex(x, np.zeros(200, int), min_size=10).memory_bytes() > 200 * 4 * 4
        True
        """
        graphs = sum(int(faiss.serialize_index(g.faiss_index).nbytes) for g in self.graphs.values())
        return graphs + sum(int(ids.nbytes) for ids in self.members.values())

    def search(self, queries: Any, k: int, allowed: Any, *, ef_search: int | None = None) -> Hits:
        """Top-``k`` authorized: each wholly authorized group's graph, unfiltered; the rest
        (partly authorized or graphless groups) scanned over their authorized members."""
        q = check_matrix("queries", queries, dims=self.vectors.shape[1])
        k = check_k(k)
        mask = check_mask(allowed, self.n_docs)
        ef = self.ef_search if ef_search is None else max(k, ef_search)
        touched = np.unique(self.groups[mask])
        parts_ids: list[npt.NDArray[np.int64]] = []
        parts_scores: list[npt.NDArray[np.float32]] = []
        scanned: list[npt.NDArray[np.int64]] = []
        for g in touched.tolist():
            ids = self.members[g]
            inside = mask[ids]
            if g in self.graphs and inside.all():
                hits = self.graphs[g].search(q, min(k, ids.shape[0]), ef_search=max(ef, k))
                parts_ids.append(np.where(hits.ids >= 0, ids[np.maximum(hits.ids, 0)], -1))
                parts_scores.append(hits.scores)
            else:
                scanned.append(ids[inside])
        if scanned:
            subset = np.sort(np.concatenate(scanned))
            local, scores = _top_k(q @ self.vectors[subset].T, min(k, subset.shape[0]))
            parts_ids.append(subset[local])
            parts_scores.append(scores)
        out_ids = np.full((q.shape[0], k), -1, dtype=np.int64)
        out_scores = np.full((q.shape[0], k), -np.inf, dtype=np.float32)
        if not parts_ids:
            return Hits(out_ids, out_scores)
        all_ids = np.concatenate(parts_ids, axis=1)
        all_scores = np.concatenate(parts_scores, axis=1)
        all_scores = np.where(all_ids >= 0, all_scores, -np.inf).astype(np.float32)
        kk = min(k, all_ids.shape[1])
        cols, top = _top_k(all_scores, kk)
        picked = np.take_along_axis(all_ids, cols, axis=1)
        out_ids[:, :kk] = np.where(np.isfinite(top), picked, -1)
        out_scores[:, :kk] = top
        return Hits(out_ids, out_scores)
