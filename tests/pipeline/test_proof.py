"""The prove stage's checks can fail: a broken placement or a leaked item is caught and named."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import arecall.pipeline.proof as proof
from arecall.core.errors import ArecallError
from arecall.core.measures import PIPELINE
from arecall.core.placed_lists import PlacedLists, place_all
from arecall.data.collection import Collection
from arecall.pipeline.config import default_config
from arecall.pipeline.run import Layout, filter_lists, generate, prove, rank, score

from tests.helpers import fast_config


def test_all_property_claims_hold_at_the_configured_strength():
    # The prove stage's own search at the configured size, as `dvc repro` runs it. Every other
    # test that runs the pipeline for its numbers uses helpers.FAST_PROOF.
    n = default_config().params()["evaluation"]["proof"]["max_examples"]
    assert n >= 200
    results = proof.check_properties(max_examples=n)
    assert [r.claim for r in results] == [name for name, _, _ in proof.PROPERTIES]
    assert [(r.passed, r.examples) for r in results] == [(True, n)] * len(proof.PROPERTIES)


def test_property_checks_are_deterministic():
    a = [r.as_dict() for r in proof.check_properties(max_examples=15)]
    b = [r.as_dict() for r in proof.check_properties(max_examples=15)]
    assert a == b


def test_the_random_cases_reach_the_edges():
    cases = proof.random_cases(200, seed=(proof.SEED, 0))
    assert len(set(cases)) > 150
    assert any(not c.ranking for c in cases) and any(len(c.ranking) == c.items for c in cases)
    assert any(not c.allowed for c in cases) and any(
        c.allowed == set(range(c.items)) for c in cases
    )
    assert any(c.k > len(c.ranking) for c in cases) and any(c.k == 1 for c in cases)


def test_one_batch_of_many_cases_equals_each_case_alone():
    cases = proof.random_cases(60, seed=(proof.SEED, 9))
    assert proof.batched(cases) == [proof.batched([c])[0] for c in cases]


# -- the deep search: Hypothesis, shrinking, one case per batch-kernel call ------------------


@st.composite
def hypothesis_cases(draw, max_items: int = proof.MAX_ITEMS) -> proof.Case:
    n = draw(st.integers(min_value=0, max_value=max_items))
    items = list(range(n))
    ranked = draw(st.permutations(items))
    depth = draw(st.integers(min_value=0, max_value=n))
    subset = st.frozensets(st.sampled_from(items)) if items else st.just(frozenset[int]())
    return proof.Case(
        ranking=tuple(ranked[:depth]),
        allowed=draw(subset),
        relevant=draw(subset),
        k=draw(st.integers(min_value=1, max_value=max_items + 2)),
    )


@pytest.mark.parametrize("claim", proof.PROPERTIES, ids=[name for name, _, _ in proof.PROPERTIES])
@settings(max_examples=100, derandomize=True, database=None, deadline=None)
@given(case=hypothesis_cases())
def test_every_property_claim_holds_under_a_shrinking_search(claim, case):
    _, _, check = claim
    assert check(case, proof.batched([case])[0])


@pytest.mark.long
@pytest.mark.parametrize("claim", proof.PROPERTIES, ids=[name for name, _, _ in proof.PROPERTIES])
@settings(max_examples=1000, derandomize=True, database=None, deadline=None)
@given(case=hypothesis_cases())
def test_every_property_claim_holds_under_a_deep_shrinking_search(claim, case):
    # The same claims over ten times the examples (make test-faults; 100 in make test).
    _, _, check = claim
    assert check(case, proof.batched([case])[0])


def _truncating_pre_filter(ranking, authorized, k):  # the bug: this is post placement
    return [d for d in ranking[:k] if authorized(d)][: max(k - 1, 1)]


def test_a_pre_filter_that_truncates_first_is_refuted_with_a_counterexample(monkeypatch):
    monkeypatch.setattr(proof, "pre_filter", _truncating_pre_filter)
    refuted = {r.claim: r for r in proof.check_properties(max_examples=100)}
    assert not refuted["batch_equals_reference"].passed
    assert refuted["batch_equals_reference"].counterexample.startswith("Case(")
    assert refuted["batch_equals_reference"].examples == 100


def test_the_counterexample_is_the_smallest_failing_case(monkeypatch):
    monkeypatch.setattr(proof, "pre_filter", _truncating_pre_filter)
    name, statement, claim = next(p for p in proof.PROPERTIES if p[0] == "batch_equals_reference")
    cases = proof.random_cases(100, seed=(proof.SEED, 4))
    refuted = proof.check_cases(name, statement, claim, cases)
    failing = [c for c in cases if not claim(c, proof.batched([c])[0])]
    assert refuted.counterexample == repr(min(failing, key=proof.Case.size))


def test_a_crash_in_the_batch_code_refutes_the_claims_naming_a_case(monkeypatch):
    def crashing_place_all(ranking, acl, k_max):
        if k_max > 20:
            raise IndexError("boom")
        return place_all(ranking, acl, k_max)

    monkeypatch.setattr(proof, "place_all", crashing_place_all)
    results = proof.check_properties(max_examples=50)
    assert not any(r.passed for r in results)
    assert all(" raised IndexError: boom" in r.counterexample for r in results)
    assert all(r.counterexample.startswith("Case(") for r in results)


def test_the_property_search_writes_nothing_and_needs_no_hypothesis(tmp_path):
    # A fresh interpreter, so what the search imports and writes shows.
    env = {k: v for k, v in os.environ.items() if not k.startswith("HYPOTHESIS")}
    code = (
        "import sys; from arecall.pipeline.proof import check_properties; "
        "assert all(r.passed for r in check_properties(max_examples=3)); "
        "assert 'hypothesis' not in sys.modules, 'hypothesis imported'"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.fixture
def stage_run(tmp_path):
    cfg = fast_config()
    layout = Layout.run(tmp_path)
    for stage in (generate, rank, filter_lists, score):
        stage(cfg, layout)
    return cfg, layout


def test_a_pre_list_holding_an_unauthorized_item_fails_the_prove_stage_by_name(stage_run):
    cfg, layout = stage_run
    lists = PlacedLists.load(layout.lists)
    acl = Collection.load(layout.corpus).acl_matrix().toarray()
    auditor = 3  # granted one domain (5 documents), so its pre lists at K=10 end in padding
    assert lists.pre[auditor, 0, -1] == -1
    pre = lists.pre.copy()
    pre[auditor, 0, -1] = int(np.flatnonzero(~acl[auditor])[0])
    dataclasses.replace(lists, pre=pre).save(layout.lists)
    with pytest.raises(
        ArecallError,
        match=r"run_lists_authorized.*principal 'external-auditor', "
        r"query 'q001'.*unauthorized",
    ):
        prove(cfg, layout)
    assert not layout.proof.exists()


def test_the_prove_stage_writes_every_claim_when_all_hold(stage_run):
    cfg, layout = stage_run
    result = prove(cfg, layout)
    assert json.loads(layout.proof.read_text()) == result
    pairs, ks = 4 * 24, 4  # the discovery corpus's principals × queries; K ∈ {1, 3, 5, 10}
    assert [(c["claim"], c["kind"], c["examples"]) for c in result["claims"]] == [
        *((name, "property", 5) for name, _, _ in proof.PROPERTIES),
        ("run_post_subset_of_pre", "data", pairs * ks),
        ("run_gap_non_negative", "data", pairs * ks),
        ("run_lists_authorized", "data", pairs),
    ]


def test_a_post_item_missing_from_pre_fails_the_prove_stage_by_name(stage_run):
    cfg, layout = stage_run
    lists = PlacedLists.load(layout.lists)
    assert lists.post[0, 0, 0] >= 0
    pre = lists.pre.copy()
    pre[0, 0, :] = -1  # pre now lacks what post shows
    dataclasses.replace(lists, pre=pre).save(layout.lists)
    with pytest.raises(
        ArecallError,
        match=r"run_post_subset_of_pre.*principal 'process-engineer', "
        r"query 'q001', K=1: post item .* not in pre",
    ):
        prove(cfg, layout)


def test_a_negative_gap_in_the_scores_is_refuted_by_name():
    case = proof.Case(ranking=(0, 1), allowed=frozenset({0, 1}), relevant=frozenset({1}), k=1)
    lists, scores = proof._batch(case)
    names = {
        "query_ids": np.array(["q1"], dtype=object),
        "principals": np.array(["ann"], dtype=object),
        "doc_ids": np.array(["d0", "d1"], dtype=object),
    }
    acl = sp.csr_matrix([[True, True]])
    assert proof.check_run(lists, scores, acl, **names)[1].passed
    post = scores.metrics["arecall_pre"] + 0.25  # post better than pre: impossible
    broken = dataclasses.replace(scores, metrics={**scores.metrics, "arecall_post": post})
    gap = proof.check_run(lists, broken, acl, **names)[1]
    assert (gap.claim, gap.passed) == ("run_gap_non_negative", False)
    assert gap.counterexample == "principal 'ann', query 'q1', K=1: Δ = -0.250000"


def _subset_reference(lists: PlacedLists, ks: tuple[int, ...]) -> tuple[int, int, int, int] | None:
    """post ⊆ pre the plain way: per principal, per K, per list (the first failure)."""
    n_p, n_q, _ = lists.pre.shape
    for p in range(n_p):
        for k in ks:
            for q in range(n_q):
                pre = {
                    (int(d), int(r))
                    for d, r in zip(lists.pre[p, q, :k], lists.pre_rank[p, q, :k], strict=True)
                    if r >= 0
                }
                for j in range(lists.post.shape[2]):
                    d, r = int(lists.post[p, q, j]), int(lists.post_rank[p, q, j])
                    if d >= 0 and 0 <= r < k and (d, r) not in pre:
                        return p, q, j, k
    return None


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    seed=st.integers(0, 2**32 - 1),
    breaks=st.integers(0, 4),
    block=st.integers(1, 4),
)
def test_the_vectorised_subset_check_names_the_reference_counterexample(seed, breaks, block):
    from arecall.core.engine import LocalEngine
    from arecall.core.ranking import rank_queries

    rng = np.random.default_rng(seed)
    n_p, n_q, n_d, ks = 3, 4, 16, (1, 2, 5)
    scores = sp.csr_matrix(rng.random((n_q, n_d)) * (rng.random((n_q, n_d)) < 0.7))
    acl = sp.csr_matrix(rng.random((n_p, n_d)) < 0.5)
    ranking = rank_queries([scores], n_queries=n_q)
    lists = place_all(ranking, acl, max(ks))
    pre, pre_rank = lists.pre.copy(), lists.pre_rank.copy()
    for _ in range(breaks):  # drop a pre item, or swap two, or move one's rank
        p, q, j = rng.integers(0, n_p), rng.integers(0, n_q), rng.integers(0, max(ks))
        choice = rng.integers(0, 3)
        if choice == 0:
            pre[p, q, j:] = np.r_[pre[p, q, j + 1 :], -1]
            pre_rank[p, q, j:] = np.r_[pre_rank[p, q, j + 1 :], -1]
        elif choice == 1:
            pre[p, q, j] = rng.integers(0, n_d)
        else:
            pre_rank[p, q, j] = pre_rank[p, q, j] + 1 if pre_rank[p, q, j] >= 0 else -1
    broken = dataclasses.replace(lists, pre=pre, pre_rank=pre_rank)
    s = proof._batch(proof.Case(ranking=(0,), allowed=frozenset({0}), relevant=frozenset(), k=1))[1]
    s = dataclasses.replace(s, ks=ks)
    names = {
        "query_ids": np.array([f"q{i}" for i in range(n_q)], dtype=object),
        "principals": np.array([f"p{i}" for i in range(n_p)], dtype=object),
        "doc_ids": np.array([f"d{i}" for i in range(n_d)], dtype=object),
    }
    run = proof.RunData(broken, s, acl, **names)
    got = proof._run_claims(run, LocalEngine(block=block))[0]
    want = _subset_reference(broken, ks)
    assert got.passed == (want is None)
    if want is not None:
        p, q, j, k = want
        item = names["doc_ids"][broken.post[p, q, j]]
        assert got.counterexample == f"{run.where(p, q, k)}: post item {item!r} not in pre"


def test_every_measure_the_kernels_report_is_held_to_its_registered_definition(monkeypatch):
    # returned_pre had no line of its own in the claim: the registry's definition is what binds
    wrong = dataclasses.replace(PIPELINE["returned_pre"], reference=lambda judged, k: 0.0)
    monkeypatch.setitem(PIPELINE, "returned_pre", wrong)
    name, statement, claim = next(p for p in proof.PROPERTIES if p[0] == "batch_equals_reference")
    refuted = proof.check_cases(
        name, statement, claim, proof.random_cases(50, seed=(proof.SEED, 4))
    )
    assert not refuted.passed
    assert refuted.counterexample.startswith("Case(")
