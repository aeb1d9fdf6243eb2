"""The fixed placements: where a filter goes when nothing is planned.

* ``post`` searches the top-k unfiltered, then drops what the principal may not use. It is
  what most stores do by default, and it under-returns: at 1% selectivity about 0.1 of 10.
* ``pushdown`` hands faiss an ``IDSelectorBitmap`` of the principal's documents; HNSW walks
  through rejected nodes but collects only accepted ones. It fixes post-filtering at moderate
  selectivity, but ``efSearch`` counts rejected candidates too, so a very selective filter
  starves it: on verity's corpus at M=16, efSearch=64 and 1% it returns 9.54/10, recall 0.658.
* ``pre`` scans the authorized subset exhaustively. Always right — it *is* the oracle — and
  as slow as a scan of that subset.

``auto`` (`arecall.vector.placement.plan`) chooses between a certified graph search and the
scan, per batch and per query.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from arecall.vector._checks import check_mask
from arecall.vector.index import Hits, VectorIndex

__all__ = ["post", "pre", "pushdown"]


def post(
    index: VectorIndex, queries: Any, k: int, allowed: Any, *, ef_search: int | None = None
) -> Hits:
    """Search top-``k`` unfiltered, then drop unauthorized documents (under-returns).

    Examples
    --------
    >>> from arecall.vector.index import build_index
    >>> idx = build_index(np.eye(4, dtype=np.float32), kind="exact")
    >>> post(idx, [[1, 0.5, 0, 0]], 2, np.array([False, True, True, True])).rows()
    [[1]]
    """
    mask = check_mask(allowed, index.n_docs)
    hits = index.search(queries, k, ef_search=ef_search)
    return hits.select(mask[np.maximum(hits.ids, 0)])


def pushdown(
    index: VectorIndex, queries: Any, k: int, allowed: Any, *, ef_search: int | None = None
) -> Hits:
    """HNSW search with the principal's documents as an ``IDSelectorBitmap`` (faiss pushdown).

    Examples
    --------
    >>> from arecall.vector.index import build_index
    >>> idx = build_index(np.eye(4, dtype=np.float32), kind="hnsw", ef_search=4)
    >>> pushdown(idx, [[1, 0.5, 0, 0]], 2, np.array([False, True, True, True])).returned()
    array([2])
    """
    return index.search_filtered(queries, k, allowed, ef_search=ef_search)


def pre(index: VectorIndex, queries: Any, k: int, allowed: Any) -> Hits:
    """Exact search restricted to the authorized subset: the oracle.

    Examples
    --------
    >>> from arecall.vector.index import build_index
    >>> idx = build_index(np.eye(4, dtype=np.float32), kind="hnsw")
    >>> pre(idx, [[1, 0.5, 0, 0]], 2, np.array([False, True, True, True])).rows()[0][0]
    1
    """
    return index.exact(queries, k, allowed)
