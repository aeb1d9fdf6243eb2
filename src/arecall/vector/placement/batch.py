"""The batch a plan answers — its queries, its filter and how many documents that authorizes —
and the exact answers every plan falls back on: counting the filter, scanning a few queries."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from arecall.vector.index import Hits, VectorIndex, packed_mask
from arecall.vector.placement.planner import AutoPlanner
from arecall.vector.placement.settings import DEFAULTS

__all__ = ["Batch", "count_allowed", "scan_rows"]


@dataclass
class Batch:
    """One ``auto`` call's inputs, checked: the index, the queries, k, the principal's mask, its
    count (``n_allowed``), its ids where they were listed, and the calibrated planner."""

    index: VectorIndex
    q: npt.NDArray[np.float32]
    k: int
    mask: npt.NDArray[np.bool_]
    n_allowed: int
    ids: npt.NDArray[np.int64] | None
    planner: AutoPlanner

    @property
    def n_q(self) -> int:
        """Queries in the batch."""
        return int(self.q.shape[0])

    @property
    def share(self) -> float:
        """The share of the documents the filter authorizes (its global selectivity)."""
        return self.n_allowed / self.index.n_docs

    @cached_property
    def bitmap(self) -> npt.NDArray[np.uint8]:
        """The mask packed once (`arecall.vector.index.packed_mask`) for every pushdown of the
        batch and as the key the cells remember the mask's verdict and counts by: at a million
        documents each packing of the mask is 70 µs of a 15 ms batch."""
        return packed_mask(self.mask)

    def pushdown(self, rows: npt.NDArray[np.int64] | None, ef: int) -> Hits:
        """The pushed-down top-k of ``rows`` (every query for ``None``) at efSearch ``ef``."""
        q = self.q if rows is None else self.q[rows]
        return self.index._walk(q, self.k, ef, self.mask, self.bitmap)

    @property
    def scan_cost(self) -> float:
        """What one query's share of the batch's exact scan costs, in scan distances: the
        authorized documents, and its share of the pass over them for a batch smaller than the
        one the prices were timed at (`CostModel.scan_share`)."""
        return self.planner.scan_share(self.n_allowed, self.n_q)

    def scan(self, rows: npt.NDArray[np.int64] | None = None) -> Hits:
        """The exact answers of ``rows`` (every query by default; :func:`scan_rows`)."""
        q = self.q if rows is None else self.q[rows]
        pass_share = self.planner.scan_pass
        return scan_rows(self.index, q, self.k, self.mask, self.n_allowed, self.ids, pass_share)


def count_allowed(
    mask: npt.NDArray[np.bool_],
    few: float,
    step: int = DEFAULTS.count_stride,
    looks: int = DEFAULTS.count_looks,
) -> tuple[int, npt.NDArray[np.int64] | None]:
    """How many documents ``mask`` authorizes, and their ids if that is at most ``few`` (also
    where a sample took the mask for that sparse; ``None`` otherwise): only a scan needs them,
    and ``auto`` scans outright only at or below ``few``.

    A scan needs the ids, and listing them counts them on the way: on ``auto``'s scan branch
    a separate count first was 5% of the call at a million documents and 0.1%. Above ``few``
    a plan lists them only if it needs them (the general plan): at a million documents and
    10% the list took 0.56 ms, 3% of a pushdown that never reads it. Every ``step``-th entry
    (``settings.count_stride``, 4,096) is looked at first, in a mask of at least ``looks``
    (``settings.count_looks``) such entries: a mask that is clearly sparse is
    listed at once, any other counted (30 µs at a million) and listed only at or below
    ``few``. The sample decides only which is cheaper: a mask laid out to fool it costs a
    count, never a wrong answer.

    Examples
    --------
    >>> count, ids = count_allowed(np.arange(10) % 4 == 0, 2)
    >>> count, ids.tolist()
    (3, [0, 4, 8])
    >>> count_allowed(np.ones(2**17, dtype=bool), 1000)
    (131072, None)
    >>> count, ids = count_allowed(np.arange(2**17) % 4096 == 0, 1000)  # fools the sample
    >>> count, ids.size
    (32, 32)
    """
    if mask.size >= looks * step and np.count_nonzero(mask[::step]) * step > few / 2 + 2 * step:
        n_allowed = int(np.count_nonzero(mask))
        if n_allowed > few:
            return n_allowed, None
    ids = np.flatnonzero(mask)
    return int(ids.size), ids


def scan_rows(
    index: VectorIndex,
    q: npt.NDArray[np.float32],
    k: int,
    mask: npt.NDArray[np.bool_],
    n_allowed: int,
    authorized_ids: npt.NDArray[np.int64] | None = None,
    scan_pass: float = DEFAULTS.scan_pass,
) -> Hits:
    """The exact scan of ``mask`` for a few fallback queries (``authorized_ids``: its
    documents, where the caller listed them already).

    ``index.exact`` first copies the ``n·s`` authorized vectors, whatever the batch: for one
    query at s = 50% that copy costs more than scoring all ``n`` documents and masking the
    rest (measured 5 ms against < 1 ms at 50,000 × 128). So score everything when the extra
    distances, ``q·n·(1 − s)``, are fewer than the copy's price, counted as ``scan_pass``
    distances per copied vector; else scan the subset. Same canonical order (score
    descending, then id).
    """
    if q.shape[0] * (index.n_docs - n_allowed) > scan_pass * n_allowed or n_allowed <= k:
        if authorized_ids is None:
            return index.exact(q, k, mask)
        return index._scan_ids(q, k, authorized_ids)
    return index._scan_masked(q, k, mask)
