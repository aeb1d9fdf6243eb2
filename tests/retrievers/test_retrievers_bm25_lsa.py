"""retriever=bm25 scores are bm25s's own; retriever=dense_lsa is TF-IDF cosine in an SVD space."""

from __future__ import annotations

import bm25s
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arecall.core.errors import ArecallError
from arecall.core.ranking import rank_queries
from arecall.data.sources import load_corpus
from arecall.pipeline.run import run_in_memory
from arecall.retrievers import dense_lsa as dense_lsa_module
from arecall.retrievers import make_retriever
from arecall.retrievers.bm25 import BM25
from arecall.retrievers.dense_lsa import DenseLSA
from arecall.retrievers.sklearn_tfidf import SklearnTfidf
from arecall.retrievers.tfidf import encode, tokenize

from tests.helpers import assert_proved_on_every_pair, fast_config

CORPUS = {"name": "synthetic", "seed": 11, "n_domains": 5, "docs_per_domain": 40}


@pytest.fixture(scope="module")
def collection():
    return load_corpus({**CORPUS, "query_noise": 0.3, "shared_vocab": 0.6})


@pytest.fixture(scope="module")
def texts(collection):
    docs = collection.documents["text"].tolist()
    docs[3] = "Mixed-CASE w0001, punctuation; and 42 numbers " + docs[3]
    docs[7] = ""  # a document without tokens
    queries = [*collection.queries["text"].tolist(), "w0001 w0001 w0001", "unseen words only"]
    return docs, queries


def _mrr(retriever, collection) -> float:
    retriever.fit(collection.documents["text"].tolist())
    scores = retriever.score(collection.queries["text"].tolist())
    ranking = rank_queries(
        [scores], n_queries=scores.shape[0], relevance=collection.relevance_matrix()
    )
    first = ranking.first_relevant
    return float(np.mean(np.where(first > 0, 1.0 / np.maximum(first, 1), 0.0)))


# -- bm25 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "k1", "b"), [("lucene", 1.5, 0.75), ("robertson", 1.2, 0.3), ("atire", 0.9, 1.0)]
)
def test_bm25_scores_equal_bm25s_own_scores(texts, method, k1, b):
    docs, queries = texts
    ours = BM25(k1=k1, b=b, method=method).fit(docs)
    scores = ours.score(queries).toarray()
    # bm25s indexing the same tokens through its own front door (its own vocabulary)
    reference = bm25s.BM25(k1=k1, b=b, method=method)
    reference.index(BM25.tokenize(docs), show_progress=False)
    for i, tokens in enumerate(BM25.tokenize(queries)):
        expected = reference.get_scores(tokens) if tokens else np.zeros(len(docs))
        expected = np.where(expected > 0, expected, 0.0)
        np.testing.assert_allclose(scores[i], expected, rtol=1e-5, atol=1e-6, err_msg=queries[i])


def test_bm25_ranking_equals_the_ranking_of_bm25s_scores(texts):
    docs, queries = texts
    ours = BM25().fit(docs)
    reference = bm25s.BM25()
    reference.index(BM25.tokenize(docs), show_progress=False)
    scores = ours.score(queries).toarray()
    for i, tokens in enumerate(BM25.tokenize(queries)[:-1]):
        expected = reference.get_scores(tokens)
        mine, theirs = np.round(scores[i], 4), np.round(expected, 4)
        assert np.array_equal(
            np.lexsort((np.arange(len(docs)), -mine))[: (mine > 0).sum()],
            np.lexsort((np.arange(len(docs)), -theirs))[: (theirs > 0).sum()],
        ), queries[i]


def test_bm25_keeps_only_positive_scores(texts):
    docs, queries = texts
    # robertson's idf of a word in more than half the documents is clipped to 0 by bm25s
    for method in ("lucene", "robertson"):
        scores = BM25(method=method).fit(docs).score(queries)
        assert scores.format == "csr" and scores.has_sorted_indices
        assert (scores.data > 0).all()
        assert scores.dtype == np.float32
    assert scores[len(queries) - 1].nnz == 0, "unseen words score nothing"


