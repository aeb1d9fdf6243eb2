"""Whether ``auto``'s plans hold from one calibration to the next on this machine.

Usage (the adversarial-filters page's stability line came from the first line):

    python benchmarks/bench_plan_stability.py --n 100000 --calibrations 3 \\
        --index-cache /tmp/arecall-graphs
    python benchmarks/bench_plan_stability.py --corpora lowrank-uniform --selectivities 0.3,0.5

``auto``'s planner prices walks by graph costs it times on the machine (``measure_graph_cost``
and ``measure_graph_costs``), so a close call between a walk and the scan can go either way
from one calibration to the next, and a noisy machine moves those prices. This benchmark
calibrates each corpus ``--calibrations`` times, exactly as the adversarial benchmark does (its
corpora, graph cache, calibration and arguments), plans the scored batch at every selectivity
with each calibration, untimed, and prints each calibration's measured graph cost, ``ef_base``
and plans — the method and efSearch, without the evidence, whose figures are estimates that
move with every calibration — then counts the cells whose plan changed.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_adversarial import (
    _calibrated,
    _corpus_names,
    _index,
    _log,
    _parser,
    _prepare,
    _print_report,
)

from arecall.vector import auto
from arecall.vector.adversarial import adversarial_corpus


def _plan_text(plan: object) -> str:
    """The plan's method and efSearch (``scan``, ``pushdown ef=41 x200``, …), without the
    evidence in parentheses."""
    return str(plan).split(" (")[0]


def run(args: argparse.Namespace, log: object) -> list[str]:
    """One line per calibration of each corpus, and the count of cells whose plan changed."""
    lines = [
        f"{args.n:,} × 128, {args.queries} queries, k={args.k}, threads={args.threads}, "
        f"{args.calibrations} calibrations per corpus; load average at the start "
        + " / ".join(f"{x:.2f}" for x in os.getloadavg()),
        "",
        "| corpus | calibration | graph cost | ef_base | "
        + " | ".join(f"{s:g}" for s in args.selectivities)
        + " |",
        "|---|---|---|---|" + "---|" * len(args.selectivities),
    ]
    changed, cells = [], 0
    for name in args.names:
        corpus = adversarial_corpus(name, args.n, 128, args.queries, args.seed)
        index = _index(corpus.data.vectors, args)
        seen: dict[float, set[str]] = {s: set() for s in args.selectivities}
        for i in range(args.calibrations):
            planner, info = _calibrated(corpus, index, args)
            plans = []
            for share in args.selectivities:
                _, plan = auto(index, corpus.data.queries, args.k, corpus.mask(share), planner)
                plans.append(_plan_text(plan))
                seen[share].add(plans[-1])
            lines.append(
                f"| {name} | {i + 1} | {info['graph_cost']:.1f} | {planner.ef_base} | "
                + " | ".join(plans)
                + " |"
            )
            log(lines[-1])  # type: ignore[operator]
        cells += len(args.selectivities)
        changed += [f"{name} {s:g}" for s, plans in seen.items() if len(plans) > 1]
    lines += [
        "",
        f"- cells whose plan changed between calibrations: {len(changed)} of {cells}"
        + (f" ({', '.join(changed)})" if changed else ""),
        "- load average at the end: " + " / ".join(f"{x:.2f}" for x in os.getloadavg()),
    ]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    parser.description = __doc__.split("\n\n")[0]
    parser.add_argument("--calibrations", type=int, default=3, help="calibrations per corpus")
    args = parser.parse_args(argv)
    if args.calibrations < 2:
        parser.error("--calibrations: at least 2 (one calibration cannot change)")
    args.names = _corpus_names(parser, args)
    _prepare(args)
    _print_report(run(args, _log), args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
