"""The one wall-clock timer of the vector experiments.

Timings only ever reach the console, MLflow and the benchmark's own report (``qps``, the build
and calibration seconds), never a byte-identical artifact, so one helper serves the experiment
(one run per call) and the benchmark (best of several).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from arecall.vector._checks import check_positive_int

__all__ = ["clock"]

T = TypeVar("T")


def clock(fn: Callable[..., T], *args: Any, repeats: int = 1, **kwargs: Any) -> tuple[T, float]:
    """Return ``fn(*args, **kwargs)`` and its best wall time in seconds over ``repeats`` runs.

    The minimum, not the mean: on a shared machine other processes only ever add time, so the
    fastest run is the best estimate of what the call itself costs. The result returned is the
    last run's.

    Examples
    --------
    >>> out, seconds = clock(sorted, [3, 1, 2], repeats=2)
    >>> out, seconds >= 0.0
    ([1, 2, 3], True)
    """
    repeats = check_positive_int("repeats", repeats)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn(*args, **kwargs)
        best = min(best, time.perf_counter() - start)
    return out, best
