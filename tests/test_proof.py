"""The prove stage's checks can fail: a broken placement or a leaked item is caught and named."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import arecall.pipeline.proof as proof
from arecall.data.collection import Collection
from arecall.pipeline.config import default_config
from arecall.core.errors import ArecallError
from arecall.pipeline.run import Layout, filter_lists, generate, prove, rank, score
from arecall.core.placement import PlacedLists


def test_all_property_claims_hold_with_their_example_counts():
    results = proof.check_properties(max_examples=30)
    assert [r.claim for r in results] == [name for name, _, _ in proof.PROPERTIES]
    assert all(r.passed and r.examples == 30 for r in results)


def test_property_checks_are_deterministic():
    a = [r.as_dict() for r in proof.check_properties(max_examples=15)]
    b = [r.as_dict() for r in proof.check_properties(max_examples=15)]
    assert a == b


def test_a_pre_filter_that_truncates_first_is_refuted_with_a_counterexample(monkeypatch):
    def truncating_pre_filter(ranking, authorized, k):  # the bug: this is post placement
        return [d for d in ranking[:k] if authorized(d)][: max(k - 1, 1)]

    monkeypatch.setattr(proof, "pre_filter", truncating_pre_filter)
    name, statement, claim = next(p for p in proof.PROPERTIES if p[0] == "batch_equals_reference")
    refuted = proof._run_property(name, statement, claim, max_examples=100)
    assert not refuted.passed and refuted.counterexample.startswith("Case(")


@pytest.fixture
def stage_run(tmp_path):
    cfg = default_config(["evaluation.proof.max_examples=5"])
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
    kinds = {c["kind"] for c in result["claims"]}
    assert result["passed"] and kinds == {"property", "data"}
    data = [c for c in result["claims"] if c["kind"] == "data"]
    assert all(c["examples"] >= 96 for c in data)  # every pair of the discovery corpus


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
