"""Where the direct plan's time goes, against a plain pushdown at its own efSearch.

Usage (the adversarial-filters page's breakdown came from the first line):

    python benchmarks/bench_direct_plan.py --n 1000000 --corpora lowrank-uniform \\
        --selectivities 0.1 --queries 100 --index-cache /tmp/arecall-graphs
    python benchmarks/bench_direct_plan.py --corpora lowrank-uniform --selectivities 0.3,0.5

Where a filter is independent of the cells, ``auto`` answers a batch by its direct plan
(`arecall.vector.placement.direct`): a strided sample reads its unfiltered top-ef lists, the
lists that hold k answer their rows, and the rest of the batch — with the sample's rows whose
lists fell short — is pushed down at that efSearch in one call. Its zero-overhead bound in the
adversarial benchmark is that pushdown alone, for every row. This benchmark times, interleaved
by the process's CPU clock at one thread (the adversarial benchmark's timer, corpora, graph cache
and calibration, so its arguments are that benchmark's), each part of one batch:

* ``auto`` — the whole call, as the user makes it;
* ``pushdown, every row`` — the bound: one filtered walk of the batch at auto's efSearch;
* ``sample lists`` — the sample's unfiltered walks at that efSearch;
* ``pushdown, rest + short`` — the second call: the unsampled rows and the short lists' rows;
* ``pushdown, sample rows`` — what the sample's rows would have cost pushed down.

so that auto − (sample lists + pushdown, rest + short) is the plan's own numpy, and
(sample lists + pushdown, rest + short) − pushdown, every row is the cost of sampling: the short
lists' rows walked twice. A cell where auto does not take the direct plan with a pushdown says
so and is skipped.

``--deeper-lists 1.2,1.4,1.7`` also reads the sample's lists at those multiples of auto's
efSearch, in the same interleaved timing, and prints a second table: at each depth, how many
lists fell short of k and what the sample then costs (its lists, and a pushdown of each short
row at auto's efSearch, priced at the sample rows' own pushdown) against pushing the sample's
rows down outright — whether reading deeper, so that fewer lists fall short, would pay.
"""

from __future__ import annotations

import math
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_adversarial import (
    _calibrated,
    _corpus_names,
    _floats,
    _index,
    _log,
    _parser,
    _prepare,
    _print_report,
)

from arecall.vector import auto
from arecall.vector._timing import interleaved
from arecall.vector.adversarial import adversarial_corpus
from arecall.vector.index import VectorIndex
from arecall.vector.placement import AutoPlanner, certification


def _short(index: VectorIndex, q: np.ndarray, k: int, mask: np.ndarray, depth: int) -> np.ndarray:
    """Per row of ``q``, whether its unfiltered top-``depth`` list holds fewer than k
    authorized documents (faiss pads a short list with -1: masked out)."""
    lists = index._walk(q, depth, depth)
    ok = mask[lists.ids] & (lists.ids >= 0)
    return np.asarray(np.count_nonzero(ok, axis=1) < k)


def _parts(
    index: VectorIndex,
    q: np.ndarray,
    k: int,
    mask: np.ndarray,
    planner: AutoPlanner,
    ef: int,
    depths: list[int],
) -> tuple[dict[str, Any], dict[str, int]]:
    """The contenders of one cell (each a call over the batch's rows the direct plan walks),
    and the row counts that say what each one walks (``short at D``: the sample's lists
    read at each of the deeper ``depths`` that fall short)."""
    n_q, settings = q.shape[0], planner.settings
    read = certification.sample_rows(n_q, settings.sample_min, settings.sample_share)
    rest = certification.unsampled_rows(n_q, settings.sample_min, settings.sample_share)
    short = read[_short(index, q[read], k, mask, ef)]
    pushed = np.union1d(rest, short)
    fns = {
        "auto": lambda: auto(index, q, k, mask, planner),
        "pushdown, every row": lambda: index._walk(q, k, ef, mask),
        "sample lists": lambda: index._walk(q[read], ef, ef),
        "pushdown, rest + short": lambda: index._walk(q[pushed], k, ef, mask),
        "pushdown, sample rows": lambda: index._walk(q[read], k, ef, mask),
    }
    rows = {"sample": read.size, "short": short.size, "pushed": pushed.size}
    for depth in depths:
        fns[f"sample lists at {depth}"] = partial(index._walk, q[read], depth, depth)
        rows[f"short at {depth}"] = int(np.count_nonzero(_short(index, q[read], k, mask, depth)))
    return fns, rows


