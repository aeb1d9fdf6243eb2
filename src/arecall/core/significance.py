"""Paired significance for per-pair differences: bootstrap CIs and a sign-flip randomization test.

Why: a mean Δ@K = ARecall^pre − ARecall^post (or a difference between two runs) over a few
hundred query-principal pairs says nothing about whether it would survive another sample of
queries. Both procedures here work on the paired differences d_i = a_i − b_i, which is what
"paired" means: each query (or query-principal pair) is its own control.

* `paired_bootstrap_ci` — the nonparametric bootstrap of the mean of d: resample the n pairs
  with replacement, take the mean, repeat; the interval is BCa (bias-corrected and accelerated,
  scipy.stats.bootstrap's default, with the same formulas) or percentile.
* `paired_randomization_test` — under H0 (no difference) each d_i is as likely to be +|d_i| as
  −|d_i|; the p-value is the share of sign-flipped means at least as far from 0 as the observed
  one (two-sided). It enumerates all 2^n sign patterns when that is no more than
  ``n_resamples`` and n <= 20 (an exact test), else draws ``n_resamples`` patterns and reports
  (hits + 1) / (n_resamples + 1), which is never 0.

Speed without approximation: differences of recall values take few distinct values, so both
procedures draw *counts per distinct value* — a multinomial for the bootstrap, binomial sign
counts for the randomization test — which have exactly the distribution of resampling or
sign-flipping the individual pairs, at a cost proportional to the number of distinct values
instead of the number of pairs. `delta_significance`, what every report carries, always works
on that histogram (`delta_significance_counts`), however many distinct values there are: a
histogram is what blocks of pairs computed apart (shards of a cluster) merge exactly, so the
figures are the same bytes for any engine and block size. Up to 20 pairs the exact sign test
enumerates every pattern. `paired_bootstrap_ci` and `paired_randomization_test` resample the
pairs themselves (directly, in memory-bounded batches, when values rarely repeat); tests
compare them and the histogram forms with scipy.stats.bootstrap and
scipy.stats.permutation_test.

Degenerate input is not an error: when every difference is equal (e.g. all zero) the CI is
[d, d] and the p-value is 1 if d = 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from arecall.core.errors import ArecallError

__all__ = [
    "BootstrapCI",
    "RandomizationTest",
    "delta_significance",
    "delta_significance_counts",
    "exact_mean",
    "paired_bootstrap_ci",
    "paired_randomization_test",
    "resamples_bytes",
    "resamples_problem",
]

_BATCH_ELEMENTS = 1 << 22  # resample batch size in array elements (≈ 32 MB of float64)
_MAX_EXACT = 20  # enumerate all 2^n sign patterns up to n = 20 (≈ 10^6 patterns)


@dataclass(frozen=True)
class BootstrapCI:
    """A bootstrap confidence interval for the mean paired difference.

    Attributes
    ----------
    mean_diff : float
        Observed mean of a − b.
    low, high : float
        Interval bounds.
    confidence : float
    n : int
        Number of pairs.
    method : str
        ``"BCa"`` or ``"percentile"`` (BCa falls back to percentile when its bias correction
        is undefined, i.e. every resampled mean lies on one side of the observed one).
    """

    mean_diff: float
    low: float
    high: float
    confidence: float
    n: int
    method: str


@dataclass(frozen=True)
class RandomizationTest:
    """A paired sign-flip randomization test of mean(a − b) = 0 (two-sided).

    Attributes
    ----------
    mean_diff : float
    p_value : float
    n : int
    n_resamples : int
        Sign patterns evaluated (2^n when ``exact``).
    exact : bool
    """

    mean_diff: float
    p_value: float
    n: int
    n_resamples: int
    exact: bool


def _differences(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> np.ndarray:
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if x.ndim != 1 or y.ndim != 1:
        raise ArecallError(f"paired samples must be 1-D, got shapes {x.shape} and {y.shape}")
    if x.shape != y.shape:
        raise ArecallError(f"paired samples differ in length: {len(x)} and {len(y)}")
    if len(x) == 0:
        raise ArecallError("paired samples are empty")
    d = x - y
    if not np.all(np.isfinite(d)):
        raise ArecallError("paired samples contain NaN or infinite values")
    return d


def _check_resamples(n_resamples: int) -> None:
    if int(n_resamples) < 1:
        raise ArecallError(f"n_resamples must be at least 1, got {n_resamples}")


def min_resamples(confidence: float) -> int:
    """The fewest bootstrap resamples a ``confidence`` interval can be read from: each tail,
    (1 − confidence) / 2 of them, must hold one. With fewer, an end of the interval is an
    extreme resample (2 resamples gave [+0.013, +0.025] around a mean of +0.027).

    Examples
    --------
    >>> min_resamples(0.95), min_resamples(0.99)
    (40, 200)
    """
    return math.ceil(round(2.0 / (1.0 - confidence), 9))


def resamples_problem(n_resamples: int, confidence: float) -> str | None:
    """What is wrong with ``n_resamples`` for a ``confidence`` interval, or None: the one
    wording the API, the config and ``arecall evaluate`` share.

    Examples
    --------
    >>> resamples_problem(2, 0.95)
    'must be at least 40 for a 95% interval (each tail of the bootstrap needs a resample)'
    >>> resamples_problem(40, 0.95) is None
    True
    """
    least = min_resamples(confidence)
    if int(n_resamples) >= least:
        return None
    return (
        f"must be at least {least} for a {100 * confidence:g}% interval "
        "(each tail of the bootstrap needs a resample)"
    )


def _batched(total: int, width: int, draw: Callable[[int], np.ndarray]) -> np.ndarray:
    """Concatenate ``draw(size)`` over batches of at most ``_BATCH_ELEMENTS / width`` rows."""
    step = max(1, _BATCH_ELEMENTS // max(width, 1))
    return np.concatenate([draw(min(step, total - s)) for s in range(0, total, step)])


def _bootstrap_means(d: np.ndarray, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Means of ``n_resamples`` resamples of ``d`` with replacement."""
    n = len(d)
    values, counts = np.unique(d, return_counts=True)
    if len(values) * 4 <= n:
        p = counts / n

        def draw(size: int) -> np.ndarray:
            return np.asarray(rng.multinomial(n, p, size=size) @ values / n, dtype=np.float64)

        return _batched(n_resamples, len(values), draw)

    def draw_pairs(size: int) -> np.ndarray:
        return np.asarray(d[rng.integers(0, n, size=(size, n))].mean(axis=1), dtype=np.float64)

    return _batched(n_resamples, n, draw_pairs)


