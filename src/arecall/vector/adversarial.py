"""Corpora whose authorization filter follows the data: the cases a size-only planner gets wrong.

Real authorization is not independent of the embedding space: a team's documents cluster by
topic, a clearance level by subject. A planner that looks only at the filter's size (``auto``
before issue 11) is right on verity's uniform filter and wrong as soon as the filter is
correlated with the geometry. Each corpus here is an ordinary `~arecall.vector.generator.
BenchData` — vectors, queries and one key per document, a document matching selectivity ``s``
iff ``key < s`` — so every experiment and store takes it unchanged (``Below("draw", s)``):

``clustered-anti``
    200 Gaussian clusters; authorization grows a whole cluster at a time (clusters in a random
    order, the boundary cluster partly); queries come from clusters authorized only at 100%
    (the last 40% of the order): the filter is *anti*-correlated with every query.
``clustered-corr``
    The same corpus and filter, queries from all clusters: some queries sit inside authorized
    clusters, most outside.
``lowrank-halfspace``
    Rank-12 embeddings in d = 128 (plus noise); authorized = the documents furthest along one
    direction of the subspace (a half-space), queries from the opposite tail (the 5% lowest
    along it).
``lowrank-uniform``
    The same rank-12 corpus with a uniform filter (the control: the filter's size is all there
    is to know).
``verity``
    verity's generator (`~arecall.vector.generator.generate`): isotropic Gaussians, uniform.

Clustered and low-rank corpora also carry ``groups`` (cluster ids; ``None`` where there are no
groups), which partitioned indexes (`arecall.vector.partitions`) split on. ``calibration``
queries are held out and drawn from the documents' distribution (all clusters / the whole
subspace) — the planner never sees the adversarial query distribution before it is scored.
``workload_queries`` are fresh draws from the *scored* queries' distribution (their own stream):
the benchmark picks its best fixed pushdown for a filter on them, as an operator tuning an
efSearch on their own traffic would, rather than on the very queries it is then scored on.
Everything is seeded and vectorised (a million 128-d vectors in a few seconds).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from arecall.core.errors import ArecallError
from arecall.vector._checks import check_positive_int
from arecall.vector.generator import BenchData, generate, l2_normalise
from arecall.vector.shifted import DEFAULT_DIMS, SHIFTED_CORPORA, shifted_corpus

__all__ = [
    "ADVERSARIAL_CORPORA",
    "ALL_CORPORA",
    "SHIFTED_CORPORA",
    "AdversarialCorpus",
    "adversarial_corpus",
    "with_duplicates",
]

#: Corpus names, in benchmark order.
ADVERSARIAL_CORPORA: tuple[str, ...] = (
    "clustered-anti",
    "clustered-corr",
    "lowrank-halfspace",
    "lowrank-uniform",
    "verity",
)

#: Every corpus :func:`adversarial_corpus` draws: the filters that follow the data above, then
#: the queries drawn unlike the documents (`arecall.vector.shifted`).
ALL_CORPORA: tuple[str, ...] = ADVERSARIAL_CORPORA + SHIFTED_CORPORA

_CHUNK = 65536


@dataclass(frozen=True)
class AdversarialCorpus:
    """A named corpus with its filter key, scored and held-out queries, and groups.

    Attributes
    ----------
    name : str
    data : BenchData
        ``data.draws`` is the filter key (``mask(s)`` = ``key < s``); ``data.queries`` the
        scored queries; ``data.calibration_queries(n)`` held-out ones.
    groups : ndarray of int64 or None
        Cluster id per document (clustered corpora), else ``None``.
    workload : callable
        ``workload(n)``: ``n`` fresh queries of the scored kind (:meth:`workload_queries`).
    """

    name: str
    data: BenchData
    groups: npt.NDArray[np.int64] | None
    workload: Callable[[int], npt.NDArray[np.float32]] = field(repr=False, compare=False)

    def workload_queries(self, n: int) -> npt.NDArray[np.float32]:
        """``n`` more queries from the scored queries' distribution, none of them scored.

        Their own seeded stream, so the same call returns the same queries, and neither the
        scored queries nor the calibration ones are among them.

        Examples
        --------
        >>> c = adversarial_corpus("lowrank-halfspace", 2000, 16, 5)
        >>> c.workload_queries(3).shape
        (3, 16)
        """
        return self.workload(check_positive_int("n_workload", n))

    def mask(self, selectivity: float) -> npt.NDArray[np.bool_]:
        """The authorized documents at ``selectivity`` (``data.mask``)."""
        return self.data.mask(selectivity)


def _rank_key(order: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    """Key per document so that ``key < s`` admits the first ``round(s·n)`` of ``order``."""
    n = order.shape[0]
    key = np.empty(n, dtype=np.float64)
    key[order] = (np.arange(n, dtype=np.float64) + 0.5) / n
    return key


def _clustered(
    n_docs: int, dims: int, n_queries: int, seed: int, *, n_clusters: int, spread: float, anti: bool
) -> tuple[BenchData, npt.NDArray[np.int64], Callable[[int], npt.NDArray[np.float32]]]:
    rng = np.random.default_rng([seed, 11])
    centers = rng.normal(size=(n_clusters, dims)).astype(np.float32) / np.float32(np.sqrt(dims))
    scale = np.float32(spread / np.sqrt(dims))

    def draw(labels: npt.NDArray[np.int64], gen: np.random.Generator) -> npt.NDArray[np.float32]:
        out = np.empty((labels.shape[0], dims), dtype=np.float32)
        for start in range(0, labels.shape[0], _CHUNK):
            part = labels[start : start + _CHUNK]
            noise = gen.normal(size=(part.shape[0], dims)).astype(np.float32)
            out[start : start + part.shape[0]] = centers[part] + scale * noise
        return l2_normalise(out)

    groups = rng.integers(0, n_clusters, size=n_docs).astype(np.int64)
    vectors = draw(groups, rng)
    # Authorization order: clusters in a random order, documents within a cluster shuffled.
    cluster_rank = rng.permutation(n_clusters)
    within = rng.random(n_docs)
    order = np.lexsort((within, cluster_rank[groups])).astype(np.int64)
    late = np.flatnonzero(cluster_rank >= int(np.ceil(0.6 * n_clusters)))
    q_rng = np.random.default_rng([seed, 12])
    pool = late if anti else np.arange(n_clusters)
    queries = draw(q_rng.choice(pool, size=n_queries).astype(np.int64), q_rng)

    def held_out(n: int) -> npt.NDArray[np.float32]:
        gen = np.random.default_rng([seed, 13])
        return draw(gen.integers(0, n_clusters, size=n).astype(np.int64), gen)

    def workload(n: int) -> npt.NDArray[np.float32]:
        gen = np.random.default_rng([seed, 14])
        return draw(gen.choice(pool, size=n).astype(np.int64), gen)

    data = BenchData(vectors, queries, _rank_key(order), seed, sampler=held_out)
    return data, groups, workload


def _lowrank(
    n_docs: int, dims: int, n_queries: int, seed: int, *, rank: int, noise: float, halfspace: bool
) -> tuple[BenchData, Callable[[int], npt.NDArray[np.float32]]]:
    rng = np.random.default_rng([seed, 21])
    basis = rng.normal(size=(rank, dims)).astype(np.float32)
    amplitude = np.float32(noise * np.sqrt(rank))

    def draw(n: int, gen: np.random.Generator) -> npt.NDArray[np.float32]:
        out = np.empty((n, dims), dtype=np.float32)
        for start in range(0, n, _CHUNK):
            stop = min(n, start + _CHUNK)
            z = gen.normal(size=(stop - start, rank)).astype(np.float32)
            eps = gen.normal(size=(stop - start, dims)).astype(np.float32)
            out[start:stop] = z @ basis + amplitude * eps
        return l2_normalise(out)

    vectors = draw(n_docs, rng)
    q_rng = np.random.default_rng([seed, 22])
    direction = l2_normalise(q_rng.normal(size=(1, rank)).astype(np.float32) @ basis)[0]

    def scored_kind(n: int, gen: np.random.Generator) -> npt.NDArray[np.float32]:
        if not halfspace:
            return draw(n, gen)
        # The 5% of the subspace lowest along `direction`, opposite the authorized half-space.
        pool = draw(20 * n, gen)
        return np.ascontiguousarray(pool[np.argsort(pool @ direction, kind="stable")[:n]])

    if halfspace:
        # Authorized: furthest along `direction`.
        order = np.argsort(-(vectors @ direction), kind="stable").astype(np.int64)
    else:
        order = rng.permutation(n_docs).astype(np.int64)
    queries = scored_kind(n_queries, q_rng)

    def held_out(n: int) -> npt.NDArray[np.float32]:
        return draw(n, np.random.default_rng([seed, 23]))

    def workload(n: int) -> npt.NDArray[np.float32]:
        return scored_kind(n, np.random.default_rng([seed, 24]))

    data = BenchData(vectors, queries, _rank_key(order), seed, sampler=held_out)
    return data, workload


def _isotropic_workload(seed: int, dims: int) -> Callable[[int], npt.NDArray[np.float32]]:
    """verity's query distribution (isotropic unit Gaussians), from a stream it never uses."""

    def workload(n: int) -> npt.NDArray[np.float32]:
        gen = np.random.default_rng([seed, 3])
        return l2_normalise(gen.normal(size=(n, dims)).astype(np.float32))

    return workload


