"""Where the per-pair counts of an evaluation go: kept, tallied, or spilled to disk.

An evaluation with an ACL has one value per (principal, query) pair and measure and K: 10^8
pairs for a thousand principals on a deep run of 100,000 queries, more than memory. The kernels
give integer counts per pair (`arecall.evaluate.kernels.pair_counts`); what is kept of them
depends on how many pairs there are, never on how the run was split into blocks:

* always, the counts are tallied (`Tallies`): for each K, how many pairs have each (pre, post,
  |R_A|) and each unusable count. The summary is computed from the tallies alone: every mean is
  exact (`arecall.core.significance.exact_mean`) and the bootstrap and randomization test draw
  from them, which is the distribution of resampling the pairs
  (`arecall.core.significance.delta_significance_counts`). Tallies of blocks merge exactly
  (integer counts per integer key), so each block of principals is tallied where it was
  computed — on a Dask worker, `reduce_block` — and only its tallies travel back;
* on this machine's engine, up to `RETAIN_CELLS` count cells, every pair's counts are also kept
  (`Retained`) for the rows, `compare` and `worst`;
* otherwise, when rows, `compare` or `worst` are wanted, the counts are spilled to temporary
  files (`Spill`) — on a cluster each worker writes its blocks' files itself, so no per-pair
  array passes through this process — and read back a slice of principals at a time.

`pair_values` turns counts into the measures' values: the one definition every store uses.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from arecall.core.errors import ArecallError
from arecall.core.measures import EVALUATE
from arecall.core.placed_lists import Placement
from arecall.evaluate.kernels import AUTHORIZED_MEASURES, pair_counts, ratio
from arecall.io.atomic import atomic_path

__all__ = [
    "RETAIN_CELLS",
    "BlockResult",
    "Retained",
    "Spill",
    "Tallies",
    "pair_values",
    "reduce_block",
    "retains",
]

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

    def merge(self, other: Tallies) -> None:
        """Add another block's tallies (exact: integer counts per integer key)."""
        self.n_pairs += other.n_pairs
        for j in range(self.n_ks):
            for key, count in other.triples[j].items():
                self.triples[j][key] = self.triples[j].get(key, 0) + count
            for u, count in other.unusable[j].items():
                self.unusable[j][u] = self.unusable[j].get(u, 0) + count

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

    A block of queries is stored as its eval indices and parts, each part the four count arrays
    (principal-major) of principals ``start … stop − 1``: this process appends its blocks to one
    file (one part per block of queries), while on a cluster each worker writes the part of its
    block of principals to a file of its own in the spill's directory (`part_prefix`; written
    to a temporary name and renamed, so a block a killed worker leaves half-written is never
    read, and a rerun writes the same name once). `read` gathers principals ``start … stop − 1``
    of every block into arrays over all the evaluated queries, so rows come out principal by
    principal in eval order, as the in-memory tables do. The directory is a temporary one,
    removed by `close` (and when the evaluation is collected).
    """

    def __init__(self, n_principals: int, n_queries: int, n_ks: int) -> None:
        self.shape = (n_principals, n_queries, n_ks)
        self.directory = Path(tempfile.mkdtemp(prefix="arecall-pairs-"))
        self.path = self.directory / "pairs.bin"
        self._file = self.path.open("w+b")
        # (eval indices, parts: (start, stop, file, offset)) per block of queries
        self._blocks: list[tuple[np.ndarray, list[tuple[int, int, Path, int]]]] = []

    def add(self, eval_index: np.ndarray, block: Mapping[str, np.ndarray]) -> None:
        offset = self._file.tell()
        for name in ("n_auth", *_COUNTS):
            self._file.write(np.ascontiguousarray(block[name], dtype=np.int32).tobytes())
        part = (0, self.shape[0], self.path, offset)
        self._blocks.append((np.asarray(eval_index, dtype=np.int64), [part]))

    def part_prefix(self) -> str:
        """A fresh name prefix, in the spill's directory, for the parts of one block of queries."""
        return str(self.directory / f"part-{uuid.uuid4().hex}")

    def add_parts(self, eval_index: np.ndarray, parts: list[tuple[int, int, str]]) -> None:
        """Record the files workers wrote for one block of queries (``(start, stop, file)``)."""
        found = []
        for start, stop, name in parts:
            path = Path(name)
            if not path.is_file():
                raise ArecallError(
                    f"{path}: a worker wrote the per-pair counts of principals {start}-{stop} "
                    "there, and this process cannot read it (per-pair rows on a cluster need "
                    "the temporary directory, TMPDIR, on a filesystem the workers share)"
                )
            found.append((start, stop, path, 0))
        self._blocks.append((np.asarray(eval_index, dtype=np.int64), found))

    def read(self, start: int, stop: int) -> dict[str, np.ndarray]:
        """Counts of principals ``start … stop − 1`` over every evaluated query."""
        _, nq, n_k = self.shape
        width = stop - start
        out = {n: np.zeros((width, nq, n_k), dtype=np.int32) for n in _COUNTS}
        out["n_auth"] = np.zeros((width, nq), dtype=np.int32)
        self._file.flush()
        for eval_index, parts in self._blocks:
            q = len(eval_index)
            for s, e, path, offset in parts:
                lo, hi = max(start, s), min(stop, e)
                at = offset
                for name in ("n_auth", *_COUNTS):
                    per = q * (1 if name == "n_auth" else n_k)
                    if lo < hi:
                        skip = at + 4 * (lo - s) * per
                        values = np.fromfile(path, np.int32, count=(hi - lo) * per, offset=skip)
                        shape = (hi - lo, q) if name == "n_auth" else (hi - lo, q, n_k)
                        out[name][lo - start : hi - start, eval_index] = values.reshape(shape)
                    at += 4 * (e - s) * per
        return out

    def close(self) -> None:
        self._file.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __del__(self) -> None:  # the evaluation is gone: so is its spill
        with contextlib.suppress(Exception):
            self.close()


@dataclass(eq=False)
class BlockResult:
    """What one block of principals sends back: its tallies, and its counts only when this
    process keeps them (``counts``) or the name of the file the worker wrote them to (``part``).
    """

    start: int
    stop: int
    tallies: Tallies
    counts: dict[str, np.ndarray] | None = None
    part: str | None = None


def reduce_block(
    start: int,
    stop: int,
    tables: tuple[np.ndarray, np.ndarray | None],
    *,
    keep: str,
    part_prefix: str | None,
    **inputs: Any,
) -> BlockResult:
    """`arecall.evaluate.kernels.pair_counts` of principals ``start … stop − 1``, reduced where
    they were computed: tallied, and kept (``keep="counts"``), written to a part file
    (``keep="file"``, named from ``part_prefix``) or dropped (``keep="none"``).

    Pure and deterministic: a block rerun after its worker died returns the same tallies and
    writes the same file, so the caller, which keeps one result per block, counts it once.
    """
    counts = pair_counts(start, stop, tables, **inputs)
    tallies = Tallies(len(inputs["ks"]))
    tallies.add(np.zeros(0, dtype=np.int64), counts)
    if keep == "counts":
        return BlockResult(start, stop, tallies, counts=counts)
    if keep == "file":
        assert part_prefix is not None
        path = f"{part_prefix}-{start}-{stop}.bin"
        with atomic_path(path) as tmp, open(tmp, "wb") as out:
            for name in ("n_auth", *_COUNTS):
                out.write(np.ascontiguousarray(counts[name], dtype=np.int32).tobytes())
        return BlockResult(start, stop, tallies, part=path)
    return BlockResult(start, stop, tallies)


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
