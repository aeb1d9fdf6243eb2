"""Every registered measure: each engine's batch kernel equals the per-list definition.

The registry (`arecall.core.measures`) names each measure, its R = ∅ convention and its
reference definition; here the pipeline's kernel (`score_pairs`), ``evaluate``'s and the vector
oracle's are held to that definition on random inputs, R = ∅ and R_A = ∅ included.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from arecall.core.measures import (
    EVALUATE,
    PIPELINE,
    VECTOR,
    Convention,
    Judged,
    Kind,
    Measure,
    column,
    mlflow_key,
)
from arecall.core.placed_lists import PLACEMENTS, place_all
from arecall.core.ranking import rank_queries, rank_scores
from arecall.core.scoring import score_pairs
from arecall.evaluate.evaluation import evaluate
from arecall.io.trec import Run
from arecall.vector.index import Hits
from arecall.vector.oracle import score_hits

from tests.helpers import rank_world

TOL = 1e-12


@st.composite
def worlds(draw):
    """Scores, graded relevance (0..3, so R = ∅ is common), an ACL and cutoffs."""
    n_docs = draw(st.integers(1, 10))
    n_q = draw(st.integers(1, 4))
    n_p = draw(st.integers(1, 3))

    def grid(rows, values):
        row = st.lists(st.sampled_from(values), min_size=n_docs, max_size=n_docs)
        return np.array(draw(st.lists(row, min_size=rows, max_size=rows)))

    scores = grid(n_q, [0.0, 0.1, 0.5, 0.5, 0.9])
    grades = grid(n_q, [0, 0, 0, 1, 2, 3])
    acl = grid(n_p, [False, True])
    ks = tuple(sorted(draw(st.sets(st.integers(1, 12), min_size=1, max_size=3))))
    return scores, grades, acl, ks


def _judged(ranked, grades_row, acl_row, placement="post") -> Judged:
    allowed = {f"d{j}" for j in np.flatnonzero(acl_row)}
    return Judged(
        ranking=ranked,
        relevance={f"d{j}": int(g) for j, g in enumerate(grades_row)},
        authorized=allowed.__contains__,
        placement=placement,
    )


def _check(measure: Measure, got: float, judged: Judged, k: int) -> None:
    assert measure.reference is not None
    want = measure.reference(judged, k)
    assert abs(got - want) <= TOL, (measure.name, k, got, want)


@settings(max_examples=120, deadline=None)
@given(worlds(), st.one_of(st.none(), st.integers(1, 6)))
def test_pipeline_kernel_equals_every_registered_definition(world, depth):
    scores, grades, acl, ks = world
    acl_m, rel_m = sp.csr_matrix(acl), sp.csr_matrix(grades.astype(float))
    ranked_all, ranking = rank_world(scores, rel_m, acl_m, ks, depth)
    got = score_pairs(ranking, place_all(ranking, acl_m, max(ks)), rel_m, acl_m, ks)
    per_pair = {**got.metrics, "gap": got.metrics["arecall_pre"] - got.metrics["arecall_post"]}
    checked = set()
    for q in range(len(scores)):
        ranked = [f"d{j}" for j in ranked_all[q] if j >= 0]
        for p in range(len(acl)):
            judged = _judged(ranked, grades[q], acl[p])
            for i, k in enumerate(ks):
                for m in PIPELINE.values():
                    if m.reference is not None:
                        _check(m, float(per_pair[m.name][p, q, i]), judged, k)
                        checked.add(m.name)
    assert checked == {m.name for m in PIPELINE.values() if m.reference is not None}


@settings(max_examples=120, deadline=None)
@given(worlds(), st.sampled_from(PLACEMENTS))
def test_evaluate_kernel_equals_every_registered_definition(world, placement):
    scores, grades, acl, ks = world
    ranked_all = rank_scores(sp.csr_matrix(scores)).padded()
    qids = [f"q{q}" for q in range(len(scores))]
    rankings = {qid: [f"d{j}" for j in ranked_all[q] if j >= 0] for q, qid in enumerate(qids)}
    qrels = {qid: {f"d{j}": int(g) for j, g in enumerate(grades[q])} for q, qid in enumerate(qids)}
    grants = {f"p{p}": [f"d{j}" for j in np.flatnonzero(acl[p])] for p in range(len(acl))}
    # a run cannot be empty: an unjudged query keeps one line (it is ignored, and counted)
    run = Run.from_rankings({"unjudged": ["d0"], **{q: r for q, r in rankings.items() if r}})
    ev = evaluate(run, qrels, acl=grants, k=ks, placement=placement, significance=False)
    per_query = ev.per_query.set_index("query_id")
    per_pair = ev.per_pair.set_index(["principal", "query_id"])
    checked = set()
    for q, qid in enumerate(qids):
        for p, principal in enumerate(grants):
            judged = _judged(rankings[qid], grades[q], acl[p], placement)
            for k in ks:
                for m in EVALUATE.values():
                    if m.reference is None:
                        continue
                    if m.kind == Kind.STANDARD:
                        got = per_query.loc[qid, m.column(k)]
                    else:
                        got = per_pair.loc[(principal, qid), m.column(k)]
                    _check(m, float(got), judged, k)
                    checked.add(m.name)
    assert checked == {m.name for m in EVALUATE.values() if m.reference is not None}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 7), max_size=5, unique=True), min_size=1, max_size=4),
    st.lists(st.booleans(), min_size=8, max_size=8),
    st.integers(1, 5),
)
def test_vector_oracle_equals_every_registered_definition(rows, mask, k):
    """Each row is a placement's result; the oracle is its authorized part (so R_A can be ∅)."""
    allowed = np.array(mask)

    def hits(lists):
        ids = np.full((len(lists), k), -1)
        for i, r in enumerate(lists):
            ids[i, : len(r[:k])] = r[:k]
        return Hits(ids, np.zeros(ids.shape, dtype=np.float32))

    got = hits(rows)
    oracle = hits([[d for d in r if mask[d]] for r in rows])
    score = score_hits(got, oracle, allowed, k, unfiltered=got)
    ok = {f"d{d}" for d in np.flatnonzero(allowed)}.__contains__
    for name, ranking_of, relevant_of in (
        ("recall", lambda r: r[:k], lambda r: [d for d in r if mask[d]][:k]),
        ("arecall", lambda r: r[:k], lambda r: [d for d in r if mask[d]][:k]),
        ("u_at_k", lambda r: r[:k], lambda r: []),
    ):
        m = VECTOR[name]
        assert m.reference is not None
        want = [
            m.reference(
                Judged(
                    [f"d{d}" for d in ranking_of(r)],
                    {f"d{d}": 1 for d in relevant_of(r)},
                    ok,
                ),
                k,
            )
            for r in rows
        ]
        field = {"u_at_k": score.u_at_k, "recall": score.recall, "arecall": score.arecall}[name]
        assert abs(field - float(np.mean(want))) <= 1e-9, (name, field, want)


