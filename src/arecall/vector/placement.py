"""Where the authorization filter goes: ``post``, ``pushdown``, ``pre`` — and ``auto``.

* ``post`` searches the top-k unfiltered, then drops what the principal may not use. It is
  what most stores do by default, and it under-returns: at 1% selectivity about 0.1 of 10.
* ``pushdown`` hands faiss an ``IDSelectorBitmap`` of the principal's documents; HNSW walks
  through rejected nodes but collects only accepted ones. It fixes post-filtering at moderate
  selectivity, but ``efSearch`` counts rejected candidates too, so a very selective filter
  starves it: on verity's corpus at M=16, efSearch=64 and 1% it returns 9.54/10, recall 0.658.
* ``pre`` scans the authorized subset exhaustively. Always right — it *is* the oracle — and
  as slow as a scan of that subset.
* ``auto`` chooses per principal — and, with a calibrated planner, per query, from evidence —
  between a certified graph search and the scan.

The ``auto`` rule
-----------------
Pushdown keeps recall at selectivity s if its candidate list still holds about as many
*authorized* candidates as an unfiltered search would: ``ef(s) = ceil(ef_base / s)``, clipped
to [k, n]. ``ef_base`` is not a guess: :func:`calibrate_auto` measures the index's unfiltered
recall against the exact scan on held-out queries for efSearch = k, then 16·2^(j/4) (16, 20,
23, 27, 32, 39, 46, …) and takes the smallest value reaching ``target_recall + margin``. The
ladder is fine on purpose: a calibrated efSearch is at most 19% above the one that just
suffices (a √2 ladder left up to 41%, which cost ``auto`` up to 1.3× the best fixed
pushdown). (Filtered search at the scaled ef has
measured at least the unfiltered recall at ef_base; the benchmark checks it again at 1M.)

Cost is counted in distance computations. An exact scan of the subset costs ``n·s``; a
pushdown search costs ``graph_cost × ndis(ef(s))``, where ``ndis`` (distances per query) is
measured by faiss's own counters during calibration — on the whole ladder, up to the efSearch
at which one graph search costs a full scan — interpolated log-log, and ``graph_cost`` is how
much dearer a graph distance is than a BLAS-batched scan distance (random memory access, heap
upkeep). Measured at 1M × 128 on this 2-core box: a scan runs 5–9·10⁷ distances/s, an HNSW
search 3–7·10⁶, 11–18× fewer; the default is 16. ``auto``
scans when ``n·s ≤ graph_cost × ndis(ef(s))`` and pushes down otherwise — so it scans small
principals (cheap, exact) and pushes down for large ones (sublinear). If no efSearch reaches the
target recall before a graph search costs as much as scanning everything, pushdown can never
pay and ``auto`` always scans; that is the honest answer on isotropic Gaussian data at a
million vectors, where HNSW reaches only recall 0.64 at efSearch 4,096 (94,000 distances per
query, already the cost of a scan).

That rule (``AutoPlanner.plan``) assumes the filter is independent of the vectors. It is the
prior, and the whole plan when a scan is cheaper even than an unfiltered-quality graph search
(``graph_cost × ndis(ef_base) ≥ n·s``) or when the graph never pays (``ef_base`` is None).

Evidence, not size (issue 11)
-----------------------------
Authorization usually follows the data (a team's documents cluster by topic), and then the
size rule is wrong in both directions: a query far from every authorized document needs a far
larger efSearch than ``ef_base / s`` (measured: recall 0.06 at s = 30% with 200 clusters and
queries from never-authorized ones), a query inside an authorized cluster a smaller one. So
``auto`` plans each query from evidence about *that query and that filter*:

1. **Local selectivity.** ``calibrate_auto`` also fits coarse k-means cells (``Cells``, about
   2·√n); for a principal the authorized share of each cell is one ``bincount``, and a
   query's local selectivity ℓ is the authorized share of its 4 nearest cells — a few hundred
   scan-priced distances. When every cell's count is within binomial noise of the global
   share (``Cells.independent``: the filter ignores the geometry at the cells' scale), the
   probe could only return the global share, noisily, so it is skipped and ℓ = s. It is
   skipped too, and every query scanned, where it cannot pay: a walk beats the scan only
   above some ℓ, and if the cells authorized that densely hold too few documents for the
   probe's saving (their share × (scan − cheapest walk)) to cover its cost, the answer is
   the scan whatever the probe says (``Plan.graph_pays_near``).
   ``calibrate_auto`` measures pushdown under uniform filters of shares 2^(-j/2) (½, 0.35,
   ¼, …) on the same ladder; the recall at a share between two is interpolated in log share
   (``AutoPlanner.filtered_recall``), and ``ef_needed(ℓ)`` is the smallest efSearch reaching
   ``target_recall + margin`` there. A query's first efSearch is the ladder value from
   ``ef_needed(ℓ)`` up that is cheapest in expectation — ``D(e) + P[Binomial(e, ℓ) < k]·D(2e)``,
   since a list with fewer than k authorized cannot be certified and is searched again — and a
   query with ℓ = 0, or whose graph search would cost more than scanning the principal's
   documents, is scanned. A principal with every document authorized gets one plain graph
   search at ``ef_base``, certified by the unfiltered calibration — or, where the calibration
   found it cheaper, a plain search at a smaller efSearch and a second one at 4× it for the
   queries whose k-th hit scores below the calibration queries' 5% or 10% quantile: the
   queries far from their neighbours, where a walk misses most (``_second_look``).
2. **A certificate from the search itself.** faiss's filtered HNSW walk visits exactly the
   nodes the unfiltered walk visits (the selector only gates what is collected), so the
   unfiltered top-ef list at efSearch ef, filtered, *is* pushdown(ef)'s answer whenever it
   holds k authorized documents — and it also says where they sit: if the k-th authorized
   document has rank r, the walk had ``ef·k/r`` candidates per wanted result, the same
   budget an unfiltered search at efSearch ``ef·k/r`` has. The calibrated unfiltered recall
   at that effective efSearch, or the uniform-filter recall at efSearch ef and the authorized
   share the list actually held, whichever is higher, is the query's certified recall; a
   query with fewer than k authorized in its list is uncertified (recall 0).
   For a filter independent of the cells whose searched lists hold, pooled, the share its
   size predicts (``_pooled_share_fits``), a list's own count is binomial noise: every query
   is then priced at the global share, and a query whose list held fewer than k authorized is
   answered by pushdown at the same efSearch — the search the uniform calibration measured.
   So for such a filter only a strided sample of the batch (16 queries, or an eighth) reads
   its list, to run that check; if it passes, the rest go straight to pushdown at the
   efSearch where the interpolated calibration curve crosses the target
   (``AutoPlanner.ef_direct``), with no second walk for short lists — unless the planner
   measured one list walk of the whole batch cheaper (``AutoPlanner.lists_pay``: it skips
   the selector's check at every scored node, and a second faiss call), and then every query
   reads its list in one call and only the short ones are pushed down.
   That target keeps the margin the batch needs, not a fixed one: ``target_recall`` plus
   2.58 standard errors of the batch's mean against the calibration's, from the per-query
   spread the calibration measured (``AutoPlanner.aim``), within [``margin``/2, ``margin``].
3. **Escalate once, then scan.** If the mean certified recall over the batch is below
   ``target_recall + margin/2``, the fewest lowest-certified queries are searched once more
   at the efSearch their evidence asks for (at least twice the first), if that is still
   cheaper than a scan; whatever still falls short is answered by the exact scan. Scanned
   queries count as recall 1, so the batch's certified mean meets the goal by construction,
   and k is returned whenever k documents are authorized.

The ``Plan`` carries the evidence — the efSearch range, how many queries were scanned or
escalated, the mean local selectivity, the certified recall and the estimated cost against a
scan — and its string is the ``plan`` column of the experiment's rows, e.g.
``pushdown ef=91..258 x64, scan x136 (local s=0.32; certified recall 0.995; cost 0.85x scan)``.
What the certificate rests on is the calibration: held-out queries from the documents'
distribution, recall measured against the exact scan. ``benchmarks/bench_adversarial.py``
measures the result on corpora built to break the size rule (`arecall.vector.adversarial`).

Everything in a plan is deterministic (counts, not timings), so the table is reproducible.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache, partial
from typing import Any, Literal

import faiss
import numpy as np
import numpy.typing as npt
from scipy import special

from arecall.core.errors import ArecallError
from arecall.vector._checks import check_k, check_mask, check_positive_int
from arecall.vector._timing import clock, interleaved
from arecall.vector.config import SEARCH_PLACEMENTS, IndexConfig
from arecall.vector.index import Hits, VectorIndex, _top_k

__all__ = [
    "DEFAULT_CALIBRATION_QUERIES",
    "DEFAULT_GRAPH_COST",
    "AutoPlanner",
    "Cells",
    "Plan",
    "answer",
    "auto",
    "calibrate_auto",
    "check_placements",
    "coarse_cells",
    "measure_graph_cost",
    "measure_graph_costs",
    "place",
    "post",
    "pre",
    "pushdown",
    "synthetic_queries",
]

_faiss: Any = faiss  # hnsw_stats is missing from faiss's bundled stubs

#: Cost of one graph-traversal distance relative to one batched-scan distance (see module doc).
DEFAULT_GRAPH_COST = 16.0

#: Held-out queries ``auto`` is calibrated on. Per-query recall is heavy-tailed on clustered
#: data (a few clusters' queries miss most), so a hundred queries can miss the tail: on five
#: draws of 100 at 100,000 clustered vectors ef_base came out 46 to 216, and at 46 the scored
#: queries' recall was 0.924. Five draws of 400, with the second look (:func:`_second_look`),
#: returned 0.962–0.969 on them.
DEFAULT_CALIBRATION_QUERIES = 400

#: Standard errors of a batch's mean recall that :meth:`AutoPlanner.aim` keeps above the
#: target: the one-sided 99.5% point of the normal distribution (2.58). The promise holds for
#: every cell of a benchmark, not for most: at 2.33 (99%) a 1,000,000-vector run's 100
#: low-rank queries, harder than the held-out ones (a plain search certified at 0.980 gave
#: them 0.967), came back at recall 0.955 and 0.957 at 50% and 30%, aimed at 0.968. At 3,
#: 200 queries at 100,000 vectors would keep nearly the whole margin (efSearch 33 at 50%,
#: against 34 with it and 32 at 2.58).
_MARGIN_Z = float(special.ndtri(0.995))


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


@dataclass(frozen=True)
class Plan:
    """What ``auto`` decided for one principal's batch, and the evidence it decided on.

    ``method`` is ``exact`` when every query was scanned and ``pushdown`` when any query was
    answered from the graph; ``ef_search`` is then the largest efSearch searched. The evidence
    fields are filled by the per-query planner (``auto`` with a calibrated planner) and stay at
    their defaults for a plan decided from the filter's size alone (:meth:`AutoPlanner.plan`).
    """

    method: Literal["exact", "pushdown"]
    ef_search: int | None
    n_allowed: int
    cost_exact: float
    cost_pushdown: float | None
    n_fallback: int = 0
    """Queries answered by the exact scan although the plan is ``pushdown``."""
    n_queries: int = 0
    ef_min: int | None = None
    """Smallest efSearch a query was answered from (``ef_search`` is the largest)."""
    n_escalated: int = 0
    """Queries searched a second time at a larger efSearch (evidence said the first fell short)."""
    local_selectivity: float | None = None
    """Mean over queries of the authorized share of the query's nearest coarse cells."""
    predicted_recall: float | None = None
    """Mean recall the calibration predicts from each answered query's rank evidence (1 for
    scanned queries): the certificate ``auto`` checks against ``target_recall``."""
    cost_auto: float | None = None
    """Estimated distances per query of everything ``auto`` ran, probes and fallbacks included."""
    n_probed: int | None = None
    """Set when ``auto`` probed only a sample of the queries and scanned the batch: no sampled
    query sat where a walk could pay."""
    pilot: tuple[int, int] | None = None
    """(certified, walked) of the pilot: the most promising queries, walked first when the
    filter follows the data; the rest walk only where that share says a walk pays."""
    graph_pays_near: float | None = None
    """Set when ``auto`` scanned without probing: the share of the documents in cells whose
    authorized share is high enough for a graph walk to beat the scan — too few for the probe
    (about two scan distances per cell and query, ``_PROBE_DISTANCES``) to pay for itself."""

    def __str__(self) -> str:
        if self.method == "exact":
            if self.graph_pays_near is not None:
                return (
                    f"scan (no probe: a walk beats the scan only near "
                    f"{self.graph_pays_near:.1%} of the documents)"
                )
            if self.local_selectivity is None:
                return "scan"
            if self.n_probed is not None:
                return (
                    f"scan (local s={self.local_selectivity:.2f} on {self.n_probed} probed: "
                    "no walk can pay)"
                )
            if self.pilot is not None:
                return (
                    f"scan (local s={self.local_selectivity:.2f}; pilot walks certified "
                    f"{self.pilot[0]}/{self.pilot[1]})"
                )
            return f"scan (local s={self.local_selectivity:.2f}: no graph plan cheaper)"
        if self.local_selectivity is None and self.predicted_recall is None:
            extra = f" (+{self.n_fallback} scanned)" if self.n_fallback else ""
            return f"pushdown ef={self.ef_search}{extra}"
        graph = self.n_queries - self.n_fallback
        efs = (
            f"ef={self.ef_search}"
            if self.ef_min == self.ef_search
            else f"ef={self.ef_min}..{self.ef_search}"
        )
        parts = [f"pushdown {efs} x{graph}"]
        if self.n_fallback:
            parts.append(f"scan x{self.n_fallback}")
        evidence = []
        if self.local_selectivity is not None:
            evidence.append(f"local s={self.local_selectivity:.2f}")
        if self.pilot is not None:
            evidence.append(f"pilot {self.pilot[0]}/{self.pilot[1]} certified")
        if self.n_escalated:
            evidence.append(f"{self.n_escalated} escalated")
        if self.predicted_recall is not None:
            evidence.append(f"certified recall {self.predicted_recall:.3f}")
        if self.cost_auto is not None:
            evidence.append(f"cost {self.cost_auto / max(self.cost_exact, 1.0):.2f}x scan")
        return ", ".join(parts) + " (" + "; ".join(evidence) + ")"


