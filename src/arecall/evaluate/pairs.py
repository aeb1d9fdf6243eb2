"""Where the per-pair counts of an evaluation go: kept, tallied, or spilled to disk.

An evaluation with an ACL has one value per (principal, query) pair and measure and K: 10^8
pairs for a thousand principals on a deep run of 100,000 queries, more than memory. The kernels
give integer counts per pair (`arecall.evaluate.kernels.pair_counts`); what is kept of them
depends on how many pairs there are, never on how the run was split into blocks:

* up to `RETAIN_CELLS` count cells, every pair's counts are kept (`Retained`): the summary, the
  rows, `compare` and `worst` are computed from the whole arrays, in principal-major order,
  exactly as an evaluation held in memory always was;
* beyond, the counts are tallied (`Tallies`): for each K, how many pairs have each (pre, post,
  |R_A|) and each unusable count. Every mean is exact (`arecall.core.significance.exact_mean`)
  and the bootstrap and randomization test draw from the tallies, which is the distribution of
  resampling the pairs (`arecall.core.significance.delta_significance_counts`). When rows,
  `compare` or `worst` are wanted, the counts are also spilled to a temporary file
  (`Spill`) and read back a slice of principals at a time.

`pair_values` turns counts into the measures' values: the one definition every store uses.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from arecall.core.measures import EVALUATE
from arecall.core.placement import Placement
from arecall.evaluate.kernels import AUTHORIZED_MEASURES, ratio

__all__ = ["RETAIN_CELLS", "Retained", "Spill", "Tallies", "pair_values", "retains"]

#: Count cells (pairs × (3 × K + 1)) kept per pair; past this, tallies (and a spill if asked).
RETAIN_CELLS = 1 << 25
_COUNTS = ("post", "pre", "unusable")


def retains(n_pairs: int, n_ks: int) -> bool:
    """Whether an evaluation of ``n_pairs`` pairs at ``n_ks`` cutoffs keeps every pair's counts."""
    return n_pairs * (3 * n_ks + 1) <= RETAIN_CELLS


def pair_values(
    measure: str,
    counts: Mapping[str, np.ndarray],
    j: int,
    k: int,
    placement: str,
) -> np.ndarray:
    """The values of ``measure`` at the j-th cutoff ``k`` from the counts (any shape)."""
    n_auth = counts["n_auth"]
    if measure == "unusable":
        return np.asarray(counts["unusable"][..., j], dtype=np.float64) / k
    if measure == "arecall":
        measure = "arecall_pre" if placement == Placement.PRE else "arecall_post"
    if measure == "gap":
        return pair_values("arecall_pre", counts, j, k, placement) - pair_values(
            "arecall_post", counts, j, k, placement
        )
    side = "pre" if measure == "arecall_pre" else "post"
    hits = np.asarray(counts[side][..., j], dtype=np.float64)
    return ratio(hits, n_auth, EVALUATE[measure].empty)


@dataclass(eq=False)
class Retained:
    """Every pair's counts: ``n_auth`` (P, Q) and ``post``, ``pre``, ``unusable`` (P, Q, K)."""

    counts: dict[str, np.ndarray]

    @classmethod
    def empty(cls, n_principals: int, n_queries: int, n_ks: int) -> Retained:
        counts = {n: np.zeros((n_principals, n_queries, n_ks), dtype=np.int32) for n in _COUNTS}
        counts["n_auth"] = np.zeros((n_principals, n_queries), dtype=np.int32)
        return cls(counts)

    def add(self, eval_index: np.ndarray, block: Mapping[str, np.ndarray]) -> None:
        for name, values in block.items():
            self.counts[name][:, eval_index] = values