def adversarial_corpus(
    name: str,
    n_docs: int = 100_000,
    dims: int | None = None,
    n_queries: int = 200,
    seed: int = 7,
    *,
    n_clusters: int | None = None,
    spread: float = 0.6,
    rank: int = 12,
    noise: float = 0.1,
    few: int = 1,
) -> AdversarialCorpus:
    """Generate one corpus of :data:`ALL_CORPORA` (see the module docstring, and
    `arecall.vector.shifted` for the shifted-query ones).

    Parameters
    ----------
    name : str
        One of ``ALL_CORPORA``.
    n_docs, dims, n_queries, seed : int
        ``dims`` defaults to 128 (96 for ``tight-few``).
    n_clusters : int
        Clusters of the clustered corpora (default 200; 60 for ``tight-few``).
    few : int
        Clusters ``tight-few`` draws its queries from.
    spread : float
        Within-cluster noise norm relative to the (unit-scale) cluster centre.
    rank, noise : int, float
        Subspace rank and isotropic noise of the low-rank corpora.

    Returns
    -------
    AdversarialCorpus

    Examples
    --------
    >>> c = adversarial_corpus("clustered-anti", 2000, 16, 5, n_clusters=20)
    >>> c.data.vectors.shape, int(c.mask(0.3).sum())
    ((2000, 16), 600)
    >>> bool(c.mask(0.3)[c.groups == c.groups[c.mask(0.01)][0]].all())  # whole clusters
    True
    """
    n_docs = check_positive_int("n_docs", n_docs)
    dims = check_positive_int("dims", DEFAULT_DIMS.get(name, 128) if dims is None else dims)
    n_clusters = (60 if name == "tight-few" else 200) if n_clusters is None else n_clusters
    n_queries = check_positive_int("n_queries", n_queries)
    seed = check_positive_int("seed", seed, minimum=0)
    if name in ("clustered-anti", "clustered-corr"):
        n_clusters = check_positive_int("n_clusters", n_clusters, minimum=2)
        if not spread > 0:
            raise ArecallError(f"spread={spread!r}: must be positive")
        data, groups, workload = _clustered(
            n_docs,
            dims,
            n_queries,
            seed,
            n_clusters=n_clusters,
            spread=spread,
            anti=name == "clustered-anti",
        )
        return AdversarialCorpus(name, data, groups, workload)
    if name in ("lowrank-halfspace", "lowrank-uniform"):
        rank = check_positive_int("rank", rank)
        data, workload = _lowrank(
            n_docs,
            dims,
            n_queries,
            seed,
            rank=rank,
            noise=noise,
            halfspace=name == "lowrank-halfspace",
        )
        return AdversarialCorpus(name, data, None, workload)
    if name == "verity":
        data = generate(n_docs, dims, n_queries, seed)
        return AdversarialCorpus(name, data, None, _isotropic_workload(seed, dims))
    if name in SHIFTED_CORPORA:
        n_clusters = check_positive_int("n_clusters", n_clusters, minimum=2)
        few = check_positive_int("few", min(few, n_clusters))
        drawn, labels, stream = shifted_corpus(
            name, n_docs, dims, n_queries, seed, n_clusters=n_clusters, few=few
        )
        return AdversarialCorpus(name, drawn, labels, stream)
    raise ArecallError(f"corpus={name!r}: must be one of {', '.join(ALL_CORPORA)}")


