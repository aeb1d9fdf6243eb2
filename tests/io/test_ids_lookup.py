"""`arecall.io.ids.Lookup` answers exactly what Arrow's ``index_in`` answers, hash collisions
included: it is how every block of a run finds its documents' authorization in an ACL."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arecall.io import ids
from arecall.io.ids import Lookup, index_in, string_hashes

_IDS = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)


@settings(max_examples=80, deadline=None)
@given(
    vocabulary=st.lists(_IDS, unique=True, max_size=40),
    probes=st.lists(_IDS, max_size=40),
    large=st.booleans(),
    sliced=st.integers(0, 3),
)
def test_lookup_equals_arrows_index_in_on_random_ids(vocabulary, probes, large, sliced) -> None:
    kind = pa.large_string() if large else pa.string()
    vocab = pa.array(vocabulary, type=kind)
    # probes drawn from the vocabulary too, and read through a slice (an array's offset)
    values = pa.array(["pad"] * sliced + probes + vocabulary[::2], type=kind)[sliced:]
    assert Lookup(vocab)(values).tolist() == index_in(values, vocab).tolist()


def test_equal_strings_hash_equal_and_lengths_and_positions_count() -> None:
    h = string_hashes(pa.array(["d1", "d1", "1d", "d1\x00", "", "\x00", "é"]))
    assert h[0] == h[1]
    assert len(set(h[1:].tolist())) == 6


def test_a_collision_between_a_probe_and_a_document_is_not_a_match(monkeypatch) -> None:
    vocab = pa.array(["alpha", "beta"])
    lookup = Lookup(vocab)
    real = string_hashes

    def colliding(values: pa.Array) -> np.ndarray:  # "zeta" hashes like "beta"
        h = real(values)
        h[np.asarray(values.to_pylist()) == "zeta"] = real(pa.array(["beta"]))[0]
        return h

    monkeypatch.setattr(ids, "string_hashes", colliding)
    assert lookup(pa.array(["zeta", "beta", "alpha", "omega"])).tolist() == [-1, 1, 0, -1]


@pytest.mark.parametrize("size", [2, 1000])
def test_a_vocabulary_with_equal_hashes_falls_back_to_index_in(monkeypatch, size) -> None:
    monkeypatch.setattr(ids, "string_hashes", lambda values: np.zeros(len(values), np.uint64))
    vocab = pa.array([f"d{i}" for i in range(size)])
    lookup = Lookup(vocab)
    probes = pa.array(["d1", "x", f"d{size - 1}"])
    assert lookup(probes).tolist() == [1, -1, size - 1]
