"""Id vocabularies as pyarrow string arrays: dictionary codes and look-ups, one definition each.

Runs, qrels and ACLs all turn string ids into integer codes over a vocabulary so that the
evaluation is numpy passes over integers; these are the two operations every reader uses.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["as_strings", "encode", "index_in"]


def as_strings(values: Iterable[Any] | pa.Array | pa.ChunkedArray) -> pa.Array:
    """A pyarrow string array from a sequence of str (or a pyarrow string array).

    Examples
    --------
    >>> as_strings(["a", "b"]).to_pylist()
    ['a', 'b']
    """
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array):
        return values
    return pa.array(list(values), type=pa.string())


def encode(values: Iterable[Any] | pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, pa.Array]:
    """Dictionary-encode strings: int64 codes in first-appearance order and the distinct values.

    Examples
    --------
    >>> codes, vocabulary = encode(["b", "a", "b"])
    >>> codes.tolist(), vocabulary.to_pylist()
    ([0, 1, 0], ['b', 'a'])
    """
    encoded = pc.dictionary_encode(as_strings(values))
    return np.asarray(encoded.indices.to_numpy(), dtype=np.int64), encoded.dictionary


def index_in(values: pa.Array, vocabulary: pa.Array) -> np.ndarray:
    """Position of each of ``values`` in ``vocabulary`` (whose entries are unique), -1 if absent.

    Examples
    --------
    >>> index_in(pa.array(["b", "z"]), pa.array(["a", "b"])).tolist()
    [1, -1]
    """
    if len(values) == 0:
        return np.zeros(0, dtype=np.int64)
    if len(vocabulary) == 0:
        return np.full(len(values), -1, dtype=np.int64)
    found = pc.index_in(values, value_set=vocabulary)
    return np.asarray(pc.fill_null(found, -1).to_numpy(zero_copy_only=False), dtype=np.int64)