def with_duplicates(corpus: AdversarialCorpus, share: float, seed: int = 7) -> AdversarialCorpus:
    """``corpus`` with ``share`` of its documents replaced by exact copies of the others.

    Real collections hold the same passage many times over (boilerplate, mirrored pages,
    a chunk repeated across versions). A copy keeps its own filter key and group, so two
    copies may differ in who may use them. Recall must then be counted by score ties
    (`arecall.vector.oracle.tie_aware_recall`): a walk returning another copy of a true
    neighbour than the scan's has lost nothing, and by ids a plain search on 50-60% copies
    plateaued at recall 0.76 while every answer was as good as the truth's.

    Examples
    --------
    >>> c = with_duplicates(adversarial_corpus("lowrank-uniform", 1000, 16, 5), 0.5)
    >>> n = len(np.unique(c.data.vectors, axis=0))
    >>> 400 < n < 600, c.data.draws.shape
    (True, (1000,))
    """
    if not 0.0 <= share < 1.0:
        raise ArecallError(f"duplicates={share!r}: must be in [0, 1)")
    data = corpus.data
    rng = np.random.default_rng([seed, 81])
    copies = rng.random(data.n_docs) < share
    sources = np.flatnonzero(~copies)
    if not sources.size:
        return corpus
    rows = np.arange(data.n_docs)
    rows[copies] = rng.choice(sources, size=int(copies.sum()))
    vectors = np.ascontiguousarray(data.vectors[rows])
    return replace(corpus, data=replace(data, vectors=vectors))
