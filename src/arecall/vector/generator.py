"""verity's benchmark generator, reproduced draw for draw, plus a low-rank variant.

The filtered-search experiment only means something if its corpus is the one verity published
its table on, so ``generate`` consumes one ``numpy.random.default_rng(seed)`` stream in exactly
verity 0.1.1's order: document vectors, query vectors, then one uniform draw per document. A
document matches selectivity ``s`` iff its draw is ``< s``; because the draw is fixed per
document, the 1% set is a subset of the 3% set and so on, so rows of the table differ only in
the filter. The test suite checks the vectors and draws against verity's own code.

Isotropic Gaussians in 128 dimensions are the hardest case there is for a graph index (every
point is nearly equidistant from every other), which is fine at 2,000 documents but makes HNSW
lose to a brute-force scan at a million. ``generate_lowrank`` draws the same shapes from a
16-dimensional subspace plus noise — the structure real embeddings have — so the benchmark can
show both regimes. It uses its own stream and never touches verity's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from arecall.vector._checks import check_positive_int, check_selectivity

__all__ = [
    "VERITY_DEFAULTS",
    "BenchData",
    "generate",
    "generate_lowrank",
    "l2_normalise",
]

#: verity 0.1.1's ``run_selectivity_benchmark`` defaults (its README table).
VERITY_DEFAULTS: dict[str, object] = {
    "n_docs": 2000,
    "dims": 128,
    "n_queries": 50,
    "k": 10,
    "seed": 42,
    "m": 16,
    "ef_search": 64,
    "selectivities": (0.01, 0.03, 0.10, 0.30, 1.0),
}


def l2_normalise(matrix: npt.NDArray[np.floating]) -> npt.NDArray[np.float32]:
    """Scale each row to unit L2 norm (zero rows stay zero), as float32, bit for bit as verity.

    verity 0.1.1 normalises one vector at a time: ``x / float(np.linalg.norm(x))`` on float32
    ``x``, i.e. a float32 BLAS dot product, a float32 square root, and a float32 division.
    ``np.linalg.norm(x, axis=1)`` sums the squares in another order and differs by up to 3 ulps,
    so the rows' squared norms here come from ``np.vecdot`` (the same dot kernel as
    ``x.dot(x)``, vectorised); the test suite checks the result against verity's own function.

    Examples
    --------
    >>> l2_normalise(np.array([[3.0, 4.0], [0.0, 0.0]])).tolist()
    [[0.6000000238418579, 0.800000011920929], [0.0, 0.0]]
    """
    x = np.ascontiguousarray(matrix, dtype=np.float32)
    norms = np.sqrt(np.vecdot(x, x))[:, None]
    norms[norms == 0.0] = 1.0
    return np.ascontiguousarray(x / norms, dtype=np.float32)


@dataclass(frozen=True)
class BenchData:
    """A generated corpus: document vectors, query vectors, and one filter draw per document.

    Attributes
    ----------
    vectors : ndarray of float32, shape (n_docs, dims)
        Unit-norm unless generated with ``normalise=False``.
    queries : ndarray of float32, shape (n_queries, dims)
    draws : ndarray of float64, shape (n_docs,)
        Uniform [0, 1) per document; document i matches selectivity s iff ``draws[i] < s``.
    seed : int
    """

    vectors: npt.NDArray[np.float32]
    queries: npt.NDArray[np.float32]
    draws: npt.NDArray[np.float64]
    seed: int
    sampler: Callable[[int], npt.NDArray[np.float32]] | None = field(
        default=None, repr=False, compare=False
    )
    """Draws ``n`` fresh queries from the corpus's query distribution (held-out queries)."""

    @property
    def n_docs(self) -> int:
        """Number of documents."""
        return int(self.vectors.shape[0])

    @property
    def dims(self) -> int:
        """Vector dimension."""
        return int(self.vectors.shape[1])

    def mask(self, selectivity: float) -> npt.NDArray[np.bool_]:
        """Boolean mask of the documents matching ``selectivity`` (``draws < selectivity``).

        Examples
        --------
        >>> int(generate().mask(0.01).sum())
        21
        """
        return np.asarray(self.draws < check_selectivity(selectivity), dtype=np.bool_)

    def matching(self, selectivity: float) -> int:
        """Number of documents matching ``selectivity``.

        Examples
        --------
        >>> generate().matching(0.3)
        611
        """
        return int(self.mask(selectivity).sum())

    def calibration_queries(self, n: int = 100) -> npt.NDArray[np.float32]:
        """``n`` held-out queries from the same distribution, from a stream verity never uses.

        For the ``auto`` planner's calibration, so that it is never tuned on the queries it is
        scored on. Isotropic Gaussians unless the generator supplied its own ``sampler``.

        Examples
        --------
        >>> generate(100, 8, 2).calibration_queries(3).shape
        (3, 8)
        """
        n = check_positive_int("n_calibration", n)
        if self.sampler is not None:
            return self.sampler(n)
        rng = np.random.default_rng([self.seed, 1])
        return l2_normalise(rng.normal(size=(n, self.dims)).astype(np.float32))