def test_bm25_scores_of_a_query_do_not_depend_on_its_chunk(texts):
    docs, queries = texts
    bm25 = BM25().fit(docs)
    whole = bm25.score(queries).toarray()
    alone = np.array([bm25.score([q]).toarray()[0] for q in queries])
    np.testing.assert_array_equal(alone, whole)


def test_bm25_tokenises_like_the_seed_tfidf(texts):
    docs, _ = texts
    rows, tokens = tokenize(docs)
    per_doc = [[] for _ in docs]
    for row, token in zip(rows.tolist(), tokens.to_pylist(), strict=True):
        per_doc[row].append(token)
    assert BM25.tokenize(docs) == per_doc
    assert set(BM25().fit(docs).model.vocab_dict) == set(tokens.to_pylist())
    assert BM25.tokenize(["Kelvin \u212a9 and ß"]) == [["kelvin", "k9", "and"]]


def test_bm25_parameters_reach_bm25s():
    r = make_retriever({"name": "bm25", "k1": 0.5, "b": 0.1, "method": "atire"})
    r.fit(["a b", "b c"])
    assert (r.model.k1, r.model.b, r.model.method) == (0.5, 0.1, "atire")


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"k1": -1}, "retriever.k1: must be a non-negative number, got -1"),
        ({"k1": "1.2"}, "retriever.k1: must be a non-negative number"),
        ({"b": 1.5}, "retriever.b: must be a number in [0, 1], got 1.5"),
        ({"method": "bm25+"}, "retriever.method: must be one of lucene, robertson, atire"),
    ],
)
def test_bad_bm25_parameters_are_refused_naming_the_field(patch, message):
    with pytest.raises(ArecallError) as err:
        make_retriever({"name": "bm25", **patch})
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_corpus_without_tokens_is_refused():
    for name in ("bm25", "dense_lsa"):
        with pytest.raises(ArecallError, match=f"retriever={name}: the documents contain no"):
            make_retriever({"name": name}).fit(["", "--"])


# -- dense_lsa -----------------------------------------------------------------------------------


def test_lsa_with_every_component_kept_ranks_exactly_as_tfidf_cosine(texts):
    docs, queries = texts
    lsa = DenseLSA(n_components=10_000).fit(docs)
    n_terms = len(set(tokenize(docs)[1].to_pylist()))
    assert lsa.embed_documents().shape[1] == min(len(docs), n_terms)
    tfidf = SklearnTfidf().fit(docs).score(queries).toarray()
    cosine = (lsa.embed_queries(queries) @ lsa.embed_documents().T).astype(np.float64)
    for i in range(len(queries)):
        if tfidf[i].max() == 0:
            continue
        # the projection drops the query's component outside the documents' span: a constant
        scale = tfidf[i].max() / cosine[i, tfidf[i].argmax()]
        np.testing.assert_allclose(cosine[i] * scale, tfidf[i], atol=2e-5, err_msg=queries[i])


def test_lsa_ranking_is_sensible_on_a_separable_corpus():
    easy = load_corpus({**CORPUS, "shared_vocab": 0.0, "query_noise": 0.0})
    assert _mrr(DenseLSA(n_components=16), easy) > 0.9
    hard = load_corpus({**CORPUS, "shared_vocab": 0.9, "query_noise": 0.5})
    assert _mrr(DenseLSA(n_components=16), hard) < _mrr(DenseLSA(n_components=16), easy)


