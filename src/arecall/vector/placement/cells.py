"""The cells: a coarse k-means partition, the probe of a query's local selectivity, and the test
that a filter is independent of the geometry.

For a principal, the share of authorized documents in each cell is one ``bincount``; for a
query, the authorized share of its nearest cells estimates how many authorized documents its
graph neighbourhood holds — the evidence a size-only rule lacks when the filter follows the
data. When every cell's count is within binomial noise of the global share
(:meth:`Cells.independent`), the probe could only return the global share, noisily, and the
plan skips it (the direct plan, `arecall.vector.placement.direct`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from arecall.vector._checks import check_positive_int
from arecall.vector.index import packed_mask
from arecall.vector.placement.settings import DEFAULTS, PlannerSettings

__all__ = ["Cells", "coarse_cells", "probe_width"]


@dataclass(frozen=True)
class Cells:
    """A coarse k-means partition of the corpus: the planner's cheap local-selectivity probe.

    For a principal, the share of authorized documents in each cell is one ``bincount``; for a
    query, the authorized share of its ``probe`` nearest cells estimates how many authorized
    documents its graph neighbourhood holds — the evidence a size-only rule lacks when the
    filter follows the data.
    """

    centroids: npt.NDArray[np.float32]
    assignment: npt.NDArray[np.int64]
    sizes: npt.NDArray[np.int64]
    probe: int = DEFAULTS.probe_max
    sample: npt.NDArray[np.int64] | None = field(default=None, repr=False)
    """Sorted ids of the documents :meth:`looks_independent` counts (``None``: all of them)."""
    settings: PlannerSettings = field(default=DEFAULTS, repr=False, compare=False)
    landmarks: npt.NDArray[np.int64] | None = field(default=None, repr=False, compare=False)
    """Per cell, the member nearest its centroid (-1 for an empty cell): real documents whose
    scores bound from below what a query's walk should have found (:meth:`landmark_best`)."""
    landmark_vectors: npt.NDArray[np.float32] | None = field(
        default=None, repr=False, compare=False
    )
    """The landmarks' vectors, one row per non-empty cell (in ``landmarks`` order)."""
    metric: str = "ip"
    """The index's metric, which :meth:`landmark_best` scores the landmarks in: its answers'
    scores are inner products (``ip``) or ``-||q - d||^2`` (``l2``)."""

    @property
    def n_cells(self) -> int:
        """Number of cells."""
        return int(self.centroids.shape[0])

    def authorized(
        self, mask: npt.NDArray[np.bool_], ids: npt.NDArray[np.int64] | None = None
    ) -> npt.NDArray[np.int64]:
        """Authorized documents per cell (one ``bincount``; ``ids``: ``mask``'s documents, where
        the caller listed them — the cheapest way in when there are few).

        Past ``settings.gather_below`` of the documents (an eighth), counting with
        ``weights=mask`` beats gathering the authorized cells first (the gather's branches
        mispredict: at a million and 50%, 9 ms against 3.5 ms); below it the gather is the
        smaller read.
        """
        n_allowed = np.count_nonzero(mask) if ids is None else ids.size
        if n_allowed < self.settings.gather_below * mask.size:
            listed = self.assignment[mask if ids is None else ids]
            return np.bincount(listed, minlength=self.n_cells).astype(np.int64)
        counted = np.bincount(self.assignment, weights=mask, minlength=self.n_cells)
        return counted.astype(np.int64)

    def counts(
        self,
        mask: npt.NDArray[np.bool_],
        ids: npt.NDArray[np.int64] | None = None,
        packed: npt.NDArray[np.uint8] | None = None,
    ) -> npt.NDArray[np.int64]:
        """:meth:`authorized`, remembered per mask (by its packed bits, ``packed`` where the
        caller packed them already, as :meth:`looks_independent`'s verdict is): the calls of
        one principal share the count, so a one-query call does not pay a whole bincount over
        the documents each time.

        Examples
        --------
        >>> cells = Cells(np.eye(2, dtype=np.float32), np.array([0, 0, 1, 1]), np.array([2, 2]))
        >>> mask = np.array([True, False, True, True])
        >>> cells.counts(mask).tolist(), cells.counts(mask) is cells.counts(mask.copy())
        ([1, 2], True)
        """
        key = (packed_mask(mask) if packed is None else packed).tobytes()
        kept = self._counts
        got = kept.get(key)
        if got is None:
            got = self.authorized(mask, ids)
            got.flags.writeable = False
            if len(kept) >= self.settings.verdicts_kept:
                kept.clear()
            kept[key] = got
        return got

    @cached_property
    def _counts(self) -> dict[bytes, npt.NDArray[np.int64]]:
        """:meth:`counts` by packed mask (at most ``verdicts_kept``)."""
        return {}

    def looks_independent(
        self, mask: npt.NDArray[np.bool_], packed: npt.NDArray[np.uint8] | None = None
    ) -> bool:
        """:meth:`independent` on the counts of the ``sample`` (all documents without one);
        ``packed``: the mask's bits, where the caller packed them for its walks already.

        Counting every document costs 3–6 ms at a million (a gather and a ``bincount`` of up
        to n), 15% of a 30% pushdown; the sample (64 documents a cell) costs a tenth of a
        millisecond. It still sees what matters — a filter that follows the data moves whole
        cells to 0 or 1 — and a filter it passes that is dependent at a finer scale is caught
        on the searched lists themselves (the pooled-share check) and in the certificate's
        audit of each answer (`arecall.vector.placement.certification`).

        Examples
        --------
        >>> cells = coarse_cells(np.random.default_rng(0).normal(size=(4000, 4)).astype(np.float32),
        ...                      16, sample_per_cell=8)
        >>> cells.sample.size, cells.looks_independent(np.arange(4000) % 3 == 0)
        (128, True)
        >>> cells.looks_independent(cells.assignment < 4)
        False
        """
        # The verdict is the mask's alone, so a principal's next batch reuses it: keyed by the
        # packed bits themselves (a dict compares the bytes on a hit, so no collision can hand
        # one filter another's verdict, and a mask changed in place is a new key). The lookup
        # is 8 us at 100,000 documents against the count's 43 (71 against 116 at 1,000,000).
        key = (packed_mask(mask) if packed is None else packed).tobytes()
        verdicts = self._verdicts
        verdict = verdicts.get(key)
        if verdict is None:
            docs, starts, sizes = self._by_cell
            # One gather in cell order and one sum per cell's run: at 100,000 vectors the
            # count by bincount(weights=) read and wrote a megabyte (sample ids, their cells,
            # float weights), 1% of a 50% pushdown on its own and as much again in the graph
            # search after it, whose cache it had emptied. This reads 0.4 MB, in half the time.
            counts = np.add.reduceat(mask[docs], starts, dtype=np.int64)
            verdict = self.independent(counts, sizes=sizes)
            if len(verdicts) >= self.settings.verdicts_kept:
                verdicts.clear()
            verdicts[key] = verdict
        return verdict

    @cached_property
    def _verdicts(self) -> dict[bytes, bool]:
        """:meth:`looks_independent`'s verdicts by packed mask (at most ``verdicts_kept``)."""
        return {}

    @cached_property
    def _by_cell(self) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp], npt.NDArray[np.int64]]:
        """The counted documents ordered by cell, where each cell's run starts, and its
        length — cells with none counted left out (their count is 0 against an expected 0,
        which :meth:`independent` always passes)."""
        docs = np.arange(self.assignment.size) if self.sample is None else self.sample
        cells = self.assignment[docs]
        sizes = np.bincount(cells, minlength=self.n_cells).astype(np.int64)
        order = np.argsort(cells, kind="stable")
        filled = np.flatnonzero(sizes)
        starts = (np.cumsum(sizes) - sizes)[filled]
        return docs[order].astype(np.intp), starts.astype(np.intp), sizes[filled]

    def independent(
        self,
        authorized: npt.NDArray[np.int64],
        z: float | None = None,
        *,
        sizes: npt.NDArray[np.int64] | None = None,
    ) -> bool:
        """Whether the filter looks independent of the cells: every cell's authorized count
        within ``z`` binomial standard deviations (default ``settings.independence_z``, 5) of
        its size × the global share (``sizes``: the cells' sizes, or the sampled documents per
        cell when the counts are a sample's).

        Then every query's local selectivity is the global share up to sampling noise, and
        :meth:`local_selectivity` (a distance to every centroid per query, about a tenth of a
        graph search) has nothing to add: ``auto`` skips it. ``z = 5`` keeps the chance that
        an independent filter over a thousand cells fails the test below 10⁻³; a filter that
        follows the data moves whole cells to 0 or 1 and fails it by orders of magnitude.

        Examples
        --------
        >>> cells = Cells(np.eye(2, dtype=np.float32), np.zeros(400, np.int64) + np.arange(400) % 2,
        ...               np.array([200, 200]))
        >>> cells.independent(np.array([101, 99])), cells.independent(np.array([200, 0]))
        (True, False)
        """
        z = self.settings.independence_z if z is None else z
        n = self.sizes if sizes is None else sizes
        s = float(authorized.sum()) / max(1.0, float(n.sum()))
        sd = np.sqrt(np.maximum(n * s * (1.0 - s), 1e-12))
        return bool((np.abs(authorized - n * s) <= z * sd + 1.0).all())

    def local_selectivity(
        self,
        queries: npt.NDArray[np.float32],
        mask: npt.NDArray[np.bool_],
        authorized: npt.NDArray[np.int64] | None = None,
    ) -> npt.NDArray[np.float64]:
        """Per query, the authorized share of its ``probe`` nearest cells and of any cell tied
        with the last of them (``authorized``: :meth:`authorized` of ``mask``, when the caller
        has it already).

        One matrix product, one ``partition`` for each query's ``probe``-th best score, and a
        second small product that sums the authorized documents and the documents of the cells
        at or above it: no argsort of the nearest cells, whose order the share ignores. At
        1,000 queries × 632 cells that is 4.6 ms against 8.9 ms for ``argpartition`` and
        ``lexsort``, and the probe is priced against the scan (``settings.probe_distances``).

        Examples
        --------
        >>> cells = Cells(np.eye(2, dtype=np.float32), np.array([0, 0, 1, 1]), np.array([2, 2]), 1)
        >>> cells.local_selectivity(np.array([[1, 0], [0, 1]], np.float32),
        ...                         np.array([True, False, False, False])).tolist()
        [0.5, 0.0]
        """
        if authorized is None:
            authorized = self.authorized(mask)
        n_q, n_cells = queries.shape[0], self.n_cells
        p = min(self.probe, n_cells)
        # The counts summed in float32 are exact integers below 2^24 documents.
        dtype: type[np.floating[Any]] = np.float32 if int(self.sizes.sum()) < 2**24 else np.float64
        counts: npt.NDArray[np.floating[Any]] = np.stack([authorized, self.sizes], axis=1).astype(
            dtype
        )
        out = np.empty(n_q, dtype=np.float64)
        block = self.settings.block_rows
        for start in range(0, n_q, block):
            score = queries[start : start + block] @ self._centroid_columns
            score -= self._half_norm
            kth = np.partition(score, n_cells - p, axis=1)[:, n_cells - p]
            near: npt.NDArray[np.floating[Any]] = (score >= kth[:, None]).astype(dtype)
            summed = np.asarray(near @ counts, dtype=np.float64)
            out[start : start + score.shape[0]] = summed[:, 0] / np.maximum(summed[:, 1], 1.0)
        return out

    def landmark_best(
        self, queries: npt.NDArray[np.float32], mask: npt.NDArray[np.bool_] | None = None
    ) -> npt.NDArray[np.float64]:
        """Per query, the best score of an authorized landmark (``-inf`` where none is, or
        where the cells have no landmarks): a score some authorized document reaches, so a
        walk whose best answer scores lower never reached the query's neighbourhood.

        Examples
        --------
        >>> x = np.array([[1, 0], [0.9, 0.1], [0, 1], [0.1, 0.9]], np.float32)
        >>> cells = coarse_cells(x, 2, iterations=2)
        >>> cells.landmark_best(np.array([[1, 0]], np.float32)).round(2).tolist()
        [1.0]
        >>> cells.landmarks.tolist()  # each cell's member nearest its centroid (ties: lowest id)
        [0, 2]
        >>> cells.landmark_best(np.array([[1, 0]], np.float32), np.arange(4) >= 2).tolist()
        [0.0]
        """
        if self.landmark_vectors is None or not self.landmark_vectors.shape[0]:
            return np.full(queries.shape[0], -np.inf)
        scores = queries @ self._landmark_columns
        if self.metric == "l2":  # the index's score: -||q - l||^2 = 2 q.l - ||q||^2 - ||l||^2
            scores *= 2.0
            scores -= np.einsum("ij,ij->i", queries, queries)[:, None]
            scores -= self._landmark_norms[None, :]
        if mask is not None:
            scores = np.where(mask[self._landmark_ids], scores, -np.inf)
        return np.asarray(scores.max(axis=1), dtype=np.float64)

    def outscored(
        self,
        queries: npt.NDArray[np.float32],
        best: npt.NDArray[np.floating[Any]],
        mask: npt.NDArray[np.bool_] | None = None,
    ) -> npt.NDArray[np.bool_]:
        """Per query, whether an authorized landmark outscores its walk's best answer ``best``
        by more than rounding: the walk never reached the query's neighbourhood (the audit's
        *stuck*, and the calibration's).

        A landmark is a document, so where the best answer is that landmark, or a copy of it,
        the two scores differ only in how BLAS and faiss rounded them: the last bit decided a
        retry or a scan. Above ``settings.landmark_tie`` of the scores' scale (``||q||·||l||``
        for ``ip``, ``||q||^2 + ||l||^2`` for ``l2``, the largest landmark's) a landmark
        outscores the answer.

        Examples
        --------
        >>> x = np.array([[1, 0], [0.9, 0.1], [0, 1], [0.1, 0.9]], np.float32)
        >>> cells = coarse_cells(x, 2, iterations=2)
        >>> q = np.array([[1, 0], [1, 0]], np.float32)
        >>> cells.outscored(q, np.array([1.0 - 1e-9, 0.5])).tolist()  # a tie, then a miss
        [False, True]
        """
        if self.landmark_vectors is None or not self.landmark_vectors.shape[0]:
            return np.zeros(queries.shape[0], dtype=bool)  # no landmark outscores anything
        landmark = self.landmark_best(queries, mask)
        q_norm = np.einsum("ij,ij->i", queries, queries).astype(np.float64)
        l_norm = self._landmark_norm_max
        scale = q_norm + l_norm if self.metric == "l2" else np.sqrt(q_norm * l_norm)
        return np.asarray(landmark > best + self.settings.landmark_tie * scale, dtype=bool)

    def stuck(
        self,
        queries: npt.NDArray[np.float32],
        best: npt.NDArray[np.floating[Any]],
        deep: npt.NDArray[np.bool_],
        mask: npt.NDArray[np.bool_] | None = None,
    ) -> npt.NDArray[np.bool_]:
        """Per query, whether its walk got stuck: a ``deep`` answer (below the calibration's
        deep threshold) that an authorized landmark outscores (:meth:`outscored`, asked of the
        deep rows only). One test for the audit of a batch and for the calibration's own walks.

        Examples
        --------
        >>> x = np.array([[1, 0], [0.9, 0.1], [0, 1], [0.1, 0.9]], np.float32)
        >>> cells = coarse_cells(x, 2, iterations=2)
        >>> q = np.array([[1, 0], [1, 0]], np.float32)
        >>> cells.stuck(q, np.array([0.5, 0.5]), np.array([True, False])).tolist()
        [True, False]
        """
        out = np.zeros(queries.shape[0], dtype=bool)
        rows = np.flatnonzero(deep)
        if rows.size:
            out[rows] = self.outscored(queries[rows], best[rows], mask)
        return out

    def nearest(self, queries: npt.NDArray[np.float32]) -> npt.NDArray[np.int64]:
        """Each query's nearest cell (L2 to the centroids; ties: lower id).

        Examples
        --------
        >>> cells = Cells(np.eye(2, dtype=np.float32), np.array([0, 0, 1, 1]), np.array([2, 2]))
        >>> cells.nearest(np.array([[0.9, 0.2], [0.1, 0.8]], np.float32)).tolist()
        [0, 1]
        """
        score = queries @ self._centroid_columns - self._half_norm
        return np.asarray(np.argmax(score, axis=1), dtype=np.int64)

    @cached_property
    def _landmark_ids(self) -> npt.NDArray[np.int64]:
        """The landmarks that exist (one per non-empty cell), in ``landmark_vectors`` order."""
        marks = np.zeros(0, dtype=np.int64) if self.landmarks is None else self.landmarks
        return marks[marks >= 0]

    @cached_property
    def _landmark_norms(self) -> npt.NDArray[np.float32]:
        """Each landmark's squared norm."""
        assert self.landmark_vectors is not None
        marks = self.landmark_vectors
        return np.asarray(np.einsum("ij,ij->i", marks, marks))

    @cached_property
    def _landmark_norm_max(self) -> float:
        """The largest landmark's squared norm: the tie test's scale, read once."""
        return float(self._landmark_norms.max())

    @cached_property
    def _landmark_columns(self) -> npt.NDArray[np.float32]:
        """The landmarks' vectors as contiguous columns: OpenBLAS multiplies a few queries by
        them in a third to half the time it takes with the rows' transposed view (at 1,024
        landmarks × 128 and 3 deep rows, 73 µs against 186 cold after a walk). From two rows
        up the products are the same to the bit; a single row's may differ by a rounding step
        (~2·10⁻⁷ of the scores' scale, against the tie test's ``settings.landmark_tie``)."""
        assert self.landmark_vectors is not None
        return np.ascontiguousarray(self.landmark_vectors.T)

    @cached_property
    def _centroid_columns(self) -> npt.NDArray[np.float32]:
        """The centroids as contiguous columns, for the probe's and :meth:`nearest`'s products
        (as :attr:`_landmark_columns`)."""
        return np.ascontiguousarray(self.centroids.T)

    @cached_property
    def _half_norm(self) -> npt.NDArray[np.float32]:
        """Half each centroid's squared norm: ``q·c − ‖c‖²/2`` ranks cells as −‖q − c‖² does."""
        return np.asarray(0.5 * np.einsum("ij,ij->i", self.centroids, self.centroids))


