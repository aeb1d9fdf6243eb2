"""Input checks shared by the vector modules, each failing with one `ArecallError` line.

Every message names the offending field and value and says what is wrong, because the CLI prints
it verbatim and exits without a traceback: "queries: dimension 64 does not match the index
dimension 128" is something a user can act on; a faiss assertion from C++ is not.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from arecall.core.errors import ArecallError

__all__ = [
    "check_ef_search",
    "check_k",
    "check_mask",
    "check_matrix",
    "check_positive_int",
    "check_selectivities",
    "check_selectivity",
]


def check_positive_int(name: str, value: Any, *, minimum: int = 1) -> int:
    """Return ``value`` as an int, or raise if it is not an integer ``>= minimum``."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ArecallError(f"{name}={value!r}: must be an integer >= {minimum}")
    if value < minimum:
        raise ArecallError(f"{name}={value}: must be an integer >= {minimum}")
    return int(value)


def check_k(k: Any) -> int:
    """Return ``k`` as an int, or raise if it is not a positive integer."""
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k <= 0:
        raise ArecallError(f"k={k!r}: must be a positive integer (the number of results wanted)")
    return int(k)


def check_ef_search(ef_search: Any, k: int) -> int:
    """Return ``ef_search`` as an int, or raise if it is not an integer ``>= k``.

    faiss silently raises a too-small efSearch to k; refusing it instead keeps the configured
    value and the value actually searched with the same number.
    """
    ef = check_positive_int("ef_search", ef_search)
    if ef < k:
        raise ArecallError(f"ef_search={ef}: must be at least k={k} (HNSW keeps ef candidates)")
    return ef


def check_selectivity(value: Any, name: str = "selectivity") -> float:
    """Return ``value`` as a float in (0, 1], or raise."""
    try:
        s = float(value)
    except (TypeError, ValueError):
        raise ArecallError(f"{name}={value!r}: must be a number in (0, 1]") from None
    if not (math.isfinite(s) and 0.0 < s <= 1.0):
        raise ArecallError(f"{name}={value!r}: must be in (0, 1] (a fraction of the corpus)")
    return s


def check_selectivities(values: Iterable[Any]) -> tuple[float, ...]:
    """Return ``values`` as a non-empty tuple of floats in (0, 1], or raise."""
    if isinstance(values, str | bytes):
        raise ArecallError(f"selectivities={values!r}: must be a list of numbers in (0, 1]")
    out = tuple(check_selectivity(v, "selectivities") for v in values)
    if not out:
        raise ArecallError("selectivities=[]: must list at least one selectivity in (0, 1]")
    return out


def check_matrix(name: str, value: Any, *, dims: int | None = None) -> npt.NDArray[np.float32]:
    """Return ``value`` as a C-contiguous float32 (n, d) matrix with finite entries, or raise.

    A single vector (1-D) is accepted as one row. ``dims`` is the dimension the matrix must have
    (the index's), named in the message when it differs.
    """
    try:
        array = np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError):
        raise ArecallError(f"{name}: not a numeric matrix") from None
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2:
        raise ArecallError(f"{name}: expected a 2-D (n, d) matrix, got shape {array.shape}")
    if array.shape[0] == 0 or array.shape[1] == 0:
        raise ArecallError(f"{name}: empty matrix of shape {array.shape}")
    if dims is not None and array.shape[1] != dims:
        raise ArecallError(
            f"{name}: dimension {array.shape[1]} does not match the index dimension {dims}"
        )
    finite = np.isfinite(array)
    if not finite.all():
        row = int(np.flatnonzero(~finite.all(axis=1))[0])
        raise ArecallError(f"{name}: row {row} contains NaN or inf")
    return np.ascontiguousarray(array)


def check_mask(value: Any, n: int, name: str = "allowed") -> npt.NDArray[np.bool_]:
    """Return ``value`` as a boolean vector of length ``n``, or raise."""
    array = np.asarray(value)
    if array.dtype != np.bool_:
        raise ArecallError(f"{name}: expected a boolean mask, got dtype {array.dtype}")
    if array.shape != (n,):
        raise ArecallError(f"{name}: mask of shape {array.shape} does not match {n} documents")
    return array
