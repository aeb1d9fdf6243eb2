"""arecall's standard measures equal ranx's (the dev-only oracle) to 1e-9, query by query.

Random runs cover what moves these numbers: tied scores, graded and negative relevance, judged
queries missing from the run, run queries without judgments, queries with nothing relevant, runs
shorter and longer than K. ranx orders tied scores by an unstable sort (no convention), so on
tied runs ranx is handed arecall's order (score descending, doc id ascending) as a pre-sorted
numba list — its own metric code then runs on the same ranking; tie-free runs go through ranx's
public path, from dicts and from the same TREC files.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ranx import Qrels as RanxQrels
from ranx import Run as RanxRun
from ranx import evaluate as ranx_evaluate

from arecall.evaluate.evaluation import STANDARD_MEASURES, evaluate
from arecall.io.trec import Qrels, Run, save_qrels, save_run

from tests.evaluate._ranx_oracle import (
    KS,
    RANX_NAME,
    TOL,
    assert_equal_to_ranx,
    random_case,
    ranx_metrics,
    ranx_on_dicts,
    ranx_on_order,
)


@pytest.mark.parametrize("seed", range(4))
def test_standard_measures_equal_ranx_on_random_tie_free_runs(seed: int) -> None:
    run, qrels = random_case(seed, ties=False)
    assert_equal_to_ranx(evaluate(run, qrels, k=KS), ranx_on_dicts(run, qrels))


@pytest.mark.parametrize("seed", range(4))
def test_standard_measures_equal_ranx_on_random_runs_with_ties(seed: int) -> None:
    run, qrels = random_case(100 + seed, ties=True)
    ordered = Run.from_dict(run)
    tied = sum(len(v) - len(set(v.values())) for v in run.values())
    assert tied > 50  # the case really is full of ties
    assert_equal_to_ranx(evaluate(ordered, qrels, k=KS), ranx_on_order(ordered, qrels))


def test_recall_equals_ranx_on_the_same_trec_files(tmp_path: Path) -> None:
    run, qrels = random_case(7, ties=False)
    save_run(Run.from_dict(run, name="sys"), tmp_path / "run.trec")
    save_qrels(Qrels.from_dict(qrels), tmp_path / "qrels.txt")
    r = RanxRun.from_file(str(tmp_path / "run.trec"), kind="trec")
    ranx_evaluate(
        RanxQrels.from_file(str(tmp_path / "qrels.txt"), kind="trec"),
        r,
        ranx_metrics(),
        make_comparable=True,
    )
    ours = evaluate(tmp_path / "run.trec", tmp_path / "qrels.txt", k=KS)
    assert_equal_to_ranx(ours, {m: dict(v) for m, v in r.scores.items()})


def test_summary_means_equal_ranx_means_including_queries_without_relevant_documents() -> None:
    run, qrels = random_case(11, ties=False)
    ours = evaluate(run, qrels, k=KS).summary()
    r = RanxRun.from_dict(run)
    means = ranx_evaluate(RanxQrels.from_dict(qrels), r, ranx_metrics(), make_comparable=True)
    for m in STANDARD_MEASURES:
        for k in KS:
            assert abs(ours["k"][str(k)][m] - means[f"{RANX_NAME[m]}@{k}"]) <= TOL
    assert ours["queries"] == len(qrels) == 24
    no_relevant = [q for q, judged in qrels.items() if max(judged.values()) < 1]
    assert ours["queries_without_relevant"] == len(no_relevant) >= 4
    assert ours["queries_missing_from_run"] == len(set(qrels) - set(run)) == 3
    assert ours["run_queries_not_judged"] == len(set(run) - set(qrels)) == 2
