"""Chroma, a second real store with its own filtered search, runs the same experiment as faiss.

All chroma tests live in this module (importing chromadb costs ~2 s; the stores here are built
once per module). The corpus is our own: clustered unit vectors, one integer ``group`` per
document (its cluster), and a correlated ACL — authorized = whole clusters, queries drawn from
clusters that are never authorized, the case where post-filtering returns nothing and a graph
search must leave the query's neighbourhood to find any authorized document.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from arecall.core.errors import ArecallError
from arecall.pipeline.vector_search import run_vector_corpus
from arecall.vector import build_index
from arecall.vector.generator import BenchData, l2_normalise
from arecall.vector.index import Hits, VectorIndex
from arecall.vector.measurement import audit, experiment, measure_store
from arecall.vector.schema import IndexConfig
from arecall.vector.stores import Below, ChromaStore, InSet, store_from_config

from tests.helpers import (
    AUTHORIZED,
    WITHOUT_AUTO,
    K,
    clustered,
    rows_by_mode,
    with_vector_search,
)


@pytest.fixture(scope="module")
def corpus() -> tuple[BenchData, npt.NDArray[np.int64]]:
    return clustered()


@pytest.fixture(scope="module")
def oracle(corpus: tuple[BenchData, npt.NDArray[np.int64]]) -> VectorIndex:
    return build_index(corpus[0].vectors, kind="exact")


@pytest.fixture(scope="module")
def chroma(corpus: tuple[BenchData, npt.NDArray[np.int64]]) -> Iterator[ChromaStore]:
    data, group = corpus
    with ChromaStore() as store:
        store.build(data.vectors, {"draw": data.draws, "group": group})
        yield store


def test_the_index_config_reaches_the_chroma_collection() -> None:
    config = IndexConfig(store="chroma", m=8, ef_construction=50, ef_search=70)
    store = store_from_config(config)
    assert isinstance(store, ChromaStore)
    vectors = l2_normalise(np.random.default_rng(1).normal(size=(20, 4)))
    with store:
        store.build(vectors, {})
        hnsw = store._collection.configuration_json["hnsw"]  # as chroma reports it
    assert (hnsw["space"], hnsw["max_neighbors"]) == ("ip", 8)
    assert (hnsw["ef_construction"], hnsw["ef_search"]) == (50, 70)
    with pytest.raises(ArecallError, match=r"^index.name='exact': store chroma builds an HNSW"):
        store_from_config(IndexConfig(name="exact", store="chroma"))


def test_chroma_runs_offline_in_a_temporary_directory_removed_on_close(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(*args: Any) -> None:
        raise AssertionError(f"chroma opened a connection: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    vectors = l2_normalise(np.random.default_rng(2).normal(size=(50, 8)))
    first, second = ChromaStore(), ChromaStore()  # two stores side by side: no shared instance
    first.build(vectors, {"draw": np.linspace(0, 1, 50)})
    second.build(vectors[::-1], {"draw": np.linspace(0, 1, 50)})
    path = first._tmp.name if first._tmp else ""
    assert os.path.isdir(path)
    hits = first.search(vectors[:2], 3, Below("draw", 2.0), prefilter=True)
    assert hits.ids[:, 0].tolist() == [0, 1]  # each vector is its own nearest neighbour
    assert second.search(vectors[:1], 1, Below("draw", 2.0), prefilter=True).ids[0, 0] == 49
    first.close()
    second.close()
    assert not os.path.exists(path)
    with pytest.raises(ArecallError, match=r"^chroma: search\(\) before build\(\)"):
        first.search(vectors[:1], 1, Below("draw", 0.5), prefilter=True)


def test_chroma_scores_are_dot_products_of_authorized_documents(
    corpus: tuple[BenchData, npt.NDArray[np.int64]], chroma: ChromaStore
) -> None:
    data, group = corpus
    where = InSet("group", AUTHORIZED)
    for prefilter in (False, True):
        hits = chroma.search(data.queries, K, where, prefilter=prefilter)
        for row, scores, q in zip(hits.ids, hits.scores, data.queries, strict=True):
            real = row >= 0
            np.testing.assert_allclose(scores[real], data.vectors[row[real]] @ q, atol=1e-5)
            assert np.isin(group[row[real]], AUTHORIZED).all()
            assert (np.diff(scores[real]) <= 1e-6).all()  # best first


def test_under_a_correlated_acl_chroma_prefilter_returns_k_post_returns_nothing(
    corpus: tuple[BenchData, npt.NDArray[np.int64]], chroma: ChromaStore, oracle: VectorIndex
) -> None:
    data, group = corpus
    where = InSet("group", AUTHORIZED)
    attributes = {"group": group}
    rows = rows_by_mode(
        measure_store(chroma, oracle, data.queries, where, attributes, placements=WITHOUT_AUTO)
    )
    # queries sit in never-authorized clusters: their unfiltered top-k holds no authorized doc
    assert rows["post"]["returned"] == 0 and rows["post"]["short"] == 1.0
    assert rows["post"]["u_at_k"] == 1.0
    # Chroma's filtered search leaves the neighbourhood and fills every answer ...
    assert rows["pushdown"]["returned"] == K and rows["pushdown"]["short"] == 0.0
    # ... with authorized documents only, scored against the same exhaustive oracle
    assert 0.0 < rows["pushdown"]["recall"] <= 1.0
    assert rows["pre"]["recall"] == 1.0 and rows["pre"]["plan"] == "scan"
    # the same ACL as a threshold on draws: the same documents, the same answers
    below = chroma.search(data.queries, K, Below("draw", 0.3), prefilter=True)
    inset = chroma.search(data.queries, K, where, prefilter=True)
    np.testing.assert_array_equal(below.ids, inset.ids)


def test_an_empty_group_set_admits_nothing(
    corpus: tuple[BenchData, npt.NDArray[np.int64]], chroma: ChromaStore
) -> None:
    data, _ = corpus
    for prefilter in (False, True):
        hits = chroma.search(data.queries[:3], K, InSet("group", []), prefilter=prefilter)
        assert isinstance(hits, Hits) and (hits.returned() == 0).all()


def test_the_experiment_runs_on_chroma_under_a_correlated_acl(
    corpus: tuple[BenchData, npt.NDArray[np.int64]],
) -> None:
    data, _ = corpus
    df = experiment(data=data, store="chroma", selectivities=[0.3, 1.0], placements=WITHOUT_AUTO)
    assert df["mode"].tolist() == WITHOUT_AUTO * 2
    assert df["plan"].tolist() == ["prefilter=False", "prefilter=True", "scan"] * 2
    at = df.set_index(["selectivity", "mode"])
    assert at.loc[(0.3, "post"), "returned"] == 0  # the correlated ACL defeats post-filtering
    assert at.loc[(0.3, "pushdown"), "returned"] == K
    assert at.loc[(1.0, "post"), "returned"] == K and at.loc[(1.0, "pre"), "recall"] == 1.0
    with pytest.raises(
        ArecallError, match=r"^vector_search.index.placements: store chroma does not answer"
    ):
        experiment(data=data, store="chroma", selectivities=[1.0])  # auto is faiss's


def test_index_store_chroma_runs_through_the_pipeline_config_and_the_audit() -> None:
    cfg = {
        "corpus": {"name": "vectors", "n_docs": 300, "dims": 16, "n_queries": 4},
        "index": {"name": "hnsw", "store": "chroma", "placements": WITHOUT_AUTO, "m": 8},
    }
    df = run_vector_corpus(with_vector_search(cfg).vector_search)
    assert set(df["plan"]) == {"prefilter=False", "prefilter=True", "scan"}
    assert (df[df["mode"] == "pushdown"]["returned"] == 10).all()
    table = audit(store="chroma", n_docs=300, dims=16, n_queries=4, selectivities=[0.1, 1.0])
    assert table["mode"].tolist() == ["chroma/post", "chroma/pre"] * 2
    assert (table[table["mode"] == "chroma/pre"]["returned"] == 10).all()