def paired_bootstrap_ci(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    *,
    confidence: float = 0.95,
    n_resamples: int = 9999,
    seed: int = 0,
    method: str = "BCa",
) -> BootstrapCI:
    """Bootstrap confidence interval for the mean of the paired differences a − b.

    Parameters
    ----------
    a, b : array-like of float, same length
        Paired observations (e.g. ARecall^pre and ARecall^post per query-principal pair).
    confidence : float
        Confidence level in (0, 1).
    n_resamples : int
        Bootstrap resamples.
    seed : int
        Seed of the numpy Generator; equal inputs and seed give equal intervals.
    method : {"BCa", "percentile"}

    Returns
    -------
    BootstrapCI

    Examples
    --------
    >>> ci = paired_bootstrap_ci([0.5, 0.7, 0.9, 0.6], [0.5, 0.5, 0.5, 0.5], seed=1)
    >>> round(ci.mean_diff, 3), ci.low <= ci.mean_diff <= ci.high
    (0.175, True)
    >>> z = paired_bootstrap_ci([1, 1], [1, 1]); (z.low, z.high)
    (0.0, 0.0)
    """
    d = _differences(a, b)
    _check_resamples(n_resamples)
    if not 0.0 < confidence < 1.0:
        raise ArecallError(f"confidence must be in (0, 1), got {confidence}")
    problem = resamples_problem(n_resamples, confidence)
    if problem is not None:
        raise ArecallError(f"n_resamples={n_resamples}: {problem}")
    if method not in ("BCa", "percentile"):
        raise ArecallError(f"method must be 'BCa' or 'percentile', got {method!r}")
    n = len(d)
    theta = float(d.mean())
    if np.all(d == d[0]):
        point = float(d[0])
        return BootstrapCI(point, point, point, confidence, n, method)
    rng = np.random.default_rng(seed)
    means = _bootstrap_means(d, int(n_resamples), rng)
    alpha = (1.0 - confidence) / 2.0
    lo_q, hi_q = alpha, 1.0 - alpha
    used = "percentile"
    if method == "BCa":
        from scipy import special  # loaded when an interval is computed

        # scipy.stats._resampling._bca_interval, with the jackknife of the mean in closed form
        below = np.count_nonzero(means < theta) + np.count_nonzero(means <= theta)
        z0 = special.ndtri(below / (2.0 * len(means)))
        jack = (n * theta - d) / (n - 1)
        dev = jack.mean() - jack
        den = 6.0 * np.sum(dev**2) ** 1.5
        accel = np.sum(dev**3) / den if den > 0 else np.nan
        z_lo, z_hi = special.ndtri(alpha), special.ndtri(1.0 - alpha)
        q_lo = special.ndtr(z0 + (z0 + z_lo) / (1.0 - accel * (z0 + z_lo)))
        q_hi = special.ndtr(z0 + (z0 + z_hi) / (1.0 - accel * (z0 + z_hi)))
        if np.isfinite(q_lo) and np.isfinite(q_hi):
            lo_q, hi_q, used = float(q_lo), float(q_hi), "BCa"
    low, high = np.percentile(means, [100.0 * lo_q, 100.0 * hi_q])
    return BootstrapCI(theta, float(low), float(high), confidence, n, used)


