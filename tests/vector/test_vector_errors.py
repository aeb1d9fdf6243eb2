"""Bad input fails with one ArecallError line naming the field and what is wrong."""

from __future__ import annotations

import numpy as np
import pytest

from arecall.core.errors import ArecallError
from arecall.vector import (
    audit,
    auto,
    build_index,
    calibrate_auto,
    experiment,
    generate,
    place,
    recall_loss,
)
from arecall.vector.stores import Below, make_store


@pytest.fixture(scope="module")
def idx():
    return build_index(np.eye(16, 8, dtype=np.float32) + 0.01)


def fails(match: str, fn, *args, **kwargs) -> None:
    with pytest.raises(ArecallError, match=match) as info:
        fn(*args, **kwargs)
    assert "\n" not in str(info.value)


def test_dimension_mismatch(idx) -> None:
    q = np.ones((2, 5), dtype=np.float32)
    fails(r"queries: dimension 5 does not match the index dimension 8", idx.search, q, 3)
    fails(r"dimension 5 does not match", place, "pre", idx, q, 3, np.ones(16, bool))


def test_nan_and_inf(idx) -> None:
    bad = np.ones((4, 8), dtype=np.float32)
    bad[2, 3] = np.nan
    fails(r"vectors: row 2 contains NaN or inf", build_index, bad)
    q = np.ones((3, 8), dtype=np.float32)
    q[1, 0] = np.inf
    fails(r"queries: row 1 contains NaN or inf", idx.search, q, 2)
    fails(r"queries: row 1 contains NaN or inf", idx.exact, q, 2)


@pytest.mark.parametrize("k", [0, -3, 2.5, True])
def test_bad_k(idx, k) -> None:
    fails(r"k=.*must be a positive integer", idx.search, np.ones((1, 8), np.float32), k)
    fails(r"k=.*must be a positive integer", experiment, k=k)


def test_ef_search_below_k(idx) -> None:
    fails(r"ef_search=5: must be at least k=10", experiment, ef_search=5)
    fails(
        r"ef_search=2: must be at least k=3",
        idx.search,
        np.ones((1, 8), np.float32),
        3,
        ef_search=2,
    )


@pytest.mark.parametrize("s", [0, 0.0, -0.1, 1.5, float("nan"), float("inf"), "abc"])
def test_selectivity_outside_unit_interval(s) -> None:
    fails(r"selectivities=.*must be", experiment, selectivities=[0.1, s])
    if not isinstance(s, str):
        fails(r"selectivity=.*must be in \(0, 1\]", generate(50, 4, 1).mask, s)


def test_other_bad_values(idx) -> None:
    fails(r"index kind='ivf': must be one of exact, hnsw", build_index, np.ones((3, 2)), kind="ivf")
    fails(r"placement='sideways'", place, "sideways", idx, np.ones((1, 8)), 1, np.ones(16, bool))
    fails(r"placements: 'x' is not one of", experiment, placements=["pre", "x"])
    fails(
        r"allowed: mask of shape \(3,\) does not match 16 documents",
        idx.exact,
        np.ones((1, 8)),
        1,
        np.ones(3, bool),
    )
    fails(r"allowed: expected a boolean mask", idx.exact, np.ones((1, 8)), 1, np.ones(16))
    fails(r"k=11: exceeds n_docs=10", experiment, n_docs=10, dims=4, k=11, ef_search=64)
    # k > n_docs is named as such, not as an efSearch below k (issue 11).
    fails(r"k=600: exceeds n_docs=500", experiment, n_docs=500, k=600)
    fails(r"k=600: exceeds n_docs=500", audit, n_docs=500, k=600)
    fails(r"n_docs=0: must be an integer >= 1", generate, 0)
    fails(r"selectivities=\[\]", experiment, selectivities=[])
    fails(r"m=1: must be an integer >= 2", build_index, np.ones((3, 2)), m=1)
    fails(r"vectors: expected a 2-D", build_index, np.ones((2, 2, 2)))
    fails(
        r"placement=auto: needs a planner",
        place,
        "auto",
        idx,
        np.ones((1, 8)),
        1,
        np.ones(16, bool),
    )
    planner = calibrate_auto(idx, 2)
    fails(
        r"auto: planner calibrated for n_docs=16, k=2",
        auto,
        idx,
        np.ones((1, 8)),
        3,
        np.ones(16, bool),
        planner,
    )
    fails(r"store='qdrant': must be one of .*faiss.*lancedb", audit, store="qdrant")
    fails(r"lancedb index_type='DISKANN'", make_store, "lancedb", index_type="DISKANN")
    fails(r"filter column='draw; drop': must be a plain identifier", Below, "draw; drop", 0.1)
    assert recall_loss([1], [1]) == (1.0, 0)