@pytest.mark.parametrize(
    "registry", [PIPELINE, EVALUATE, VECTOR], ids=["pipeline", "evaluate", "vector"]
)
def test_each_definition_takes_its_declared_value_when_nothing_is_relevant(registry):
    """The convention a measure declares is what its definition does on R = ∅ (and R_A = ∅)."""
    nothing = Judged(["a", "b", "c"], {"a": 0, "x": 0}, {"a", "b"}.__contains__)
    nothing_authorized = Judged(["a", "b", "c"], {"c": 2}, {"a", "b"}.__contains__)
    for m in registry.values():
        if m.reference is None or m.empty is None:
            continue
        for judged in (nothing, nothing_authorized) if m.kind == Kind.AUTHORIZED else (nothing,):
            if m.name == "gap":  # pre − post of two vacuous values
                assert m.reference(judged, 2) == 0.0
            else:
                assert m.reference(judged, 2) == m.empty, m.name


def test_the_two_recall_conventions_are_named_and_reach_the_outputs():
    """``recall`` is 1 on R = ∅ in the pipeline (vacuous) and 0 in ``evaluate`` (trec)."""
    assert PIPELINE["recall"].convention == Convention.VACUOUS
    assert EVALUATE["recall"].convention == Convention.TREC
    assert EVALUATE["arecall"].convention == Convention.VACUOUS
    # the pipeline: one query, nothing relevant
    scores, rel = sp.csr_matrix([[0.9, 0.5]]), sp.csr_matrix((1, 2))
    acl = sp.csr_matrix([[True, True]])
    ranking = rank_queries([scores], n_queries=1, acl=acl, k_max=1, relevance=rel)
    s = score_pairs(ranking, place_all(ranking, acl, 1), rel, acl, (1,))
    assert s.metrics["recall"][0, 0, 0] == 1.0 and s.metrics["arecall_pre"][0, 0, 0] == 1.0
    # evaluate: the same query
    ev = evaluate({"q": {"d0": 0.9, "d1": 0.5}}, {"q": {"d0": 0}}, acl={"p": ["d0", "d1"]}, k=[1])
    assert ev.per_query["recall@1"].tolist() == [0.0]
    assert ev.per_pair["arecall_pre@1"].tolist() == [1.0]


def test_name_formats():
    m = PIPELINE["arecall_pre"]
    assert (m.name, m.column(5), m.mlflow(5), m.nonempty_key, m.heading()) == (
        "arecall_pre",
        "arecall_pre@5",
        "arecall_pre_at_5",
        "arecall_pre_nonempty",
        "ARecall pre",
    )
    assert column("gap", 1) == "gap@1" and mlflow_key("gap_ci_low", "10") == "gap_ci_low_at_10"
    assert VECTOR["arecall"].heading(10) == "ARecall@10"