_VERDICTS_KEPT = 64  # masks whose independence verdict Cells remembers: 8 MB at 10⁶ documents


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
    probe: int = 4
    sample: npt.NDArray[np.int64] | None = field(default=None, repr=False)
    """Sorted ids of the documents :meth:`looks_independent` counts (``None``: all of them)."""

    @property
    def n_cells(self) -> int:
        """Number of cells."""
        return int(self.centroids.shape[0])

    def authorized(
        self, mask: npt.NDArray[np.bool_], ids: npt.NDArray[np.int64] | None = None
    ) -> npt.NDArray[np.int64]:
        """Authorized documents per cell (one ``bincount``; ``ids``: ``mask``'s documents, where
        the caller listed them — the cheapest way in when there are few).

        Past an eighth of the documents, counting with ``weights=mask`` beats gathering the
        authorized cells first (the gather's branches mispredict: at a million and 50%, 9 ms
        against 3.5 ms); below it the gather is the smaller read.
        """
        n_allowed = np.count_nonzero(mask) if ids is None else ids.size
        if 8 * n_allowed < mask.size:
            listed = self.assignment[mask if ids is None else ids]
            return np.bincount(listed, minlength=self.n_cells).astype(np.int64)
        counted = np.bincount(self.assignment, weights=mask, minlength=self.n_cells)
        return counted.astype(np.int64)

    def looks_independent(self, mask: npt.NDArray[np.bool_]) -> bool:
        """:meth:`independent` on the counts of the ``sample`` (all documents without one).

        Counting every document costs 3–6 ms at a million (a gather and a ``bincount`` of up
        to n), 15% of a 30% pushdown; the sample (64 documents a cell) costs a tenth of a
        millisecond. It still sees what matters — a filter that follows the data moves whole
        cells to 0 or 1 — and a filter it passes that is dependent at a finer scale is caught
        on the searched lists themselves (``_pooled_share_fits``).

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
        key = np.packbits(mask).tobytes()
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
            if len(verdicts) >= _VERDICTS_KEPT:
                verdicts.clear()
            verdicts[key] = verdict
        return verdict

    @cached_property
    def _verdicts(self) -> dict[bytes, bool]:
        """:meth:`looks_independent`'s verdicts by packed mask (at most ``_VERDICTS_KEPT``)."""
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
        z: float = 5.0,
        *,
        sizes: npt.NDArray[np.int64] | None = None,
    ) -> bool:
        """Whether the filter looks independent of the cells: every cell's authorized count
        within ``z`` binomial standard deviations of its size × the global share (``sizes``:
        the cells' sizes, or the sampled documents per cell when the counts are a sample's).

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
        ``lexsort``, and the probe is priced against the scan (``_PROBE_DISTANCES``).

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
        for start in range(0, n_q, 16384):
            score = queries[start : start + 16384] @ self.centroids.T
            score -= self._half_norm
            kth = np.partition(score, n_cells - p, axis=1)[:, n_cells - p]
            near: npt.NDArray[np.floating[Any]] = (score >= kth[:, None]).astype(dtype)
            summed = np.asarray(near @ counts, dtype=np.float64)
            out[start : start + score.shape[0]] = summed[:, 0] / np.maximum(summed[:, 1], 1.0)
        return out

    @cached_property
    def _half_norm(self) -> npt.NDArray[np.float32]:
        """Half each centroid's squared norm: ``q·c − ‖c‖²/2`` ranks cells as −‖q − c‖² does."""
        return np.asarray(0.5 * np.einsum("ij,ij->i", self.centroids, self.centroids))


def _nearest_cell(
    x: npt.NDArray[np.float32], centroids: npt.NDArray[np.float32]
) -> npt.NDArray[np.int64]:
    """The nearest centroid (L2) of each row (ties: lower id), in blocks of 16,384 rows."""
    half_norm = 0.5 * np.einsum("ij,ij->i", centroids, centroids)
    out = np.empty(x.shape[0], dtype=np.int64)
    for start in range(0, x.shape[0], 16384):
        score = x[start : start + 16384] @ centroids.T - half_norm
        out[start : start + score.shape[0]] = np.argmax(score, axis=1)
    return out


def coarse_cells(
    vectors: npt.NDArray[np.float32],
    n_cells: int | None = None,
    *,
    probe: int = 4,
    iterations: int = 8,
    seed: int = 0,
    sample_per_cell: int = 64,
) -> Cells:
    """k-means cells of ``vectors`` (numpy, seeded, so equal inputs give equal cells).

    ``n_cells`` defaults to ``2·sqrt(n)`` clipped to [1, 1024] — finer than the topic structure
    of most corpora, so a cell rarely straddles two groups the filter treats differently;
    centroids are fitted on a sample of at most 40 points per cell, then every document is
    assigned.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> cells = coarse_cells(rng.normal(size=(400, 4)).astype(np.float32), 8)
    >>> cells.n_cells, int(cells.sizes.sum())
    (8, 400)
    """
    n = vectors.shape[0]
    c = int(min(1024, max(1, round(2 * math.sqrt(n))))) if n_cells is None else n_cells
    c = check_positive_int("n_cells", min(c, n))
    rng = np.random.default_rng([seed, 31])
    sample = vectors[np.sort(rng.choice(n, size=min(n, 40 * c), replace=False))]
    centroids = sample[np.sort(rng.choice(sample.shape[0], size=c, replace=False))].copy()
    for _ in range(iterations):
        labels = _nearest_cell(sample, centroids)
        counts = np.bincount(labels, minlength=c)
        sums = np.zeros_like(centroids, dtype=np.float64)
        np.add.at(sums, labels, sample)
        filled = counts > 0
        centroids[filled] = (sums[filled] / counts[filled, None]).astype(np.float32)
    assignment = _nearest_cell(vectors, centroids)
    sizes = np.bincount(assignment, minlength=c).astype(np.int64)
    # The documents Cells.looks_independent counts: all of them unless a sample is much smaller.
    wanted = sample_per_cell * c
    sample = np.sort(rng.choice(n, size=wanted, replace=False)) if 2 * wanted <= n else None
    return Cells(np.ascontiguousarray(centroids), assignment, sizes, probe, sample)


def _probe_width(ef: int, cells: Cells) -> int:
    """How many nearest cells a query's probe averages over: as many as hold the ``ef``
    candidates of its first walk, at least 1 and at most 4.

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
    >>> _probe_width(77, cells), _probe_width(200, cells), _probe_width(5000, cells)
    (1, 2, 4)
    """
    per_cell = float(cells.sizes.sum()) / max(1, cells.n_cells)
    return int(min(4, max(1, math.ceil(ef / max(per_cell, 1.0)))))


_Curve = tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]
"""(log efSearch, recall) points of one calibrated share."""

_Table = tuple[
    npt.NDArray[np.float64],
    npt.NDArray[np.float64],
    npt.NDArray[np.float64],
    npt.NDArray[np.float64],
]
"""(shares descending, the union grid of log efSearch, each share's values on it, each share's
first log efSearch) — what :func:`_lookup` reads."""


def _curve_table(
    unfiltered: Sequence[tuple[int, float]], filtered: Sequence[tuple[float, int, float]]
) -> _Table:
    """:func:`_lookup`'s table of calibrated points: unfiltered (efSearch, value) and filtered
    (share, efSearch, value), each share's curve on one grid of log efSearch."""
    shares = [1.0]
    curves: list[_Curve] = []
    if unfiltered:
        curves.append(
            (
                np.log([float(e) for e, _ in unfiltered]),
                np.array([r for _, r in unfiltered], dtype=np.float64),
            )
        )
    else:  # nothing measured: the unfiltered search is taken as exact (predicted_recall)
        curves.append((np.zeros(1), np.ones(1)))
    for share in sorted({g for g, _, _ in filtered}, reverse=True):
        points = sorted((e, r) for g, e, r in filtered if g == share)
        shares.append(share)
        curves.append(
            (
                np.log([float(e) for e, _ in points]),
                np.array([r for _, r in points], dtype=np.float64),
            )
        )
    grid = np.unique(np.concatenate([le for le, _ in curves]))
    values = np.stack(
        [np.interp(grid, le, r, left=0.0 if i else r[0]) for i, (le, r) in enumerate(curves)]
    )
    firsts = np.array([le[0] if i else -np.inf for i, (le, _) in enumerate(curves)])
    return np.array(shares, dtype=np.float64), grid, values, firsts


