"""The store audit runs here, small and fast: LanceDB's post-filter under-returns, pre does not.

Also shows the adapter interface is one small class: a numpy "store" written in the test
plugs into the same audit.
"""

from __future__ import annotations

import lancedb  # noqa: F401 - a missing store fails loudly
import numpy as np
import pandas as pd
import pytest

from arecall.vector import generate
from arecall.vector.measurement import audit, render_markdown
from arecall.vector.stores import Below, LanceDBStore


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
