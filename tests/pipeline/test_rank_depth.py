"""`retriever.depth` says what it does: the rank stage stores, per query, the smaller exact form.

A finite depth keeps each query's head (``max(depth, K)`` documents) and keeps every principal's
pre list exact either as head + tails or by ranking deeper, whichever has fewer entries. These
tests count both forms independently from the full ranking, check that the stored one is the
smaller on a corpus with many principals (ranking deeper wins) and with few (tails win), that
the placed lists and metrics equal the full ranking's, and that a depth below the largest K is
one error line.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arecall.core.placed_lists import place_all
from arecall.core.ranking import Ranking, rank_queries, rank_scores
from arecall.core.schema import ConfigProblem
from arecall.core.scoring import score_pairs
from arecall.data.authorization import apply_profiles
from arecall.data.collection import Collection
from arecall.data.sources import load_corpus
from arecall.pipeline.config import default_config
from arecall.pipeline.layout import Layout
from arecall.pipeline.schema import check_depth
from arecall.pipeline.stages.rank import (
    REPRESENTATION_KEY,
    rank,
    representation,
    representation_line,
)
from arecall.retrievers import fit_on, make_retriever

K_MAX = 10


def _world(n_principals: int, seed: int = 5):
    """A small synthetic collection's scores, ACL and relevance with ``n_principals``."""
    corpus = {
        "name": "synthetic",
        "seed": seed,
        "n_domains": 8,
        "docs_per_domain": 50,
        "queries_per_domain": 3,
        "n_principals": n_principals,
    }
    collection = apply_profiles(load_corpus(corpus), {"name": "corpus"})
    retriever = make_retriever({"name": "tfidf"}).fit(collection.documents["text"].tolist())
    scores = retriever.score(collection.queries["text"].tolist())
    return scores, collection.acl_matrix(), collection.relevance_matrix()


