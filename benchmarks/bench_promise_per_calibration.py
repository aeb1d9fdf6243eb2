"""Whether ``auto`` keeps its per-batch promise for each calibration, not only over them.

Usage (the adversarial-filters page's per-calibration figures came from these lines):

    python benchmarks/bench_promise_per_calibration.py --n 1000000 --queries 100 \\
        --corpora lowrank-uniform --selectivities 0.1,0.3,0.5,1 --calibrations 3 \\
        --index-cache /tmp/arecall-graphs
    python benchmarks/bench_promise_per_calibration.py --n 100000 --corpora lowrank-uniform \\
        --selectivities 0.3,0.5,1 --calibrations 4 --index-cache /tmp/arecall-graphs

``auto`` promises recall ≥ the target on each batch at ``index.confidence`` (99.5%). A
calibration of 400 queries errs on the true mean recall by about σ/20, the same way at every
efSearch it measures, and an unlucky one makes every batch planned with it miss more often
than the promise allows, although the rate over calibrations stays within it. This benchmark
calibrates each corpus ``--calibrations`` times on disjoint draws of held-out queries (drawn
like the documents, as the pipeline does; graph costs at ``--graph-cost``, default the
planner's untimed price, so that nothing here depends on the machine's timing), then sends
``--batches`` fresh batches of ``--queries`` workload queries through ``auto`` at each
selectivity, untimed, and reports per calibration and selectivity: the plans, the certified
recall, the batches' mean recall, the standard deviation of the batch means, the lowest batch,
how many batches fell below the target, and the miss rate a normal model of the batch means
puts on one batch (the measured count is too small to show a rate of 0.5%).

With ``--time-against EF``, each calibration is priced with graph costs timed on this machine
(as the adversarial benchmark and the pipeline price them) instead of the fixed one, and each
cell also times ``auto`` on the corpus's scored batch against a plain pushdown at efSearch EF
(interleaved, the fastest of ``--min-calls`` calls and ``--min-time`` seconds each, by the
process's CPU clock): what one calibration's plans cost against the steady pushdown. The
adversarial-filters page's per-calibration times came from

    python benchmarks/bench_promise_per_calibration.py --n 100000 --corpora clustered-corr \
        --queries 200 --selectivities 1 --calibrations 3 --batches 2 --time-against 74 \
        --index-cache /tmp/arecall-graphs                  # and clustered-anti, 61
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from scipy import special

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_adversarial import (
    _corpus_names,
    _index,
    _log,
    _parser,
    _prepare,
    _print_report,
    _recalls,
)

from arecall.vector import auto
from arecall.vector._timing import clock, interleaved
from arecall.vector.adversarial import AdversarialCorpus, adversarial_corpus
from arecall.vector.index import Hits, VectorIndex
from arecall.vector.placement import (
    AutoPlanner,
    calibrate_auto,
    measure_graph_cost,
    measure_graph_costs,
)
from arecall.vector.placement.settings import DEFAULTS


def _cell(
    index: VectorIndex,
    planner: AutoPlanner,
    workload: np.ndarray,
    mask: np.ndarray,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """Every fresh batch of one selectivity through ``auto``: its plans and recall figures."""
    oracle = index.exact(workload, args.k, mask)
    means: list[float] = []
    certified: list[float] = []
    plans: Counter[str] = Counter()
    for start in range(0, workload.shape[0] - args.queries + 1, args.queries):
        rows = slice(start, start + args.queries)
        hits, plan = auto(index, workload[rows], args.k, mask, planner)
        truth = Hits(oracle.ids[rows], oracle.scores[rows])
        means.append(float(np.mean(_recalls(hits, truth, index, workload[rows]))))
        certified.append(1.0 if plan.predicted_recall is None else plan.predicted_recall)
        plans[str(plan).split(" (")[0]] += 1
    m = np.array(means)
    sd = float(np.std(m, ddof=1)) if m.size > 1 else 0.0
    modelled = float(special.ndtr((args.target - m.mean()) / sd)) if sd > 0 else float("nan")
    return {
        "plans": ", ".join(f"{p} ×{c}" for p, c in plans.most_common(2)),
        "certified": float(np.mean(certified)),
        "mean": float(m.mean()),
        "sd": sd,
        "lowest": float(m.min()),
        "below": int(np.count_nonzero(m < args.target - 1e-12)),
        "batches": int(m.size),
        "modelled": modelled,
    }


def _timed(
    index: VectorIndex,
    planner: AutoPlanner,
    corpus: AdversarialCorpus,
    share: float,
    args: argparse.Namespace,
) -> float:
    """``auto`` on the corpus's scored batch against a plain pushdown at ``--time-against``,
    interleaved: the ratio of their fastest calls."""
    q, mask = corpus.data.queries, corpus.mask(share)
    fns: dict[str, Callable[[], Any]] = {
        "auto": partial(auto, index, q, args.k, mask, planner),
        "pushdown": partial(index.search_filtered, q, args.k, mask, ef_search=args.time_against),
    }
    first = {name: clock(fn)[1] for name, fn in fns.items()}
    best = interleaved(fns, first, args.min_time, args.min_calls, time.process_time)
    return best["auto"] / best["pushdown"]


def _planner(index: VectorIndex, queries: np.ndarray, args: argparse.Namespace) -> AutoPlanner:
    """One calibration on ``queries``: at the fixed graph cost, or (``--time-against``) at graph
    costs timed on a batch of them the scored batch's size."""
    batch = queries[: args.queries]
    timed = args.time_against is not None
    planner = calibrate_auto(
        index,
        args.k,
        queries=queries,
        graph_cost=measure_graph_cost(index, batch, args.k) if timed else args.graph_cost,
        confidence=args.confidence,
        settings=args.settings,
    )
    return measure_graph_costs(index, batch, planner) if timed else planner


