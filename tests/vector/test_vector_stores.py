"""Vector stores are one file plus a registry line, and reach both the experiment and audit.

faiss, the experiment's own index, sits behind the same `VectorStore` interface as LanceDB; the
experiment picks its store by name (``index.store``), so a store defined here in a dozen lines
and registered in ``STORES`` (one line: its class and what it answers) runs the same
experiment, through the pipeline config too.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arecall.core.errors import ArecallError
from arecall.core.registry import Registered
from arecall.pipeline.vector_search import run_vector_corpus
from arecall.vector import Hits, build_index, calibrate_auto, generate, measure_placements
from arecall.vector.generator import l2_normalise
from arecall.vector.measurement import audit, experiment
from arecall.vector.schema import IndexConfig
from arecall.vector.stores import (
    STORES,
    Below,
    FaissStore,
    InSet,
    VectorStore,
    make_store,
    store_class,
    store_from_config,
)
from arecall.vector.stores.chroma import where_document
from arecall.vector.stores.lancedb import where_sql

from tests.helpers import with_vector_search

SMALL: dict[str, Any] = {"n_docs": 400, "dims": 16, "n_queries": 6, "selectivities": [0.1, 1.0]}
WITHOUT_AUTO = ["post", "pushdown", "pre"]


class ToyStore(VectorStore):
    """A whole store in a dozen lines: an exact scan, filtered after (post) or before (pre)."""

    name = "toy"

    def build(self, vectors: np.ndarray, attributes: Mapping[str, Any]) -> None:
        self.index, self.attributes = build_index(vectors, kind="exact"), attributes

    def search(self, queries: np.ndarray, k: int, where: Below, *, prefilter: bool) -> Hits:
        mask = where.mask(self.attributes)
        if prefilter:
            return self.index.exact(queries, k, mask)
        hits = self.index.exact(queries, k)
        return hits.select(mask[np.maximum(hits.ids, 0)])


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> None:
    registered = Registered("toy", ToyStore, answers=ToyStore.placements)
    monkeypatch.setitem(STORES, "toy", registered)  # the registry line


def test_the_registry_lists_faiss_lancedb_and_chroma_under_their_own_names() -> None:
    assert {"chroma", "faiss", "lancedb"} <= set(STORES)
    assert all(store_class(name).name == name for name in STORES)
    assert isinstance(store_from_config(IndexConfig()), FaissStore)


@pytest.mark.parametrize("name", ["faiss", "lancedb"])
def test_the_same_experiment_runs_through_each_store(name: str) -> None:
    df = experiment(store=name, placements=WITHOUT_AUTO, **SMALL)
    assert df["mode"].tolist() == WITHOUT_AUTO * 2
    assert df["selectivity"].tolist() == [0.1] * 3 + [1.0] * 3
    pre = df[df["mode"] == "pre"]
    assert pre["recall"].tolist() == [1.0, 1.0] and pre["plan"].tolist() == ["scan", "scan"]
    # post-filtering under-returns at 10%, and every store returns k unfiltered
    post = df[df["mode"] == "post"].set_index("selectivity")
    assert post.loc[0.1, "returned"] < 5 and post.loc[1.0, "returned"] == 10


def test_faiss_through_the_store_is_the_index_measured_directly() -> None:
    data = generate(400, 16, 6)
    got = experiment(data=data, selectivities=[0.03, 0.3, 1.0])
    idx = build_index(data.vectors)
    planner = calibrate_auto(idx, 10, queries=data.calibration_queries(100))
    want = [
        {"selectivity": s, **row}
        for s in (0.03, 0.3, 1.0)
        for row in measure_placements(idx, data.queries, data.mask(s), planner=planner)
    ]
    columns = [c for c in got.columns if c != "qps"]
    assert got[columns].to_dict("records") == [{c: r[c] for c in columns} for r in want]
    assert set(got["plan"]) >= {"ef=64", "scan"}


def test_a_registered_store_reaches_the_experiment(toy: None) -> None:
    df = experiment(store="toy", placements=WITHOUT_AUTO, **SMALL)
    assert df["plan"].tolist() == ["prefilter=False", "prefilter=True", "scan"] * 2
    pushdown = df[df["mode"] == "pushdown"]
    assert pushdown["recall"].tolist() == [1.0, 1.0]  # the toy's prefilter is an exact scan
    assert df[df["mode"] == "post"]["returned"].iloc[0] < 5


def test_a_registered_store_reaches_the_pipeline_and_audit(toy: None) -> None:
    cfg = {
        "corpus": {"name": "vectors", **SMALL},
        "index": {"name": "hnsw", "store": "toy", "placements": WITHOUT_AUTO},
    }
    assert run_vector_corpus(with_vector_search(cfg).vector_search)["plan"].tolist()[:2] == [
        "prefilter=False",
        "prefilter=True",
    ]
    df = audit(store="toy", **SMALL)
    assert df["mode"].tolist() == ["toy/post", "toy/pre", "toy/post", "toy/pre"]
    assert df[df["mode"] == "toy/pre"]["recall"].tolist() == [1.0, 1.0]
    assert df.iloc[0]["returned"] < 10  # post-filtering under-returns at 10%


def test_a_placement_the_store_cannot_answer_is_refused(toy: None) -> None:
    with pytest.raises(
        ArecallError, match=r"^vector_search.index.placements: store toy does not answer 'auto'"
    ):
        experiment(store="toy", **SMALL)


def test_an_unknown_store_names_the_key() -> None:
    with pytest.raises(ArecallError, match=r"^index.store='qdrant': must be one of .*faiss"):
        experiment(store="qdrant", **SMALL)


def test_faiss_answers_audit_too() -> None:
    df = audit(store="faiss", **SMALL)
    assert df["mode"].tolist() == ["faiss/post", "faiss/pre"] * 2
    assert df[df["mode"] == "faiss/pre"]["returned"].tolist() == [10.0, 10.0]


def test_inset_is_a_sorted_set_of_integers_rendered_for_every_store() -> None:
    where = InSet("group", [np.int64(4), 1, 4])
    assert where.values == (1, 4) and where == InSet("group", (4, 1))
    assert where_sql(where) == "group IN (1, 4)" and where_document(where) == {
        "group": {"$in": [1, 4]}
    }
    assert where_sql(InSet("group", [])) == "false"
    assert where_document(Below("draw", 0.25)) == {"draw": {"$lt": 0.25}}
    mask = where.mask({"group": np.array([1, 2, 4, 0], dtype=np.uint8)})
    assert mask.tolist() == [True, False, True, False]


@pytest.mark.parametrize(
    ("column", "values", "message"),
    [
        ("group", [1, 2.5], r"^filter value=2.5: InSet takes integers"),
        ("group", [True], r"^filter value=True: InSet takes integers"),
        ("group; drop", [1], r"^filter column='group; drop': must be a plain identifier"),
    ],
)
def test_inset_refuses_what_it_cannot_render(column: str, values: list[Any], message: str) -> None:
    with pytest.raises(ArecallError, match=message):
        InSet(column, values)


def test_inset_on_a_non_integer_attribute_names_the_column() -> None:
    with pytest.raises(ArecallError, match=r"^filter column='draw': InSet needs an integer"):
        InSet("draw", [1]).mask({"draw": np.array([0.5, 1.0])})
    with pytest.raises(ArecallError, match=r"^filter column='team': no such attribute"):
        InSet("team", [1]).mask({"draw": np.array([0.5, 1.0])})


TINY_DOCS, TINY_GROUPS = 60, 8


@pytest.fixture(scope="module", params=sorted(STORES))
def tiny_store(request: pytest.FixtureRequest) -> Iterator[tuple[VectorStore, Any, Any]]:
    """Each registered store over 60 documents in 8 groups (a graph this small is searched
    exhaustively, so any difference from numpy is the filter's)."""
    rng = np.random.default_rng(3)
    vectors = l2_normalise(rng.normal(size=(TINY_DOCS, 8)))
    group = rng.integers(0, TINY_GROUPS, TINY_DOCS)
    with make_store(request.param) as store:
        store.build(vectors, {"group": group, "even": group % 2 == 0})
        yield store, vectors, group


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=st.sets(st.integers(0, TINY_GROUPS + 1), max_size=TINY_GROUPS + 2),
    threshold=st.floats(-1.0, TINY_GROUPS + 1.0),
    query=st.integers(0, TINY_DOCS - 1),
)
def test_inset_and_below_match_numpy_on_every_store(
    tiny_store: tuple[VectorStore, Any, Any], values: set[int], threshold: float, query: int
) -> None:
    store, vectors, group = tiny_store
    inset = InSet("group", values)
    np.testing.assert_array_equal(inset.mask({"group": group}), np.isin(group, list(values)))
    oracle = build_index(vectors, kind="exact")
    q = vectors[query : query + 1]
    attributes = {"group": group, "even": group % 2 == 0}
    # a float bound on an integer and on a boolean attribute, a set of integers on both
    for where in (inset, Below("group", threshold), Below("even", threshold), InSet("even", [1])):
        mask = where.mask(attributes)
        want = oracle.exact(q, TINY_DOCS, mask)
        for prefilter in (False, True):
            # k = every document: the whole authorized set, best first, nothing else
            hits = store.search(q, TINY_DOCS, where, prefilter=prefilter)
            assert hits.rows() == want.rows(), (store.name, where, prefilter)
            few = store.search(q, 3, where, prefilter=prefilter)
            assert few.returned()[0] <= 3 and mask[few.rows()[0]].all()