def generate(
    n_docs: int = 2000,
    dims: int = 128,
    n_queries: int = 50,
    seed: int = 42,
    *,
    normalise: bool = True,
) -> BenchData:
    """verity 0.1.1's bench corpus: Gaussian vectors and queries, one uniform draw per document.

    Parameters
    ----------
    n_docs, dims, n_queries : int
        Corpus size, dimension and number of queries (verity: 2000, 128, 50).
    seed : int
        Seed of the single ``numpy.random.default_rng`` stream (verity: 42).
    normalise : bool
        L2-normalise vectors and queries (verity does, on the way into its indexes), so that
        the dot product is the cosine. ``False`` returns the raw float32 draws.

    Returns
    -------
    BenchData

    Examples
    --------
    >>> data = generate()
    >>> [data.matching(s) for s in (0.01, 0.03, 0.10, 0.30, 1.0)]
    [21, 79, 228, 611, 2000]
    """
    n_docs = check_positive_int("n_docs", n_docs)
    dims = check_positive_int("dims", dims)
    n_queries = check_positive_int("n_queries", n_queries)
    seed = check_positive_int("seed", seed, minimum=0)
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(n_docs, dims)).astype(np.float32)
    queries = rng.normal(size=(n_queries, dims)).astype(np.float32)
    draws = rng.random(n_docs)
    if normalise:
        vectors, queries = l2_normalise(vectors), l2_normalise(queries)
    return BenchData(vectors=vectors, queries=queries, draws=draws, seed=seed)


def generate_lowrank(
    n_docs: int = 2000,
    dims: int = 128,
    n_queries: int = 50,
    seed: int = 42,
    *,
    rank: int = 16,
    noise: float = 0.1,
) -> BenchData:
    """Unit vectors from a random ``rank``-dimensional subspace plus isotropic ``noise``.

    Documents and queries share the distribution; draws are uniform per document as in
    ``generate``. Generated in chunks so a million 128-d vectors never need a float64 copy.
    ``calibration_queries`` draws from the same subspace (its own stream).

    Examples
    --------
    >>> generate_lowrank(100, 8, 3, rank=2).vectors.shape
    (100, 8)
    """
    n_docs = check_positive_int("n_docs", n_docs)
    dims = check_positive_int("dims", dims)
    n_queries = check_positive_int("n_queries", n_queries)
    rank = check_positive_int("rank", rank)
    seed = check_positive_int("seed", seed, minimum=0)
    rng = np.random.default_rng([seed, 2])
    basis = rng.normal(size=(rank, dims)).astype(np.float32)

    def draw(n: int, rng: np.random.Generator = rng) -> npt.NDArray[np.float32]:
        out = np.empty((n, dims), dtype=np.float32)
        for start in range(0, n, 65536):
            stop = min(n, start + 65536)
            z = rng.normal(size=(stop - start, rank)).astype(np.float32)
            eps = rng.normal(size=(stop - start, dims)).astype(np.float32)
            out[start:stop] = z @ basis + np.float32(noise * np.sqrt(rank)) * eps
        return l2_normalise(out)

    def held_out(n: int) -> npt.NDArray[np.float32]:
        return draw(n, np.random.default_rng([seed, 3]))

    vectors = draw(n_docs)
    queries = draw(n_queries)
    draws = rng.random(n_docs)
    return BenchData(vectors=vectors, queries=queries, draws=draws, seed=seed, sampler=held_out)