def _nearest_cell(
    x: npt.NDArray[np.float32], centroids: npt.NDArray[np.float32], block: int
) -> npt.NDArray[np.int64]:
    """The nearest centroid (L2) of each row (ties: lower id), in blocks of ``block`` rows."""
    half_norm = 0.5 * np.einsum("ij,ij->i", centroids, centroids)
    out = np.empty(x.shape[0], dtype=np.int64)
    for start in range(0, x.shape[0], block):
        score = x[start : start + block] @ centroids.T - half_norm
        out[start : start + score.shape[0]] = np.argmax(score, axis=1)
    return out


def coarse_cells(
    vectors: npt.NDArray[np.float32],
    n_cells: int | None = None,
    *,
    probe: int | None = None,
    iterations: int | None = None,
    seed: int = 0,
    sample_per_cell: int | None = None,
    settings: PlannerSettings = DEFAULTS,
    metric: str = "ip",
) -> Cells:
    """k-means cells of ``vectors`` (numpy, seeded, so equal inputs give equal cells).

    ``n_cells`` defaults to ``2·sqrt(n)`` clipped to [1, 1024] (``settings.cells_per_sqrt_n``,
    ``cells_max``) — finer than the topic structure of most corpora, so a cell rarely straddles
    two groups the filter treats differently; centroids are fitted on a sample of at most
    ``fit_per_cell`` (40) points per cell, then every document is assigned. ``probe``,
    ``iterations`` and ``sample_per_cell`` default to ``settings``' ``probe_max``,
    ``kmeans_iterations`` and ``verdict_per_cell``. ``metric``: the index's, which the
    landmarks are scored in (:meth:`Cells.landmark_best`).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> cells = coarse_cells(rng.normal(size=(400, 4)).astype(np.float32), 8)
    >>> cells.n_cells, int(cells.sizes.sum())
    (8, 400)
    """
    probe = settings.probe_max if probe is None else probe
    iterations = settings.kmeans_iterations if iterations is None else iterations
    per_cell = settings.verdict_per_cell if sample_per_cell is None else sample_per_cell
    n = vectors.shape[0]
    most = settings.cells_max
    c = int(min(most, max(1, round(settings.cells_per_sqrt_n * math.sqrt(n)))))
    c = check_positive_int("n_cells", min(c if n_cells is None else n_cells, n))
    rng = np.random.default_rng([seed, 31])
    sample = vectors[np.sort(rng.choice(n, size=min(n, settings.fit_per_cell * c), replace=False))]
    centroids = sample[np.sort(rng.choice(sample.shape[0], size=c, replace=False))].copy()
    block = settings.block_rows
    for _ in range(iterations):
        labels = _nearest_cell(sample, centroids, block)
        counts = np.bincount(labels, minlength=c)
        sums = np.zeros_like(centroids, dtype=np.float64)
        np.add.at(sums, labels, sample)
        filled = counts > 0
        centroids[filled] = (sums[filled] / counts[filled, None]).astype(np.float32)
    assignment = _nearest_cell(vectors, centroids, block)
    sizes = np.bincount(assignment, minlength=c).astype(np.int64)
    # The documents Cells.looks_independent counts: all of them unless a sample is much smaller.
    wanted = per_cell * c
    counted = np.sort(rng.choice(n, size=wanted, replace=False)) if 2 * wanted <= n else None
    marks = _landmarks(vectors, centroids, assignment, block)
    return Cells(
        np.ascontiguousarray(centroids),
        assignment,
        sizes,
        probe,
        counted,
        settings,
        marks,
        np.ascontiguousarray(vectors[marks[marks >= 0]]),
        metric,
    )


