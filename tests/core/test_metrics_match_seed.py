"""The per-list metrics and placements equal authorized-recall 0.1.0's on random inputs."""

from __future__ import annotations

import authorized_recall as seed
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import arecall

ITEMS = [f"d{i}" for i in range(15)]
lists = st.lists(st.sampled_from(ITEMS), unique=True, max_size=15)
subsets = st.frozensets(st.sampled_from(ITEMS))
ks = st.integers(min_value=1, max_value=17)


@settings(max_examples=300, deadline=None)
@given(ranking=lists, relevant=subsets, allowed=subsets, k=ks)
def test_every_metric_equals_the_seed_package(ranking, relevant, allowed, k):
    ok = allowed.__contains__
    assert arecall.recall_at_k(ranking, relevant, k) == seed.recall_at_k(ranking, relevant, k)
    assert arecall.precision_at_k(ranking, relevant, k) == seed.precision_at_k(ranking, relevant, k)
    assert arecall.ndcg_at_k(ranking, relevant, k) == seed.ndcg_at_k(ranking, relevant, k)
    assert arecall.reciprocal_rank(ranking, relevant) == seed.reciprocal_rank(ranking, relevant)
    assert arecall.unusable_fraction_at_k(ranking, ok, k) == seed.unusable_fraction_at_k(
        ranking, ok, k
    )
    assert arecall.authorized_recall_at_k(ranking, relevant, ok, k) == (
        seed.authorized_recall_at_k(ranking, relevant, ok, k)
    )
    assert arecall.post_filter(ranking, ok, k) == seed.post_filter(ranking, ok, k)
    assert arecall.pre_filter(ranking, ok, k) == seed.pre_filter(ranking, ok, k)


@settings(max_examples=300, deadline=None)
@given(ranking=lists, allowed=subsets, k=ks)
def test_post_filter_is_a_subset_of_pre_filter(ranking, allowed, k):
    ok = allowed.__contains__
    assert set(arecall.post_filter(ranking, ok, k)) <= set(arecall.pre_filter(ranking, ok, k))


@settings(max_examples=300, deadline=None)
@given(ranking=lists, relevant=subsets, allowed=subsets, k=ks)
def test_gap_is_never_negative(ranking, relevant, allowed, k):
    ok = allowed.__contains__
    post = arecall.authorized_recall_at_k(arecall.post_filter(ranking, ok, k), relevant, ok, k)
    pre = arecall.authorized_recall_at_k(arecall.pre_filter(ranking, ok, k), relevant, ok, k)
    assert pre >= post


@settings(max_examples=200, deadline=None)
@given(ranking=lists, relevant=subsets, k=ks)
def test_authorized_recall_equals_recall_when_everything_is_authorized(ranking, relevant, k):
    everything = lambda _d: True  # noqa: E731
    assert arecall.authorized_recall_at_k(ranking, relevant, everything, k) == arecall.recall_at_k(
        ranking, relevant, k
    )


def test_empty_authorized_relevant_set_scores_one_by_the_seed_convention():
    assert arecall.authorized_recall_at_k(["a"], {"b"}, {"a"}.__contains__, 1) == 1.0


def test_precision_and_unusable_divide_by_k_not_by_what_came_back():
    assert arecall.precision_at_k(["a"], {"a"}, 4) == 0.25
    assert arecall.unusable_fraction_at_k(["x"], {"a"}.__contains__, 4) == 0.25


@pytest.mark.parametrize("fn", [arecall.post_filter, arecall.pre_filter])
def test_k_must_be_positive(fn):
    with pytest.raises(ValueError, match="positive"):
        fn(["a"], lambda _d: True, 0)
