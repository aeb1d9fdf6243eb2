"""Ragged arrays: groups stored back to back in one flat array, described by their lengths.

Runs, qrels, rankings and placed lists are all kept this way (CSR-like: a flat array plus the
length of each group), so the same few index computations recur: where each group starts, each
element's position within its group, the flat indices of a slice of every group. They are
defined once here, vectorised, so no module re-derives them with its own cumsum/repeat trick.
"""

from __future__ import annotations

import numpy as np

__all__ = ["expand", "offsets", "positions_in_groups", "positions_in_runs", "run_starts"]


def offsets(lengths: np.ndarray) -> np.ndarray:
    """Group boundaries ``[0, l0, l0 + l1, …]`` (length n + 1, int64) from group lengths.

    Examples
    --------
    >>> offsets(np.array([2, 0, 3])).tolist()
    [0, 2, 2, 5]
    """
    return np.concatenate(([0], np.cumsum(lengths, dtype=np.int64))).astype(np.int64)


def positions_in_groups(lengths: np.ndarray) -> np.ndarray:
    """Each element's 0-based position within its group: ``concat(arange(l) for l in lengths)``.

    Examples
    --------
    >>> positions_in_groups(np.array([2, 0, 3])).tolist()
    [0, 1, 0, 1, 2]
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    return np.arange(total, dtype=np.int64) - np.repeat(offsets(lengths)[:-1], lengths)


def expand(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Flat indices ``concat(starts[i] + arange(lengths[i]))``: a slice of every group at once.

    Examples
    --------
    >>> expand(np.array([10, 0, 5]), np.array([2, 0, 3])).tolist()
    [10, 11, 5, 6, 7]
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    return np.repeat(np.asarray(starts, dtype=np.int64), lengths) + positions_in_groups(lengths)


def run_starts(keys: np.ndarray) -> np.ndarray:
    """Indices where a run of equal consecutive ``keys`` begins (keys sorted, or grouped).

    Examples
    --------
    >>> run_starts(np.array([4, 4, 7, 9, 9, 9])).tolist()
    [0, 2, 3]
    >>> run_starts(np.array([], dtype=int)).tolist()
    []
    """
    keys = np.asarray(keys)
    if not len(keys):
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])


def positions_in_runs(keys: np.ndarray) -> np.ndarray:
    """Each element's 0-based position within its run of equal consecutive ``keys``.

    Why: "the n-th hit of this query", "the n-th tail of this (query, principal)" — the rank
    within a group of a flat array sorted by group.

    Examples
    --------
    >>> positions_in_runs(np.array([4, 4, 7, 9, 9, 9])).tolist()
    [0, 1, 0, 0, 1, 2]
    """
    starts = run_starts(keys)
    return positions_in_groups(np.diff(np.r_[starts, len(keys)]))
