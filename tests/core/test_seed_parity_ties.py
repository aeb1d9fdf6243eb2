"""The seed-parity boundary: where arecall's figures differ from the seed's, exact ties are why.

Documents with the same word multiset in a different order score *exactly* the same in exact
arithmetic. The seed (authorized-recall 0.1.0) sums a document's norm in the order its words first
occur, so such documents get scores a few ulps apart (0.466714272671135 vs 0.46671427267113497)
and it orders them by that noise; arecall compares scores rounded to 12 decimals and orders ties
by document id (`arecall.core.ranking`), which is what makes its TF-IDF retrievers agree with each
other. On corpora built of such permuted documents the two sets of figures can differ; these
tests show that every difference comes from the order inside a block of exact ties: the seed with
its ties broken by id gives arecall's figures exactly, and every position where the two rankings
differ holds two documents of the same multiset.
"""

from __future__ import annotations

import sys
from collections import Counter

import numpy as np
import pytest
from authorized_recall import TfIdfIndex
from authorized_recall.retrieval import _TOKEN

from arecall.core.placed_lists import place_all
from arecall.core.ranking import TIE_DECIMALS, rank_queries, rank_scores
from arecall.core.scoring import score_pairs, summarise
from arecall.data.collection import Collection
from arecall.data.sources.synthetic import synthetic_collection
from arecall.retrievers.tfidf import SeedTfidf

from tests.helpers import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import seed_reference as seed_module

KS = (1, 3, 5, 10)
BASES = 37  # distinct multisets; not a multiple of the topic count, so ties cross topics


def permuted_collection(seed: int) -> Collection:
    """A synthetic collection whose document i ≥ BASES is document (i mod BASES), reshuffled.

    Tied documents then belong to different topics and domains: one may be relevant or
    authorized and its twin not, so the order inside a tie moves the figures.
    """
    c = synthetic_collection(
        {
            "seed": seed,
            "n_docs": 4 * BASES,
            "docs_per_topic": 6,
            "queries_per_domain": 4,
            "n_principals": 5,
            "query_noise": 0.2,
        }
    )
    rng = np.random.default_rng(seed)
    texts = c.documents["text"].tolist()
    for i in range(BASES, len(texts)):
        words = texts[i % BASES].split()
        texts[i] = " ".join(words[j] for j in rng.permutation(len(words)))
    documents = c.documents.copy()
    documents["text"] = texts
    return Collection.build(
        documents=documents,
        queries=c.queries,
        qrels=c.qrels,
        principals=c.principals,
        acl=c.acl,
        origin="permuted",
    )


def arecall_figures(collection: Collection) -> dict:
    """rank → place → score with arecall's TF-IDF (the seed's formula), full depth."""
    retriever = SeedTfidf().fit(collection.documents["text"].tolist())
    acl, rel = collection.acl_matrix(), collection.relevance_matrix()
    ranking = rank_queries(
        [retriever.score(collection.queries["text"].tolist())],
        n_queries=len(collection.queries),
        acl=acl,
        k_max=max(KS),
        relevance=rel,
    )
    lists = place_all(ranking, acl, max(KS))
    return summarise(
        score_pairs(ranking, lists, rel, acl, KS), n_documents=len(collection.documents)
    )


def figures(summary: dict) -> dict[str, float | None]:
    """The seed's figures, flattened: MRR and each per-K mean."""
    out: dict[str, float | None] = {"mrr": summary["mrr"]}
    for k in KS:
        for key in seed_module_keys():
            out[f"{key}@{k}"] = summary["k"][str(k)][key]
    return out


def seed_module_keys() -> tuple[str, ...]:
    return (
        "recall",
        "arecall_post",
        "arecall_pre",
        "precision",
        "ndcg",
        "unusable",
        "arecall_post_nonempty",
        "arecall_pre_nonempty",
    )


def differing(ours: dict, theirs: dict) -> list[str]:
    a, b = figures(ours), figures(theirs)
    return [
        name
        for name in a
        if (a[name] is None) != (b[name] is None)
        or (a[name] is not None and abs(a[name] - b[name]) > 1e-12)
    ]


class TiesById(TfIdfIndex):
    """The seed's index with arecall's rule: scores rounded to 12 decimals, ties by id."""

    def rank(self, query: str, k: int) -> list[str]:
        q = self._vector(Counter(_TOKEN.findall(query.lower())))
        scored = []
        for doc_id, counts in self._docs.items():
            d = self._vector(counts)
            score = sum(w * d.get(t, 0.0) for t, w in q.items())
            if score > 0:
                scored.append((doc_id, round(score, TIE_DECIMALS)))
        scored.sort(key=lambda pair: (-pair[1], pair[0]))
        return [doc_id for doc_id, _ in scored[:k]]


@pytest.fixture(
    scope="module",
    params=[0, pytest.param(1, marks=pytest.mark.long), pytest.param(2, marks=pytest.mark.long)],
)
def corpus(request) -> Collection:
    return permuted_collection(request.param)


def test_the_seed_gives_tied_documents_scores_a_few_ulps_apart(corpus):
    docs = dict(zip(corpus.documents["doc_id"], corpus.documents["text"], strict=True))
    index = TfIdfIndex(docs)
    ids = corpus.documents["doc_id"].tolist()
    vectors = {d: index._vector(index._docs[d]) for d in ids}  # as the seed's rank builds them
    apart = []
    for text in corpus.queries["text"]:
        q = index._vector(Counter(_TOKEN.findall(text.lower())))
        score = {d: sum(w * vectors[d].get(t, 0.0) for t, w in q.items()) for d in ids}
        for i in range(BASES, len(ids)):
            a, b = score[ids[i % BASES]], score[ids[i]]
            assert round(a, TIE_DECIMALS) == round(b, TIE_DECIMALS)  # an exact tie, rounded
            if a != b:
                assert abs(a - b) < 1e-15
                apart.append((a, b))
    assert apart, "no tie split by summation order: the corpus does not exercise the boundary"


def test_every_difference_from_the_seed_comes_from_exact_ties(corpus, monkeypatch):
    ours = arecall_figures(corpus)
    seed = seed_module.seed_reference(corpus, KS)
    monkeypatch.setattr(seed_module, "TfIdfIndex", TiesById)
    tie_broken = seed_module.seed_reference(corpus, KS)
    assert differing(ours, seed), "the boundary is real: the plain seed differs somewhere"
    assert differing(ours, tie_broken) == [], "the seed with ties by id is arecall, exactly"


def test_rankings_differ_only_inside_blocks_of_identical_multisets(corpus):
    docs = dict(zip(corpus.documents["doc_id"], corpus.documents["text"], strict=True))
    index = TfIdfIndex(docs)
    ids = corpus.documents["doc_id"].tolist()
    multiset = {d: tuple(sorted(t.split())) for d, t in docs.items()}
    scores = SeedTfidf().fit(list(docs.values())).score(corpus.queries["text"].tolist())
    ours = rank_scores(scores).padded()
    moved = 0
    for q, text in enumerate(corpus.queries["text"]):
        theirs = index.rank(text, k=len(docs))
        mine = [ids[i] for i in ours[q] if i >= 0]
        assert len(mine) == len(theirs)
        for a, b in zip(theirs, mine, strict=True):
            if a != b:
                moved += 1
                assert multiset[a] == multiset[b], (q, a, b)
    assert moved > 0, "the corpus has ties the seed orders differently"
