"""Corpora whose queries are not drawn like the documents: the cases a calibration on the
documents' distribution gets wrong (issue 35).

A real encoder's questions are not distributed like its documents, and a planner calibrated on
held-out queries drawn like the documents certifies a recall those queries got, not the one
the user's batch gets. Each corpus is a `~arecall.vector.generator.BenchData` (vectors,
scored queries, one filter key per document; ``key < s`` authorizes) whose held-out
``calibration_queries`` are drawn like the documents, as the pipeline draws them:

``lowrank-offmean``
    Rank-16 anisotropic embeddings (scales 2^(-j/4)) around a mean, d = 128; queries around an
    unrelated mean of the same norm, with twice the documents' noise. Uniform filter.
``lowrank-flipped``
    The same documents; queries around the documents' mean flipped. Uniform filter.
``noisedir-shifted``
    Rank-12 embeddings with noise 0.3 (three times the low-rank corpus's); authorized = a
    half-space along one of the *noise* directions, which the coarse cells cannot see; queries
    shifted along that direction, every other one each way, by their own norm.
``tight-few``
    60 tight Gaussian clusters (spread 0.3) in d = 96; every query from a few clusters (one by
    default), so a cluster the graph links badly — an HNSW island — takes a whole batch with
    it. Uniform filter.

``workload_queries`` draw more of the scored kind from their own stream. All seeded and
vectorised.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from arecall.vector.generator import BenchData, l2_normalise

__all__ = ["SHIFTED_CORPORA", "shifted_corpus"]

#: Corpus names, in benchmark order.
SHIFTED_CORPORA: tuple[str, ...] = (
    "lowrank-offmean",
    "lowrank-flipped",
    "noisedir-shifted",
    "tight-few",
)

#: Dimensions each corpus is drawn in unless the caller says otherwise (the issue's shapes).
DEFAULT_DIMS: dict[str, int] = {
    "lowrank-offmean": 128,
    "lowrank-flipped": 128,
    "noisedir-shifted": 128,
    "tight-few": 96,
}

_CHUNK = 65536
Workload = Callable[[int], npt.NDArray[np.float32]]


def _uniform_key(n: int, rng: np.random.Generator) -> npt.NDArray[np.float64]:
    """One uniform draw per document: ``key < s`` authorizes a uniform share ``s``."""
    return rng.random(n)


def _aniso(
    n_docs: int, dims: int, n_queries: int, seed: int, *, flipped: bool
) -> tuple[BenchData, Workload]:
    """``lowrank-offmean`` or ``lowrank-flipped`` (module docstring)."""
    rank, noise = 16, 0.1
    rng = np.random.default_rng([seed, 51])
    basis = np.linalg.qr(rng.normal(size=(dims, rank)))[0].T.astype(np.float32)
    scales = (2.0 ** (-np.arange(rank) / 4.0)).astype(np.float32)
    mean = rng.normal(size=dims).astype(np.float32)
    mean /= np.linalg.norm(mean)
    amplitude = np.float32(noise * float(np.sqrt((scales**2).sum())) / np.sqrt(dims))

    def draw(n: int, gen: np.random.Generator, centre: npt.NDArray[np.float32], times: float):
        out = np.empty((n, dims), dtype=np.float32)
        for start in range(0, n, _CHUNK):
            m = min(n, start + _CHUNK) - start
            z = gen.normal(size=(m, rank)).astype(np.float32) * scales
            eps = gen.normal(size=(m, dims)).astype(np.float32) * (amplitude * np.float32(times))
            out[start : start + m] = centre + z @ basis + eps
        return l2_normalise(out)

    vectors = draw(n_docs, rng, mean, 1.0)
    key = _uniform_key(n_docs, rng)
    if flipped:
        centre, times = -mean, 1.0
    else:
        other = np.random.default_rng([seed, 54]).normal(size=dims).astype(np.float32)
        centre, times = other / np.linalg.norm(other), 2.0
    queries = draw(n_queries, np.random.default_rng([seed, 52]), centre, times)

    def held_out(n: int) -> npt.NDArray[np.float32]:
        return draw(n, np.random.default_rng([seed, 53]), mean, 1.0)

    def workload(n: int) -> npt.NDArray[np.float32]:
        return draw(n, np.random.default_rng([seed, 55]), centre, times)

    return BenchData(vectors, queries, key, seed, sampler=held_out), workload


def _noise_direction(
    n_docs: int, dims: int, n_queries: int, seed: int
) -> tuple[BenchData, Workload]:
    """``noisedir-shifted`` (module docstring)."""
    rank, noise, shift = 12, 0.3, 1.0
    rng = np.random.default_rng([seed, 61])
    basis = rng.normal(size=(rank, dims)).astype(np.float32)
    amplitude = np.float32(noise * np.sqrt(rank))
    span = np.linalg.qr(basis.T)[0]
    u = rng.normal(size=dims)
    u -= span @ (span.T @ u)  # orthogonal to the subspace: a direction only the noise has
    direction = (u / np.linalg.norm(u)).astype(np.float32)

    def draw(n: int, gen: np.random.Generator) -> npt.NDArray[np.float32]:
        out = np.empty((n, dims), dtype=np.float32)
        for start in range(0, n, _CHUNK):
            m = min(n, start + _CHUNK) - start
            z = gen.normal(size=(m, rank)).astype(np.float32)
            eps = gen.normal(size=(m, dims)).astype(np.float32)
            out[start : start + m] = z @ basis + amplitude * eps
        return out

    vectors = l2_normalise(draw(n_docs, rng))
    order = np.argsort(-(vectors @ direction), kind="stable")
    key = np.empty(n_docs, dtype=np.float64)
    key[order] = (np.arange(n_docs, dtype=np.float64) + 0.5) / n_docs

    def shifted(n: int, gen: np.random.Generator) -> npt.NDArray[np.float32]:
        raw = draw(n, gen)
        sign = np.where(np.arange(n) % 2 == 0, 1.0, -1.0).astype(np.float32)[:, None]
        size = np.linalg.norm(raw, axis=1, keepdims=True)
        return l2_normalise(raw + sign * np.float32(shift) * size * direction)

    queries = shifted(n_queries, np.random.default_rng([seed, 62]))

    def held_out(n: int) -> npt.NDArray[np.float32]:
        return l2_normalise(draw(n, np.random.default_rng([seed, 63])))

    def workload(n: int) -> npt.NDArray[np.float32]:
        return shifted(n, np.random.default_rng([seed, 64]))

    return BenchData(vectors, queries, key, seed, sampler=held_out), workload


def _tight(
    n_docs: int, dims: int, n_queries: int, seed: int, *, n_clusters: int, few: int
) -> tuple[BenchData, npt.NDArray[np.int64], Workload]:
    """``tight-few`` (module docstring)."""
    spread = 0.3
    rng = np.random.default_rng([seed, 71])
    centres = rng.normal(size=(n_clusters, dims)).astype(np.float32) / np.float32(np.sqrt(dims))
    scale = np.float32(spread / np.sqrt(dims))

    def draw(labels: npt.NDArray[np.int64], gen: np.random.Generator) -> npt.NDArray[np.float32]:
        noise = gen.normal(size=(labels.shape[0], dims)).astype(np.float32)
        return l2_normalise(centres[labels] + scale * noise)

    groups = rng.integers(0, n_clusters, size=n_docs).astype(np.int64)
    vectors = draw(groups, rng)
    key = _uniform_key(n_docs, rng)
    chosen = np.random.default_rng([seed, 74]).choice(n_clusters, size=few, replace=False)
    q_rng = np.random.default_rng([seed, 72])
    queries = draw(q_rng.choice(chosen, size=n_queries).astype(np.int64), q_rng)

    def held_out(n: int) -> npt.NDArray[np.float32]:
        gen = np.random.default_rng([seed, 73])
        return draw(gen.integers(0, n_clusters, size=n).astype(np.int64), gen)

    def workload(n: int) -> npt.NDArray[np.float32]:
        gen = np.random.default_rng([seed, 75])
        return draw(gen.choice(chosen, size=n).astype(np.int64), gen)

    return BenchData(vectors, queries, key, seed, sampler=held_out), groups, workload


def shifted_corpus(
    name: str, n_docs: int, dims: int, n_queries: int, seed: int, *, n_clusters: int, few: int
) -> tuple[BenchData, npt.NDArray[np.int64] | None, Workload]:
    """(data, groups, workload) of one corpus of :data:`SHIFTED_CORPORA` (the caller,
    `arecall.vector.adversarial.adversarial_corpus`, checks the arguments).

    Examples
    --------
    >>> data, groups, workload = shifted_corpus("lowrank-flipped", 2000, 32, 5, 7,
    ...                                         n_clusters=60, few=1)
    >>> data.vectors.shape, float(data.queries.mean(0) @ data.vectors.mean(0)) < 0
    ((2000, 32), True)
    """
    if name in ("lowrank-offmean", "lowrank-flipped"):
        data, workload = _aniso(n_docs, dims, n_queries, seed, flipped=name == "lowrank-flipped")
        return data, None, workload
    if name == "noisedir-shifted":
        data, workload = _noise_direction(n_docs, dims, n_queries, seed)
        return data, None, workload
    if name == "tight-few":
        return _tight(n_docs, dims, n_queries, seed, n_clusters=n_clusters, few=few)
    raise ValueError(f"not a shifted corpus: {name!r}")
