"""Paired bootstrap CIs and the sign-flip randomization test agree with scipy.stats and stay
fast and well-defined at the sizes the score stage uses (~10^4 query-principal pairs)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from arecall.core.errors import ArecallError
from arecall.core.significance import (
    delta_significance,
    delta_significance_counts,
    paired_bootstrap_ci,
    paired_randomization_test,
)


def _mean_diff(x, y, axis=-1):
    return np.mean(x - y, axis=axis)


def recall_like(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """pre ≥ post, both multiples of 1/10 — few distinct differences, like Δ@K."""
    rng = np.random.default_rng(seed)
    post = rng.integers(0, 11, n) / 10
    pre = np.minimum(post + rng.choice([0, 0, 0, 0.1, 0.2, 0.5], n), 1.0)
    return pre, post


def test_bootstrap_ci_matches_scipy_bootstrap_on_continuous_differences() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.random(400), rng.random(400) + 0.05
    ours = paired_bootstrap_ci(a, b, n_resamples=4000, seed=5)
    ref = stats.bootstrap((a - b,), np.mean, n_resamples=4000, rng=np.random.default_rng(5))
    width = ref.confidence_interval.high - ref.confidence_interval.low
    assert ours.method == "BCa"
    assert abs(ours.low - ref.confidence_interval.low) <= 0.05 * width
    assert abs(ours.high - ref.confidence_interval.high) <= 0.05 * width


def test_bootstrap_ci_matches_scipy_on_few_distinct_differences() -> None:
    pre, post = recall_like(600, 1)
    for method in ("BCa", "percentile"):
        ours = paired_bootstrap_ci(pre, post, n_resamples=9999, seed=2, method=method)
        ref = stats.bootstrap(
            (pre - post,), np.mean, n_resamples=9999, method=method, rng=np.random.default_rng(2)
        ).confidence_interval
        width = ref.high - ref.low
        assert abs(ours.low - ref.low) <= 0.06 * width, method
        assert abs(ours.high - ref.high) <= 0.06 * width, method
        assert ours.mean_diff == pytest.approx(float(np.mean(pre - post)), abs=1e-15)


def test_exact_randomization_p_value_equals_scipy_permutation_test() -> None:
    rng = np.random.default_rng(4)
    for _ in range(5):
        a = rng.integers(0, 5, 11) / 4
        b = rng.integers(0, 5, 11) / 4
        ours = paired_randomization_test(a, b, n_resamples=9999)
        ref = stats.permutation_test(
            (a, b), _mean_diff, permutation_type="samples", vectorized=True, n_resamples=9999
        )
        assert ours.exact
        assert ours.p_value == pytest.approx(ref.pvalue, abs=1e-12)


def test_monte_carlo_randomization_p_value_is_close_to_scipy() -> None:
    pre, post = recall_like(150, 8)
    post = post + np.random.default_rng(0).choice([0, 0.1, -0.1], 150)
    ours = paired_randomization_test(pre, post, n_resamples=9999, seed=1)
    ref = stats.permutation_test(
        (pre, post),
        _mean_diff,
        permutation_type="samples",
        vectorized=True,
        n_resamples=9999,
        rng=np.random.default_rng(1),
    )
    assert not ours.exact
    assert abs(ours.p_value - ref.pvalue) <= 0.02


def test_all_zero_differences_give_a_zero_interval_and_p_value_one() -> None:
    same = np.linspace(0, 1, 10_000)
    ci = paired_bootstrap_ci(same, same)
    test = paired_randomization_test(same, same)
    assert (ci.mean_diff, ci.low, ci.high) == (0.0, 0.0, 0.0)
    assert test.p_value == 1.0
    assert delta_significance(same, same)["p_value"] == 1.0


def test_results_are_deterministic_for_a_seed() -> None:
    pre, post = recall_like(500, 2)
    assert paired_bootstrap_ci(pre, post, seed=7) == paired_bootstrap_ci(pre, post, seed=7)
    assert paired_randomization_test(pre, post, seed=7) == paired_randomization_test(
        pre, post, seed=7
    )


def test_ten_thousand_pairs_take_well_under_a_second_for_recall_like_differences() -> None:
    pre, post = recall_like(10_000, 5)
    start = time.perf_counter()
    out = delta_significance(pre, post, n_resamples=9999)
    assert time.perf_counter() - start < 1.0
    assert out["low"] <= out["mean_diff"] <= out["high"]
    assert out["p_value"] == pytest.approx(1 / 10_000)


def test_ten_thousand_continuous_pairs_stay_within_a_few_seconds() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.random(10_000), rng.random(10_000)
    start = time.perf_counter()
    delta_significance(a, b, n_resamples=2000)
    assert time.perf_counter() - start < 5.0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=1, max_size=40),
    st.integers(0, 2**16),
)
def test_interval_is_ordered_and_p_value_is_a_probability(pairs, seed) -> None:
    a = np.array([x for x, _ in pairs]) / 4
    b = np.array([y for _, y in pairs]) / 4
    ci = paired_bootstrap_ci(a, b, n_resamples=500, seed=seed)
    test = paired_randomization_test(a, b, n_resamples=500, seed=seed)
    d = a - b
    assert d.min() - 1e-12 <= ci.low <= ci.high <= d.max() + 1e-12
    assert 0.0 < test.p_value <= 1.0
    if np.all(d == 0):
        assert (ci.low, ci.high, test.p_value) == (0.0, 0.0, 1.0)


@pytest.mark.parametrize(
    ("a", "b", "message"),
    [
        ([1.0, 2.0], [1.0], "differ in length"),
        ([], [], "empty"),
        ([1.0, float("nan")], [0.0, 0.0], "NaN"),
    ],
)
def test_bad_samples_are_errors(a, b, message) -> None:
    with pytest.raises(ArecallError, match=message):
        paired_bootstrap_ci(a, b)
    with pytest.raises(ArecallError, match=message):
        paired_randomization_test(a, b)


@pytest.mark.parametrize(("confidence", "least"), [(0.95, 40), (0.9, 20), (0.99, 200)])
def test_a_bootstrap_needs_a_resample_in_each_tail(confidence: float, least: int) -> None:
    """Fewer resamples than 2 / (1 - confidence) leave a tail of the interval empty."""
    from arecall.core.significance import min_resamples

    assert min_resamples(confidence) == least
    a, b = [0.2, 0.9, 0.4, 0.8, 0.1], [0.1, 0.3, 0.4, 0.2, 0.0]
    ci = paired_bootstrap_ci(a, b, confidence=confidence, n_resamples=least)
    assert ci.low <= ci.mean_diff <= ci.high
    with pytest.raises(ArecallError, match=f"must be at least {least} for a"):
        paired_bootstrap_ci(a, b, confidence=confidence, n_resamples=least - 1)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(0, 6), min_size=1, max_size=60),
    st.lists(st.integers(1, 6), min_size=1, max_size=60),
    st.integers(1, 7),
)
def test_the_significance_of_pairs_is_the_significance_of_their_merged_block_histograms(
    hits, sizes, blocks
) -> None:
    """One definition: per-pair arrays, and histograms of any split of them merged (what a
    sharded evaluation's blocks send back), give the same bytes."""
    n = min(len(hits), len(sizes))
    pre = np.array([min(h, s) for h, s in zip(hits[:n], sizes[:n], strict=True)]) / np.array(
        sizes[:n]
    )
    post = pre * np.array([(i % 3) != 0 for i in range(n)])
    whole = delta_significance(pre, post, n_resamples=199, seed=3)
    merged: dict[float, int] = {}
    for part in np.array_split(pre - post, blocks):
        values, counts = np.unique(part, return_counts=True)
        for v, c in zip(values.tolist(), counts.tolist(), strict=True):
            merged[v] = merged.get(v, 0) + c
    keys = sorted(merged)
    parts = delta_significance_counts(
        np.array(keys), np.array([merged[v] for v in keys]), n_resamples=199, seed=3
    )
    assert parts == whole
