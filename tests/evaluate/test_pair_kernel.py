"""The sparse pair kernel (`arecall.evaluate.kernels.pair_counts`) gives exactly the counts of
the window-scan kernel it replaced (`tests/evaluate/_windowed_kernel.py`): every (principal,
query, K) count, on random runs with tied scores, many principals, principals with the same
documents, documents with the same principals, relevant results below the deepest K, judged
queries the run never returned, and any slice of principals (a cluster's split)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from arecall.evaluate.kernels import (
    EvalQrels,
    authorization_tables,
    missing,
    pair_counts,
    pair_inputs,
    prepare,
)
from arecall.io.acl import Acl
from arecall.io.trec import Qrels, Run

from tests.evaluate import _windowed_kernel as windowed

DOCS = [f"d{i}" for i in range(24)]


@st.composite
def cases(draw):
    queries = [f"q{i}" for i in range(draw(st.integers(1, 6)))]
    scores = st.integers(0, 3).map(float)  # few distinct scores: many ties
    run = {
        q: draw(st.dictionaries(st.sampled_from(DOCS), scores, max_size=len(DOCS))) for q in queries
    }
    run = {q: r for q, r in run.items() if r}
    if not run:
        run = {queries[0]: {DOCS[0]: 1.0}}
    qrels = {
        q: draw(st.dictionaries(st.sampled_from(DOCS), st.integers(-1, 3), min_size=1, max_size=10))
        for q in queries
    }
    # principals drawn from a few document sets: many share their authorization exactly
    n_sets = draw(st.integers(1, 6))
    sets = [draw(st.sets(st.sampled_from(DOCS))) for _ in range(n_sets)]
    n_principals = draw(st.integers(1, 40))
    grants = {f"p{i}": sorted(sets[draw(st.integers(0, n_sets - 1))]) for i in range(n_principals)}
    ks = tuple(sorted(draw(st.sets(st.integers(1, 12), min_size=1, max_size=4))))
    return run, qrels, grants, ks


def _both(prepared, acl: Acl, ks: tuple[int, ...], start: int, stop: int):
    shared = pair_inputs(prepared, ks)
    new = pair_counts(start, stop, authorization_tables(acl, start, stop), **shared)
    old = windowed.pair_counts(
        start, stop, windowed.authorization_tables(acl, start, stop), **shared
    )
    return new, old


@settings(max_examples=150, deadline=None)
@given(case=cases(), cut=st.integers(0, 40))
def test_the_sparse_kernel_equals_the_window_scan_on_random_runs(case, cut) -> None:
    run_dict, qrels_dict, grants, ks = case
    acl = Acl.from_mapping(grants)
    n_p = len(acl.principals)
    judg = EvalQrels.of(Qrels.from_dict(qrels_dict), ks)
    prepared = prepare(Run.from_dict(run_dict), judg, acl)
    absent = np.setdiff1d(np.arange(judg.n_queries), prepared.eval_index)
    blocks = [prepared] + ([missing(judg, absent, acl)] if len(absent) else [])
    cut = min(cut, n_p)
    for block in blocks:
        for start, stop in ((0, n_p), (0, cut), (cut, n_p)):
            new, old = _both(block, acl, ks, start, stop)
            assert set(new) == set(old)
            for name in old:
                assert new[name].dtype == np.int32
                np.testing.assert_array_equal(new[name], old[name], err_msg=name)


def test_a_relevant_result_below_the_deepest_k_counts_only_before_k_authorized_results() -> None:
    # p may use every result; q's relevant result is at rank 5 (0-based): pre@2 misses it,
    # pre@6 has it; o may use only it and d0: it is o's 2nd result, so pre@2 has it
    run = Run.from_dict({"q": {f"d{i}": 10.0 - i for i in range(8)}})
    judg = EvalQrels.of(Qrels.from_dict({"q": {"d5": 1}}), (2, 6))
    acl = Acl.from_mapping({"o": ["d0", "d5"], "p": [f"d{i}" for i in range(8)]})
    prepared = prepare(run, judg, acl)
    new, old = _both(prepared, acl, (2, 6), 0, 2)
    assert new["pre"].tolist() == [[[1, 1]], [[0, 1]]]
    assert new["post"].tolist() == [[[0, 1]], [[0, 1]]]
    assert new["unusable"].tolist() == [[[1, 4]], [[0, 0]]]
    for name in old:
        np.testing.assert_array_equal(new[name], old[name])
