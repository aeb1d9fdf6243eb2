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
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_adversarial import (
    _calibrated,
    _corpora,
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


def _parts(
    index: VectorIndex, q: np.ndarray, k: int, mask: np.ndarray, planner: AutoPlanner, ef: int
) -> tuple[dict[str, Any], dict[str, int]]:
    """The contenders of one cell (each a call over the batch's rows the direct plan walks),
    and the row counts that say what each one walks."""
    n_q, settings = q.shape[0], planner.settings
    read = certification.sample_rows(n_q, settings.sample_min, settings.sample_share)
    rest = certification.unsampled_rows(n_q, settings.sample_min, settings.sample_share)
    lists = index._walk(q[read], ef, ef)
    ok = mask[lists.ids] & (lists.ids >= 0)
    short = read[np.count_nonzero(ok, axis=1) < k]
    pushed = np.union1d(rest, short)
    fns = {
        "auto": lambda: auto(index, q, k, mask, planner),
        "pushdown, every row": lambda: index._walk(q, k, ef, mask),
        "sample lists": lambda: index._walk(q[read], ef, ef),
        "pushdown, rest + short": lambda: index._walk(q[pushed], k, ef, mask),
        "pushdown, sample rows": lambda: index._walk(q[read], k, ef, mask),
    }
    return fns, {"sample": read.size, "short": short.size, "pushed": pushed.size}


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
            fns, rows = _parts(index, q, args.k, mask, planner, int(plan.ef_search))
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
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    parser.description = __doc__.split("\n\n")[0]
    args = parser.parse_args(argv)
    args.names = _corpora(args.corpora)
    _prepare(args)
    _print_report(run(args, _log), args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