def _landmarks(
    vectors: npt.NDArray[np.float32],
    centroids: npt.NDArray[np.float32],
    assignment: npt.NDArray[np.int64],
    block: int,
) -> npt.NDArray[np.int64]:
    """Per cell, the member nearest its centroid (lowest id on a tie; -1 for an empty cell)."""
    gap = np.empty(vectors.shape[0], dtype=np.float64)
    for start in range(0, vectors.shape[0], block):
        stop = min(vectors.shape[0], start + block)
        off = vectors[start:stop] - centroids[assignment[start:stop]]
        gap[start:stop] = np.einsum("ij,ij->i", off, off)
    order = np.lexsort((np.arange(gap.size), gap, assignment))
    firsts = np.flatnonzero(np.r_[True, np.diff(assignment[order]) != 0])
    marks = np.full(centroids.shape[0], -1, dtype=np.int64)
    marks[assignment[order[firsts]]] = order[firsts]
    return marks


def probe_width(ef: int, cells: Cells) -> int:
    """How many nearest cells a query's probe averages over: as many as hold the ``ef``
    candidates of its first walk, at least 1 and at most ``settings.probe_max`` (4).

    The walk's list is what must hold k authorized documents, so its local selectivity is
    measured at the list's scale. Four cells of ~160 documents against a list of 77 at 100,000
    clustered vectors read a query from a never-authorized cluster beside half-authorized
    ones as ℓ ≈ 0.5: its walk failed to certify and was scanned after all (8 of 200 queries
    at 50%). Against the authorized share of each query's 300 exact nearest
    neighbours the nearest cell's share erred by 0.000 on both clustered corpora and by 0.02
    on the low-rank half-space at 50%, four cells' by 0.02-0.04 and 0.03.

    Examples
    --------
    >>> cells = Cells(np.eye(2, dtype=np.float32), np.zeros(300, np.int64) + np.arange(300) % 2,
    ...               np.array([150, 150]))
    >>> probe_width(77, cells), probe_width(200, cells), probe_width(5000, cells)
    (1, 2, 4)
    """
    per_cell = float(cells.sizes.sum()) / max(1, cells.n_cells)
    most = cells.settings.probe_max
    return int(min(most, max(1, math.ceil(ef / max(per_cell, 1.0)))))