def paired_randomization_test(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    *,
    n_resamples: int = 9999,
    seed: int = 0,
) -> RandomizationTest:
    """Two-sided paired sign-flip randomization test of mean(a − b) = 0.

    Parameters
    ----------
    a, b : array-like of float, same length
    n_resamples : int
        Random sign patterns; all 2^n are enumerated (an exact test) when 2^n <= n_resamples
        and n <= 20.
    seed : int

    Returns
    -------
    RandomizationTest

    Examples
    --------
    >>> t = paired_randomization_test([1.0, 1.0, 1.0], [0.0, 0.0, 0.0])
    >>> t.p_value, t.exact
    (0.25, True)
    >>> paired_randomization_test([0.3, 0.2], [0.3, 0.2]).p_value
    1.0
    """
    d = _differences(a, b)
    _check_resamples(n_resamples)
    n = len(d)
    observed = float(d.mean())
    # the same relative tolerance scipy.stats.permutation_test uses for "at least as extreme"
    tol = max(1e-14, abs(observed) * 1e-14)
    threshold = abs(observed) - tol
    exact = n <= _MAX_EXACT and 2**n <= n_resamples
    if observed == 0.0 or np.all(d == 0):
        return RandomizationTest(observed, 1.0, n, 2**n if exact else int(n_resamples), exact)
    if exact:
        bits = (np.arange(2**n, dtype=np.int64)[:, None] >> np.arange(n)) & 1
        null = (1.0 - 2.0 * bits) @ d / n
        hits = int(np.count_nonzero(np.abs(null) >= threshold))
        return RandomizationTest(observed, hits / len(null), n, len(null), True)
    rng = np.random.default_rng(seed)
    magnitudes, counts = np.unique(np.abs(d[d != 0]), return_counts=True)
    total = float(np.abs(d).sum())
    if len(magnitudes) * 4 <= n:

        def draw(size: int) -> np.ndarray:
            positive = rng.binomial(counts, 0.5, size=(size, len(counts)))
            return np.asarray((2.0 * positive @ magnitudes - total) / n, dtype=np.float64)

        null = _batched(int(n_resamples), len(magnitudes), draw)
    else:
        absd = np.abs(d)

        def draw_pairs(size: int) -> np.ndarray:
            positive = rng.random((size, n)) < 0.5
            return np.asarray((2.0 * (positive @ absd) - total) / n, dtype=np.float64)

        null = _batched(int(n_resamples), n, draw_pairs)
    hits = int(np.count_nonzero(np.abs(null) >= threshold))
    p = (hits + 1) / (len(null) + 1)
    return RandomizationTest(observed, float(p), n, len(null), False)


