"""``evaluate``'s standard measures equal trec_eval's, computed by its own C code (through
pytrec_eval), on random runs full of tied scores: ``ties="trec_eval"`` orders equal scores as
trec_eval's ``comp_sim_docno`` does, so the two agree on every query (to 1e-12).

ranx leaves ties to an unstable sort (tests/evaluate/test_evaluation_vs_ranx.py avoids them); trec_eval
defines them, which makes it the oracle for the order rule.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arecall.evaluate import evaluate

pytrec_eval = pytest.importorskip("pytrec_eval")

DOCS = [f"d{i:02d}" for i in range(30)] + ["D7", "a", "z9"]
KS = (1, 3, 5, 10, 20)
# arecall's column -> trec_eval's measure, at each K
MEASURES = {"recall": "recall", "precision": "P", "ndcg": "ndcg_cut", "map": "map_cut",
            "hit_rate": "success"}  # fmt: skip


@st.composite
def cases(draw):
    queries = [f"q{i}" for i in range(draw(st.integers(1, 6)))]
    run = {q: draw(st.dictionaries(st.sampled_from(DOCS), st.sampled_from([0.5, 1.0, 2.0, 3.5]),
                                   min_size=1, max_size=25)) for q in queries}  # fmt: skip
    qrels = {}
    for q in queries:
        judged = draw(st.dictionaries(st.sampled_from(DOCS), st.integers(0, 3), min_size=1,
                                      max_size=10))  # fmt: skip
        judged[draw(st.sampled_from(DOCS))] = draw(st.integers(1, 3))  # something relevant
        qrels[q] = judged
    return run, qrels


@settings(max_examples=120, deadline=None)
@given(cases())
def test_standard_measures_equal_trec_eval_on_tied_runs(case) -> None:
    run, qrels = case
    measures = {f"{name}_{k}" for name in MEASURES.values() for k in KS}
    theirs = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    ours = evaluate(run, qrels, k=KS, ties="trec_eval").per_query.set_index("query_id")
    for q in qrels:
        for ours_name, their_name in MEASURES.items():
            for k in KS:
                assert ours.loc[q, f"{ours_name}@{k}"] == pytest.approx(
                    theirs[q][f"{their_name}_{k}"], abs=1e-12
                ), (q, ours_name, k)
