"""corpus=synthetic: deterministic in its seed, realistic in difficulty at every size, and each
knob does what its name says."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arecall.core.errors import ArecallError
from arecall.core.ranking import rank_queries
from arecall.data.authorization import LEVELS
from arecall.data.sources import load_corpus
from arecall.data.sources.synthetic import (
    BATCH,
    SyntheticSpec,
    _Vocabularies,
    synthetic_collection,
)
from arecall.pipeline.config import default_config
from arecall.pipeline.run import run_in_memory
from arecall.retrievers.tfidf import SeedTfidf

from tests.helpers import ROOT, assert_proved_on_every_pair, fast_config

sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_corpus_quality import TARGETS, corpus_config, quality

SMALL = {"name": "synthetic", "seed": 3, "n_domains": 4, "docs_per_domain": 10}


def _mrr(collection) -> float:
    retriever = SeedTfidf().fit(collection.documents["text"].tolist())
    scores = retriever.score(collection.queries["text"].tolist())
    ranking = rank_queries(
        [scores], n_queries=scores.shape[0], relevance=collection.relevance_matrix()
    )
    first = ranking.first_relevant
    return float(np.mean(np.where(first > 0, 1.0 / np.maximum(first, 1), 0.0)))


def _tokens(text: str) -> set[int]:
    return {int(w[1:]) for w in text.split()}


# -- determinism ---------------------------------------------------------------------------------


def test_same_seed_gives_identical_parquet_bytes(tmp_path: Path):
    for name in ("a", "b"):
        load_corpus({**SMALL, "relevance": "graded"}).save(tmp_path / name)
    files = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert files == [
        f"{t}.parquet" for t in sorted(("acl", "documents", "principals", "qrels", "queries"))
    ]
    for f in files:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f


def test_another_seed_gives_another_corpus():
    a, b = load_corpus(SMALL), load_corpus({**SMALL, "seed": 4})
    assert a.documents["text"].tolist() != b.documents["text"].tolist()


def test_a_corpus_larger_than_one_batch_is_generated_whole_and_balanced():
    c = synthetic_collection({"n_docs": BATCH + 5, "n_domains": 8, "n_principals": 2})
    assert len(c.documents) == BATCH + 5
    assert c.documents["doc_id"].is_monotonic_increasing
    assert (c.documents["text"].str.len() > 0).all()
    sizes = c.documents["domain"].value_counts()
    assert sizes.max() - sizes.min() <= 1


# -- shape ---------------------------------------------------------------------------------------


def test_ids_are_zero_padded_so_sorted_order_is_generation_order():
    c = synthetic_collection({"n_docs": 1000, "n_domains": 7, "queries_per_domain": 2})
    ids = c.documents["doc_id"].tolist()
    assert ids[0] == "d000" and ids[-1] == "d999" and ids == sorted(ids)
    assert c.query_ids.tolist()[:2] == ["q00", "q01"] and len(c.queries) == 14
    assert c.documents["domain"].astype(str).tolist()[:8] == [f"dom{i}" for i in range(7)] + [
        "dom0"
    ]


def test_lengths_follow_doc_length_and_query_length_and_documents_vary():
    c = synthetic_collection({"n_docs": 4000, "doc_length": 12, "query_length": 4})
    doc_len = c.documents["text"].str.split().str.len()
    assert doc_len.min() >= 1 and abs(doc_len.mean() - 12) < 0.3
    assert doc_len.std() > 3, "log-normal lengths: documents of varying length"
    q_len = c.queries["text"].str.split().str.len()
    assert q_len.min() >= 1 and abs(q_len.mean() - 4) < 0.5 and q_len.nunique() > 1
    fixed = synthetic_collection({"n_docs": 400, "doc_length": 12, "length_spread": 0})
    assert (fixed.documents["text"].str.split().str.len() == 12).all()


def _words(spec: SyntheticSpec) -> np.ndarray:
    """The topic and sub-topic word lists, drawn first from the seeded generator."""
    return _Vocabularies.draw(np.random.default_rng(spec.seed), spec).words


def _own(spec: SyntheticSpec, words: np.ndarray, topic: int, subtopic: int) -> set[int]:
    rows = [topic, spec.n_topics + topic * spec.subtopics + subtopic]
    return set(words[rows].ravel().tolist())


def test_topical_tokens_come_from_the_topic_and_queries_stray_only_by_query_noise():
    knobs = {"n_docs": 400, "vocab_size": 100_000, "shared_vocab": 0.0, "query_noise": 0.0}
    spec = SyntheticSpec.from_config(knobs)
    words = _words(spec)
    clean = synthetic_collection(knobs)
    for frame in (clean.documents, clean.queries):
        for text, t, s in zip(frame["text"], frame["topic"], frame["subtopic"], strict=True):
            assert _tokens(text) <= _own(spec, words, t, s)
    noisy = synthetic_collection({**knobs, "query_noise": 1.0})
    topic_words = set(words[: spec.n_topics].ravel().tolist())
    for text, t, s in zip(
        noisy.queries["text"], noisy.queries["topic"], noisy.queries["subtopic"], strict=True
    ):
        tokens = _tokens(text)
        assert tokens <= topic_words and not tokens & _own(spec, words, t, s), "other topics'"


def test_background_words_are_zipfian_and_never_in_queries():
    c = synthetic_collection({"n_docs": 2000, "shared_vocab": 1.0, "zipf": 1.0})
    tokens = np.array([int(w[1:]) for t in c.documents["text"] for w in t.split()])
    freq = np.bincount(tokens)
    assert freq[0] > freq[9] > freq[99] > 0  # w0 is the most frequent word
    # Zipf with exponent 1: frequency × rank about constant over the head
    ratio = freq[[0, 9, 99]] * np.array([1.5, 10.5, 100.5])
    assert ratio.max() / ratio.min() < 1.5, ratio
    spec = SyntheticSpec.from_config({"n_docs": 2000})
    query_tokens = set().union(*map(_tokens, c.queries["text"]))
    assert min(query_tokens) >= spec.head_words, "no background head word in a query"


def test_sensitivity_follows_sensitivity_mix():
    c = synthetic_collection({"n_docs": 20000, "sensitivity_mix": [2, 1, 1]})
    share = c.documents["sensitivity"].astype(str).value_counts(normalize=True)
    assert share["internal"] == pytest.approx(0.5, abs=0.02)
    assert share["restricted"] == pytest.approx(0.25, abs=0.02)
    assert set(share.index) == set(LEVELS)


# -- relevance and authorization -----------------------------------------------------------------


def _same(c, column: str) -> np.ndarray:
    return (
        c.queries[column].astype(str).to_numpy()[:, None]
        == c.documents[column].astype(str).to_numpy()[None, :]
    )


def test_domain_relevance_is_every_document_of_the_query_domain():
    c = load_corpus({**SMALL, "relevance": "domain"})
    assert np.array_equal(c.relevance_matrix().toarray(), _same(c, "domain").astype(float))


def test_graded_relevance_is_2_on_the_query_subtopic_and_1_elsewhere_in_its_topic():
    c = load_corpus({**SMALL, "n_docs": 300, "docs_per_topic": 20, "subtopics": 3})
    rel = c.relevance_matrix().toarray()
    topic, sub = _same(c, "topic"), _same(c, "subtopic")
    assert np.array_equal(rel, np.where(topic, np.where(sub, 2.0, 1.0), 0.0))
    assert (rel == 2).any() and (rel == 1).any()
    assert (topic <= _same(c, "domain")).all(), "topics nest in domains"


def test_topic_and_subtopic_relevance_are_the_graded_levels():
    knobs = {**SMALL, "n_docs": 300, "docs_per_topic": 20, "subtopics": 3}
    graded = load_corpus(knobs).relevance_matrix().toarray()
    topic = load_corpus({**knobs, "relevance": "topic"}).relevance_matrix().toarray()
    subtopic = load_corpus({**knobs, "relevance": "subtopic"}).relevance_matrix().toarray()
    assert np.array_equal(topic, (graded > 0).astype(float))
    assert np.array_equal(subtopic, (graded == 2).astype(float))


@settings(max_examples=8, deadline=None)
@given(
    n_docs=st.integers(40, 3000),
    docs_per_topic=st.integers(1, 60),
    subtopics=st.integers(1, 6),
    relevance=st.sampled_from(["graded", "topic", "subtopic"]),
)
def test_a_query_has_a_bounded_nonempty_set_of_relevant_documents(
    n_docs, docs_per_topic, subtopics, relevance
):
    knobs = {"n_docs": n_docs, "docs_per_topic": docs_per_topic, "subtopics": subtopics}
    spec = SyntheticSpec.from_config({**knobs, "relevance": relevance})
    c = synthetic_collection({**knobs, "relevance": relevance, "vocab_size": 1000})
    per_query = np.diff(c.relevance_matrix().tocsr().indptr)
    assert per_query.min() >= 1 and per_query.max() <= spec.relevant_per_query
    assert spec.n_topics % spec.n_domains == 0 and spec.n_topics * docs_per_topic >= n_docs


def test_relevant_documents_per_query_do_not_grow_with_the_corpus():
    small = SyntheticSpec.from_config({"n_docs": 1_000})
    huge = SyntheticSpec.from_config({"n_docs": 10_000_000})
    assert small.relevant_per_query <= huge.relevant_per_query == small.docs_per_topic
    assert huge.vocab_size > 10 * small.vocab_size, "Heaps' law: the vocabulary grows"
    assert SyntheticSpec.from_config({"n_docs": 10**6, "relevance": "domain"}).relevant_per_query


@settings(max_examples=8, deadline=None)
@given(
    n_domains=st.integers(1, 9),
    data=st.data(),
    queries_per_domain=st.integers(1, 4),
    n_principals=st.integers(1, 6),
    seed=st.integers(0, 100),
)
def test_the_share_of_pairs_with_authorized_relevant_documents_is_granted_over_domains(
    n_domains, data, queries_per_domain, n_principals, seed
):
    held = data.draw(st.integers(1, n_domains))
    c = synthetic_collection(
        {
            "seed": seed,
            "n_docs": 20 * n_domains,
            "n_domains": n_domains,
            "queries_per_domain": queries_per_domain,
            "n_principals": n_principals,
            "domains_per_principal": held,
        }
    )
    authorized_relevant = (c.acl_matrix().astype(float) @ c.relevance_matrix().T).toarray() > 0
    assert authorized_relevant.mean() == pytest.approx(held / n_domains)


def test_the_corpus_acl_grants_each_principal_its_whole_domains_and_nothing_else():
    c = load_corpus({**SMALL, "n_principals": 5, "domains_per_principal": 2})
    acl = c.acl_matrix().toarray()
    domains = c.documents["domain"].astype(str).to_numpy()
    for i, held in enumerate(c.principals["domains"]):
        assert len(held.split(",")) == 2
        assert np.array_equal(acl[i], np.isin(domains, held.split(",")))
    assert c.principals["clearance"].tolist() == [*LEVELS, *LEVELS[:2]]


# -- difficulty knobs ----------------------------------------------------------------------------


def test_more_background_words_mean_lower_mrr_with_tfidf():
    def mrr(shared: float) -> float:
        return np.mean(
            [
                _mrr(load_corpus({**SMALL, "seed": s, "n_docs": 400, "shared_vocab": shared}))
                for s in range(2)
            ]
        )

    easy, middle, hard = mrr(0.0), mrr(0.5), mrr(0.95)
    assert easy > middle > hard, (easy, middle, hard)


def test_more_query_noise_means_lower_mrr_with_tfidf():
    clean = _mrr(load_corpus({**SMALL, "n_docs": 400, "query_noise": 0.0}))
    noisy = _mrr(load_corpus({**SMALL, "n_docs": 400, "query_noise": 0.8}))
    assert clean > noisy, (clean, noisy)


# -- realistic difficulty at every size (the documented targets of bench_corpus_quality) ----------


@pytest.mark.parametrize("n_docs", [1_000, 3_000])
def test_the_defaults_give_retrieval_quality_inside_the_documented_ranges(n_docs):
    collection = load_corpus(corpus_config(n_docs, queries=160, principals=10))
    figures = {name: quality(collection, name) for name in ("tfidf", "bm25")}
    for name, f in figures.items():
        for key in ("mrr", "recall@100", "authorized_share"):
            low, high = TARGETS[key]
            assert low <= f[key] <= high, (n_docs, name, key, f[key])
        assert f["gap@10"] > 0, (n_docs, name, "the pre placement finds more at K=10")
        assert f["post@10"] < f["pre@10"]
    assert figures["tfidf"]["ndcg@10"] != figures["bm25"]["ndcg@10"]


# -- bad knobs -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"n_docs": 0}, "corpus.n_docs: must be a positive integer, got 0"),
        ({"n_docs": 3}, "corpus.n_docs: must be at least corpus.n_domains (8)"),
        ({"docs_per_domain": -1}, "corpus.docs_per_domain: must be a positive integer, got -1"),
        ({"n_domains": "8"}, "corpus.n_domains: must be a positive integer, got '8'"),
        ({"vocab_size": 20}, "corpus.vocab_size: too small"),
        ({"shared_vocab": 1.5}, "corpus.shared_vocab: must be a number in [0, 1], got 1.5"),
        ({"zipf": -1}, "corpus.zipf: must be a number in [0, 4]"),
        ({"length_spread": 5}, "corpus.length_spread: must be a number in [0, 3]"),
        ({"docs_per_topic": 0}, "corpus.docs_per_topic: must be a positive integer, got 0"),
        ({"topic_words": 0}, "corpus.topic_words: must be a positive integer, got 0"),
        ({"query_noise": -0.1}, "corpus.query_noise: must be a number in [0, 1]"),
        ({"topic_focus": True}, "corpus.topic_focus: must be a number in [0, 1]"),
        ({"relevance": "bm25"}, "corpus.relevance: must be one of graded, topic, subtopic, domain"),
        ({"domains_per_principal": 9}, "corpus.domains_per_principal: must be at most"),
        ({"sensitivity_mix": [1, 1]}, "corpus.sensitivity_mix: must be 3 non-negative weights"),
        ({"sensitivity_mix": [0, 0, 0]}, "corpus.sensitivity_mix"),
        ({"seed": -1}, "corpus.seed: must be an integer ≥ 0, got -1"),
        ({"query_length": 0}, "corpus.query_length: must be a positive integer, got 0"),
    ],
)
def test_bad_knobs_are_refused_in_one_line_naming_the_field(patch, message):
    with pytest.raises(ArecallError) as err:
        load_corpus({"name": "synthetic", **patch})
    text = str(err.value)
    assert message in text and "\n" not in text, text


def test_the_config_option_composes_with_the_generator_defaults():
    cfg = default_config(["corpus=synthetic"]).corpus
    spec = SyntheticSpec.from_config(cfg)
    assert spec == SyntheticSpec.from_config({})
    assert spec.n_docs == 40 and spec.n_queries == 24


def test_the_pipeline_runs_end_to_end_on_synthetic():
    out = run_in_memory(fast_config("corpus=synthetic"))
    assert_proved_on_every_pair(out)
    assert out["metrics"]["datasets"] == 40 and out["metrics"]["queries"] == 24
    assert out["metrics"]["profiles"] == 4
