"""The store audit runs here, small and fast: LanceDB's post-filter under-returns, pre does not.

Also shows the adapter interface is one small class: a numpy "store" written in the test
plugs into the same audit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import pytest

from arecall.vector import Hits, build_index, generate
from arecall.vector.measurement import audit, render_markdown
from arecall.vector.stores import STORES, Below, LanceDBStore, VectorStore

pytest.importorskip("lancedb")


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return audit(n_docs=1000, dims=32, n_queries=20, selectivities=[0.03, 0.3, 1.0])


def test_lancedb_post_filter_under_returns(table: pd.DataFrame) -> None:
    post = table[table["mode"] == "lancedb/post"].set_index("selectivity")
    pre = table[table["mode"] == "lancedb/pre"].set_index("selectivity")
    assert post.loc[0.03, "returned"] < 1.0 and post.loc[0.03, "short"] == 1.0
    assert post.loc[0.3, "returned"] < 5.0
    assert (pre["returned"] == 10).all() and (pre["short"] == 0).all()
    assert (pre["recall"] >= 0.9).all()
    assert post.loc[1.0, "returned"] == 10
    assert "`lancedb/post`" in render_markdown(table)


def test_lancedb_scores_are_dot_products() -> None:
    data = generate(400, 16, 3)
    with LanceDBStore() as store:
        store.build(data.vectors, {"draw": data.draws})
        hits = store.search(data.queries, 5, Below("draw", 0.5), prefilter=True)
    for row, scores, q in zip(hits.ids, hits.scores, data.queries, strict=True):
        np.testing.assert_allclose(scores, data.vectors[row] @ q, atol=1e-5)
        assert (data.draws[row] < 0.5).all()


class NumpyStore(VectorStore):
    """A whole adapter in a dozen lines: exact scan, filter before or after top-k."""

    name = "numpy"

    def build(self, vectors: np.ndarray, attributes: Mapping[str, Any]) -> None:
        self.index, self.attributes = build_index(vectors, kind="exact"), attributes

    def search(self, queries: np.ndarray, k: int, where: Below, *, prefilter: bool) -> Hits:
        mask = where.mask(self.attributes)
        if prefilter:
            return self.index.exact(queries, k, mask)
        hits = self.index.exact(queries, k)
        return hits.select(mask[np.maximum(hits.ids, 0)])


def test_another_store_is_one_class(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(STORES, "numpy", NumpyStore)
    df = audit(store="numpy", n_docs=500, dims=8, n_queries=5, selectivities=[0.1, 1.0])
    assert df["mode"].tolist() == ["numpy/post", "numpy/pre", "numpy/post", "numpy/pre"]
    assert df[df["mode"] == "numpy/pre"]["recall"].tolist() == [1.0, 1.0]
    assert df.iloc[0]["returned"] < 10
