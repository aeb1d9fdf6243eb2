"""corpus=synthetic: deterministic in its seed, and each knob does what its name says."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from arecall.core.errors import ArecallError
from arecall.core.ranking import rank_queries
from arecall.data.authorization import LEVELS
from arecall.data.sources import load_corpus
from arecall.data.sources.synthetic import BATCH, SyntheticSpec, synthetic_collection
from arecall.pipeline.config import default_config
from arecall.pipeline.run import run_in_memory
from arecall.retrievers.tfidf import SeedTfidf

from conftest import assert_proved_on_every_pair, fast_config

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


def test_lengths_follow_doc_length_and_query_length():
    c = synthetic_collection({"n_docs": 4000, "doc_length": 12, "query_length": 4})
    doc_len = c.documents["text"].str.split().str.len()
    assert doc_len.min() >= 1 and abs(doc_len.mean() - 12) < 0.3
    assert (c.queries["text"].str.split().str.len() == 4).all()


def test_documents_use_only_their_domain_words_and_queries_stray_only_by_query_noise():
    spec = SyntheticSpec.from_config({"n_docs": 400, "vocab_size": 400, "shared_vocab": 0.2})
    shared = set(range(spec.shared_words))

    def own(domain: str) -> set[int]:
        d = int(domain[3:])
        base = spec.shared_words + d * spec.private_words
        return shared | set(range(base, base + spec.private_words))

    clean = synthetic_collection({"n_docs": 400, "vocab_size": 400, "query_noise": 0.0})
    for frame in (clean.documents, clean.queries):
        for text, domain in zip(frame["text"], frame["domain"].astype(str), strict=True):
            assert _tokens(text) <= own(domain)
    noisy = synthetic_collection({"n_docs": 400, "vocab_size": 400, "query_noise": 1.0})
    for text, domain in zip(
        noisy.queries["text"], noisy.queries["domain"].astype(str), strict=True
    ):
        assert not _tokens(text) & own(domain), "query_noise=1: every token off-domain"


def test_sensitivity_follows_sensitivity_mix():
    c = synthetic_collection({"n_docs": 20000, "sensitivity_mix": [2, 1, 1]})
    share = c.documents["sensitivity"].astype(str).value_counts(normalize=True)
    assert share["internal"] == pytest.approx(0.5, abs=0.02)
    assert share["restricted"] == pytest.approx(0.25, abs=0.02)
    assert set(share.index) == set(LEVELS)


# -- relevance and authorization -----------------------------------------------------------------


def test_domain_relevance_is_every_document_of_the_query_domain():
    c = load_corpus(SMALL)
    rel = c.relevance_matrix().toarray()
    same = (
        c.queries["domain"].astype(str).to_numpy()[:, None]
        == c.documents["domain"].astype(str).to_numpy()[None, :]
    )
    assert np.array_equal(rel, same.astype(float))


def test_graded_relevance_is_2_on_the_query_subtopic_and_1_elsewhere_in_its_domain():
    c = load_corpus({**SMALL, "relevance": "graded", "subtopics": 3})
    rel = c.relevance_matrix().toarray()
    q, d = c.queries, c.documents
    same_domain = q["domain"].astype(str).to_numpy()[:, None] == d["domain"].astype(str).to_numpy()
    same_topic = q["subtopic"].to_numpy()[:, None] == d["subtopic"].to_numpy()[None, :]
    expected = np.where(same_domain, np.where(same_topic, 2.0, 1.0), 0.0)
    assert np.array_equal(rel, expected)
    assert (rel == 2).any() and (rel == 1).any()


def test_subtopic_relevance_is_only_the_query_domain_and_subtopic():
    graded = load_corpus({**SMALL, "relevance": "graded", "subtopics": 3}).relevance_matrix()
    subtopic = load_corpus({**SMALL, "relevance": "subtopic", "subtopics": 3}).relevance_matrix()
    assert np.array_equal(subtopic.toarray(), (graded.toarray() == 2).astype(float))


def test_the_corpus_acl_grants_each_principal_its_whole_domains_and_nothing_else():
    c = load_corpus({**SMALL, "n_principals": 5, "domains_per_principal": 2})
    acl = c.acl_matrix().toarray()
    domains = c.documents["domain"].astype(str).to_numpy()
    for i, held in enumerate(c.principals["domains"]):
        assert len(held.split(",")) == 2
        assert np.array_equal(acl[i], np.isin(domains, held.split(",")))
    assert c.principals["clearance"].tolist() == [*LEVELS, *LEVELS[:2]]


# -- difficulty knobs ----------------------------------------------------------------------------


def test_more_shared_vocabulary_means_lower_mrr_with_tfidf():
    def mrr(shared: float) -> float:
        return np.mean(
            [
                _mrr(
                    load_corpus({**SMALL, "seed": s, "docs_per_domain": 25, "shared_vocab": shared})
                )
                for s in range(2)
            ]
        )

    easy, middle, hard = mrr(0.0), mrr(0.5), mrr(0.9)
    assert easy > middle > hard, (easy, middle, hard)
    assert easy > 0.9


def test_more_query_noise_means_lower_mrr_with_tfidf():
    clean = _mrr(load_corpus({**SMALL, "docs_per_domain": 25, "query_noise": 0.0}))
    noisy = _mrr(load_corpus({**SMALL, "docs_per_domain": 25, "query_noise": 0.8}))
    assert clean > noisy, (clean, noisy)


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
        ({"query_noise": -0.1}, "corpus.query_noise: must be a number in [0, 1]"),
        ({"topic_focus": True}, "corpus.topic_focus: must be a number in [0, 1]"),
        ({"relevance": "bm25"}, "corpus.relevance: must be one of domain, graded, subtopic"),
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
    cfg = default_config(["corpus=synthetic"])["corpus"]
    spec = SyntheticSpec.from_config(cfg)
    assert spec == SyntheticSpec.from_config({})
    assert spec.n_docs == 40 and spec.n_queries == 24


def test_the_pipeline_runs_end_to_end_on_synthetic():
    out = run_in_memory(fast_config("corpus=synthetic"))
    assert_proved_on_every_pair(out)
    assert out["metrics"]["datasets"] == 40 and out["metrics"]["queries"] == 24
    assert out["metrics"]["profiles"] == 4
