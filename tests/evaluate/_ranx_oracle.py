"""The ranx oracle the evaluate tests and ``make install``'s numba warm-up share.

One copy of the calls into ranx, so ``tests/_ranx_warmup.py`` compiles exactly the signatures
``test_evaluation_vs_ranx.py`` uses, without importing a test module.
"""

from __future__ import annotations

import warnings

import numpy as np
from numba.typed import List as TypedList
from ranx import Qrels as RanxQrels
from ranx import Run as RanxRun
from ranx import evaluate as ranx_evaluate

from arecall.evaluate.evaluation import STANDARD_MEASURES
from arecall.io.trec import Run

warnings.filterwarnings("ignore", message=".*unsafe cast.*")  # numba, inside ranx

RANX_NAME = {
    "recall": "recall",
    "precision": "precision",
    "ndcg": "ndcg",
    "ndcg_exp": "ndcg_burges",
    "mrr": "mrr",
    "map": "map",
    "hit_rate": "hit_rate",
}
KS = (1, 3, 5, 10, 25)
TOL = 1e-9


def random_case(seed: int, *, ties: bool) -> tuple[dict, dict]:
    """A run and qrels with every awkward case in them."""
    rng = np.random.default_rng(seed)
    docs = np.array([f"d{i:03d}" for i in range(90)])
    run: dict[str, dict[str, float]] = {}
    qrels: dict[str, dict[str, int]] = {}
    for q in range(24):
        qid = f"q{q:02d}"
        depth = int(rng.integers(1, 45))
        ranked = rng.choice(docs, size=depth, replace=False)
        scores = rng.integers(0, 4, size=depth).astype(float) if ties else rng.random(depth)
        if q % 8 != 7:  # every 8th judged query is missing from the run
            run[qid] = dict(zip(ranked.tolist(), scores.tolist(), strict=True))
        pool = np.concatenate(
            [ranked[: int(rng.integers(0, depth + 1))], rng.choice(docs, size=6, replace=False)]
        )
        judged = np.unique(pool)[: int(rng.integers(1, 16))]
        rels = rng.choice([-1, 0, 0, 1, 1, 2, 3], size=len(judged))
        if q % 6 == 5:  # judged, but nothing relevant
            rels = np.minimum(rels, 0)
        qrels[qid] = dict(zip(judged.tolist(), rels.tolist(), strict=True))
    for extra in ("x1", "x2"):  # run queries nobody judged
        run[extra] = {str(d): float(rng.random()) for d in rng.choice(docs, 5, replace=False)}
    return run, qrels


def ranx_metrics() -> list[str]:
    return [f"{RANX_NAME[m]}@{k}" for m in STANDARD_MEASURES for k in KS]


def assert_equal_to_ranx(ours, theirs: dict[str, dict[str, float]]) -> None:
    frame = ours.per_query.set_index("query_id")
    checked = 0
    for m in STANDARD_MEASURES:
        for k in KS:
            expected = theirs[f"{RANX_NAME[m]}@{k}"]
            assert set(expected) == set(frame.index)
            got = frame[f"{m}@{k}"]
            for qid, value in expected.items():
                assert abs(got[qid] - value) <= TOL, (m, k, qid, got[qid], value)
                checked += 1
    assert checked == len(STANDARD_MEASURES) * len(KS) * len(frame)


def ranx_on_dicts(run: dict, qrels: dict) -> dict[str, dict[str, float]]:
    r = RanxRun.from_dict(run)
    ranx_evaluate(RanxQrels.from_dict(qrels), r, ranx_metrics(), make_comparable=True)
    return {m: dict(v) for m, v in r.scores.items()}


def ranx_on_order(ordered: Run, qrels: dict) -> dict[str, dict[str, float]]:
    """ranx's metric kernels on arecall's ranking, handed over as a pre-sorted numba list."""
    rq = RanxQrels.from_dict(qrels)
    qids = list(rq.keys())
    lists = TypedList()
    for qid in qids:
        ranked = ordered.ranking(qid)
        arr = np.array(
            [[hash(d), float(len(ranked) - i)] for i, d in enumerate(ranked)], dtype=np.float64
        ).reshape(-1, 2)
        lists.append(arr)
    scores = ranx_evaluate(rq, lists, ranx_metrics(), return_mean=False)
    return {m: dict(zip(qids, np.asarray(v).tolist(), strict=True)) for m, v in scores.items()}
