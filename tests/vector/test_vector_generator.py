"""The generator is verity's, draw for draw: checked against verity's own benchmark code."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import verity.benchmark as verity_benchmark
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from arecall.vector.generator import VERITY_DEFAULTS, generate, generate_lowrank, l2_normalise
from arecall.vector.index import build_index

SELECTIVITIES = (0.01, 0.03, 0.10, 0.30, 1.0)


def test_default_matching_counts() -> None:
    data = generate()
    assert [data.matching(s) for s in SELECTIVITIES] == [21, 79, 228, 611, 2000]
    assert data.vectors.shape == (2000, 128) and data.queries.shape == (50, 128)
    assert data.vectors.dtype == np.float32 and data.draws.dtype == np.float64
    np.testing.assert_allclose(np.linalg.norm(data.vectors, axis=1), 1.0, atol=1e-5)


def test_defaults_are_veritys() -> None:
    assert VERITY_DEFAULTS["selectivities"] == SELECTIVITIES
    assert (VERITY_DEFAULTS["n_docs"], VERITY_DEFAULTS["dims"]) == (2000, 128)


@pytest.fixture(scope="module")
def verity_capture() -> dict[str, Any]:
    """Run verity's own bench (pre mode only) and record the corpus its oracle receives."""
    captured: dict[str, Any] = {"records": {}, "queries": [], "exact": {}}
    original = verity_benchmark.BruteForceIndex

    class Recording(original):  # type: ignore[misc, valid-type]
        def __init__(self, records: Any = None) -> None:
            records = list(records)
            key = sum(bool(r.metadata["match"]) for r in records)
            captured["records"][key] = records
            self._key = key
            super().__init__(records)

        def search(self, query: Any, k: int, *, predicate: Any = None) -> Any:
            if self._key == len(self.records):  # 100%: record the query stream once
                captured["queries"].append(np.asarray(query, dtype=np.float32).copy())
            hits = super().search(query, k, predicate=predicate)
            captured["exact"].setdefault(self._key, []).append([int(h.id[1:]) for h in hits])
            return hits

    verity_benchmark.BruteForceIndex = Recording
    try:
        rows = verity_benchmark.run_selectivity_benchmark(modes=("pre",))
    finally:
        verity_benchmark.BruteForceIndex = original
    captured["rows"] = rows
    return captured


def test_vectors_and_draws_match_verity(verity_capture: dict[str, Any]) -> None:
    raw = generate(normalise=False)
    records = verity_capture["records"][2000]
    theirs = np.stack([np.asarray(r.vector, dtype=np.float32) for r in records])
    np.testing.assert_array_equal(theirs, raw.vectors)
    np.testing.assert_array_equal(np.stack(verity_capture["queries"]), raw.queries)
    for s in SELECTIVITIES:
        matches = raw.mask(s)
        records = verity_capture["records"][int(matches.sum())]
        assert [bool(r.metadata["match"]) for r in records] == matches.tolist()
    assert [row.matching_docs for row in verity_capture["rows"]] == [21, 79, 228, 611, 2000]


def test_exact_oracle_matches_veritys(verity_capture: dict[str, Any]) -> None:
    data = generate()
    idx = build_index(data.vectors, kind="exact")
    for s in SELECTIVITIES:
        mask = data.mask(s)
        ours = idx.exact(data.queries, 10, mask).rows()
        assert ours == verity_capture["exact"][int(mask.sum())]


def test_normalised_is_raw_over_norm() -> None:
    raw, unit = generate(300, 16, 4, normalise=False), generate(300, 16, 4)
    np.testing.assert_allclose(unit.vectors, l2_normalise(raw.vectors), atol=1e-7)
    np.testing.assert_array_equal(unit.draws, raw.draws)


def test_calibration_queries_are_held_out_and_stable() -> None:
    data = generate(300, 16, 4)
    cal = data.calibration_queries(8)
    assert cal.shape == (8, 16)
    np.testing.assert_array_equal(cal, generate(300, 16, 4).calibration_queries(8))
    assert not np.isin(cal, data.queries).any()


def test_lowrank_shapes_and_determinism() -> None:
    a, b = generate_lowrank(500, 32, 7, seed=3), generate_lowrank(500, 32, 7, seed=3)
    assert a.vectors.shape == (500, 32) and a.queries.shape == (7, 32)
    np.testing.assert_array_equal(a.vectors, b.vectors)
    np.testing.assert_allclose(np.linalg.norm(a.vectors, axis=1), 1.0, atol=1e-5)


def test_lowrank_calibration_queries_share_the_subspace() -> None:
    data = generate_lowrank(2000, 32, 5, rank=4, noise=0.05)
    _, _, vt = np.linalg.svd(data.vectors, full_matrices=False)
    basis = vt[:4]
    cal = data.calibration_queries(50)
    inside = np.linalg.norm(cal @ basis.T, axis=1) ** 2
    assert inside.mean() > 0.9  # nearly all energy in the documents' subspace
    iso = generate(2000, 32, 5).calibration_queries(50)
    assert (np.linalg.norm(iso @ basis.T, axis=1) ** 2).mean() < 0.5


def test_normalised_vectors_match_veritys_bit_for_bit() -> None:
    from verity.filtered import _normalise

    for n, d, seed in ((2000, 128, 42), (500, 7, 1), (300, 768, 3)):
        raw = generate(n, d, 4, seed, normalise=False)
        unit = generate(n, d, 4, seed)
        theirs = np.stack([_normalise(row) for row in raw.vectors])
        np.testing.assert_array_equal(unit.vectors, theirs)
        np.testing.assert_array_equal(unit.queries, np.stack([_normalise(q) for q in raw.queries]))


@given(
    arrays(
        np.float32,
        st.tuples(st.integers(1, 20), st.integers(1, 40)),
        elements=st.floats(-1e3, 1e3, width=32),
    )
)
def test_l2_normalise_is_veritys_normalise(matrix: np.ndarray) -> None:
    from verity.filtered import _normalise

    theirs = np.stack([_normalise(row) for row in matrix])
    np.testing.assert_array_equal(l2_normalise(matrix), theirs)