def _deeper_table(depth_rows: list[str]) -> list[str]:
    """The second table, where ``--deeper-lists`` asked for one."""
    if not depth_rows:
        return []
    return [
        "",
        "The sample's lists read deeper (milliseconds per batch; a short list's row is priced "
        "at the sample rows' own pushdown, per row):",
        "",
        "| corpus | sel. | efSearch | lists read at | short | lists | lists + short rows "
        "pushed down | sample rows pushed down outright |",
        "|---|---|--:|--:|--:|--:|--:|--:|",
        *depth_rows,
    ]


def _depth_rows(
    name: str, share: float, ef: int, depths: list[int], ms: dict[str, float], rows: dict[str, int]
) -> list[str]:
    """One row per depth the sample's lists were read at (auto's own efSearch first)."""
    per_row = ms["pushdown, sample rows"] / rows["sample"]
    out = []
    for depth in [ef, *depths]:
        lists = ms["sample lists"] if depth == ef else ms[f"sample lists at {depth}"]
        short = rows["short"] if depth == ef else rows[f"short at {depth}"]
        out.append(
            f"| {name} | {share:g} | {ef} | {depth} | {short} of {rows['sample']} | {lists:.2f} "
            f"| {lists + short * per_row:.2f} | {ms['pushdown, sample rows']:.2f} |"
        )
    return out


def run(args: Any, log: Any) -> list[str]:
    """One table row per cell (corpus × share) where auto takes the direct plan's pushdown."""
    timer = time.process_time if args.clock == "cpu" else time.perf_counter
    lines = [
        f"{args.n:,} × 128, {args.queries} queries, k={args.k}, threads={args.threads}, "
        f"timed by {args.clock} clock, interleaved (fastest of ≥ {args.min_calls} calls and "
        f"≥ {args.min_time} s per contender); milliseconds per batch",
        "",
        "| corpus | sel. | auto plan | sample (short) | auto | pushdown, every row | "
        "sample lists | pushdown, rest + short | pushdown, sample rows | numpy | "
        "auto / pushdown |",
        "|---|---|---|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    depth_rows: list[str] = []
    for name in args.names:
        corpus = adversarial_corpus(name, args.n, 128, args.queries, args.seed)
        index = _index(corpus.data.vectors, args)
        planner, _ = _calibrated(corpus, index, args)
        q = corpus.data.queries
        for share in args.selectivities:
            mask = corpus.mask(share)
            _, plan = auto(index, q, args.k, mask, planner)
            direct = plan.method == "pushdown" and not plan.n_fallback
            direct = direct and plan.ef_min == plan.ef_search and plan.n_escalated == 0
            if not direct or planner.lists_pay(int(plan.ef_search), float(mask.mean())):
                log(f"{name} {share:g}: {plan} — not a direct plan's sample and pushdown; skipped")
                continue
            ef = int(plan.ef_search)
            depths = sorted({math.ceil(ef * m) for m in args.deeper_lists} - {ef})
            fns, rows = _parts(index, q, args.k, mask, planner, ef, depths)
            first = {}
            for label, fn in fns.items():
                start = timer()
                fn()
                first[label] = timer() - start
            ms = {
                k: v * 1e3
                for k, v in interleaved(fns, first, args.min_time, args.min_calls, timer).items()
            }
            numpy = ms["auto"] - ms["sample lists"] - ms["pushdown, rest + short"]
            lines.append(
                f"| {name} | {share:g} | {plan} | {rows['sample']} ({rows['short']}) | "
                f"{ms['auto']:.2f} | {ms['pushdown, every row']:.2f} | {ms['sample lists']:.2f} | "
                f"{ms['pushdown, rest + short']:.2f} | {ms['pushdown, sample rows']:.2f} | "
                f"{numpy:.2f} | {ms['auto'] / ms['pushdown, every row']:.2f} |"
            )
            log(lines[-1])
            depth_rows += _depth_rows(name, share, ef, depths, ms, rows)
    return lines + _deeper_table(depth_rows)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    parser.description = __doc__.split("\n\n")[0]
    parser.add_argument(
        "--deeper-lists",
        type=_floats,
        default=[],
        help="also read the sample's lists at these multiples (> 1) of auto's efSearch",
    )
    args = parser.parse_args(argv)
    if any(not m > 1 for m in args.deeper_lists):
        parser.error(f"--deeper-lists={args.deeper_lists}: each multiple must be above 1")
    args.names = _corpus_names(parser, args)
    _prepare(args)
    _print_report(run(args, _log), args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