def test_lsa_embeddings_are_unit_float32_and_deterministic_in_random_state(texts):
    docs, queries = texts
    a = DenseLSA(n_components=8, random_state=3).fit(docs)
    b = DenseLSA(n_components=8, random_state=3).fit(docs)
    emb = a.embed_documents()
    assert emb.dtype == np.float32 and emb.shape == (len(docs), 8)
    norms = np.linalg.norm(emb, axis=1)
    assert np.allclose(norms[norms > 0], 1.0, atol=1e-5) and norms[7] == 0  # empty document
    assert np.array_equal(emb, b.embed_documents())
    q = a.embed_queries(queries)
    assert q.dtype == np.float32 and np.all(q[-1] == 0), "a query of unseen words is zero"


def test_lsa_scores_are_the_positive_cosines_whatever_the_block_size(texts, monkeypatch):
    docs, queries = texts
    lsa = DenseLSA(n_components=12).fit(docs)
    cosine = lsa.embed_queries(queries) @ lsa.embed_documents().T
    whole = lsa.score(queries)
    assert (whole.data > 0).all() and whole.dtype == np.float32 and whole.has_sorted_indices
    np.testing.assert_allclose(whole.toarray(), np.where(cosine > 0, cosine, 0), atol=1e-6)
    # a query's scores do not depend on which other queries share its block
    monkeypatch.setattr(dense_lsa_module, "BLOCK_CELLS", len(docs) * 3 + 1)
    blocked = lsa.score(queries)
    np.testing.assert_array_equal(blocked.toarray(), whole.toarray())
    alone = [lsa.score([q]).toarray()[0] for q in queries]
    np.testing.assert_array_equal(np.array(alone), whole.toarray())


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"n_components": 0}, "retriever.n_components: must be a positive integer, got 0"),
        ({"random_state": -1}, "retriever.random_state: must be a non-negative integer, got -1"),
        ({"n_iter": 2.5}, "retriever.n_iter: must be a non-negative integer, got 2.5"),
    ],
)
def test_bad_lsa_parameters_are_refused_naming_the_field(patch, message):
    with pytest.raises(ArecallError) as err:
        make_retriever({"name": "dense_lsa", **patch})
    assert str(err.value) == message


# -- end to end ----------------------------------------------------------------------------------


@pytest.mark.parametrize("retriever", ["bm25", "dense_lsa"])
def test_the_pipeline_runs_end_to_end_on_each_retriever(retriever):
    out = run_in_memory(fast_config(f"retriever={retriever}"))
    assert_proved_on_every_pair(out)
    assert out["metrics"]["mrr"] > 0.9, "discovery: each domain's vocabulary is its own"


# -- encoding in threads -------------------------------------------------------------------------

_WORDS = ["a", "b", "Red", "w01", "apple", "ß", "\u212a9", "x-y", "", "  ", "12", "zz"]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(_WORDS), max_size=6).map(" ".join), max_size=12),
    st.integers(1, 5),
)
def test_encoding_in_pieces_equals_one_dictionary_encode(texts, parts):
    """The fit's vocabulary and codes do not depend on how many threads encoded the texts."""
    import pyarrow.compute as pc

    rows, tokens = tokenize(texts)
    whole = pc.dictionary_encode(tokens)
    got_rows, got_codes, vocabulary = encode(texts, parts=parts)
    assert got_rows.tolist() == rows.tolist()
    assert got_codes.tolist() == whole.indices.to_pylist()
    assert vocabulary.to_pylist() == whole.dictionary.to_pylist()


def test_a_fitted_tfidf_is_the_same_encoded_in_one_piece_or_two(texts, monkeypatch):
    from arecall.retrievers import tfidf

    docs, queries = texts
    monkeypatch.setattr(tfidf, "PARALLEL_MIN", 1)
    split = make_retriever({"name": "tfidf"}).fit(docs).score(queries)
    monkeypatch.setattr(tfidf, "PARALLEL_MIN", 10**9)
    whole = make_retriever({"name": "tfidf"}).fit(docs).score(queries)
    assert (split != whole).nnz == 0 and np.array_equal(split.data, whole.data)
