"""Id vocabularies as pyarrow string arrays: dictionary codes and look-ups, one definition each.

Runs, qrels and ACLs all turn string ids into integer codes over a vocabulary so that the
evaluation is numpy passes over integers; these are the two operations every reader uses.
`Lookup` is `index_in` for a vocabulary looked up in again and again (an ACL's documents, once
per block of a run): Arrow's ``index_in`` hashes its value set on every call, which for a
million documents costs more than the look-up itself, so `Lookup` hashes it once.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["Lookup", "as_strings", "encode", "index_in"]


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


# -- many look-ups into one vocabulary -------------------------------------------------------------

_MIX = (np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB))


def _mixed(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: every input bit moves every output bit (in place, returned)."""
    x ^= x >> np.uint64(30)
    x *= _MIX[0]
    x ^= x >> np.uint64(27)
    x *= _MIX[1]
    x ^= x >> np.uint64(31)
    return x


def _position_weights(n: int) -> np.ndarray:
    """An odd pseudo-random 64-bit weight per byte position (the same prefix for every n)."""
    return _mixed(np.arange(1, n + 2, dtype=np.uint64)) | np.uint64(1)


def string_hashes(values: pa.Array) -> np.ndarray:
    """A 64-bit hash of each string (equal strings, equal hashes), computed in numpy passes
    over the array's bytes: the sum of each byte (plus one) times its position's weight, the
    length mixed in, then splitmix64's finaliser. Not a proof of equality: `Lookup` checks.

    Examples
    --------
    >>> h = string_hashes(pa.array(["d1", "d2", "d1", ""]))
    >>> bool(h[0] == h[2]), bool(h[0] == h[1]), h.dtype.name
    (True, False, 'uint64')
    """
    if values.type not in (pa.string(), pa.large_string()):
        values = values.cast(pa.string())
    width = 8 if values.type == pa.large_string() else 4
    _, offsets_buffer, data_buffer = values.buffers()
    offsets = np.frombuffer(
        offsets_buffer, dtype=np.int64 if width == 8 else np.int32,
        count=len(values) + 1, offset=values.offset * width,
    ).astype(np.int64)  # fmt: skip
    first, last = int(offsets[0]), int(offsets[-1])
    lengths = np.diff(offsets)
    hashes = lengths.astype(np.uint64) * _position_weights(0)[0]
    if last > first:
        data = np.frombuffer(data_buffer, dtype=np.uint8, count=last - first, offset=first)
        starts = offsets[:-1] - first
        position = np.arange(last - first) - np.repeat(starts, lengths)
        weights = _position_weights(int(lengths.max()))[position + 1]
        terms = (data.astype(np.uint64) + np.uint64(1)) * weights
        nonempty = lengths > 0
        hashes[nonempty] ^= np.add.reduceat(terms, starts[nonempty])
    return _mixed(hashes)


class Lookup:
    """`index_in` into one ``vocabulary`` (unique strings), hashed once for many look-ups.

    The vocabulary's hashes are sorted and bucketed by their top bits, so a look-up is a few
    numpy gathers per value; every match is then compared as strings, so a hash collision
    never gives a wrong position. A vocabulary with two equal hashes (about n²/2⁶⁵ odds) or
    values with nulls fall back to `index_in`.

    Examples
    --------
    >>> lookup = Lookup(pa.array(["a", "b", "c"]))
    >>> lookup(pa.array(["c", "z", "a"])).tolist()
    [2, -1, 0]
    """

    def __init__(self, vocabulary: pa.Array) -> None:
        self.vocabulary = vocabulary
        hashes = string_hashes(vocabulary)
        self._order = np.argsort(hashes, kind="stable")
        self._sorted = hashes[self._order]
        self._exact = vocabulary.null_count == 0 and bool(
            (self._sorted[1:] != self._sorted[:-1]).all()
        )
        # about one or two hashes per bucket; int32 positions while they fit
        bits = max(1, len(hashes).bit_length() - 1)
        small = np.int32 if len(hashes) < 1 << 31 else np.int64
        self._order = self._order.astype(small)
        self._shift = np.uint64(64 - bits)
        buckets = np.arange((1 << bits) + 1, dtype=np.uint64)
        self._starts = np.searchsorted(self._sorted >> self._shift, buckets).astype(small)

    def __call__(self, values: pa.Array) -> np.ndarray:
        """Position of each of ``values`` in the vocabulary, -1 if absent."""
        if not self._exact or values.null_count or not len(values) or not len(self.vocabulary):
            return index_in(values, self.vocabulary)
        if values.type != self.vocabulary.type:
            values = values.cast(self.vocabulary.type)
        hashes = string_hashes(values)
        bucket = (hashes >> self._shift).astype(np.int64)
        at = self._starts[bucket].astype(np.int64)
        stop = self._starts[bucket + 1].astype(np.int64)
        found = np.full(len(values), -1, dtype=np.int64)
        live = np.flatnonzero(at < stop)
        while len(live):  # a bucket holds about one hash: a few rounds
            same = self._sorted[at[live]] == hashes[live]
            found[live[same]] = self._order[at[live[same]]]
            live = live[~same]
            at[live] += 1
            live = live[at[live] < stop[live]]
        matched = np.flatnonzero(found >= 0)
        equal = pc.equal(
            values.take(pa.array(matched)), self.vocabulary.take(pa.array(found[matched]))
        )
        found[matched[~np.asarray(equal.to_numpy(zero_copy_only=False), dtype=bool)]] = -1
        return found