def _forms(scores: sp.csr_matrix, acl: sp.spmatrix, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """Per query, by brute force on the full ranking: head + tails entries, needed depth."""
    full = rank_scores(scores).padded()
    allowed = acl.toarray().astype(bool)
    split, deep = [], []
    for row in full:
        ranked = row[row >= 0]
        head = min(len(ranked), max(depth, K_MAX))
        tails, needed = 0, head
        for p in range(allowed.shape[0]):
            positions = np.flatnonzero(allowed[p][ranked])[:K_MAX]  # p's pre list
            tails += int(np.count_nonzero(positions >= head))
            if len(positions):
                needed = max(needed, int(positions[-1]) + 1)
        split.append(head + tails)
        deep.append(needed)
    return np.array(split), np.array(deep)


@pytest.mark.parametrize(("n_principals", "winner"), [(40, "deep"), (1, "tails")])
def test_the_stored_form_is_the_smaller_one_per_query(n_principals, winner):
    scores, acl, rel = _world(n_principals)
    ranking = rank_queries(
        [scores], n_queries=scores.shape[0], depth=K_MAX, acl=acl, k_max=K_MAX, relevance=rel
    )
    split, deep = _forms(scores, acl, K_MAX)
    stored = ranking.lengths + np.bincount(ranking.tail_query, minlength=ranking.n_queries)
    assert stored.tolist() == np.minimum(split, deep).tolist()
    rep = representation(ranking, K_MAX)
    assert rep["if_head_and_tails"] == split.sum()
    assert rep["if_ranked_to_needed_depth"] == deep.sum()
    assert rep["entries"] == stored.sum()
    if winner == "deep":  # many principals: their tails outnumber a deeper ranking
        assert deep.sum() < split.sum() and rep["queries_ranked_to_needed_depth"] > 0
    else:  # one principal: a few tail entries beat ranking down to them
        assert split.sum() < deep.sum() and rep["queries_head_and_tails"] > 0
    assert rep["entries"] < max(split.sum(), deep.sum())


def _random_world(draw):
    n_docs = draw(st.integers(1, 30))
    n_q = draw(st.integers(1, 4))
    n_p = draw(st.integers(1, 12))
    levels = [0.0, 0.1, 0.3, 0.3, 0.7, 0.9]
    scores = np.array(
        draw(st.lists(st.sampled_from(levels), min_size=n_q * n_docs, max_size=n_q * n_docs))
    ).reshape(n_q, n_docs)
    rel = np.array(
        draw(st.lists(st.booleans(), min_size=n_q * n_docs, max_size=n_q * n_docs))
    ).reshape(n_q, n_docs)
    share = draw(st.sampled_from([0.1, 0.4, 0.8]))
    seed = draw(st.integers(0, 2**16))
    acl = np.random.default_rng(seed).random((n_p, n_docs)) < share
    k_max = draw(st.integers(1, 8))
    depth = draw(st.integers(1, 10))
    return scores, rel, acl, k_max, max(depth, k_max)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_either_form_gives_the_full_rankings_lists_and_metrics(data):
    scores, rel, acl, k_max, depth = _random_world(data.draw)
    s, a, r = sp.csr_matrix(scores), sp.csr_matrix(acl), sp.csr_matrix(rel.astype(float))
    ks = tuple(sorted({1, k_max}))
    full = rank_queries([s], n_queries=len(scores), relevance=r)
    kept = rank_queries([s], n_queries=len(scores), depth=depth, acl=a, k_max=k_max, relevance=r)
    want, got = place_all(full, a, k_max), place_all(kept, a, k_max)
    for name in ("post", "post_rank", "pre", "pre_rank"):
        assert np.array_equal(getattr(got, name), getattr(want, name)), name
    m_want, m_got = score_pairs(full, want, r, a, ks), score_pairs(kept, got, r, a, ks)
    assert np.array_equal(m_got.reciprocal_rank, m_want.reciprocal_rank)
    for name, arr in m_want.metrics.items():
        assert np.array_equal(m_got.metrics[name], arr), name


def test_both_forms_mix_within_one_ranking_and_place_exactly():
    # query 0: one principal far down (tails win); query 1: many principals (ranking wins)
    scores = sp.csr_matrix(np.array([np.linspace(1, 0.1, 20), np.linspace(1, 0.1, 20)]))
    acl = np.zeros((6, 20), dtype=bool)
    acl[0, 19] = True  # principal 0: one document, last in both rankings
    acl[1:, 2:6] = True  # principals 1-5: four documents just below a head of 2
    ranking = rank_queries([scores], n_queries=2, depth=2, acl=sp.csr_matrix(acl), k_max=2)
    rep = representation(ranking, 2)
    # head + tails: 2 + 1 (p0) + 5 × 2 (p1-5) = 13 per query; ranked deep: 20 per query
    assert rep["if_head_and_tails"] == 26 and rep["if_ranked_to_needed_depth"] == 40
    assert rep["chosen"] == "head + tails" and rep["entries"] == 26
    lists = place_all(ranking, sp.csr_matrix(acl), 2)
    full = place_all(rank_scores(scores), sp.csr_matrix(acl), 2)
    assert np.array_equal(lists.pre, full.pre) and np.array_equal(lists.post, full.post)
    ranking = rank_queries([scores], n_queries=2, depth=2, acl=sp.csr_matrix(acl[1:]), k_max=2)
    assert representation(ranking, 2)["chosen"] == "ranked to the needed depth"
    assert ranking.lengths.tolist() == [4, 4] and len(ranking.tail_doc) == 0


def test_a_depth_below_the_largest_k_is_refused_naming_both_keys():
    with pytest.raises(ConfigProblem, match=r"retriever\.depth: .*evaluation\.ks: 5"):
        default_config(["retriever.depth=3", "evaluation.ks=[1,5]"])
    cfg = default_config(["evaluation.ks=[1,5,10]"])
    cfg.retriever.depth = 1
    with pytest.raises(ConfigProblem, match=r"^retriever\.depth: .*evaluation\.ks: 10.*got 1$"):
        check_depth(cfg)
    cfg.retriever.depth = 10
    check_depth(cfg)
    cfg.retriever.depth = None
    check_depth(cfg)


@pytest.mark.long
def test_the_rank_stage_refuses_a_shallow_depth_in_one_line(tmp_path):
    cfg = default_config(["evaluation.ks=[1,5]", "tracking.enabled=false"]).params()
    cfg["retriever"]["depth"] = 3  # as a hand edit of params.yaml would (composing refuses it)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    out = subprocess.run(
        [sys.executable, "-m", "arecall.pipeline.stages.rank"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("arecall: error: ")
    assert "retriever.depth" in lines[0] and "evaluation.ks: 5" in lines[0], lines


def test_the_rank_stage_writes_and_prints_its_choice(tmp_path, monkeypatch, capsys):
    from arecall.pipeline.stages.generate import generate

    cfg = default_config(
        ["corpus=synthetic", "corpus.n_principals=30", "retriever.depth=10", "evaluation.ks=[1,10]"]
    )
    layout = Layout.run(tmp_path)
    generate(cfg, layout)
    c = Collection.load(layout.corpus)
    monkeypatch.setenv("ARECALL_PROGRESS", "1")
    returned = rank(cfg, layout)
    ranking = Ranking.load(layout.ranking)
    saved = json.loads(layout.ranking.with_name("rank.json").read_text())[REPRESENTATION_KEY]
    assert saved == returned
    whole = rank_queries(  # the one-process ranking, with its sizes
        [
            fit_on(make_retriever(cfg.retriever), c.documents, c.queries).score(
                c.queries["text"].tolist()
            )
        ],
        n_queries=len(c.queries),
        depth=10,
        acl=c.acl_matrix(),
        k_max=10,
        relevance=c.relevance_matrix(),
    )
    assert saved == representation(whole, 10)
    assert saved["entries"] == len(ranking.doc_index) + len(ranking.tail_doc)
    assert saved["entries"] <= min(saved["if_head_and_tails"], saved["if_ranked_to_needed_depth"])
    out = capsys.readouterr().out
    assert f"arecall: rank: {representation_line(saved)}" in out.splitlines()
