"""Where ``auto``'s time beyond its own searches goes: its bookkeeping, part by part.

Usage (the adversarial-filters page's figures came from these lines):

    python benchmarks/bench_bookkeeping.py --n 1000000 --queries 100 --min-calls 6 \\
        --min-time 0.2 --corpora lowrank-uniform --selectivities 0.3,1 \\
        --index-cache /tmp/arecall-graphs
    python benchmarks/bench_bookkeeping.py --n 100000 --min-time 1 --corpora lowrank-uniform,\\
lowrank-halfspace --selectivities 0.3,0.5,1 --index-cache /tmp/arecall-graphs

The adversarial benchmark times ``auto`` against its own searches replayed (every graph walk
and exact scan one call made, back to back, without the arithmetic between them): what
``auto`` costs over them is its bookkeeping. This one says what that is made of. For every
cell where ``auto`` walks it times, interleaved and by the CPU clock as the adversarial
benchmark does, ``auto``, its searches and the cell's exact scan (which also empties the
caches between calls, as in the adversarial benchmark); then, in ``--parts-calls`` calls of
``auto`` each after a scan, it times the plan's parts by wrapping them (a wrapper costs a
microsecond or two): counting the filter, checking the queries, the cells' independence
verdict, the audit and within it the landmark test, the settling, reading the sample's lists,
and the conversion of faiss's answers (which the searches pay too).

Last, the bookkeeping alone: ``auto`` with every search answered at once from a recording of
one call (:func:`answered_from_recording`), so that what is timed is its own Python and numpy
and nothing else — cold (right after a scan, which fills the caches with other data, as a
walk does) and warm (the same call again straight after it), the fastest of
``--parts-calls`` pairs by the CPU clock (:func:`cold_and_warm`). The two apart are what
the caches cost it.
"""

from __future__ import annotations

import functools
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_adversarial import (
    _calibrated,
    _corpus_names,
    _index,
    _log,
    _parser,
    _prepare,
    _print_report,
    _searches_of,
    searches_replaced,
)

from arecall.vector import auto
from arecall.vector._timing import clock, interleaved
from arecall.vector.adversarial import adversarial_corpus
from arecall.vector.index import Hits, VectorIndex
from arecall.vector.placement import certification, direct, plan
from arecall.vector.placement.cells import Cells

#: (label, owner, attribute): each part of the plan as it is called. A function imported by
#: name is wrapped where it is called from; a method on its class.
PARTS: tuple[tuple[str, Any, str], ...] = (
    ("count the filter", plan, "count_allowed"),
    ("check the queries", VectorIndex, "check_queries"),
    ("independence verdict", Cells, "looks_independent"),
    ("audit", certification, "audit"),
    ("landmark test (in the audit)", Cells, "landmark_best"),
    ("settle", direct, "settle_audited"),
    ("settle", plan, "settle_audited"),
    ("read the lists", certification, "read_lists"),
    ("faiss answers converted", Hits, "from_faiss"),
)


