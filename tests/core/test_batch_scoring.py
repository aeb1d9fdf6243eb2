"""The vectorised all-pairs code equals the per-list definitions, exactly."""

from __future__ import annotations

import statistics

import numpy as np
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import arecall
from arecall.core.placed_lists import place_all
from arecall.core.ranking import rank_queries, rank_scores
from arecall.core.scoring import exact_mean, score_pairs

from tests.helpers import rank_world


@st.composite
def worlds(draw):
    n_docs = draw(st.integers(1, 12))
    n_q = draw(st.integers(1, 4))
    n_p = draw(st.integers(1, 3))
    scores = draw(
        st.lists(
            st.lists(st.sampled_from([0.0, 0.1, 0.5, 0.5, 0.9]), min_size=n_docs, max_size=n_docs),
            min_size=n_q,
            max_size=n_q,
        )
    )
    rel = draw(
        st.lists(
            st.lists(st.booleans(), min_size=n_docs, max_size=n_docs), min_size=n_q, max_size=n_q
        )
    )
    acl = draw(
        st.lists(
            st.lists(st.booleans(), min_size=n_docs, max_size=n_docs), min_size=n_p, max_size=n_p
        )
    )
    ks = tuple(sorted(draw(st.sets(st.integers(1, 14), min_size=1, max_size=3))))
    return np.array(scores), np.array(rel), np.array(acl), ks


@settings(max_examples=150, deadline=None)
@given(worlds(), st.one_of(st.none(), st.integers(1, 6)))
def test_batch_metrics_equal_per_list_metrics_for_every_pair_at_any_kept_depth(world, depth):
    """A shallow ranking is extended exactly as far as the pre-filter needs: same numbers."""
    scores, rel, acl, ks = world
    acl_m, rel_m = sp.csr_matrix(acl), sp.csr_matrix(rel.astype(float))
    ranked_all, ranking = rank_world(scores, rel_m, acl_m, ks, depth)
    lists = place_all(ranking, acl_m, max(ks))
    got = score_pairs(ranking, lists, rel_m, acl_m, ks)
    for q in range(scores.shape[0]):
        ranked = [f"d{j}" for j in ranked_all[q] if j >= 0]
        relevant = {f"d{j}" for j in np.flatnonzero(rel[q])}
        assert got.reciprocal_rank[q] == arecall.reciprocal_rank(ranked, relevant)
        for p in range(acl.shape[0]):
            ok = {f"d{j}" for j in np.flatnonzero(acl[p])}.__contains__
            for i, k in enumerate(ks):
                post = arecall.post_filter(ranked, ok, k)
                pre = arecall.pre_filter(ranked, ok, k)
                m = {name: arr[p, q, i] for name, arr in got.metrics.items()}
                assert m["recall"] == arecall.recall_at_k(ranked, relevant, k)
                assert m["precision"] == arecall.precision_at_k(ranked, relevant, k)
                assert abs(m["ndcg"] - arecall.ndcg_at_k(ranked, relevant, k)) < 1e-12
                assert m["unusable"] == arecall.unusable_fraction_at_k(ranked, ok, k)
                assert m["arecall_post"] == arecall.authorized_recall_at_k(post, relevant, ok, k)
                assert m["arecall_pre"] == arecall.authorized_recall_at_k(pre, relevant, ok, k)
                assert m["returned_post"] == len(post) / k
                assert m["returned_pre"] == len(pre) / k


def test_ranking_breaks_ties_by_ascending_document_id():
    ranking = rank_scores(sp.csr_matrix([[0.5, 0.9, 0.5, 0.0, 0.5]])).padded()
    assert ranking.tolist() == [[1, 0, 2, 4]]


def test_ranking_drops_documents_scoring_zero_and_respects_depth():
    r = rank_scores(sp.csr_matrix([[0.0, 0.3, 0.2, 0.1]]), depth=2)
    assert r.padded().tolist() == [[1, 2]]
    assert r.n_positive.tolist() == [3]


def test_a_short_principal_gets_its_next_authorized_items_from_below_the_kept_depth():
    scores = sp.csr_matrix([np.linspace(1.0, 0.01, 100)])
    acl = sp.csr_matrix(np.isin(np.arange(100), [1, 50, 60, 90])[None, :])
    r = rank_queries([scores], n_queries=1, depth=3, acl=acl, k_max=3)
    assert r.lengths.tolist() == [3]  # the head: max(depth, K)
    assert r.tail_doc.tolist() == [50, 60] and r.tail_rank.tolist() == [50, 60]
    lists = place_all(r, acl, 3)
    assert lists.pre.tolist() == [[[1, 50, 60]]] and lists.post.tolist() == [[[1, -1, -1]]]


def test_first_relevant_rank_is_exact_even_when_the_ranking_is_cut():
    scores = sp.csr_matrix([np.linspace(1.0, 0.01, 100)])
    rel = sp.csr_matrix(np.isin(np.arange(100), [70])[None, :].astype(float))
    r = rank_queries([scores], n_queries=1, depth=5, relevance=rel)
    assert r.lengths.tolist() == [5] and r.first_relevant.tolist() == [71]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([0.0, 1 / 3, 0.5, 2 / 3, 0.8625, 1.0, 0.1]), min_size=1))
def test_exact_mean_is_the_correctly_rounded_mean_like_statistics_mean(values):
    assert exact_mean(np.array(values)) == statistics.mean(values)