def run(args: argparse.Namespace, log: Callable[[str], None]) -> list[str]:
    """One line per calibration and selectivity, then the worst modelled miss rate."""
    lines = [
        f"{args.n:,} × 128, batches of {args.queries} queries ({args.batches} fresh batches a "
        f"cell), k={args.k}, target {args.target:g}, confidence {args.confidence:g}, "
        f"{args.calibrations} calibrations of {args.calibration_queries} held-out queries "
        "each (disjoint draws), "
        + (
            f"graph cost {args.graph_cost:g}"
            if args.time_against is None
            else f"graph costs timed; auto timed against a pushdown at efSearch "
            f"{args.time_against} on the scored batch (fastest of ≥ {args.min_calls} calls and "
            f"≥ {args.min_time:g} s each, CPU clock, interleaved)"
        )
        + "; load average at the start "
        + " / ".join(f"{x:.2f}" for x in os.getloadavg()),
        "",
        "| corpus | calibration | sel. | plans | certified | batch mean | sd of means | lowest "
        "| below target | modelled miss a batch |"
        + ("" if args.time_against is None else f" auto / ef={args.time_against} |"),
        "|---|---|---|---|---|---|---|---|---|---|" + ("" if args.time_against is None else "---|"),
    ]
    worst: tuple[float, str] = (0.0, "none")
    for name in args.names:
        corpus = adversarial_corpus(name, args.n, 128, args.queries, args.seed)
        index = _index(corpus.data.vectors, args)
        workload = corpus.workload_queries(args.batches * args.queries)
        held_out = corpus.data.calibration_queries(args.calibrations * args.calibration_queries)
        for i in range(args.calibrations):
            rows = slice(i * args.calibration_queries, (i + 1) * args.calibration_queries)
            planner = _planner(index, held_out[rows], args)
            for share in args.selectivities:
                c = _cell(index, planner, workload, corpus.mask(share), args)
                timed = (
                    ""
                    if args.time_against is None
                    else f" {_timed(index, planner, corpus, share, args):.2f} |"
                )
                lines.append(
                    f"| {name} | {i + 1} | {share:.0%} | {c['plans']} | {c['certified']:.3f} | "
                    f"{c['mean']:.4f} | {c['sd']:.4f} | {c['lowest']:.3f} | "
                    f"{c['below']} of {c['batches']} | "
                    + ("n/a" if math.isnan(c["modelled"]) else f"{c['modelled']:.2%}")
                    + " |"
                    + timed
                )
                log(lines[-1])
                if c["modelled"] > worst[0]:
                    worst = (c["modelled"], f"{name} {share:.0%}, calibration {i + 1}")
    lines += [
        "",
        f"- worst modelled miss rate a batch: {worst[0]:.2%} ({worst[1]}); the promise allows "
        f"{1 - args.confidence:.2%}",
        "- load average at the end: " + " / ".join(f"{x:.2f}" for x in os.getloadavg()),
    ]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    parser.description = __doc__.split("\n\n")[0]
    parser.add_argument("--calibrations", type=int, default=3, help="calibrations per corpus")
    parser.add_argument("--batches", type=int, default=80, help="fresh batches per cell")
    parser.add_argument(
        "--time-against",
        type=int,
        default=None,
        metavar="EF",
        help="time auto (priced by timed graph costs) against a pushdown at this efSearch",
    )
    args = parser.parse_args(argv)
    if args.calibrations < 1 or args.batches < 2:
        parser.error("--calibrations: at least 1; --batches: at least 2")
    if args.time_against is not None and args.time_against < args.k:
        parser.error(f"--time-against {args.time_against}: must be at least k={args.k}")
    if args.graph_cost is None:
        args.graph_cost = DEFAULTS.graph_cost
    args.names = _corpus_names(parser, args)
    _prepare(args)
    _print_report(run(args, _log), args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