def delta_significance(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    *,
    confidence: float = 0.95,
    n_resamples: int = 9999,
    seed: int = 0,
) -> dict[str, Any]:
    """Both procedures for mean(a − b) as one JSON-ready dict.

    Keys: ``mean_diff``, ``low``, ``high``, ``p_value``, ``n``, ``confidence``, ``method``
    (the CI method), ``exact`` (whether the p-value enumerated every sign pattern). This is
    what reports and MLflow carry for Δ@K = pre − post.

    The differences are reduced to their histogram first and `delta_significance_counts` does
    the rest: one definition, so a result computed from per-pair arrays and one merged from the
    histograms of blocks of pairs (a sharded evaluation) are the same bytes.

    Examples
    --------
    >>> s = delta_significance([1.0, 1.0, 1.0], [0.5, 0.5, 0.5])
    >>> sorted(s)
    ['confidence', 'exact', 'high', 'low', 'mean_diff', 'method', 'n', 'p_value']
    >>> s["mean_diff"], s["low"], s["high"], s["p_value"]
    (0.5, 0.5, 0.5, 0.25)
    """
    values, counts = np.unique(_differences(a, b), return_counts=True)
    return delta_significance_counts(
        values, counts, confidence=confidence, n_resamples=n_resamples, seed=seed
    )


def _delta_pairs(
    d: np.ndarray, *, confidence: float, n_resamples: int, seed: int
) -> dict[str, Any]:
    """Both per-pair procedures on the differences ``d`` (few pairs: the exact test)."""
    zero = np.zeros_like(d)
    ci = paired_bootstrap_ci(d, zero, confidence=confidence, n_resamples=n_resamples, seed=seed)
    test = paired_randomization_test(d, zero, n_resamples=n_resamples, seed=seed)
    out = asdict(ci)
    out.update(p_value=test.p_value, exact=test.exact)
    return out


# -- from counts: the same procedures on a histogram of the differences --------------------------


def exact_mean(values: np.ndarray, counts: np.ndarray) -> float:
    """The mean of ``values`` each repeated ``counts`` times, correctly rounded.

    Why: a mean accumulated block by block in floating point depends on the blocks; summed
    exactly it does not, so any split of an evaluation gives the same figure.

    Examples
    --------
    >>> exact_mean(np.array([0.1, 0.2]), np.array([1, 2]))  # (0.1 + 0.2 + 0.2) / 3
    0.16666666666666669
    """
    n = int(np.sum(counts))
    if n == 0:
        raise ArecallError("a mean of no values")
    total = sum(
        (Fraction(float(v)) * int(c) for v, c in zip(values, counts, strict=True)), Fraction(0)
    )
    return float(total / n)


def delta_significance_counts(
    values: np.ndarray,
    counts: np.ndarray,
    *,
    confidence: float = 0.95,
    n_resamples: int = 9999,
    seed: int = 0,
) -> dict[str, Any]:
    """`delta_significance` of differences given as a histogram: distinct ``values`` of
    a − b, each seen ``counts`` times (what an evaluation too large to keep per pair keeps).

    The bootstrap draws counts per distinct value (a multinomial) and the randomization test
    sign counts per distinct magnitude (binomials), as `delta_significance` does when values
    repeat — exactly the distribution of resampling the pairs themselves; the observed mean
    is exact (`exact_mean`). Up to 20 pairs, the pairs are rebuilt and the exact test used.

    Examples
    --------
    >>> s = delta_significance_counts(np.array([0.0, 0.5]), np.array([30, 10]))
    >>> s["mean_diff"], s["n"], s["low"] <= 0.125 <= s["high"]
    (0.125, 40, True)
    """
    values = np.asarray(values, dtype=np.float64)
    counts = np.asarray(counts, dtype=np.int64)
    keep = counts > 0
    values, counts = values[keep], counts[keep]
    n = int(counts.sum())
    if n == 0:
        raise ArecallError("paired samples are empty")
    if not np.all(np.isfinite(values)):
        raise ArecallError("paired samples contain NaN or infinite values")
    if not 0.0 < confidence < 1.0:
        raise ArecallError(f"confidence must be in (0, 1), got {confidence}")
    if n <= _MAX_EXACT:
        order = np.argsort(values, kind="stable")
        d = np.repeat(values[order], counts[order])
        return _delta_pairs(d, confidence=confidence, n_resamples=n_resamples, seed=seed)
    _check_resamples(n_resamples)
    problem = resamples_problem(n_resamples, confidence)
    if problem is not None:
        raise ArecallError(f"n_resamples={n_resamples}: {problem}")
    order = np.argsort(values)
    values, counts = values[order], counts[order]
    theta = exact_mean(values, counts)
    ci = _bca_from_counts(values, counts, n, theta, confidence, int(n_resamples), seed)
    p_value = _randomization_from_counts(values, counts, n, theta, int(n_resamples), seed)
    return {
        "mean_diff": theta,
        "low": ci[0],
        "high": ci[1],
        "confidence": confidence,
        "n": n,
        "method": ci[2],
        "p_value": p_value,
        "exact": False,
    }


