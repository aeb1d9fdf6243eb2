"""Milvus Lite, a third real store, runs the same experiment and audit as faiss, LanceDB, Chroma.

All Milvus tests live in this module (one store per module where possible: a Milvus Lite
collection takes about a second to create, flush and load). The corpus is test_vector_chroma's:
clustered unit vectors and a correlated ACL (whole clusters authorized, queries drawn from
clusters never authorized), where post-filtering returns nothing.
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
from arecall.vector.generator import BenchData, generate, l2_normalise
from arecall.vector.index import VectorIndex
from arecall.vector.measurement import audit, measure_store
from arecall.vector.schema import IndexConfig
from arecall.vector.stores import Below, InSet, MilvusStore, store_from_config

from tests.helpers import AUTHORIZED, WITHOUT_AUTO, K, clustered, rows_by_mode, with_vector_search


@pytest.fixture(scope="module")
def corpus() -> tuple[BenchData, npt.NDArray[np.int64]]:
    return clustered()


@pytest.fixture(scope="module")
def oracle(corpus: tuple[BenchData, npt.NDArray[np.int64]]) -> VectorIndex:
    return build_index(corpus[0].vectors, kind="exact")


@pytest.fixture(scope="module")
def milvus(corpus: tuple[BenchData, npt.NDArray[np.int64]]) -> Iterator[MilvusStore]:
    data, group = corpus
    with MilvusStore() as store:
        store.build(data.vectors, {"draw": data.draws, "group": group})
        yield store


def test_the_index_config_reaches_the_milvus_collection() -> None:
    config = IndexConfig(store="milvus", m=8, ef_construction=50, ef_search=70)
    store = store_from_config(config)
    assert isinstance(store, MilvusStore)
    assert store.index_params() == {
        "index_type": "HNSW",
        "metric_type": "IP",
        "params": {"M": 8, "efConstruction": 50},
    }
    vectors = l2_normalise(np.random.default_rng(1).normal(size=(20, 4)))
    with store:
        store.build(vectors, {})
        described = store.describe_index()  # as Milvus reports it
    assert (described["index_type"], described["metric_type"]) == ("HNSW", "IP")
    assert described["indexed_rows"] == 20
    l2 = store_from_config(IndexConfig(store="milvus"), metric="l2")
    assert l2.index_params()["metric_type"] == "L2"
    with pytest.raises(ArecallError, match=r"^index.name='exact': store milvus builds an HNSW"):
        store_from_config(IndexConfig(name="exact", store="milvus"))


def test_milvus_lite_runs_in_process_on_a_temporary_file_removed_on_close(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_connect = socket.socket.connect

    def loopback_only(self: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else address
        if self.family != socket.AF_UNIX and host not in ("127.0.0.1", "::1", "localhost"):
            raise AssertionError(f"milvus opened a connection to {address}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", loopback_only)
    vectors = l2_normalise(np.random.default_rng(2).normal(size=(50, 8)))
    first, second = MilvusStore(), MilvusStore()  # two stores side by side: no shared state
    first.build(vectors, {"draw": np.linspace(0, 1, 50)})
    second.build(vectors[::-1], {"draw": np.linspace(0, 1, 50)})
    path = first.database
    assert path is not None and path.exists()
    hits = first.search(vectors[:2], 3, Below("draw", 2.0), prefilter=True)
    assert hits.ids[:, 0].tolist() == [0, 1]  # each vector is its own nearest neighbour
    assert second.search(vectors[:1], 1, Below("draw", 2.0), prefilter=True).ids[0, 0] == 49
    first.close()
    second.close()
    assert not os.path.exists(path.parent)
    with pytest.raises(ArecallError, match=r"^milvus: search\(\) before build\(\)"):
        first.search(vectors[:1], 1, Below("draw", 0.5), prefilter=True)


def test_milvus_scores_are_dot_products_of_authorized_documents(
    corpus: tuple[BenchData, npt.NDArray[np.int64]], milvus: MilvusStore
) -> None:
    data, group = corpus
    where = InSet("group", AUTHORIZED)
    for prefilter in (False, True):
        hits = milvus.search(data.queries, K, where, prefilter=prefilter)
        for row, scores, q in zip(hits.ids, hits.scores, data.queries, strict=True):
            real = row >= 0
            np.testing.assert_allclose(scores[real], data.vectors[row[real]] @ q, atol=1e-5)
            assert np.isin(group[row[real]], AUTHORIZED).all()
            assert (np.diff(scores[real]) <= 1e-6).all()  # best first


def test_under_a_correlated_acl_milvus_filtered_search_returns_k_post_returns_nothing(
    corpus: tuple[BenchData, npt.NDArray[np.int64]], milvus: MilvusStore, oracle: VectorIndex
) -> None:
    data, group = corpus
    where = InSet("group", AUTHORIZED)
    rows = rows_by_mode(
        measure_store(
            milvus, oracle, data.queries, where, {"group": group}, placements=WITHOUT_AUTO
        )
    )
    assert rows["post"]["returned"] == 0 and rows["post"]["short"] == 1.0
    assert rows["pushdown"]["returned"] == K and rows["pushdown"]["short"] == 0.0
    assert rows["pre"]["recall"] == 1.0 and rows["pre"]["plan"] == "scan"
    assert rows["pushdown"]["recall"] > 0.9  # its graph's filtered search: approximate
    # the same documents, filtered by threshold or by group: the same answers
    below = milvus.search(data.queries, K, Below("draw", 0.3), prefilter=True)
    np.testing.assert_array_equal(
        below.ids, milvus.search(data.queries, K, where, prefilter=True).ids
    )


def test_milvus_searches_its_hnsw_graph_from_the_first_query() -> None:
    """Loaded before its index existed, Milvus Lite answered by brute force for the first
    seconds (recall 1.0 at any ef) and by its graph later: the adapter indexes, then loads, so
    the very first search is the graph's (at ef = 10 it misses neighbours an exact scan finds)."""
    data = generate(3000, 64, 20, 3)
    exact = build_index(data.vectors, kind="exact").exact(data.queries, K)
    with MilvusStore(ef_search=10) as store:
        store.build(data.vectors, {"draw": data.draws})
        hits = store.search(data.queries, K, Below("draw", 2.0), prefilter=False)
    found = [len(set(a) & set(b)) / K for a, b in zip(hits.rows(), exact.rows(), strict=True)]
    assert np.mean(found) < 0.9