@dataclass(eq=False)
class Tallies:
    """For each cutoff: pairs per (pre, post, |R_A|), and pairs per unusable count."""

    n_ks: int
    triples: list[dict[tuple[int, int, int], int]] = field(default_factory=list)
    unusable: list[dict[int, int]] = field(default_factory=list)
    n_pairs: int = 0

    def __post_init__(self) -> None:
        self.triples = [{} for _ in range(self.n_ks)]
        self.unusable = [{} for _ in range(self.n_ks)]

    def add(self, eval_index: np.ndarray, block: Mapping[str, np.ndarray]) -> None:
        r = block["n_auth"].astype(np.int64).ravel()
        self.n_pairs += len(r)
        for j in range(self.n_ks):
            pre = block["pre"][..., j].astype(np.int64).ravel()
            post = block["post"][..., j].astype(np.int64).ravel()
            _merge(self.triples[j], _tally((pre, post, r)))
            _merge(self.unusable[j], _tally((block["unusable"][..., j].astype(np.int64).ravel(),)))

    def histogram(
        self, measure: str, j: int, k: int, placement: str, *, nonempty: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """(distinct values, pairs with each) of ``measure`` at the j-th cutoff ``k``."""
        if measure == "unusable":
            if nonempty:
                raise ValueError("unusable has no restricted mean")
            found = sorted(self.unusable[j])
            counts = np.array([self.unusable[j][u] for u in found], dtype=np.int64)
            return np.array(found, dtype=np.float64) / k, counts
        items = sorted(self.triples[j].items())
        if nonempty:
            items = [(key, c) for key, c in items if key[2] > 0]
        if not items:
            return np.zeros(0), np.zeros(0, dtype=np.int64)
        triples = np.array([key for key, _ in items], dtype=np.int64).reshape(-1, 3)
        counts = np.array([c for _, c in items], dtype=np.int64)
        block = {"pre": triples[:, 0:1], "post": triples[:, 1:2], "n_auth": triples[:, 2]}
        values = pair_values(measure, block, 0, k, placement)
        distinct, inverse = np.unique(values, return_inverse=True)
        return distinct, np.bincount(inverse.ravel(), weights=counts).astype(np.int64)

    def nonempty(self) -> int:
        """Pairs with something relevant authorized."""
        return sum(c for key, c in self.triples[0].items() if key[2] > 0) if self.n_ks else 0


def _tally(columns: tuple[np.ndarray, ...]) -> Iterator[tuple[tuple[int, ...], int]]:
    """(distinct rows of the integer ``columns``, how often each occurs)."""
    if not len(columns[0]):
        return iter(())
    sizes = [int(c.max()) + 1 for c in columns]
    space = int(np.prod(sizes, dtype=np.float64))
    key = np.zeros(len(columns[0]), dtype=np.int64)
    for c, size in zip(columns, sizes, strict=True):
        key = key * size + c
    if space <= 1 << 22:
        counts = np.bincount(key, minlength=space)
        present = np.flatnonzero(counts)
        found, how_many = present, counts[present]
    else:
        found, how_many = np.unique(key, return_counts=True)
    decoded = []
    rest = found
    for size in reversed(sizes):
        decoded.append(rest % size)
        rest = rest // size
    decoded.reverse()
    rows = zip(*(d.tolist() for d in decoded), strict=True)
    return zip(rows, how_many.tolist(), strict=True)


def _merge(into: dict[Any, int], items: Iterator[tuple[Any, int]]) -> None:
    for key, count in items:
        key = key if len(key) > 1 else key[0]
        into[key] = into.get(key, 0) + count


class Spill:
    """Every pair's counts on disk, block by block, read back a slice of principals at a time.

    Each block is written as its eval indices and its four count arrays (principal-major);
    `read` gathers principals ``start … stop − 1`` of every block into arrays over all the
    evaluated queries, so rows come out principal by principal in eval order, as the in-memory
    tables do. The file is a temporary one, removed by `close` (and at exit).
    """

    def __init__(self, n_principals: int, n_queries: int, n_ks: int) -> None:
        self.shape = (n_principals, n_queries, n_ks)
        handle, name = tempfile.mkstemp(prefix="arecall-pairs-", suffix=".bin")
        os.close(handle)
        self.path = Path(name)
        self._file = self.path.open("w+b")
        self._blocks: list[tuple[int, np.ndarray]] = []  # (offset, eval indices)

    def add(self, eval_index: np.ndarray, block: Mapping[str, np.ndarray]) -> None:
        self._blocks.append((self._file.tell(), np.asarray(eval_index, dtype=np.int64)))
        for name in ("n_auth", *_COUNTS):
            self._file.write(np.ascontiguousarray(block[name], dtype=np.int32).tobytes())

    def read(self, start: int, stop: int) -> dict[str, np.ndarray]:
        """Counts of principals ``start … stop − 1`` over every evaluated query."""
        n_p, nq, n_k = self.shape
        width = stop - start
        out = {n: np.zeros((width, nq, n_k), dtype=np.int32) for n in _COUNTS}
        out["n_auth"] = np.zeros((width, nq), dtype=np.int32)
        self._file.flush()
        for offset, eval_index in self._blocks:
            q = len(eval_index)
            at = offset
            for name in ("n_auth", *_COUNTS):
                per = q * (1 if name == "n_auth" else n_k)
                values = np.fromfile(
                    self._file.name, dtype=np.int32, count=width * per, offset=at + 4 * start * per
                )
                shape = (width, q) if name == "n_auth" else (width, q, n_k)
                out[name][:, eval_index] = values.reshape(shape)
                at += 4 * n_p * per
        return out

    def close(self) -> None:
        self._file.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def __del__(self) -> None:  # the evaluation is gone: so is its spill
        with contextlib.suppress(Exception):
            self.close()


def measures_at(
    counts: Mapping[str, np.ndarray], ks: tuple[int, ...], placement: str
) -> dict[str, np.ndarray]:
    """Every authorized measure's column (``<measure>@<k>``) from counts of shape (P, Q, K)."""
    from arecall.core.measures import column

    out: dict[str, np.ndarray] = {}
    for m in AUTHORIZED_MEASURES:
        for j, k in enumerate(ks):
            out[column(m, k)] = pair_values(m, counts, j, k, placement).ravel()
    return out