def _bca_from_counts(
    values: np.ndarray,
    counts: np.ndarray,
    n: int,
    theta: float,
    confidence: float,
    n_resamples: int,
    seed: int,
) -> tuple[float, float, str]:
    if len(values) == 1:
        return float(values[0]), float(values[0]), "BCa"
    rng = np.random.default_rng(seed)
    if len(values) * 4 <= n:
        p = counts / n

        def draw(size: int) -> np.ndarray:
            return np.asarray(rng.multinomial(n, p, size=size) @ values / n, dtype=np.float64)

        means = _batched(n_resamples, len(values), draw)
    else:  # values rarely repeat: drawing pairs is cheaper than a multinomial per resample
        means = _bootstrap_means(np.repeat(values, counts), n_resamples, rng)
    alpha = (1.0 - confidence) / 2.0
    lo_q, hi_q, used = alpha, 1.0 - alpha, "percentile"
    from scipy import special

    below = np.count_nonzero(means < theta) + np.count_nonzero(means <= theta)
    z0 = special.ndtri(below / (2.0 * len(means)))
    jack = (n * theta - values) / (n - 1)
    dev = float(np.dot(counts, jack)) / n - jack
    den = 6.0 * float(np.dot(counts, dev**2)) ** 1.5
    accel = float(np.dot(counts, dev**3)) / den if den > 0 else np.nan
    z_lo, z_hi = special.ndtri(alpha), special.ndtri(1.0 - alpha)
    q_lo = special.ndtr(z0 + (z0 + z_lo) / (1.0 - accel * (z0 + z_lo)))
    q_hi = special.ndtr(z0 + (z0 + z_hi) / (1.0 - accel * (z0 + z_hi)))
    if np.isfinite(q_lo) and np.isfinite(q_hi):
        lo_q, hi_q, used = float(q_lo), float(q_hi), "BCa"
    low, high = np.percentile(means, [100.0 * lo_q, 100.0 * hi_q])
    return float(low), float(high), used


def _randomization_from_counts(
    values: np.ndarray, counts: np.ndarray, n: int, theta: float, n_resamples: int, seed: int
) -> float:
    if theta == 0.0 or np.all(values == 0):
        return 1.0
    tol = max(1e-14, abs(theta) * 1e-14)
    threshold = abs(theta) - tol
    nonzero = values != 0
    magnitudes, inverse = np.unique(np.abs(values[nonzero]), return_inverse=True)
    weights = np.bincount(inverse.ravel(), weights=counts[nonzero], minlength=len(magnitudes))
    per = weights.astype(np.int64)
    total = float(np.dot(per, magnitudes))
    rng = np.random.default_rng(seed)
    if len(magnitudes) * 4 <= n:

        def draw(size: int) -> np.ndarray:
            positive = rng.binomial(per, 0.5, size=(size, len(per)))
            return np.asarray((2.0 * positive @ magnitudes - total) / n, dtype=np.float64)

        null = _batched(n_resamples, len(magnitudes), draw)
    else:  # magnitudes rarely repeat: a sign per pair is cheaper than a binomial per magnitude
        absd = np.repeat(np.abs(values), counts)

        def draw_pairs(size: int) -> np.ndarray:
            positive = rng.random((size, n)) < 0.5
            return np.asarray((2.0 * (positive @ absd) - total) / n, dtype=np.float64)

        null = _batched(n_resamples, n, draw_pairs)
    hits = int(np.count_nonzero(np.abs(null) >= threshold))
    return float((hits + 1) / (len(null) + 1))


#: Bytes per resample the bootstrap and the randomization test hold at once (the resampled
#: means, their sorted copy for the percentiles, the null distribution).
RESAMPLE_BYTES = 3 * 8


def resamples_bytes(n_resamples: int) -> int:
    """Memory the resampling of one interval holds for ``n_resamples`` resamples (bytes).

    Examples
    --------
    >>> resamples_bytes(9999)
    239976
    """
    return RESAMPLE_BYTES * int(n_resamples)