def test_the_config_knows_every_store_and_exactly_what_it_answers():
    """The config is checked against ``STORES`` without importing the stores: it must list
    every registered store, with the placements the store's class answers."""
    for name, entry in STORES.items():
        cls = store_class(name)
        assert cls.name == name
        assert cls.placements == entry.answers


@pytest.mark.parametrize("name", sorted(STORES))
def test_every_store_built_for_l2_ranks_by_euclidean_distance(name: str) -> None:
    """With ``metric=l2`` each store answers what numpy's exact L2 scan answers (a graph this
    small is searched exhaustively), best first, scores ``−‖q − d‖²``."""
    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(TINY_DOCS, 8)).astype(np.float32) * rng.uniform(
        0.5, 3, (TINY_DOCS, 1)
    ).astype(np.float32)
    group = rng.integers(0, TINY_GROUPS, TINY_DOCS)
    queries = rng.normal(size=(3, 8)).astype(np.float32)
    where = InSet("group", [1, 2, 5])
    mask = where.mask({"group": group})
    distance = ((queries[:, None, :] - vectors[None, :, :]) ** 2).sum(axis=2)
    want = [[int(i) for i in np.argsort(row, kind="stable") if mask[i]] for row in distance]
    with store_from_config(IndexConfig(store=name), metric="l2") as store:
        store.build(vectors, {"group": group})
        for prefilter in (False, True):
            hits = store.search(queries, TINY_DOCS, where, prefilter=prefilter)
            assert hits.rows() == want, (name, prefilter)
            real = hits.ids >= 0
            np.testing.assert_allclose(
                hits.scores[real],
                -distance[np.nonzero(real)[0], hits.ids[real]],
                rtol=1e-4,
                atol=1e-4,
            )


def test_a_store_that_measures_inner_product_only_refuses_l2(toy: None) -> None:
    with pytest.raises(ArecallError, match=r"^metric l2: store toy measures ip only"):
        store_from_config(IndexConfig(store="toy"), metric="l2")