@contextmanager
def _parts_timed(seconds: dict[str, float]) -> Iterator[None]:
    """Every part of :data:`PARTS` wrapped to add its wall seconds to ``seconds[label]``
    while inside; the originals restored after."""
    saved = [(owner, name, vars(owner)[name]) for _, owner, name in PARTS]

    def timed(label: str, call: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(call)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                seconds[label] += time.perf_counter() - start

        return wrapper

    try:
        for label, owner, name in PARTS:
            original = vars(owner)[name]
            if isinstance(original, staticmethod):
                setattr(owner, name, staticmethod(timed(label, original.__func__)))
            else:
                setattr(owner, name, timed(label, original))
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


def parts_of(call: Callable[[], Any], flush: Callable[[], Any], calls: int) -> dict[str, float]:
    """Mean wall seconds a call of each part of :data:`PARTS` during ``calls`` calls of
    ``call``, each after ``flush()`` (untimed).

    Examples
    --------
    >>> import numpy as np
    >>> from arecall.vector.index import build_index
    >>> from arecall.vector.placement import calibrate_auto
    >>> idx = build_index(np.eye(4, dtype=np.float32))
    >>> planner = calibrate_auto(idx, 1)
    >>> q = np.ones((2, 4), np.float32)
    >>> got = parts_of(lambda: auto(idx, q, 1, np.ones(4, bool), planner), lambda: None, 3)
    >>> sorted(got) == sorted({label for label, _, _ in PARTS}), got["count the filter"] > 0
    (True, True)
    """
    seconds: dict[str, float] = defaultdict(float)
    with _parts_timed(seconds):
        for _ in range(calls):
            flush()
            call()
    return {label: seconds[label] / calls for label, _, _ in PARTS}


def answered_from_recording(index: VectorIndex, call: Callable[[], Any]) -> Callable[[], Any]:
    """``call`` (an ``auto`` call on ``index``) made again with every graph walk and exact scan
    it makes answered at once from what one recorded call got back, in order: ``auto``'s
    bookkeeping alone, without a search. Checked, twice, to give the recorded call's answers
    and plan (a call that changed what it got back, or took another path, is refused).

    Examples
    --------
    >>> from arecall.vector.index import build_index
    >>> from arecall.vector.placement import calibrate_auto
    >>> idx = build_index(np.eye(4, dtype=np.float32))
    >>> q = np.ones((2, 4), np.float32)
    >>> planner = calibrate_auto(idx, 1)
    >>> again = answered_from_recording(idx, partial(auto, idx, q, 1, np.ones(4, bool), planner))
    >>> str(again()[1])
    'scan'
    """
    got: list[Any] = []

    def recorder(search: Callable[..., Any]) -> Callable[..., Any]:
        def recorded(*args: Any, **kwargs: Any) -> Any:
            got.append(search(*args, **kwargs))
            return got[-1]

        return recorded

    def answer(*args: Any, **kwargs: Any) -> Any:
        return next(answers)

    with searches_replaced(index, recorder):
        hits, plan = call()
    answers = iter(got)

    def again() -> Any:
        nonlocal answers
        answers = iter(got)
        with searches_replaced(index, lambda search: answer):
            return call()

    for _ in range(2):
        h, p = again()
        if str(p) != str(plan) or not (
            np.array_equal(h.ids, hits.ids) and np.array_equal(h.scores, hits.scores)
        ):
            raise RuntimeError(f"auto answered from its recording differs: {p} against {plan}")
    return again


def run(args: Any, log: Any) -> list[str]:
    """One table row per cell (corpus × share) where ``auto`` walks."""
    labels = list(dict.fromkeys(label for label, _, _ in PARTS))
    lines = [
        f"{args.n:,} × 128, batches of {args.queries}, k={args.k}; milliseconds a call: auto and "
        f"its searches replayed interleaved with the exact scan (CPU clock, fastest of at least "
        f"{args.min_calls} calls and {args.min_time:g} s), the parts wall-clocked over "
        f"{args.parts_calls} calls of auto, each after a scan; the bookkeeping alone (auto with "
        f"its searches answered from a recording), cold (right after a scan) and warm (again "
        f"straight after), CPU clock, fastest of {args.parts_calls}",
        "",
        "| corpus | sel. | plan | auto | searches | bookkeeping | share of auto | "
        + " | ".join(labels)
        + " | bookkeeping alone, cold | alone, warm |",
        "|---|---|---|--:|--:|--:|--:|" + "--:|" * (len(labels) + 2),
    ]
    for name in args.names:
        corpus = adversarial_corpus(name, args.n, 128, args.queries, args.seed)
        index = _index(corpus.data.vectors, args)
        planner, _ = _calibrated(corpus, index, args)
        q, k = corpus.data.queries, args.k
        for share in args.selectivities:
            mask = corpus.mask(share)
            call = partial(auto, index, q, k, mask, planner)
            (_, got), t_auto = clock(call)
            if got.method != "pushdown":
                log(f"{name} {share:g}: {got} — no walk; skipped")
                continue
            fns = {"auto": call, "searches": _searches_of(index, call)}
            fns["scan"] = partial(index.exact, q, k, mask)
            first = {"auto": t_auto, **{n: clock(f)[1] for n, f in fns.items() if n != "auto"}}
            times = interleaved(fns, first, args.min_time, args.min_calls, time.process_time)
            parts = parts_of(call, fns["scan"], args.parts_calls)
            alone = answered_from_recording(index, call)
            cold, warm = cold_and_warm(alone, fns["scan"], args.parts_calls)
            over = times["auto"] - times["searches"]
            lines.append(
                f"| {name} | {share:g} | {got} | {times['auto'] * 1e3:.2f} "
                f"| {times['searches'] * 1e3:.2f} | {over * 1e3:.2f} "
                f"| {over / times['auto']:.1%} | "
                + " | ".join(f"{parts[label] * 1e3:.3f}" for label in labels)
                + f" | {cold * 1e3:.3f} | {warm * 1e3:.3f} |"
            )
            log(lines[-1])
    return lines


def cold_and_warm(
    call: Callable[[], Any], flush: Callable[[], Any], calls: int
) -> tuple[float, float]:
    """CPU seconds of ``call`` right after ``flush()`` (cold) and of the same call straight
    after that one (warm): the fastest of ``calls`` such pairs.

    Examples
    --------
    >>> cold, warm = cold_and_warm(lambda: sum(range(1000)), lambda: None, 3)
    >>> cold > 0 and warm > 0
    True
    """
    cold = warm = float("inf")
    for _ in range(calls):
        flush()
        start = time.process_time()
        call()
        middle = time.process_time()
        call()
        cold, warm = min(cold, middle - start), min(warm, time.process_time() - middle)
    return cold, warm


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    parser.description = __doc__.split("\n\n")[0]
    parser.add_argument(
        "--parts-calls",
        type=int,
        default=40,
        help="calls of auto whose parts are timed, per cell (at least 1)",
    )
    args = parser.parse_args(argv)
    if args.parts_calls < 1:
        parser.error(f"--parts-calls={args.parts_calls}: must be at least 1")
    args.names = _corpus_names(parser, args)
    _prepare(args)
    _print_report(run(args, _log), args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
