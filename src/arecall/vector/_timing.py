"""The timers of the vector experiments: one call (:func:`clock`), and several contenders
timed against each other (:func:`interleaved`).

Timings only ever reach the console, MLflow and the benchmark's own report (``qps``, the build
and calibration seconds), never a byte-identical artifact, so one helper serves the experiment
(one run per call) and the benchmark (best of several); the benchmarks and the planner's
graph-cost measurement share the interleaved one.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, TypeVar

from arecall.vector._checks import check_positive_int

__all__ = ["clock", "interleaved", "pair_cycle"]

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


def interleaved(
    fns: dict[str, Callable[[], Any]],
    first: dict[str, float],
    min_time: float,
    min_calls: int,
    timer: Callable[[], float] = time.perf_counter,
) -> dict[str, float]:
    """Seconds per call of each of ``fns``: the fastest of many single calls, interleaved.

    Each contender makes ``max(min_calls, len(fns), min_time / first)`` calls (``first``: its
    warm-up run's seconds), spread evenly over one shared sequence in which every contender
    follows every other one equally often (:func:`pair_cycle`), so whatever else the machine
    does at any moment, and whatever a call leaves in the caches, lands on every contender
    alike. The minimum, not the mean: other processes only ever add time. ``timer`` is wall
    time by default; the benchmarks pass the process's CPU clock.

    Examples
    --------
    >>> order = []
    >>> fns = {name: (lambda name=name: order.append(name)) for name in "ab"}
    >>> best = interleaved(fns, {"a": 2e-3, "b": 1e-3}, 0.004, 2)
    >>> order.count("a"), order.count("b"), sorted(best)
    (2, 4, ['a', 'b'])
    """
    # What ran just before a call changes its time: with the order only rotating, at 1M auto
    # always ran right after the partitions' search and measured 1.1-1.26x the identical scan
    # call, which always ran right after auto.
    least = max(min_calls, len(fns))
    calls = {name: max(least, math.ceil(min_time / max(first[name], 1e-6))) for name in fns}
    names = list(fns)
    cycle = [names[i] for i in pair_cycle(len(names))]
    per_cycle = max(1, len(names) - 1)  # each contender's turns in one cycle
    turns = math.ceil(max(calls.values()) / per_cycle) * per_cycle
    taken = dict.fromkeys(fns, 0)
    best = dict.fromkeys(fns, math.inf)
    for _ in range(turns // per_cycle):
        for name in cycle:
            t = taken[name]
            taken[name] += 1
            if (t * calls[name]) // turns == ((t + 1) * calls[name]) // turns:
                continue  # this contender's calls are spread over its turns
            start = timer()
            fns[name]()
            best[name] = min(best[name], timer() - start)
    return best


def pair_cycle(m: int) -> list[int]:
    """A cyclic order of ``range(m)`` in which every ordered pair (i, j), i ≠ j, is adjacent
    exactly once: an Eulerian circuit of the complete directed graph (Hierholzer).

    Examples
    --------
    >>> pair_cycle(3)
    [0, 2, 1, 2, 0, 1]
    """
    if m < 2:
        return list(range(m))
    ahead = {v: [w for w in range(m) if w != v] for v in range(m)}
    stack, circuit = [0], []
    while stack:
        v = stack[-1]
        if ahead[v]:
            stack.append(ahead[v].pop())
        else:
            circuit.append(stack.pop())
    return circuit[::-1][:-1]
