"""Reciprocal rank fusion has verity's semantics, per list and over whole runs, end to end."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from verity.fusion import reciprocal_rank_fusion as verity_rrf
from verity.fusion import weighted_rrf as verity_weighted_rrf

from arecall.core.errors import ArecallError
from arecall.evaluate.evaluation import evaluate
from arecall.evaluate.fusion import (
    fuse_runs,
    reciprocal_rank_fusion,
    reorderings_on_reload,
    weighted_rrf,
)
from arecall.io.trec import Run, load_run, save_run

IDS = [f"d{i}" for i in range(10)]
RANKINGS = st.dictionaries(
    st.sampled_from(["bm25", "vector", "splade"]),
    st.lists(st.sampled_from(IDS), unique=True, max_size=10),
    min_size=1,
)
SMOOTHING = st.sampled_from([1, 2, 60])
LIMIT = st.none() | st.integers(1, 12)


def as_tuples(fused):
    return [(r.id, r.score, dict(r.contributions)) for r in fused]


@settings(max_examples=150, deadline=None)
@given(RANKINGS, SMOOTHING, LIMIT)
def test_rrf_equals_verity_reciprocal_rank_fusion(rankings, smoothing, limit) -> None:
    ours = reciprocal_rank_fusion(rankings, smoothing=smoothing, limit=limit)
    theirs = verity_rrf(rankings, smoothing=smoothing, limit=limit)
    assert as_tuples(ours) == as_tuples(theirs)  # same ids, bit-identical scores, same ranks


@settings(max_examples=100, deadline=None)
@given(
    RANKINGS,
    SMOOTHING,
    st.dictionaries(
        st.sampled_from(["bm25", "vector", "splade"]), st.sampled_from([0.0, 0.5, 1.0, 2.5])
    ),
)
def test_weighted_rrf_equals_verity_weighted_rrf(rankings, smoothing, weights) -> None:
    weights = {s: w for s, w in weights.items() if s in rankings}
    ours = weighted_rrf(rankings, weights, smoothing=smoothing)
    assert as_tuples(ours) == as_tuples(verity_weighted_rrf(rankings, weights, smoothing=smoothing))


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["a", "b", "c"]),
        st.dictionaries(
            st.sampled_from(["q1", "q2", "q3"]),
            st.lists(st.sampled_from(IDS), unique=True, min_size=1, max_size=10),
            min_size=1,
        ),
        min_size=1,
    ),
    SMOOTHING,
    LIMIT,
)
def test_fuse_runs_equals_per_query_fusion_of_each_runs_ranking(sources, smoothing, limit):
    runs = {name: Run.from_rankings(r) for name, r in sources.items()}
    fused = fuse_runs(runs, smoothing=smoothing, limit=limit)
    queries = sorted({q for r in sources.values() for q in r})
    assert fused.run.query_ids.to_pylist() == queries
    for q in queries:
        per_query = {s: runs[s].ranking(q) for s in sources if q in sources[s]}
        expected = verity_rrf(per_query, smoothing=smoothing, limit=limit)
        assert fused.run.ranking(q) == [r.id for r in expected]
        assert fused.run.to_dict()[q] == {r.id: r.score for r in expected}
        got = fused.contributions[fused.contributions.query_id == q]
        assert {
            (d, s): int(k) for d, s, k in zip(got.doc_id, got.source, got["rank"], strict=True)
        } == {(r.id, s): k for r in expected for s, k in r.contributions.items()}


def test_agreement_is_summed_not_maxed() -> None:
    fused = reciprocal_rank_fusion({"a": ["x", "y"], "b": ["y", "z"]}, smoothing=1)
    assert [r.id for r in fused] == ["y", "x", "z"]
    assert fused[0].score == 1 / 3 + 1 / 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"smoothing": 0.5}, "smoothing must be at least 1"),
        ({"weights": {"a": -1.0}}, "negative"),
        ({"weights": {"nope": 1.0}}, "unknown source 'nope'"),
        ({"limit": 0}, "limit must be a positive integer"),
    ],
)
def test_bad_fusion_parameters_are_errors(kwargs, message) -> None:
    runs = {"a": Run.from_rankings({"q": ["x"]})}
    with pytest.raises(ArecallError, match=message):
        fuse_runs(runs, **kwargs)


def test_a_source_listing_a_document_twice_is_an_error() -> None:
    with pytest.raises(ArecallError, match="lists 'x' twice"):
        reciprocal_rank_fusion({"a": ["x", "x"]})


def test_fused_run_saved_as_trec_evaluates_like_the_fused_run(tmp_path: Path) -> None:
    a = Run.from_dict(
        {f"q{i}": {f"d{j}": float((i * j) % 7) for j in range(30)} for i in range(20)}
    )
    b = Run.from_dict(
        {f"q{i}": {f"d{j}": float((i + 3 * j) % 11) for j in range(5, 40)} for i in range(20)}
    )
    fused = fuse_runs({"a": a, "b": b}, weights={"b": 0.5}, limit=25)
    assert reorderings_on_reload(fused.run) == 0
    save_run(fused.run, tmp_path / "fused.trec")
    back = load_run(tmp_path / "fused.trec")
    assert back.to_dict() == fused.run.to_dict()
    qrels = {f"q{i}": {f"d{j}": (i + j) % 3 for j in range(0, 40, 3)} for i in range(20)}
    from_file = evaluate(tmp_path / "fused.trec", qrels, k=(5, 10)).per_query
    in_memory = evaluate(fused.run, qrels, k=(5, 10)).per_query
    assert from_file.equals(in_memory)