def test_an_empty_group_set_admits_nothing_on_milvus(
    corpus: tuple[BenchData, npt.NDArray[np.int64]], milvus: MilvusStore
) -> None:
    data, _ = corpus
    hits = milvus.search(data.queries[:3], K, InSet("group", []), prefilter=True)
    assert hits.returned().tolist() == [0, 0, 0]


def test_the_milvus_audit_and_experiment_on_a_small_corpus() -> None:
    small = {"n_docs": 400, "dims": 16, "n_queries": 6, "selectivities": [0.03, 0.3, 1.0]}
    df = audit(store="milvus", **small)
    assert df["mode"].tolist() == ["milvus/post", "milvus/pre"] * 3
    pre = df[df["mode"] == "milvus/pre"]
    assert pre["returned"].tolist() == [10.0] * 3 and (pre["recall"] > 0.9).all()
    post = df[df["mode"] == "milvus/post"].set_index("selectivity")
    assert post.loc[0.03, "returned"] < 2 and post.loc[1.0, "returned"] == 10
    cfg = {
        "corpus": {"name": "vectors", **small},
        "index": {"name": "hnsw", "store": "milvus", "placements": WITHOUT_AUTO},
    }
    table = run_vector_corpus(with_vector_search(cfg).vector_search)
    assert table["plan"].tolist()[:3] == ["prefilter=False", "prefilter=True", "scan"]
    assert (table[table["mode"] == "pushdown"]["returned"] == 10).all()