def _lookup(table: _Table, ef: npt.ArrayLike, share: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """A calibrated value at efSearch ``ef`` and ``share`` (:meth:`AutoPlanner.filtered_recall`
    says how: linear in log efSearch, 0 before a filtered curve's first point, flat past its
    last; between two calibrated shares linear in log share; 0 below the smallest)."""
    efs = np.asarray(ef, dtype=np.float64)
    x = np.broadcast_to(np.asarray(share, dtype=np.float64), efs.shape).ravel()
    shares, grid, values, firsts = table
    log_ef = np.log(np.maximum(efs, 1.0)).ravel()
    # Each curve is linear in log efSearch between the union of all calibrated points (a
    # superset of its own), 0 before its first point (the unfiltered one: its first value)
    # and flat past the last: one table lookup instead of an interp per curve per call.
    j = np.clip(np.searchsorted(grid, log_ef, side="right") - 1, 0, grid.size - 1)
    j1 = np.minimum(j + 1, grid.size - 1)
    span = grid[j1] - grid[j]
    w = np.clip(np.where(span > 0, (log_ef - grid[j]) / np.where(span > 0, span, 1.0), 0), 0, 1)

    def curve(i: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        v = values[i, j] + w * (values[i, j1] - values[i, j])
        return np.asarray(np.where(log_ef < firsts[i], 0.0, v), dtype=np.float64)

    out = np.where(x >= 1.0, curve(np.zeros(x.shape, np.int64)), 0.0)
    if shares.size > 1:
        # shares descend from 1.0; lo_i is the first calibrated share ≤ x, hi_i the one above
        lo_i = np.clip(np.searchsorted(-shares, -x, side="left"), 1, shares.size - 1)
        hi_i = lo_i - 1
        lo, hi = shares[lo_i], shares[hi_i]
        t = np.log(np.maximum(x, lo) / lo) / np.log(hi / lo)
        v_lo = curve(lo_i)
        out = np.where((x >= lo) & (x < hi), v_lo + t * (curve(hi_i) - v_lo), out)
    return np.asarray(out, dtype=np.float64).reshape(efs.shape)


@dataclass(frozen=True)
class AutoPlanner:
    """A calibrated per-principal planner (build it with :func:`calibrate_auto`).

    Attributes
    ----------
    n_docs, k : int
    ef_base : int or None
        Smallest calibrated efSearch reaching the target unfiltered recall; ``None`` means
        pushdown never pays on this index and every plan is an exact scan.
    ndis : tuple of (int, float)
        Measured (efSearch, mean distance computations per query), ascending, up to the
        efSearch at which a graph search costs a full scan.
    recall : tuple of (int, float)
        Measured (efSearch, unfiltered recall@k) on the calibration queries.
    graph_cost : float
    target_recall : float
    """

    n_docs: int
    k: int
    ef_base: int | None
    ndis: tuple[tuple[int, float], ...] = field(default=())
    recall: tuple[tuple[int, float], ...] = field(default=())
    graph_cost: float = DEFAULT_GRAPH_COST
    target_recall: float = 0.95
    margin: float = 0.02
    graph_costs: tuple[tuple[int, float], ...] = field(default=())
    """Measured (efSearch, graph_cost) pairs, ascending (:func:`measure_graph_costs`): one graph
    distance costs more at a large efSearch (bigger heaps, a walk that leaves the cache) — at a
    million vectors 21 scan distances at efSearch 64, 70–87 at 9,742. Empty: ``graph_cost`` at
    every efSearch (the reproducible default)."""
    cells: Cells | None = field(default=None, repr=False, compare=False)
    """Coarse cells for the local-selectivity probe (``None``: assume the global selectivity)."""
    filtered: tuple[tuple[float, int, float], ...] = field(default=())
    """Measured (share, efSearch, recall@k) of pushdown under *uniform* filters of that share
    (1/2, 1/4, …) on the calibration queries: what a search at efSearch delivers when a given
    share of its neighbourhood is authorized."""
    spread: tuple[tuple[float, int, float], ...] = field(default=())
    """Measured (share, efSearch, standard deviation of the per-query recall@k) at each point of
    ``recall`` (share 1.0) and ``filtered``: how far a batch's mean can fall from the
    calibration's (:meth:`aim`). Empty: unknown, and a direct pushdown keeps the whole margin."""
    n_calibration: int = 0
    """How many held-out queries the calibration measured (0: unknown)."""
    scan_slopes: tuple[tuple[float, float], ...] = field(default=())
    """Measured (share, slope), ascending (:func:`measure_graph_costs`): what one more query
    adds to a batch scan of that share of the documents, as a share of the batch's mean
    per-query cost. A scan streams the authorized vectors through memory once whatever the
    batch, so a query taken out of it to walk saves less than its mean share — with 200
    queries, 0.70–0.86 at 1/8 to 1/2 of 100,000 vectors, and 0.55–0.61 at a million (100
    queries). Empty: 1."""
    list_costs: tuple[tuple[int, float], ...] = field(default=())
    """Measured (efSearch, ratio), ascending (:func:`measure_graph_costs`): a batch's top-
    efSearch lists read in one unfiltered call, timed against a sample's lists and a pushdown
    of the rest at the same efSearch (:func:`_direct`) under a uniform half. The walks score
    the same nodes; the lists skip the selector's check at each and a second faiss call, and
    pay for a result heap efSearch deep — one list walk alone took 0.90x a pushdown at a
    million vectors and efSearch 32, 1.00x at 96, 1.03x at 384; 0.96x at 100,000 and 32
    (:meth:`lists_pay`). Empty: unknown, and only a sample reads its list."""
    plan_overhead: float = 0.0
    """Measured scan distances a plan for a filter that follows the data spends per call on its
    own bookkeeping — counting each cell's authorized documents, pricing, certifying, merging —
    beside its probes, walks and scans (:func:`measure_graph_costs`). At 100,000 vectors it
    measured about a million (3-4 ms) for 200 queries, a seventh of a 30% scan; left out of
    the price, a plan walking 64 queries and scanning 136 came to 0.99x the scan and ran
    1.35x. Bookkeeping is numpy on arrays of a batch's size, so it is priced per call, not
    per query. 0: unknown (the reproducible default)."""
    second_look: tuple[int, float, int, float, float, float] | None = field(default=None)
    """The unfiltered plan's second look (:func:`_second_look`): (efSearch first, k-th score
    threshold, efSearch again, share of the calibration queries below the threshold, recall of
    those above it at the first efSearch, recall of those below it at the second). ``None``:
    one plain search at ``ef_base``."""

    def filtered_recall(self, ef: npt.ArrayLike, share: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Calibrated pushdown recall at efSearch ``ef`` where ``share`` of the neighbourhood is
        authorized.

        Each calibrated share (1 = the unfiltered curve, then the uniform-filter shares of
        :func:`calibrate_auto`) gives a curve in log efSearch (held flat past its last point, 0
        before its first); between two calibrated shares the recall is interpolated in log share
        — recall grows smoothly with the share, and the grid is √2 apart — and below the
        smallest share measured it is 0 (unknown, so never certified).

        Examples
        --------
        >>> p = AutoPlanner(n_docs=1000, k=10, ef_base=16, recall=((10, 0.9), (32, 1.0)),
        ...                 filtered=((0.5, 16, 0.9), (0.5, 32, 0.96)))
        >>> np.round(p.filtered_recall([32, 32, 32, 16], [1.0, 0.5, 0.1, 0.7]), 3).tolist()
        [1.0, 0.96, 0.0, 0.92]
        """
        return _lookup(self._table, ef, share)

    def recall_spread(self, ef: npt.ArrayLike, share: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """The calibration queries' per-query standard deviation of recall@k at efSearch ``ef``
        and ``share``, interpolated like :meth:`filtered_recall` (1.0 where nothing was
        measured: the most a spread of recalls in [0, 1] can be, so the margin stays whole).

        Examples
        --------
        >>> p = AutoPlanner(n_docs=1000, k=10, ef_base=16, recall=((16, 0.98),),
        ...                 filtered=((0.5, 16, 0.9), (0.5, 32, 0.96)),
        ...                 spread=((1.0, 16, 0.05), (0.5, 16, 0.1), (0.5, 32, 0.06)))
        >>> np.round(p.recall_spread([16, 32, 24], [1.0, 0.5, 0.5]), 3).tolist()
        [0.05, 0.06, 0.077]
        """
        if not self.spread:
            return np.ones(np.broadcast_shapes(np.shape(ef), np.shape(share)))
        return _lookup(self._spread_table, ef, share)

    @cached_property
    def _table(self) -> _Table:
        """(shares descending, the union grid of log efSearch, each share's recall on it, each
        share's first log efSearch — −∞ for the unfiltered curve, held at its first value)."""
        return _curve_table(self.recall, self.filtered)

    @cached_property
    def _spread_table(self) -> _Table:
        """:attr:`_table` for the per-query spread (``spread``)."""
        unfiltered = [(e, v) for g, e, v in self.spread if g >= 1.0]
        return _curve_table(unfiltered, [p for p in self.spread if p[0] < 1.0])

    def ef_needed(
        self, share: npt.ArrayLike, *, between: bool = False, wanted: float | None = None
    ) -> npt.NDArray[np.float64]:
        """Smallest calibrated efSearch whose :meth:`filtered_recall` at ``share`` reaches
        ``wanted`` (default ``target_recall + margin``); ``ef_base / share`` where the
        calibration never reached it or measured no share that low.

        With ``between``, the efSearch between that one and the calibrated one below it where
        the interpolated recall (the same curve :meth:`filtered_recall` certifies with) crosses
        the goal: the calibration ladder is 19% a step, and a plan that must run within 10% of
        the best fixed efSearch cannot round up by a whole step.

        A ``wanted`` below the whole margin is reached sooner, and below ``ef_base`` too: from
        the first calibrated efSearch whose unfiltered recall reaches it (the crossing from the
        one below it, with ``between``), at share 1 as under any filter.

        Examples
        --------
        >>> p = AutoPlanner(n_docs=1000, k=10, ef_base=16, recall=((16, 0.98),),
        ...                 filtered=((0.5, 16, 0.9), (0.5, 32, 0.98)))
        >>> p.ef_needed([1.0, 0.7, 0.5, 0.1]).tolist()
        [16.0, 32.0, 32.0, 160.0]
        >>> np.round(p.ef_needed([0.5], between=True), 2).tolist()  # 0.97 = 7/8 of the way
        [29.34]
        >>> p = AutoPlanner(n_docs=1000, k=10, ef_base=32,
        ...                 recall=((10, 0.9), (16, 0.96), (32, 0.98)))
        >>> p.ef_needed([1.0]).tolist()  # the whole margin, 0.97: ef_base
        [32.0]
        >>> np.round(p.ef_needed([1.0], between=True, wanted=0.95), 2).tolist()
        [14.79]
        """
        shares = np.maximum(np.asarray(share, dtype=np.float64), 1e-12)
        base = float(self.ef_base or self.k)
        whole = min(1.0, self.target_recall + self.margin)
        if wanted is None:
            wanted = whole
        lowered = wanted < whole - 1e-12
        floor = base
        if lowered:
            # A goal below the calibration's own is reached sooner, unfiltered first: no filter
            # needs less than the first calibrated efSearch whose unfiltered recall reaches it.
            floor = next((float(e) for e, r in self.recall if r >= wanted - 1e-12), base)
            floor = min(floor, base)
        grid = sorted({float(e) for e, _ in self.recall} | {float(e) for _, e, _ in self.filtered})
        # Below a lowered floor, its rung below stays on the grid, unreached: the crossing
        # starts there.
        under = [e for e in grid if e < floor][-1:] if lowered else []
        grid = under + [e for e in grid if e >= floor] or [floor]
        efs = np.broadcast_to(np.array(grid), (*shares.shape, len(grid)))
        values = self.filtered_recall(efs, shares[..., None])
        reached = (values >= wanted - 1e-12) & (np.array(grid) >= floor)
        at = np.argmax(reached, axis=-1)
        first = np.array(grid)[at]
        if between:
            below = np.maximum(at - 1, 0)
            lo, hi = np.log(np.array(grid)[below]), np.log(first)
            r_lo = np.take_along_axis(values, below[..., None], axis=-1)[..., 0]
            r_hi = np.take_along_axis(values, at[..., None], axis=-1)[..., 0]
            t = np.clip((wanted - r_lo) / np.maximum(r_hi - r_lo, 1e-12), 0.0, 1.0)
            cross = np.exp(lo + t * (hi - lo))
            # A curve that starts at ``first`` (0 below its first point) is not linear there:
            # keep the crossing only where the certified curve confirms it.
            sure = self.filtered_recall(cross, shares) >= wanted - 1e-9
            first = np.where((at > 0) & sure, cross, first)
        out = np.where(reached.any(axis=-1), first, base / shares)
        # No filter needs more than ef_base; at the whole margin the grid starts there, so
        # share 1 gets ef_base itself.
        return np.asarray(np.where(shares >= 1.0, np.minimum(out, base), out), dtype=np.float64)

    def predicted_recall(self, ef: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """Calibrated unfiltered recall@k at (effective) efSearch ``ef``, log-interpolated.

        Examples
        --------
        >>> p = AutoPlanner(n_docs=1000, k=10, ef_base=32, recall=((10, 0.8), (40, 1.0)))
        >>> p.predicted_recall(np.array([10.0, 20.0, 80.0])).tolist()
        [0.8, 0.9, 1.0]
        """
        if not self.recall:
            return np.ones_like(ef, dtype=np.float64)
        log_efs, values = self._recall_curve
        return np.asarray(np.interp(np.log(np.maximum(ef, 1.0)), log_efs, values), dtype=np.float64)

    @cached_property
    def _recall_curve(self) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """:attr:`recall` as (log efSearch, recall) arrays, built once: ``auto`` certifies
        every batch by it."""
        return np.log([float(e) for e, _ in self.recall]), np.array([r for _, r in self.recall])

    @property
    def goal(self) -> float:
        """The batch's certified-recall goal, ``target_recall + margin/2``: what ``auto``
        escalates and scans to reach, half the calibration's margin kept against the gap
        between the held-out queries and the scored ones."""
        return min(1.0, self.target_recall + self.margin / 2)

    def aim(self, share: float, n_queries: int | None = None) -> float:
        """The calibrated recall a direct pushdown under a uniform filter of ``share`` aims at
        for a batch of ``n_queries``: ``target_recall`` plus the margin the calibration's own
        spread asks for, within [``margin``/2, ``margin``].

        A batch's mean recall differs from the calibration's by the noise of both samples:
        with per-query standard deviation σ (``recall_spread``, read where the curve crosses
        the goal), by σ·√(1/n_calibration + 1/n_queries); ``_MARGIN_Z`` (2.58) of those are
        kept. On 100,000 low-rank vectors σ is about 0.07: the margin comes out 0.015 for
        200 queries, and a uniform 50% filter is pushed down at efSearch 32 instead of 34 (100
        queries keep nearly all of it). On the clustered corpus σ is 0.16–0.25, and the whole
        margin (0.02, the gap once measured there between held-out and scored queries) stays.
        Without a batch size or a measured spread: the whole margin.

        Examples
        --------
        >>> p = AutoPlanner(n_docs=1000, k=10, ef_base=16, recall=((16, 0.98),),
        ...                 filtered=((0.5, 16, 0.9), (0.5, 32, 0.98)),
        ...                 spread=((1.0, 16, 0.05), (0.5, 16, 0.06), (0.5, 32, 0.06)),
        ...                 n_calibration=400)
        >>> p.aim(0.5), round(p.aim(0.5, 200), 3), p.aim(0.5, 1)
        (0.97, 0.963, 0.97)
        >>> p.ef_direct(0.5), p.ef_direct(0.5, 200)
        (30, 28)
        """
        whole = min(1.0, self.target_recall + self.margin)
        if n_queries is None or self.n_calibration <= 0 or not self.spread:
            return whole
        goal = self.goal
        at = float(self.ef_needed(np.array([share]), between=True, wanted=goal)[0])
        if float(self.filtered_recall(np.array([at]), share)[0]) < goal - 1e-9:
            return whole  # never reached at this share: no spread measured where it matters
        sd = float(self.recall_spread(np.array([at]), share)[0])
        noise = sd * math.sqrt(1.0 / self.n_calibration + 1.0 / max(1, n_queries))
        return float(min(whole, max(goal, self.target_recall + _MARGIN_Z * noise)))

    def ef_direct(self, share: float, n_queries: int | None = None) -> int:
        """The efSearch of a direct pushdown under a uniform filter of ``share`` for a batch of
        ``n_queries``: where the interpolated calibration curve crosses :meth:`aim`
        (``ef_needed(between=True)``), rounded up, within [k, n], and never below where the
        unfiltered curve crosses the same aim — share 1's own efSearch, the plain search of a
        batch with no filter: ``ef_base`` is that crossing at the whole margin only.

        The aim keeps half the margin at least, and the whole margin where the per-query
        recall is spread wide or the batch is small: on the clustered corpus the scored
        queries' recall ran 0.02 below the held-out queries' at the same efSearch (aimed at
        the batch's goal, 0.96, a plain search returned 0.940). Cached per share and batch
        size: ``auto`` asks on every call, and at 100,000 vectors the numpy arithmetic was 3%
        of the search.

        Examples
        --------
        >>> p = AutoPlanner(n_docs=1000, k=10, ef_base=16, recall=((16, 0.98),),
        ...                 filtered=((0.5, 16, 0.9), (0.5, 32, 0.98)))
        >>> p.ef_direct(0.5)  # 0.97 is 7/8 of the way from 0.9 to 0.98 in log ef
        30
        """

        def compute() -> int:
            wanted = self.aim(share, n_queries)
            cross, plain = self.ef_needed(np.array([share, 1.0]), between=True, wanted=wanted)
            lowest = math.ceil(float(plain) - 1e-9)  # no filter needs less than no filter
            return int(np.clip(max(math.ceil(float(cross) - 1e-9), lowest), self.k, self.n_docs))

        return int(self._remember(("direct", float(share), n_queries), compute))

    def direct_recall(self, share: float, n_queries: int | None = None) -> float:
        """The uniform-filter calibration's recall for pushdown at :meth:`ef_direct` (cached).

        Examples
        --------
        >>> p = AutoPlanner(n_docs=1000, k=10, ef_base=16, recall=((16, 0.98),),
        ...                 filtered=((0.5, 16, 0.9), (0.5, 32, 0.98)))
        >>> p.ef_direct(0.5), round(p.direct_recall(0.5), 3)
        (30, 0.973)
        """
        ef = float(self.ef_direct(share, n_queries))
        return float(
            self._remember(
                ("recall", float(share), n_queries),
                lambda: self.filtered_recall(np.array([ef]), share)[0],
            )
        )

    def lists_pay(self, ef: int, share: float) -> bool:
        """Whether, under a filter independent of the data authorizing ``share``, reading every
        query's top-``ef`` list costs less than a sample's lists and a pushdown of the rest at
        ``ef``: the measured :attr:`list_costs` ratio at ``ef`` (interpolated in log
        efSearch; never past the last measurement, where the deeper heap costs more than the
        selector saves), plus the chance that a list holds fewer than k authorized and is
        pushed down as well (``Binomial(ef, share) < k``, normal tail), plus ``_LIST_READ``
        for reading them — below 1. Cached per efSearch and share.

        The list's answer is the pushdown's (:func:`_read_lists`), so this decides the cost,
        never the result; and it certifies by rank too (:func:`_certified`).

        Examples
        --------
        >>> p = AutoPlanner(n_docs=10**6, k=10, ef_base=16, list_costs=((32, 0.9), (96, 1.0)))
        >>> p.lists_pay(38, 0.5), p.lists_pay(38, 0.25), p.lists_pay(128, 0.5)
        (True, False, False)
        """

        def compute() -> bool:
            if not self.list_costs or ef > self.list_costs[-1][0]:
                return False
            at = np.log([e for e, _ in self.list_costs])
            ratio = float(np.interp(math.log(max(ef, 1)), at, [c for _, c in self.list_costs]))
            mean = ef * share
            sd = math.sqrt(max(mean * (1.0 - share), 1e-12))
            p_short = float(special.ndtr((self.k - 0.5 - mean) / sd))
            return ratio + p_short + _LIST_READ < 1.0

        return bool(self._remember(("lists", int(ef), float(share)), compute))

    def _remember(self, key: tuple[Any, ...], compute: Any) -> Any:
        """``compute()``, once per key: answers that depend only on the (frozen) calibration
        and a key (a share or efSearch, and a batch size). Bounded: cleared past 4,096 entries."""
        memo = self._memo
        if key not in memo:
            if len(memo) >= 4096:
                memo.clear()
            memo[key] = compute()
        return memo[key]

    def _remember_many(
        self, tag: str, values: npt.NDArray[np.float64], compute: Any
    ) -> npt.NDArray[np.int64]:
        """:meth:`_remember` for many values at once: ``compute`` (vectorised) runs only on the
        values not remembered under ``tag`` yet."""
        memo = self._memo
        missing = np.array([x for x in values if (tag, float(x)) not in memo], dtype=np.float64)
        if missing.size:
            if len(memo) + missing.size > 4096:
                memo.clear()
            for x, answer in zip(missing, compute(missing), strict=True):
                memo[(tag, float(x))] = int(answer)
        return np.array([memo[(tag, float(x))] for x in values], dtype=np.int64)

    @cached_property
    def _memo(self) -> dict[tuple[Any, ...], Any]:
        """The store of :meth:`_remember` and :meth:`_remember_many`."""
        return {}

    def ef_at_least(self, ef: float) -> int:
        """The smallest efSearch on the planner's ladder that is ≥ ``ef``: ``ef_base``, then the
        calibration ladder ``ceil(16·2^(j/4))`` above it (so a calibrated efSearch maps to
        itself), clipped to [k, n].

        Examples
        --------
        >>> p = AutoPlanner(n_docs=10**6, k=10, ef_base=64)
        >>> p.ef_at_least(64), p.ef_at_least(65), p.ef_at_least(100), p.ef_at_least(108)
        (64, 77, 108, 108)
        """
        return int(self.ef_at_least_many(np.array([float(ef)]))[0])

    def ef_for(self, n_allowed: int) -> int:
        """efSearch for a principal with ``n_allowed`` documents: ``ceil(ef_base / s)``.

        Examples
        --------
        >>> AutoPlanner(n_docs=1000, k=10, ef_base=64).ef_for(100)  # s = 10%
        640
        """
        if self.ef_base is None:
            raise ArecallError("auto: this planner never pushes down (ef_base is None)")
        s = max(n_allowed, 1) / self.n_docs
        return int(min(self.n_docs, max(self.k, math.ceil(self.ef_base / s))))

    def distances_many(self, efs: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """:meth:`distances` for an array of efSearch values (vectorised, same numbers)."""
        efs = np.asarray(efs, dtype=np.float64)
        if not self.ndis:
            return np.full(efs.shape, float(self.n_docs))
        ladder = np.log([e for e, _ in self.ndis])
        costs = np.log([c for _, c in self.ndis])
        last_ef, last_cost = self.ndis[-1]
        inside = np.exp(np.interp(np.log(np.maximum(efs, 1.0)), ladder, costs))
        estimate = np.where(efs >= last_ef, last_cost * efs / last_ef, inside)
        return np.minimum(estimate, float(self.n_docs))

    def ef_at_least_many(self, efs: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """:meth:`ef_at_least` for an array (vectorised, same numbers)."""
        base = float(self.ef_base or self.k)
        want = np.maximum(np.asarray(efs, dtype=np.float64), 1.0)
        j = np.ceil(_STEPS * np.log2(want / 16.0) - 1e-9)
        # ceil() lifts each rung a little above 16·2^(j/4): the rung below may still reach.
        below = np.ceil(16.0 * 2 ** ((j - 1) / _STEPS) - 1e-9)
        out = np.where(below >= want, below, np.ceil(16.0 * 2 ** (j / _STEPS) - 1e-9))
        out = np.where(want <= base, base, out)
        return np.clip(out, self.k, self.n_docs).astype(np.int64)

    def walk_costs(self, efs: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """A graph search's cost at each efSearch, in scan distances: graph cost × distances.

        The graph cost is ``graph_cost``, or interpolated in log efSearch between the
        measured ``graph_costs`` (held constant past either end).

        Examples
        --------
        >>> p = AutoPlanner(n_docs=10**6, k=10, ef_base=64, ndis=((64, 1000.0), (256, 4000.0)),
        ...                 graph_cost=20.0, graph_costs=((64, 20.0), (256, 40.0)))
        >>> [round(c) for c in p.walk_costs([64, 128, 256])]
        [20000, 60000, 160000]
        """
        efs = np.asarray(efs, dtype=np.float64)
        if self.graph_costs:
            at = np.log([e for e, _ in self.graph_costs])
            per = np.interp(np.log(np.maximum(efs, 1.0)), at, [c for _, c in self.graph_costs])
        else:
            per = np.full(efs.shape, self.graph_cost)
        return np.asarray(per * self.distances_many(efs), dtype=np.float64)

    def walk_cost(self, ef: int) -> float:
        """:meth:`walk_costs` of one efSearch (cached: ``auto`` prices a few values per call)."""
        return float(
            self._remember(("walk", float(ef)), lambda: self.walk_costs(np.array([float(ef)]))[0])
        )

    def scan_slope(self, share: float) -> float:
        """:attr:`scan_slopes` at ``share``, interpolated in log share (held flat past either
        end; 1 where none were measured).

        Examples
        --------
        >>> p = AutoPlanner(n_docs=1000, k=10, ef_base=16, scan_slopes=((0.1, 0.9), (0.4, 0.7)))
        >>> p.scan_slope(0.05), p.scan_slope(0.2), p.scan_slope(1.0)
        (0.9, 0.8, 0.7)
        >>> AutoPlanner(n_docs=1000, k=10, ef_base=16).scan_slope(0.2)  # nothing measured
        1.0
        """
        if not self.scan_slopes:
            return 1.0
        at = np.log([g for g, _ in self.scan_slopes])
        slope = np.interp(np.log(max(share, 1e-12)), at, [v for _, v in self.scan_slopes])
        return float(slope)

    def distances(self, ef: int) -> float:
        """Estimated distance computations per query at ``ef`` (log-log interpolation, ≤ n).

        Examples
        --------
        >>> p = AutoPlanner(n_docs=10**6, k=10, ef_base=64, ndis=((64, 1000.0), (256, 4000.0)))
        >>> round(p.distances(128)), round(p.distances(512))
        (2000, 8000)
        """
        return float(self.distances_many(np.array([float(ef)]))[0])

    @cached_property
    def walk_cost_by_share(self) -> npt.NDArray[np.float64]:
        """The cost of a walk at the efSearch each local selectivity of ``_SHARE_GRID`` (1
        down to 2^-16) needs; cached, since ``auto`` compares it with every principal's scan."""
        return self.walk_costs(self.ef_at_least_many(self.ef_needed(_SHARE_GRID)))

    @cached_property
    def scan_below(self) -> float:
        """Principals with at most this many documents are always scanned: the cost of an
        unfiltered-quality graph search, ``graph_cost × ndis(ef_base)`` (∞ when ``ef_base`` is
        None). Cached: ``auto`` checks it on every call, and at 0.1% a scan takes < 1 ms.

        Examples
        --------
        >>> AutoPlanner(n_docs=10**6, k=10, ef_base=64, ndis=((64, 1000.0),)).scan_below
        16000.0
        """
        if self.ef_base is None:
            return math.inf
        return self.walk_cost(self.ef_base)

    def plan(self, n_allowed: int) -> Plan:
        """Choose exact-over-subset or pushdown for a principal with ``n_allowed`` documents.

        Examples
        --------
        >>> p = AutoPlanner(n_docs=10**6, k=10, ef_base=64, ndis=((64, 1200.0), (128, 2100.0)))
        >>> str(p.plan(1000)), str(p.plan(500_000))
        ('scan', 'pushdown ef=128')
        """
        cost_exact = float(n_allowed)
        if self.ef_base is None or n_allowed <= self.k:
            return Plan("exact", None, n_allowed, cost_exact, None)
        ef = self.ef_for(n_allowed)
        cost_push = self.walk_cost(ef)
        if cost_exact <= cost_push:
            return Plan("exact", None, n_allowed, cost_exact, cost_push)
        return Plan("pushdown", ef, n_allowed, cost_exact, cost_push)


def synthetic_queries(
    vectors: npt.NDArray[np.float32], n: int, seed: int = 0
) -> npt.NDArray[np.float32]:
    """Queries drawn from a Gaussian fitted to (a sample of) the documents.

    The fallback when no held-out queries exist. Documents themselves make flattering queries:
    each is a graph node whose links were chosen as its neighbours, so HNSW finds their
    neighbourhoods far more easily than a new point's (on verity's corpus, recall 0.89 against
    0.42 at efSearch=10). A fitted Gaussian keeps the documents' mean and covariance — their
    subspace, if they have one — without that advantage; unit-norm documents give unit-norm
    queries.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> synthetic_queries(rng.normal(size=(50, 4)).astype(np.float32), 3).shape
    (3, 4)
    """
    rng = np.random.default_rng(seed)
    n_docs = vectors.shape[0]
    rows = rng.choice(n_docs, size=min(n_docs, 10_000), replace=False)
    sample = vectors[np.sort(rows)].astype(np.float64)
    mean = sample.mean(axis=0)
    _, sv, vt = np.linalg.svd(sample - mean, full_matrices=False)
    scale = sv / math.sqrt(max(1, sample.shape[0] - 1))
    z = rng.normal(size=(n, scale.shape[0]))
    out = (mean + (z * scale) @ vt).astype(np.float32)
    if np.allclose(np.linalg.norm(sample, axis=1), 1.0, atol=1e-3):
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        out = out / np.where(norms == 0, 1, norms)
    return np.ascontiguousarray(out, dtype=np.float32)


def _sd(values: npt.NDArray[np.float64]) -> float:
    """The sample standard deviation (0 for fewer than two values)."""
    return float(np.std(values, ddof=1)) if values.size > 1 else 0.0


def _overlaps(hits: Hits, truth: Hits) -> npt.NDArray[np.float64]:
    """Each query's recall@k of ``hits`` against ``truth``."""
    pairs = zip(hits.rows(), truth.rows(), strict=True)
    return np.array([len(set(g) & set(t)) / max(1, len(t)) for g, t in pairs], dtype=np.float64)


def calibrate_auto(
    index: VectorIndex,
    k: int,
    *,
    queries: Any = None,
    target_recall: float = IndexConfig.target_recall,
    margin: float = 0.02,
    graph_cost: float = DEFAULT_GRAPH_COST,
    n_sample: int = DEFAULT_CALIBRATION_QUERIES,
    seed: int = 0,
) -> AutoPlanner:
    """Measure an index's recall and cost against efSearch and return an ``auto`` planner.

    Parameters
    ----------
    index : VectorIndex
    k : int
    queries : array_like, optional
        Held-out calibration queries from the query distribution (never the scored ones). When
        omitted, ``n_sample`` queries are drawn by :func:`synthetic_queries`.
    target_recall, margin : float
        Calibrate to ``target_recall + margin`` unfiltered recall@k.
    graph_cost : float
        Graph-distance cost relative to a scan distance (module docstring).
    n_sample, seed : int
        Number and seed of the synthetic queries used when ``queries`` is omitted.

    Returns
    -------
    AutoPlanner

    Examples
    --------
    >>> from arecall.vector.index import build_index
    >>> from arecall.vector.generator import generate
    >>> data = generate()
    >>> idx = build_index(data.vectors)
    >>> planner = calibrate_auto(idx, 10, queries=data.calibration_queries())
    >>> planner.ef_base is None  # at 2,000 documents a scan beats any graph walk
    True
    """
    k = check_k(k)
    n_sample = check_positive_int("n_sample", n_sample)
    if not 0.0 < target_recall <= 1.0:
        raise ArecallError(f"target_recall={target_recall!r}: must be in (0, 1]")
    if not 0.0 <= margin < 1.0:
        raise ArecallError(f"margin={margin!r}: must be in [0, 1)")
    if not graph_cost > 0:
        raise ArecallError(f"graph_cost={graph_cost!r}: must be positive")
    if index.kind == "exact":
        return AutoPlanner(
            index.n_docs,
            k,
            None,
            graph_cost=graph_cost,
            target_recall=target_recall,
            margin=margin,
        )

    if queries is None:
        q = synthetic_queries(index.vectors, n_sample, seed)
    else:
        q = index.check_queries(queries)
    truth = index.exact(q, k)
    wanted = min(1.0, target_recall + margin)

    ndis: list[tuple[int, float]] = []
    recall: list[tuple[int, float]] = []
    walks: dict[int, tuple[npt.NDArray[np.float64], npt.NDArray[np.float32]]] = {}
    spread: list[tuple[float, int, float]] = []
    ef_base: int | None = None
    stats = _faiss.cvar.hnsw_stats  # faiss's own distance counter
    for ef in _ladder(k, index.n_docs):
        stats.reset()
        hits = index.search(q, k, ef_search=ef)
        per_query = max(1.0, float(stats.ndis) / q.shape[0])
        each = _overlaps(hits, truth)
        r = float(np.mean(each))
        ndis.append((ef, per_query))
        recall.append((ef, r))
        spread.append((1.0, ef, _sd(each)))
        walks[ef] = (each, hits.scores[:, -1].copy())
        if ef_base is None and r >= wanted:
            ef_base = ef
        if graph_cost * per_query >= index.n_docs:
            # A graph search at this ef already costs a full scan: larger ef never pays, and
            # if the target is still unmet, pushdown never pays at all.
            break
        # Past ef_base the ladder continues for the cost curve only: filtered searches run at
        # ef_base / s, and measured distance counts grow sublinearly in ef.
    # The local-selectivity probe and the filtered grid are only worth measuring when
    # pushdown can pay at all.
    cells = None
    if ef_base is not None:
        cells = coarse_cells(index.vectors, seed=seed)
        cells = replace(cells, probe=_probe_width(ef_base, cells))
    filtered: list[tuple[float, int, float]] = []
    if ef_base is not None:
        draws = np.random.default_rng([seed, 41]).random(index.n_docs)
        planner_so_far = AutoPlanner(index.n_docs, k, ef_base, tuple(ndis), graph_cost=graph_cost)
        # Shares 2^(-j/2) — √2 apart, so interpolating between two (filtered_recall) is close.
        # A smaller share never needs a smaller efSearch, so each share's ladder starts two
        # steps below where the previous share reached the target.
        ladder = _ladder(k, index.n_docs)
        start = 0
        j = 1
        while (share := 2 ** (-j / 2)) * index.n_docs >= 4 * k:
            mask = draws < share
            n_allowed = int(mask.sum())
            if graph_cost * planner_so_far.distances(ef_base) >= n_allowed:
                break  # below this share the scan is always cheaper: nothing to plan
            exact = index.exact(q, k, mask)
            for i in range(start, len(ladder)):
                ef = ladder[i]
                each = _overlaps(index.search_filtered(q, k, mask, ef_search=ef), exact)
                r = float(np.mean(each))
                filtered.append((share, ef, r))
                spread.append((share, ef, _sd(each)))
                if r >= wanted:
                    start = max(0, i - 2)
                    break
                if graph_cost * planner_so_far.distances(ef) >= n_allowed:
                    break
            j += 1
    return AutoPlanner(
        n_docs=index.n_docs,
        k=k,
        ef_base=ef_base,
        ndis=tuple(ndis),
        recall=tuple(recall),
        graph_cost=float(graph_cost),
        target_recall=float(target_recall),
        margin=float(margin),
        cells=cells,
        filtered=tuple(filtered),
        spread=tuple(spread),
        n_calibration=int(q.shape[0]),
        second_look=None if ef_base is None else _second_look(walks, dict(ndis), ef_base, wanted),
    )


#: Shares of the calibration queries a second look may search again, and how much larger its
#: efSearch is than the first.
_SECOND_LOOK_SHARES = (0.05, 0.1)
_SECOND_LOOK_FACTOR = 4


def _second_look(
    walks: dict[int, tuple[npt.NDArray[np.float64], npt.NDArray[np.float32]]],
    ndis: dict[int, float],
    ef_base: int,
    wanted: float,
) -> tuple[int, float, int, float, float, float] | None:
    """The cheapest plain search with a second look that the calibration certifies, if it is
    cheaper than one plain search at ``ef_base`` (``None`` otherwise).

    A plain search misses mostly where a query sits far from its neighbours: at 100,000
    clustered vectors and efSearch 64, the tenth of the queries with the lowest k-th score held
    two thirds of the recall lost. So the queries whose k-th hit scores below a threshold — the
    calibration queries' 5% or 10% quantile at a smaller first efSearch — are searched again at
    4× that efSearch. The rest of the batch pays a cheaper walk, and a query set harder than
    the calibration's is not certified at the held-out queries' recall: more of it falls below
    the threshold and is searched again (1,000 clustered queries from all clusters: plain
    efSearch 64, calibrated at 0.973, returned 0.941 on 200 scored ones; a first walk at 46
    and a second look at 182 returned 0.969). ``walks``: per calibrated efSearch, each query's
    recall and k-th score; ``ndis``: distances per query at each efSearch.

    Examples
    --------
    >>> walks = {10: (np.array([1.0, 1.0, 1.0, 0.0]), np.array([0.9, 0.8, 0.7, 0.1])),
    ...          40: (np.array([1.0, 1.0, 1.0, 1.0]), np.array([0.9, 0.8, 0.7, 0.6]))}
    >>> _second_look(walks, {10: 100.0, 40: 300.0}, 40, 0.97)  # 100 + 300/4 < 300
    (10, 0.19, 40, 0.25, 1.0, 1.0)
    """
    efs = sorted(walks)
    best: tuple[float, tuple[int, float, int, float, float, float]] | None = None
    for lo in (e for e in efs if e < ef_base):
        hi = next((e for e in efs if e >= _SECOND_LOOK_FACTOR * lo), None)
        if hi is None:
            break
        (kept, score), (again, _) = walks[lo], walks[hi]
        for share in _SECOND_LOOK_SHARES:
            threshold = float(np.quantile(score, share))
            far = score < threshold
            flagged = float(far.mean())
            recall = float(np.mean(np.where(far, again, kept)))
            cost = ndis[lo] + flagged * ndis[hi]
            if recall >= wanted and cost < ndis[ef_base] and (best is None or cost < best[0]):
                r_near = float(kept[~far].mean()) if flagged < 1.0 else 1.0
                r_far = float(again[far].mean()) if flagged > 0.0 else 1.0
                best = (cost, (lo, threshold, hi, flagged, r_near, r_far))
    return None if best is None else best[1]


def measure_graph_cost(
    index: VectorIndex, queries: Any, k: int, *, ef_search: int | None = None, repeats: int = 3
) -> float:
    """Time one graph distance against one scan distance on this machine (``graph_cost``).

    ``DEFAULT_GRAPH_COST`` (16) was measured at a million vectors and 1,000-query batches; the
    ratio depends on the machine, the corpus size and the batch (a small batch makes the BLAS
    scan less efficient). Pass the result to :func:`calibrate_auto` to plan for this machine.
    Wall-clock, so not reproducible: the experiment keeps the fixed default. ``repeats``: the
    fewest timed calls of the scan and of the walk, interleaved (:func:`_graph_costs`).

    Examples
    --------
    >>> from arecall.vector.index import build_index
    >>> x = np.random.default_rng(0).normal(size=(2000, 16)).astype(np.float32)
    >>> measure_graph_cost(build_index(x), x[:50], 10) > 0
    True
    """
    q = index.check_queries(queries)
    k = check_k(k)
    if index.kind == "exact":
        return DEFAULT_GRAPH_COST
    ef = index._ef(ef_search, k)
    return _graph_costs(index, q, k, [ef], repeats)[ef]


def measure_graph_costs(
    index: VectorIndex, queries: Any, planner: AutoPlanner, *, repeats: int = 3
) -> AutoPlanner:
    """``planner`` with ``graph_costs`` measured on this machine at efSearch 64, 256, 1024, …
    and at ``ef_base``, up to the largest efSearch its calibration walked, the batch
    scan's ``scan_slopes`` at 1/8, 1/4 and 1/2 of the documents (:func:`_scan_slopes`), the
    batch's ``list_costs`` at those efSearch values up to 256 (:func:`_list_costs`), and the
    ``plan_overhead`` of a plan for a filter that follows the cells (:func:`_plan_overhead`).

    Wall-clock, like :func:`measure_graph_cost`: for benchmarks and for a user planning on
    their own machine, not for the reproducible experiment. One scan and every efSearch's walk
    are timed in one interleaved sequence (:func:`_graph_costs`).

    Examples
    --------
    >>> from arecall.vector.index import build_index
    >>> x = np.random.default_rng(0).normal(size=(2000, 16)).astype(np.float32)
    >>> idx = build_index(x)
    >>> p = measure_graph_costs(idx, x[:50], calibrate_auto(idx, 10, queries=x[:50]))
    >>> p.graph_costs[0][0] == p.ef_base, all(c > 0 for _, c in p.graph_costs)
    (True, True)
    >>> [g for g, _ in p.scan_slopes], all(0.25 <= v <= 1 for _, v in p.scan_slopes)
    ([0.125, 0.25, 0.5], True)
    """
    if planner.ef_base is None or not planner.ndis or index.kind == "exact":
        return planner
    q = index.check_queries(queries)
    top = planner.ndis[-1][0]
    looks = () if planner.second_look is None else planner.second_look[0:3:2]
    efs = sorted({planner.ef_base, *looks, *(e for e in (64, 256, 1024, 4096, 16384) if e <= top)})
    costs = _graph_costs(index, q, planner.k, efs, repeats)
    slopes = _scan_slopes(index, q, planner.k, _SLOPE_SHARES, repeats)
    lists = _list_costs(index, q, planner.k, [ef for ef in efs if ef <= _LIST_EF_MAX], repeats)
    measured = replace(
        planner,
        graph_costs=tuple((int(ef), costs[ef]) for ef in efs),
        scan_slopes=tuple(sorted(slopes.items())),
        list_costs=tuple((int(ef), ratio) for ef, ratio in sorted(lists.items())),
    )
    return replace(measured, plan_overhead=_plan_overhead(index, q, measured, _COST_MIN_TIME))


#: The largest efSearch at which :func:`measure_graph_costs` times a list walk against
#: pushdown: the list's heap grows with efSearch, and at a million vectors it already cost as
#: much as the selector saves at 96.
_LIST_EF_MAX = 256


def _list_costs(
    index: VectorIndex, q: npt.NDArray[np.float32], k: int, efs: Sequence[int], repeats: int
) -> dict[int, float]:
    """Per efSearch, the batch's two ways of answering a filter independent of the data, timed
    under a uniform half of the documents (fixed seed; the selector's cost depends on how many
    nodes it checks, not which): every query's top-efSearch list in one unfiltered call,
    against the sample's lists and a pushdown of the rest (:func:`_direct`) — fastest call
    each, in one interleaved sequence (:attr:`AutoPlanner.list_costs`)."""
    half = np.random.default_rng(43).random(index.n_docs) < 0.5
    listed = _sample(q.shape[0])
    sample = q[listed]
    rest = np.delete(q, listed, axis=0)

    def split(ef: int) -> None:
        index.search(sample, ef, ef_search=ef)
        if rest.shape[0]:  # a batch of 2 x _SAMPLE or fewer is all sample
            index.search_filtered(rest, k, half, ef_search=ef)

    fns: dict[str, Any] = {}
    for ef in efs:
        fns[f"lists {ef}"] = partial(index.search, q, int(ef), ef_search=int(ef))
        fns[f"split {ef}"] = partial(split, int(ef))
    first = {name: clock(fn)[1] for name, fn in fns.items()}
    best = interleaved(fns, first, _COST_MIN_TIME, repeats)
    return {int(ef): float(best[f"lists {ef}"] / max(best[f"split {ef}"], 1e-12)) for ef in efs}


class _TimedIndex(VectorIndex):
    """``index`` with the time spent in its searches and scans added up (``seconds``): what
    is left of a plan's time is the planner's own (:func:`_plan_overhead`). Timed where faiss
    and BLAS run (``_walk``, ``_scan_ids``), so the checks around them count as the plan's."""

    def __init__(self, index: VectorIndex) -> None:
        super().__init__(
            index.vectors,
            index.faiss_index,
            kind=index.kind,
            m=index.m,
            ef_construction=index.ef_construction,
            ef_search=index.ef_search,
        )
        self.seconds = 0.0

    def _timed(self, method: Callable[..., Hits], *args: Any, **kwargs: Any) -> Hits:
        start = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start

    def _walk(
        self,
        q: npt.NDArray[np.float32],
        k: int,
        ef: int,
        mask: npt.NDArray[np.bool_] | None = None,
    ) -> Hits:
        return self._timed(super()._walk, q, k, ef, mask)

    def _scan_ids(
        self, q: npt.NDArray[np.float32], k: int, ids: npt.NDArray[np.int64] | None
    ) -> Hits:
        return self._timed(super()._scan_ids, q, k, ids)


def _plan_overhead(
    index: VectorIndex, q: npt.NDArray[np.float32], planner: AutoPlanner, min_time: float
) -> float:
    """Scan distances per call that :func:`_certified`'s plan for a filter following the data
    spends on its own bookkeeping (:attr:`AutoPlanner.plan_overhead`): its own seconds on
    ``q`` (:func:`_plan_seconds`) in distances of a full batch scan timed between its calls,
    less the probes, which are priced apart. 0 without cells."""
    if planner.cells is None or q.shape[0] < 4:
        return 0.0
    own, scan = _plan_seconds(index, q, planner, min_time)
    per_distance = scan / (q.shape[0] * index.n_docs)
    probes = _PROBE_DISTANCES * planner.cells.n_cells * q.shape[0]
    return float(max(0.0, own / max(per_distance, 1e-15) - probes))


def _plan_seconds(
    index: VectorIndex, q: npt.NDArray[np.float32], planner: AutoPlanner, min_time: float
) -> tuple[float, float]:
    """(Seconds of a probing plan's call beside its searches and scans, seconds of a full
    scan of ``q``), fastest of at least five calls each, alternated, and ``min_time`` seconds.

    The plan is :func:`_certified`'s under a filter of every other cell (it follows the data
    whatever the corpus), with walks priced at a hundredth of their cost so that it probes
    every query and walks where the cells are authorized; its searches and scans are timed
    apart by :class:`_TimedIndex`. Needs ``planner.cells``."""
    assert planner.cells is not None
    mask = planner.cells.assignment % 2 == 0
    n_allowed = int(np.count_nonzero(mask))
    eager = replace(
        planner,
        graph_cost=planner.graph_cost / 100.0,
        graph_costs=tuple((ef, c / 100.0) for ef, c in planner.graph_costs),
        plan_overhead=0.0,
    )
    timed = _TimedIndex(index)
    own, scan = math.inf, math.inf
    spent, calls = 0.0, 0
    while calls < 5 or spent < min_time:
        timed.seconds = 0.0
        start = time.perf_counter()
        _certified(timed, q, planner.k, mask, eager, n_allowed)
        whole = time.perf_counter() - start
        start = time.perf_counter()
        index.exact(q, planner.k)
        this_scan = time.perf_counter() - start
        scan, own = min(scan, this_scan), min(own, whole - timed.seconds)
        spent += whole + this_scan
        calls += 1
    return own, scan


#: Shares of the documents at which :func:`measure_graph_costs` times a batch scan's slope.
_SLOPE_SHARES = (0.125, 0.25, 0.5)


def _scan_slopes(
    index: VectorIndex, q: npt.NDArray[np.float32], k: int, shares: Sequence[float], repeats: int
) -> dict[float, float]:
    """Per share, what the batch's second half adds to a scan of its first half, as a share
    of the whole batch's mean per-query cost (:attr:`AutoPlanner.scan_slopes`), clipped to
    [1/4, 1]; empty for a batch of fewer than 4 queries. Uniform masks from a fixed seed: the
    slope depends on how many vectors the scan streams, not on which."""
    n_q = q.shape[0]
    if n_q < 4:
        return {}
    half = n_q // 2
    draws = np.random.default_rng(43).random(index.n_docs)
    fns: dict[str, Any] = {}
    for share in shares:
        mask = draws < share
        fns[f"all {share}"] = partial(index.exact, q, k, mask)
        fns[f"half {share}"] = partial(index.exact, q[:half], k, mask)
    first = {name: clock(fn)[1] for name, fn in fns.items()}
    best = interleaved(fns, first, _COST_MIN_TIME, repeats)
    slopes = {}
    for share in shares:
        whole, part = best[f"all {share}"], best[f"half {share}"]
        slope = (whole - part) / ((n_q - half) * whole / n_q)
        slopes[float(share)] = float(np.clip(slope, 0.25, 1.0))
    return slopes


#: Seconds each contender of a graph-cost measurement spends at least, over its calls: a walk
#: at a small efSearch takes a few milliseconds, and the fastest of 5 such calls, not
#: interleaved, still moved the measured cost from 30 to 37 between measurements.
_COST_MIN_TIME = 0.2


def _graph_costs(
    index: VectorIndex, q: npt.NDArray[np.float32], k: int, efs: Sequence[int], repeats: int
) -> dict[int, float]:
    """Scan distances per graph distance at each of ``efs``: one scan and every walk timed in
    one interleaved sequence, fastest call each (:func:`arecall.vector._timing.interleaved`).

    Timed one efSearch after another, each against its own scan and best of one call, the cost
    at 100,000 low-rank vectors and efSearch 27 ranged 37-48 over five measurements, and a
    pushdown priced near the scan's cost became a scan at 1.9x the pushdown's time. In one
    sequence the machine's noise lands on every contender alike, and the scan is timed once.
    """
    repeats = check_positive_int("repeats", repeats)
    stats = _faiss.cvar.hnsw_stats
    ndis: dict[int, float] = {}
    fns: dict[str, Any] = {"scan": partial(index.exact, q, k)}
    first: dict[str, float] = {}
    index.exact(q[:4], k)  # warm-up
    for ef in efs:
        stats.reset()
        start = time.perf_counter()
        index.search(q, k, ef_search=ef)
        first[f"walk {ef}"] = time.perf_counter() - start
        ndis[ef] = max(1.0, float(stats.ndis))
        fns[f"walk {ef}"] = partial(index.search, q, k, ef_search=ef)
    start = time.perf_counter()
    index.exact(q, k)
    first["scan"] = time.perf_counter() - start
    best = interleaved(fns, first, _COST_MIN_TIME, repeats)
    per_scan = best["scan"] / (q.shape[0] * index.n_docs)
    return {
        ef: float(max(1e-3, (best[f"walk {ef}"] / ndis[ef]) / max(per_scan, 1e-15))) for ef in efs
    }


#: Steps per doubling of the efSearch ladders (calibration and planning): 2^(1/4) ≈ 1.19, so a
#: calibrated or planned efSearch is never more than 19% above the one that just suffices — a
#: √2 ladder left up to 41%, which cost ``auto`` up to 1.3× the best fixed pushdown.
_STEPS = 4


def _ladder(k: int, n: int) -> list[int]:
    """k, then 16·2^(j/4) (16, 20, 23, 27, 32, 39, 46, 54, 64, …) up to n.

    Examples
    --------
    >>> _ladder(10, 70)
    [10, 16, 20, 23, 27, 32, 39, 46, 54, 64, 70]
    """
    efs = [k]
    j = 0
    while (ef := math.ceil(16 * 2 ** (j / _STEPS) - 1e-9)) < n:
        if ef > k:
            efs.append(ef)
        j += 1
    if efs[-1] < n:
        efs.append(n)
    return efs


def auto(
    index: VectorIndex, queries: Any, k: int, allowed: Any, planner: AutoPlanner
) -> tuple[Hits, Plan]:
    """Answer each query by a certified graph search or the exact scan, whichever is cheaper.

    The per-query planner (module docstring, "Evidence, not size"): estimate each query's
    local selectivity, search the graph at the efSearch it implies when that is cheaper than a
    scan, certify each answer from the rank evidence the search itself returns, search again
    (once) at a larger efSearch or scan what the evidence cannot certify.

    Returns
    -------
    (Hits, Plan)

    Examples
    --------
    >>> from arecall.vector.index import build_index
    >>> idx = build_index(np.eye(4, dtype=np.float32))
    >>> planner = calibrate_auto(idx, 1)
    >>> hits, plan = auto(idx, [[1, 0.5, 0, 0]], 1, np.array([False, True, True, True]), planner)
    >>> hits.rows(), str(plan)
    ([[1]], 'scan')
    """
    mask = check_mask(allowed, index.n_docs)
    k = check_k(k)
    if planner.n_docs != index.n_docs or planner.k != k:
        raise ArecallError(
            f"auto: planner calibrated for n_docs={planner.n_docs}, k={planner.k}, "
            f"used with n_docs={index.n_docs}, k={k}"
        )
    q = index.check_queries(queries)
    n_allowed, ids = _count_allowed(mask, max(planner.scan_below, k))
    if n_allowed <= planner.scan_below or n_allowed <= k or index.kind == "exact":
        # Even an unfiltered-quality graph search costs more than a scan (or the graph never
        # pays): scan, without the probe — at 0.1% the scan itself takes well under 1 ms.
        hits = index.exact(q, k, mask) if ids is None else index._scan_ids(q, k, ids)
        return hits, Plan("exact", None, n_allowed, float(n_allowed), None)
    if n_allowed == index.n_docs:
        # No filter: the unfiltered calibration certifies a plain search directly.
        return _unfiltered(index, q, k, planner)
    return _certified(index, q, k, mask, planner, n_allowed, ids)


def _count_allowed(
    mask: npt.NDArray[np.bool_], few: float
) -> tuple[int, npt.NDArray[np.int64] | None]:
    """How many documents ``mask`` authorizes, and their ids if that is at most ``few`` (also
    where a sample took the mask for that sparse; ``None`` otherwise): only a scan needs them,
    and ``auto`` scans outright only at or below ``few``.

    A scan needs the ids, and listing them counts them on the way: on ``auto``'s scan branch
    a separate count first was 5% of the call at a million documents and 0.1%. Above ``few``
    a plan lists them only if it needs them (:func:`_certified`): at a million documents and
    10% the list took 0.56 ms, 3% of a pushdown that never reads it. Every 4,096th entry is
    looked at first: a mask that is clearly sparse is listed at once, any other counted
    (30 µs at a million) and listed only at or below ``few``. The sample decides only which
    is cheaper: a mask laid out to fool it costs a count, never a wrong answer.

    Examples
    --------
    >>> count, ids = _count_allowed(np.arange(10) % 4 == 0, 2)
    >>> count, ids.tolist()
    (3, [0, 4, 8])
    >>> _count_allowed(np.ones(2**17, dtype=bool), 1000)
    (131072, None)
    >>> count, ids = _count_allowed(np.arange(2**17) % 4096 == 0, 1000)  # fools the sample
    >>> count, ids.size
    (32, 32)
    """
    step = 4096
    if mask.size >= 16 * step and np.count_nonzero(mask[::step]) * step > few / 2 + 2 * step:
        n_allowed = int(np.count_nonzero(mask))
        if n_allowed > few:
            return n_allowed, None
    ids = np.flatnonzero(mask)
    return int(ids.size), ids


def _unfiltered(
    index: VectorIndex, q: npt.NDArray[np.float32], k: int, planner: AutoPlanner
) -> tuple[Hits, Plan]:
    """``auto`` when every document is authorized: a graph search where the unfiltered
    calibration curve crosses the batch's aim (:meth:`AutoPlanner.ef_direct` at share 1, the
    aim a pushdown under a filter keeps; no probe, no per-query certificate needed) — or,
    where the calibration found it cheaper, a smaller one with a second look at the queries
    whose k-th hit lies far (:func:`_second_look`).

    At 100,000 low-rank vectors and 200 queries the aim is 0.965, crossed at efSearch 24:
    ``ef_base``'s 27, certified at the whole margin (0.974), ran 1.27x the cheapest fixed
    efSearch that kept 0.95 on every fresh batch, and 24 runs 1.12-1.14x."""
    assert planner.ef_base is not None
    n_q = q.shape[0]
    ef = ef_min = planner.ef_direct(1.0, n_q)
    cost = planner.walk_cost(ef)
    look = planner.second_look
    again = np.zeros(0, dtype=np.int64)
    if look is not None and (
        planner.walk_cost(look[0]) + look[3] * planner.walk_cost(look[2]) < cost
    ):
        ef_min, threshold, ef, _, r_near, r_far = look
        hits = index.search(q, k, ef_search=ef_min)
        again = np.flatnonzero(hits.scores[:, -1] < threshold)
        if again.size:
            hits = hits.replace_rows(again, index.search(q[again], k, ef_search=ef))
        cost = planner.walk_cost(ef_min) + again.size / n_q * planner.walk_cost(ef)
        predicted = (again.size * r_far + (n_q - again.size) * r_near) / n_q
    else:
        hits = index.search(q, k, ef_search=ef)
        predicted = float(planner.predicted_recall(np.array([float(ef)]))[0])
    # A walk can miss nodes HNSW left unlinked (duplicates): a short answer is scanned.
    short = np.flatnonzero(hits.returned() < min(k, index.n_docs))
    if short.size:
        hits = hits.replace_rows(short, index.exact(q[short], k))
        predicted += short.size * (1.0 - predicted) / n_q
    plan = Plan(
        method="pushdown",
        ef_search=ef,
        n_allowed=index.n_docs,
        cost_exact=float(index.n_docs),
        cost_pushdown=cost,
        n_fallback=int(short.size),
        n_queries=n_q,
        ef_min=ef_min,
        local_selectivity=1.0,
        predicted_recall=predicted,
        n_escalated=int(again.size),
        cost_auto=cost + short.size * index.n_docs / n_q,
    )
    return hits, plan


def _certified(
    index: VectorIndex,
    q: npt.NDArray[np.float32],
    k: int,
    mask: npt.NDArray[np.bool_],
    planner: AutoPlanner,
    n_allowed: int,
    authorized_ids: npt.NDArray[np.int64] | None = None,
) -> tuple[Hits, Plan]:
    """The evidence-based plan of :func:`auto` (its preconditions checked by the caller;
    ``n_allowed``: the caller's count of ``mask``; ``authorized_ids``: the authorized
    documents, where the caller listed them)."""
    n_q = q.shape[0]
    assert planner.ef_base is not None
    searched: tuple[int, Hits] | None = None  # lists _direct read and handed back (ef, lists)
    independent = planner.cells is None or planner.cells.looks_independent(mask)
    if planner.cells is not None and independent and n_q > 2 * _SAMPLE:
        # First, before any other arithmetic: the direct plan must match a plain pushdown.
        done, searched = _direct(index, q, k, mask, n_allowed, planner, authorized_ids)
        if done is not None:
            return done
    scan_cost = float(n_allowed)
    # What walking a query saves when the others are scanned: a batch scan streams the
    # authorized vectors once whatever its size, so less than a query's mean share (at
    # 100,000 clustered vectors and 30%, a plan walking 64 queries and scanning 136, priced
    # per query at 0.98x the scan, ran 1.13x). A filter independent of the cells gives every
    # query the same plan, so there a walk is priced against the whole scan.
    saved = scan_cost * planner.scan_slope(n_allowed / index.n_docs)
    floor = 0.0  # the least local selectivity at which a walk may pay (below: scan)
    s_global = n_allowed / index.n_docs
    local = np.full(n_q, s_global)
    spent = np.zeros(n_q)
    if planner.cells is not None and not independent:
        if authorized_ids is None and 8 * n_allowed < index.n_docs:
            # Few enough that the cell counts, and any scan, read them rather than the mask.
            authorized_ids = np.flatnonzero(mask)
        authorized = planner.cells.authorized(mask, authorized_ids)
        near, ell_min = _graph_pays_near(planner, authorized, saved)
        # A query whose ℓ is a grid step below ℓ_min cannot walk for less than the scan.
        floor = ell_min * 2.0 ** (-1.0 / _STEPS)
        saving = saved - _WALK_DOUBT * planner.walk_cost(planner.ef_base)
        probe_cost = _PROBE_DISTANCES * planner.cells.n_cells
        # The plan's own bookkeeping, per query: paid once the probe says walks may pay.
        upkeep = planner.plan_overhead / n_q
        if near * saving < probe_cost + upkeep:
            # Scan without probing: the probe would cost more than it could ever save.
            plan = Plan("exact", None, n_allowed, scan_cost, None, graph_pays_near=near)
            return _scan(index, q, k, mask, n_allowed, authorized_ids), plan
        # Probe a strided sample first: the documents are only the prior for where the
        # queries fall, and queries from a region the filter avoids (a half-space's
        # opposite tail) all come back with ℓ = 0 — at 1M and 5% the probe was 6% of the
        # time of a plan that scanned every query.
        probed = _sample(n_q)
        local[probed] = planner.cells.local_selectivity(q[probed], mask, authorized)
        spent[probed] += probe_cost
        unprobed = np.ones(n_q, dtype=bool)
        unprobed[probed] = False
        rest = np.flatnonzero(unprobed)
        # What the sample's own first walks, priced as the plan prices them, would save a
        # query on average: probing the rest must be worth that much. (Counting the
        # sampled queries with ℓ ≥ ℓ_min priced a walk at 0.9× the scan like one at 0.1×.
        # It cannot see a walk that fails to certify: at 100,000 and 50% of the clustered
        # corpus two sampled walks would each save a third of a scan, and all six the
        # probe led to failed, 1.14× the scan.) And the plan's own bookkeeping: unpriced, at
        # 100,000 clustered vectors and 50% a plan walking 103 queries and scanning 97,
        # priced at 0.82-0.93x the scan, ran 1.01-1.12x (AutoPlanner.plan_overhead).
        sampled_first = _first_walks(planner, local[probed], saved, floor=floor)
        paying = sampled_first[sampled_first > 0]
        gain = float(np.sum(saved - _WALK_DOUBT * planner.walk_costs(paying))) / probed.size
        if gain < (probe_cost if rest.size else 0.0) + upkeep:
            plan = Plan(
                "exact",
                None,
                n_allowed,
                scan_cost,
                None,
                n_queries=n_q,
                local_selectivity=float(local[probed].mean()),
                n_probed=int(probed.size),
            )
            return _scan(index, q, k, mask, n_allowed, authorized_ids), plan
        if rest.size:
            local[rest] = planner.cells.local_selectivity(q[rest], mask, authorized)
            spent[rest] += probe_cost
        spent += upkeep

    def graph_cost(ef: int) -> float:
        return planner.walk_cost(ef)

    # First efSearch per query; 0 = scan.
    direct = independent and n_q > 2 * _SAMPLE
    first = _first_walks(
        planner,
        local,
        scan_cost if independent else saved,
        floor=floor,
        independent=independent,
        direct=direct,
        n_queries=n_q,
    )
    ids = np.full((n_q, k), -1, dtype=np.int64)
    scores = np.full((n_q, k), -np.inf, dtype=np.float32)
    predicted = np.ones(n_q)  # scanned queries are exact
    used = np.zeros(n_q, dtype=np.int64)  # efSearch each answered query came from; 0 = scan
    escalated = 0

    counts = np.zeros(n_q, dtype=np.int64)  # authorized in each query's latest list

    def count_of(rows: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        return counts[rows]

    def search(rows: npt.NDArray[np.int64], efs: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """Search ``rows`` at ``efs``; record certified answers; return the authorized share
        each row's list held. One faiss call per distinct efSearch; the certificate arithmetic
        runs once over all rows (at 30% it used to cost a third of a scan in numpy overhead)."""
        count = np.zeros(rows.shape[0], dtype=np.int64)
        rank_k = np.zeros(rows.shape[0], dtype=np.int64)
        for ef in np.unique(efs):
            at = np.flatnonzero(efs == ef)
            sub = rows[at]
            # Unfiltered top-ef == pushdown(ef)'s visited set in ranked order: faiss's
            # traversal ignores the selector, so its authorized prefix *is* pushdown's
            # answer, and where that prefix sits in the ranking is the evidence.
            if searched is not None and searched[0] == ef:  # read by _direct already
                full = Hits(searched[1].ids[sub], searched[1].scores[sub])
            else:
                full = index.search(q[sub], int(ef), ef_search=int(ef))
            count[at], rank_k[at], kept = _read_lists(full, mask, k)
            good = count[at] >= k
            ids[sub[good]], scores[sub[good]] = kept.ids, kept.scores
        spent[rows] += planner.walk_costs(efs)
        counts[rows] = count
        good = count >= k
        # Two certificates, the better one counts: where the k-th authorized hit ranks (the
        # walk's budget per wanted result, priced by the unfiltered calibration), and the
        # authorized share the walk actually met (priced by the uniform-filter one).
        by_rank = planner.predicted_recall(efs * k / np.maximum(rank_k, 1))
        share = np.maximum(count, 0.5) / efs
        if independent and _pooled_share_fits(count, efs, s_global):
            # The filter ignores the cells and the lists hold, pooled, the share its size
            # predicts: each list's count is then Binomial(ef, s), and pricing each query by
            # its own count would charge it the noise (measured: 16 of 200 queries escalated
            # to efSearch 182 on a uniform 30% filter, at 2.2x the best fixed pushdown).
            share = np.full(rows.shape[0], s_global)
            # one share, a few efSearch values: price each value once
            values, at_value = np.unique(efs, return_inverse=True)
            by_share = planner.filtered_recall(values, s_global)[at_value.reshape(-1)]
        else:
            by_share = planner.filtered_recall(efs, share)
        predicted[rows] = np.where(good, np.maximum(by_rank, by_share), 0.0)
        used[rows] = np.where(good, efs, 0)
        return np.asarray(share, dtype=np.float64)

    def push(sub_rows: npt.NDArray[np.int64]) -> None:
        """Pushdown at each row's first efSearch, priced by the uniform-filter calibration at
        the global share: the search that calibration measured (a filter shown independent of
        the cells and of the sampled lists). A row that comes back short stays unanswered."""
        for ef in np.unique(first[sub_rows]):
            sub = sub_rows[first[sub_rows] == ef]
            got = index.search_filtered(q[sub], k, mask, ef_search=int(ef))
            full_k = got.returned() >= k
            ids[sub[full_k]], scores[sub[full_k]] = got.ids[full_k], got.scores[full_k]
            used[sub[full_k]] = ef
            predicted[sub[full_k]] = planner.filtered_recall(np.array([float(ef)]), s_global)[0]
            spent[sub] += graph_cost(int(ef))

    rows = np.flatnonzero(first > 0)
    seen = np.ones(n_q)
    pilot: tuple[int, int] | None = None
    if not independent and rows.size > 2 * _PILOT:
        # Walk the most promising queries first (highest ℓ, so cheapest walks): the cells
        # average over thousands of documents, and a query can sit in the part of its cells
        # the filter avoids. If even these fail to certify, the rest would walk and then be
        # scanned anyway (at 1M and 50% of a half-space, 57 walks at efSearch 91-2,048 then
        # 100 scans: 2.8x the scan). A query walks on only where its walk costs less than the
        # scan times the pilot's certified share — the walk's expected saving.
        m = max(_PILOT, math.ceil(rows.size / 16))
        lead = rows[np.argsort(-local[rows], kind="stable")[:m]]
        seen[lead] = search(lead, first[lead])
        certified = float(np.mean(used[lead] > 0))
        pilot = (int(np.count_nonzero(used[lead])), int(lead.size))
        rest = np.setdiff1d(rows, lead)
        first[rest] = np.where(planner.walk_costs(first[rest]) < certified * saved, first[rest], 0)
        rows = np.union1d(lead, rest[first[rest] > 0])
        walked = lead
    else:
        walked = np.zeros(0, dtype=np.int64)
    listed, direct = rows, np.zeros(0, dtype=np.int64)
    if independent and rows.size > 2 * _SAMPLE:
        # A filter independent of the cells: the certificate's one job left is to check, on
        # the lists' own scale, that it is independent of the queries too (_pooled_share_fits).
        # A strided sample does that; the rest go straight to pushdown, which needs no second
        # walk when a top-ef list holds fewer than k authorized (at 1M and 10%, a fifth of the
        # queries did, and auto ran 1.2-1.4x the fixed pushdown at the same efSearch).
        picked = np.zeros(rows.size, dtype=bool)
        picked[_sample(rows.size)] = True
        listed, direct = rows[picked], rows[~picked]
    todo = listed if walked.size == 0 else np.setdiff1d(listed, walked)
    if todo.size:  # nothing walks when every query is scanned: 0.15 ms of numpy on nothing
        seen[todo] = search(todo, first[todo])
    fits = independent and _pooled_share_fits(count_of(listed), first[listed], s_global)
    pending = np.zeros(0, dtype=np.int64)  # rows for pushdown, in one search per efSearch
    if direct.size:
        if fits:
            # Where a list walk was measured cheaper than pushdown, the direct rows read
            # their lists too (_direct): the same answers, certified by rank as well.
            values, at_value = np.unique(first[direct], return_inverse=True)
            pays = np.array([planner.lists_pay(int(e), s_global) for e in values], dtype=bool)
            paying = pays[at_value.reshape(-1)]
            by_list, pending = direct[paying], direct[~paying]
            if by_list.size:
                seen[by_list] = search(by_list, first[by_list])
                listed = np.union1d(listed, by_list)
            seen[pending] = s_global
        else:  # the sample's lists are short of authorized documents: certify every query
            seen[direct] = search(direct, first[direct])
            listed = rows
            fits = _pooled_share_fits(count_of(rows), first[rows], s_global)
    short = listed[used[listed] == 0]
    if fits and (short.size or pending.size):
        # Lists too short to certify, under a filter shown independent of the cells and of the
        # lists: pushdown at the same efSearch collects from every node the walk scored, not
        # only the top ef, and the uniform-filter calibration measured exactly that search —
        # it certifies these queries without a second, larger walk. Pushed down together
        # with the direct rows: one faiss call, not two.
        push(np.union1d(pending, short))
    goal = planner.goal
    # Retry the fewest lowest-certified queries that bring the batch to its goal, and every
    # searched query whose list held fewer than k authorized (it has no answer yet).
    retry = np.union1d(_below_goal(predicted, goal), np.flatnonzero((first > 0) & (used == 0)))
    if retry.size:
        # Once more, at the efSearch the evidence asks for and at least twice the first, where
        # that is still cheaper than scanning them: a scan of m queries also reads all n·s
        # authorized vectors once, priced at _SCAN_PASS distances each, shared by the m —
        # unless the plan scans other queries anyway, and the pass is paid already (at 100,000
        # clustered vectors and 50%, one retry walked at efSearch 1,723 for 3.4 ms, the price
        # of scanning 12 queries, beside 96 queries scanned anyway).
        pass_share = 0.0 if bool(np.any(first == 0)) else _SCAN_PASS / retry.size
        scan_each = scan_cost * (1.0 + pass_share)
        base = np.where(used[retry] > 0, used[retry], first[retry])
        # The efSearch the calibration needs at the authorized share the first list held.
        need = np.where(first[retry] > 0, np.ceil(planner.ef_needed(seen[retry])), 0.0)
        again_ef = planner.ef_at_least_many(np.maximum(2 * base, need))
        # After a pilot, a second walk is worth it only in proportion to how often walks
        # certified there.
        trust = 1.0 if pilot is None else pilot[0] / pilot[1]
        ok = (
            (first[retry] > 0)
            & (again_ef > used[retry])
            & (planner.walk_costs(again_ef) < trust * scan_each)
        )
        if ok.any():
            escalated = int(ok.sum())
            search(retry[ok], again_ef[ok])
    scan = np.union1d(np.flatnonzero(used == 0), _below_goal(predicted, goal))
    if scan.size:
        exact = _scan(index, q[scan], k, mask, n_allowed, authorized_ids)
        ids[scan], scores[scan] = exact.ids, exact.scores
        predicted[scan], used[scan] = 1.0, 0
        # The batch scan less what each query not in it saved.
        spent[scan] += (n_q * scan_cost - (n_q - scan.size) * saved) / scan.size
    graph = used[used > 0]
    plan = Plan(
        method="pushdown" if graph.size else "exact",
        ef_search=int(graph.max()) if graph.size else None,
        n_allowed=n_allowed,
        cost_exact=scan_cost,
        cost_pushdown=graph_cost(int(graph.max())) if graph.size else None,
        n_fallback=int(scan.size) if graph.size else 0,
        n_queries=n_q,
        ef_min=int(graph.min()) if graph.size else None,
        n_escalated=escalated,
        local_selectivity=float(local.mean()),
        predicted_recall=float(predicted.mean()),
        cost_auto=float(spent.mean()),
        pilot=pilot,
    )
    return Hits(ids, scores), plan


def _direct(
    index: VectorIndex,
    q: npt.NDArray[np.float32],
    k: int,
    mask: npt.NDArray[np.bool_],
    n_allowed: int,
    planner: AutoPlanner,
    authorized_ids: npt.NDArray[np.int64] | None = None,
) -> tuple[tuple[Hits, Plan] | None, tuple[int, Hits] | None]:
    """:func:`_certified` for a filter independent of the cells, in one to three faiss calls
    and little else — or ``None`` (nothing answered) where the general plan must decide,
    with the lists it read, if it read every query's (efSearch, lists), for that plan to use.

    The plan is the one the general path reaches for such a filter: a strided sample reads its
    top-ef lists at :meth:`AutoPlanner.ef_direct`, which also answers the sampled queries whose
    lists hold k authorized; if the lists hold, pooled, the share the filter's size predicts
    (``_pooled_share_fits``), every other query is pushed down at that efSearch in one call,
    certified by the uniform-filter calibration. Where the planner measured one list walk for
    the whole batch cheaper than that sample and pushdown (:meth:`AutoPlanner.lists_pay`),
    every query reads its list in one call instead, and only the lists holding fewer than k
    go to pushdown. ``None`` before any search where a scan is cheaper or the calibration does
    not reach the goal at this share, and after the lists where they fall short.

    Between and before its faiss calls it does as little as it can, and the rest after: at
    100,000 vectors, a hundred microseconds of numpy between the sample's walk and the
    pushdown cost the pushdown three times that (the graph it had cached was evicted), and
    this plan must run within 10% of a plain pushdown of the batch.
    """
    n_q = q.shape[0]
    s_global = n_allowed / index.n_docs  # n_allowed: the caller's count of mask
    ef = planner.ef_direct(s_global, n_q)
    walk, scan_cost = planner.walk_cost(ef), float(n_allowed)
    certified = planner.direct_recall(s_global, n_q)
    if not walk < scan_cost:
        # Every query has the global share, and no walk at it beats the scan: the general
        # plan would scan them all too, after 0.3-0.5 ms of numpy (10% of a 10% scan at
        # 100,000 vectors). The same answer and the same plan, without it.
        return _scan_all(index, q, k, mask, n_allowed, authorized_ids), None
    if certified < planner.goal:
        return None, None
    every = planner.lists_pay(ef, s_global)
    # The rows whose lists are read: every row, or the sample.
    read = np.arange(n_q) if every else _sample(n_q)
    full = index._walk(q if every else q[read], ef, ef)
    ok = mask[full.ids] & (full.ids >= 0)  # faiss pads with -1: mask[-1], then masked out
    count = np.count_nonzero(ok, axis=1)
    if not _pooled_share_fits(count, ef, s_global):
        return None, ((ef, full) if every else None)
    short = count < k  # lists that cannot answer: pushed down with the rows not read
    if every:
        pushed = np.flatnonzero(short)
    else:
        pushed = np.union1d(_unsampled(n_q), read[short]) if short.any() else _unsampled(n_q)
    got = index._walk(q[pushed], k, ef, mask) if pushed.size else None
    # Everything else after the searches: each read list's answer and evidence, the plan.
    ids = np.empty((n_q, k), dtype=np.int64)
    scores = np.empty((n_q, k), dtype=np.float32)
    _, rank_k, kept = _read_lists(full, mask, k, ok)
    answered = read[~short]
    ids[answered], scores[answered] = kept.ids, kept.scores
    # A list's rank certificate can only raise its recall above the uniform calibration's.
    by_rank = planner.predicted_recall(float(ef * k) / rank_k[~short])
    predicted = certified * n_q + float(np.sum(np.maximum(by_rank, certified) - certified))
    spent = walk * (n_q + int(np.count_nonzero(short)))  # a short list is walked twice
    scanned = np.zeros(0, dtype=np.int64)
    if got is not None:
        ids[pushed], scores[pushed] = got.ids, got.scores
        # A pushdown that comes back short (nodes HNSW left unreachable) is scanned.
        scanned = pushed[got.returned() < min(k, n_allowed)]
    if scanned.size:
        exact = _scan(index, q[scanned], k, mask, n_allowed, authorized_ids)
        ids[scanned], scores[scanned] = exact.ids, exact.scores
        predicted += scanned.size * (1.0 - certified)
        spent += scanned.size * scan_cost
    plan = Plan(
        method="pushdown",
        ef_search=ef,
        n_allowed=n_allowed,
        cost_exact=scan_cost,
        cost_pushdown=walk,
        n_fallback=int(scanned.size),
        n_queries=n_q,
        ef_min=ef,
        local_selectivity=s_global,
        predicted_recall=predicted / n_q,
        cost_auto=spent / n_q,
    )
    return (Hits(ids, scores), plan), None


def _scan_all(
    index: VectorIndex,
    q: npt.NDArray[np.float32],
    k: int,
    mask: npt.NDArray[np.bool_],
    n_allowed: int,
    authorized_ids: npt.NDArray[np.int64] | None,
) -> tuple[Hits, Plan]:
    """Every query of a filter independent of the cells scanned, and the plan
    :func:`_certified`'s general path states for it (no query walked or probed: each query's
    local selectivity is the global share, its certified recall 1, its cost the scan's).

    Examples
    --------
    >>> from arecall.vector.index import build_index
    >>> idx = build_index(np.eye(4, dtype=np.float32), kind="exact")
    >>> hits, plan = _scan_all(idx, np.eye(4, dtype=np.float32)[:2], 1, np.ones(4, bool), 4, None)
    >>> hits.rows(), str(plan)
    ([[0], [1]], 'scan (local s=1.00: no graph plan cheaper)')
    """
    n_q = q.shape[0]
    scan_cost = float(n_allowed)
    hits = _scan(index, q, k, mask, n_allowed, authorized_ids)
    plan = Plan(
        method="exact",
        ef_search=None,
        n_allowed=n_allowed,
        cost_exact=scan_cost,
        cost_pushdown=None,
        n_fallback=0,
        n_queries=n_q,
        ef_min=None,
        n_escalated=0,
        local_selectivity=float(np.full(n_q, n_allowed / index.n_docs).mean()),
        predicted_recall=1.0,
        cost_auto=float(np.full(n_q, n_q * scan_cost / n_q).mean()),
    )
    return hits, plan


def _read_lists(
    full: Hits, mask: npt.NDArray[np.bool_], k: int, ok: npt.NDArray[np.bool_] | None = None
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], Hits]:
    """What a query's unfiltered top-ef list says under ``mask``: the authorized count, the rank
    of its k-th authorized entry (0 when it holds fewer than k), and — for the lists that hold k
    — the first k authorized, which *are* pushdown(ef)'s answer (faiss's walk ignores the
    selector, so the filtered walk visits the same nodes).

    Examples
    --------
    >>> full = Hits(np.array([[5, 2, 7, 9], [3, 8, -1, -1]]), np.ones((2, 4), dtype=np.float32))
    >>> count, rank_k, kept = _read_lists(full, np.arange(10) % 2 == 1, 2)
    >>> count.tolist(), rank_k.tolist(), kept.ids.tolist()
    ([3, 1], [3, 0], [[5, 7]])
    """
    if ok is None:  # ``mask`` at the lists' entries, unless the caller has read it
        ok = mask[full.ids] & (full.ids >= 0)  # faiss pads with -1: mask[-1], masked out
    count = np.count_nonzero(ok, axis=1).astype(np.int64)
    good = count >= k
    # The first k authorized positions of each list that holds k, in rank order.
    at = np.argsort(~ok[good], axis=1, kind="stable")[:, :k]
    rank_k = np.zeros(count.shape[0], dtype=np.int64)
    if at.shape[0]:
        rank_k[good] = at[:, k - 1] + 1
    rows = np.flatnonzero(good)[:, None]  # fancy indexing: half take_along_axis's time
    return count, rank_k, Hits(full.ids[rows, at], full.scores[rows, at])


def _sample(n: int) -> npt.NDArray[np.int64]:
    """The queries ``auto`` gathers evidence on first: ``_SAMPLE`` or an eighth of ``n``,
    strided (:func:`_strided`)."""
    return _strided(n, max(_SAMPLE, math.ceil(n / 8)))


@lru_cache(maxsize=64)
def _unsampled(n: int) -> npt.NDArray[np.int64]:
    """The queries :func:`_sample` leaves out, ascending. Cached (read-only): ``setdiff1d``
    sorted on every call of the direct plan, 0.04 ms of its ~0.3 ms of numpy at 200 queries.

    Examples
    --------
    >>> _unsampled(40).tolist() == sorted(set(range(40)) - set(_sample(40).tolist()))
    True
    """
    out = np.setdiff1d(np.arange(n, dtype=np.int64), _sample(n), assume_unique=True)
    out.flags.writeable = False
    return out


@lru_cache(maxsize=64)
def _strided(n: int, m: int) -> npt.NDArray[np.int64]:
    """``m`` of ``range(n)`` evenly spread (all of them when ``n ≤ 2m``): a sample that does
    not depend on how the caller ordered the queries. Cached (read-only): a batch size recurs.

    Examples
    --------
    >>> _strided(10, 3).tolist(), _strided(5, 3).tolist()
    ([0, 4, 9], [0, 1, 2, 3, 4])
    """
    out = (
        np.arange(n, dtype=np.int64)
        if n <= 2 * m
        else np.unique(np.linspace(0, n - 1, m).round().astype(np.int64))
    )
    out.flags.writeable = False
    return out


def _graph_pays_near(
    planner: AutoPlanner, authorized: npt.NDArray[np.int64], scan_cost: float
) -> tuple[float, float]:
    """The share of the documents in cells where a graph walk can beat the scan, and the
    least local selectivity ℓ_min at which one can (1.0 past every share: never).

    A walk at the efSearch a local selectivity ℓ needs is cheaper than the scan only above some
    ℓ_min, and a query's ℓ (the authorized share of its nearest cells) exceeds ℓ_min only near a
    cell whose own share does. Taking the documents as the prior for where queries fall, the
    probe saves at most this share × (scan − cheapest walk) per query, and costs about two
    distances per cell (``_PROBE_DISTANCES``): at a million vectors and 1% it had cost 8–13% of
    ``auto``'s time to learn that every query of a half-space filter's opposite tail had ℓ = 0.

    Examples
    --------
    >>> cells = Cells(np.eye(2, dtype=np.float32), np.array([0, 0, 1, 1]), np.array([2, 2]))
    >>> p = AutoPlanner(n_docs=4, k=1, ef_base=2, ndis=((2, 1.0),), graph_cost=1.0, cells=cells)
    >>> _graph_pays_near(p, np.array([2, 0]), 2.0), _graph_pays_near(p, np.array([2, 0]), 0.5)
    ((0.5, 0.7071067811865476), (0.0, 1.0))
    """
    assert planner.cells is not None
    grid = _SHARE_GRID
    paying = grid[planner.walk_cost_by_share < scan_cost]
    if paying.size == 0:
        return 0.0, 1.0
    ell_min = float(paying.min())
    sizes = planner.cells.sizes
    share = authorized / np.maximum(sizes, 1)
    return float(sizes[share >= ell_min].sum() / max(1, int(sizes.sum()))), ell_min


#: A query's local-selectivity probe (:meth:`Cells.local_selectivity`), in scan distances per
#: cell: the product with the centroids, then a partition and a compare of the same matrix.
#: Measured 1.7-1.9 against the scan at 100,000 clustered vectors (632 cells, 200 and 1,000
#: queries). Priced at one distance a cell, it had let through walks that saved less than the
#: probe cost: 1,000 queries at 30% of the clustered corpus went 319 walks and 681 scans,
#: priced at 1.00x the scan, and measured 1.10-1.27x.
_PROBE_DISTANCES = 1.8


#: Local selectivities at which :func:`_graph_pays_near` prices a walk: 1 down to 2^-16.
_SHARE_GRID = 2.0 ** (-np.arange(0, 16 * _STEPS + 1) / _STEPS)


def _first_walks(
    planner: AutoPlanner,
    local: npt.NDArray[np.float64],
    scan_cost: float,
    *,
    floor: float = 0.0,
    independent: bool = False,
    direct: bool = False,
    n_queries: int | None = None,
) -> npt.NDArray[np.int64]:
    """Each query's first efSearch (:func:`_first_ef`) where a walk there costs less than the
    scan, else 0 (scan). Priced only above ``floor``: under a filter that follows the data a
    query a grid step below ℓ_min cannot pay (pricing all 200 queries had cost 2.6 ms at
    100,000 and 50%, 3% of the scan). ``n_queries``: the batch's size, for ``direct``.

    Examples
    --------
    >>> p = AutoPlanner(n_docs=10**6, k=10, ef_base=64, ndis=((64, 1000.0), (1024, 9000.0)))
    >>> _first_walks(p, np.array([1.0, 0.5, 0.01]), 50_000.0, floor=0.02).tolist()
    [64, 128, 0]
    """
    first = np.zeros(local.shape[0], dtype=np.int64)
    able = np.flatnonzero(local > floor)
    if able.size:
        ef = _first_ef(planner, local[able], independent, direct=direct, n_queries=n_queries)
        first[able] = np.where(planner.walk_costs(ef) < scan_cost, ef, 0)
    return first


def _first_ef(
    planner: AutoPlanner,
    local: npt.NDArray[np.float64],
    independent: bool = False,
    *,
    direct: bool = False,
    n_queries: int | None = None,
) -> npt.NDArray[np.int64]:
    """Each query's first efSearch: the cheapest in expectation of the ladder values from what
    the uniform calibration needs at its local selectivity ℓ (:meth:`AutoPlanner.ef_needed`)
    upwards.

    A first search at efSearch e certifies only if its top-e list holds k authorized, which
    for ℓ·e near k is a coin flip; an uncertified query is searched again at 2e. So e costs
    ``D(e) + P[Binomial(e, ℓ) < k]·D(2e)`` distances (``D``: the calibrated cost curve,
    the binomial tail by its normal approximation). A fixed floor of (k + 2√k)/ℓ did the same
    job with more distances: at ℓ = 0.49 it moved 55% of the queries of a uniform 50% filter
    from efSearch 33 to 39. For a filter ``independent`` of the cells a short list is answered
    by pushdown at the same efSearch (:func:`_certified`), so the second walk costs ``D(e)``.
    With ``direct``, most queries go straight to pushdown, which has no short lists to pay
    for: the first efSearch is then just the one the calibration needs for a batch of
    ``n_queries`` (:meth:`AutoPlanner.ef_direct`).
    """
    ell, back = np.unique(np.clip(local, 1e-12, 1.0), return_inverse=True)
    if direct:
        direct_ef = np.array([planner.ef_direct(float(x), n_queries) for x in ell], dtype=np.int64)
        return np.asarray(direct_ef[back.reshape(-1)], dtype=np.int64)
    # Remembered per ℓ: a one-cell probe gives few distinct values (a clustered filter's cells
    # are 0 or 1), and the arithmetic below cost 0.7 ms a call whatever their number.
    best = planner._remember_many(
        "first independent" if independent else "first",
        ell,
        lambda values: _cheapest_first_ef(planner, values, independent),
    )
    return np.asarray(best[back.reshape(-1)], dtype=np.int64)


def _cheapest_first_ef(
    planner: AutoPlanner, ell: npt.NDArray[np.float64], independent: bool
) -> npt.NDArray[np.int64]:
    """:func:`_first_ef` for distinct local selectivities ``ell``, computed."""
    k = planner.k
    start = planner.ef_at_least_many(planner.ef_needed(ell))
    # The ladder's rungs from the start up to 8× it, past any useful floor.
    j0 = np.floor(_STEPS * np.log2(np.maximum(start, 1.0) / 16.0) + 1e-9)
    steps = np.arange(3 * _STEPS)
    cand = planner.ef_at_least_many(16.0 * 2 ** ((j0[:, None] + steps[None, :]) / _STEPS))
    cand = np.maximum(cand, start[:, None])
    mean = cand * ell[:, None]
    sd = np.sqrt(np.maximum(cand * ell[:, None] * (1.0 - ell[:, None]), 1e-12))
    # P[count < k] = P[count ≤ k - 1], continuity-corrected normal tail
    z = (k - 0.5 - mean) / sd
    p_short = special.ndtr(z)
    # Independent filter: a short list is answered by pushdown at the same efSearch.
    again = cand if independent else planner.ef_at_least_many(2 * cand)
    cost = planner.walk_costs(cand) + p_short * planner.walk_costs(again)
    return np.asarray(cand[np.arange(cand.shape[0]), np.argmin(cost, axis=1)], dtype=np.int64)


#: Queries whose top-ef lists check a filter independent of the cells against the queries
#: (at least this many, or an eighth of the batch): 16 lists at efSearch 128 and a share of 10%
#: are 2,048 draws, enough to tell a pooled share of 8% from 10% at three standard errors.
_SAMPLE = 16

#: What reading a batch's top-ef lists in numpy adds, as a share of its walks
#: (:meth:`AutoPlanner.lists_pay`): at 1,000,000 vectors and efSearch 38, 0.25 ms for the
#: 100 lists of a batch beside 9.5 ms of walks.
_LIST_READ = 0.03

#: How far a walk's price may fall short of its cost, where a plan for a filter that follows
#: the data weighs what its walks would save against its probes and bookkeeping. The graph
#: cost is timed on walks that follow walks of the same queries (:func:`_graph_costs`); in a
#: plan they follow whatever ran before, a scan at worst. At 100,000 clustered vectors and
#: 50%, 200 queries, a plan walking 103 and scanning 97, priced at 0.86-0.87x the scan with
#: its walks at 1.15x their price, ran 1.07-1.17x in three benchmark runs of five; replayed
#: after the scan, its walks took 2.06x their price, and the plan 1.07x the scan. At twice
#: their price it scans (1.02x); with 1,000 queries, whose walks pay more than twice over, it
#: still walks 512 and runs 0.86x the scan.
_WALK_DOUBT = 2.0

#: Queries walked first (or a sixteenth of those planned) when the filter follows the data:
#: the ones with the highest local selectivity, whose certified share decides the rest.
_PILOT = 4

#: What one pass over the authorized vectors costs a scan, in (batched) distances per vector:
#: a scan of one query takes about as long as 8 queries' share of a 200-query batch scan
#: (measured at 50,000 × 128: 4 ms against 0.3 ms per query), since it is memory-bound.
_SCAN_PASS = 8.0


def _pooled_share_fits(
    count: npt.NDArray[np.int64], efs: npt.NDArray[np.int64] | int, s: float, z: float = 3.0
) -> bool:
    """Whether the searched lists hold, pooled, at least the authorized share ``s`` predicts
    (within ``z`` binomial standard errors): the check, at the scale of the graph's own
    neighbourhoods, that a filter independent of the cells is independent of the queries too.
    ``efs``: each list's efSearch (its length), or one for all.

    Examples
    --------
    >>> _pooled_share_fits(np.array([14, 12, 15]), np.array([46, 46, 46]), 0.3)
    True
    >>> _pooled_share_fits(np.array([14, 12, 15]), 46, 0.3)
    True
    >>> _pooled_share_fits(np.array([2, 1, 3]), np.array([46, 46, 46]), 0.3)
    False
    """
    total = float(efs * count.size if isinstance(efs, int) else np.sum(efs))
    if total <= 0:
        return False
    pooled = float(np.sum(count)) / total
    return pooled >= s - z * math.sqrt(s * (1.0 - s) / total)


def _scan(
    index: VectorIndex,
    q: npt.NDArray[np.float32],
    k: int,
    mask: npt.NDArray[np.bool_],
    n_allowed: int,
    authorized_ids: npt.NDArray[np.int64] | None = None,
) -> Hits:
    """The exact scan of ``mask`` for a few fallback queries (``authorized_ids``: its
    documents, where the caller listed them already).

    ``index.exact`` first copies the ``n·s`` authorized vectors, whatever the batch: for one
    query at s = 50% that copy costs more than scoring all ``n`` documents and masking the
    rest (measured 5 ms against < 1 ms at 50,000 × 128). So score everything when the extra
    distances, ``q·n·(1 − s)``, are fewer than the copy's price, counted as ``_SCAN_PASS``
    distances per copied vector; else scan the subset. Same canonical order (score
    descending, then id).
    """
    if q.shape[0] * (index.n_docs - n_allowed) > _SCAN_PASS * n_allowed or n_allowed <= k:
        if authorized_ids is None:
            return index.exact(q, k, mask)
        return index._scan_ids(q, k, authorized_ids)
    scores = q @ index.vectors.T
    scores[:, ~mask] = -np.inf
    ids, top = _top_k(scores, k)
    return Hits(ids, top)


def _below_goal(predicted: npt.NDArray[np.float64], goal: float) -> npt.NDArray[np.int64]:
    """Fewest queries (lowest predicted first) whose exact answers lift the mean to ``goal``."""
    if predicted.mean() >= goal:
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(predicted, kind="stable")
    gain = np.cumsum(1.0 - predicted[order])
    deficit = goal * predicted.shape[0] - predicted.sum()
    n = int(np.searchsorted(gain, deficit - 1e-12) + 1)
    return np.sort(order[:n]).astype(np.int64)


def answer(
    placement: str,
    index: VectorIndex,
    queries: Any,
    k: int,
    allowed: Any,
    *,
    ef_search: int | None = None,
    planner: AutoPlanner | None = None,
) -> tuple[Hits, str]:
    """The hits of one placement and its plan as the tables print it.

    The plan says what was run: ``scan`` for an exhaustive scan (``pre``, or any placement on
    an ``exact`` index), ``ef=N`` for a graph search at efSearch N, and for ``auto`` the plan
    it chose. ``auto`` needs a ``planner`` (from :func:`calibrate_auto`).

    Examples
    --------
    >>> from arecall.vector.index import build_index
    >>> idx = build_index(np.eye(2, dtype=np.float32), kind="hnsw", ef_search=4)
    >>> hits, plan = answer("post", idx, [[1, 0]], 1, np.array([False, True]))
    >>> hits.rows(), plan
    ([[]], 'ef=4')
    """
    if placement == "pre":
        return pre(index, queries, k, allowed), "scan"
    if placement == "auto":
        if planner is None:
            raise ArecallError("placement=auto: needs a planner from calibrate_auto()")
        hits, plan = auto(index, queries, k, allowed, planner)
        return hits, str(plan)
    if placement not in ("post", "pushdown"):
        raise ArecallError(
            f"placement={placement!r}: must be one of {', '.join(SEARCH_PLACEMENTS)}"
        )
    search = post if placement == "post" else pushdown
    ef = index.ef_search if ef_search is None else ef_search
    label = "scan" if index.kind == "exact" else f"ef={ef}"
    return search(index, queries, k, allowed, ef_search=ef_search), label


def place(
    placement: str,
    index: VectorIndex,
    queries: Any,
    k: int,
    allowed: Any,
    *,
    ef_search: int | None = None,
    planner: AutoPlanner | None = None,
) -> Hits:
    """Dispatch on a placement name (``post``, ``pushdown``, ``pre`` or ``auto``).

    ``auto`` needs a ``planner`` (from :func:`calibrate_auto`).

    Examples
    --------
    >>> from arecall.vector.index import build_index
    >>> idx = build_index(np.eye(2, dtype=np.float32), kind="exact")
    >>> place("pre", idx, [[1, 0]], 1, np.array([False, True])).rows()
    [[1]]
    """
    return answer(placement, index, queries, k, allowed, ef_search=ef_search, planner=planner)[0]


def check_placements(placements: Sequence[str]) -> tuple[str, ...]:
    """Return ``placements`` as a tuple, or raise naming the first unknown one."""
    out = tuple(placements)
    for p in out:
        if p not in SEARCH_PLACEMENTS:
            raise ArecallError(f"placements: {p!r} is not one of {', '.join(SEARCH_PLACEMENTS)}")
    if not out:
        raise ArecallError("placements=[]: name at least one of " + ", ".join(SEARCH_PLACEMENTS))
    return out
