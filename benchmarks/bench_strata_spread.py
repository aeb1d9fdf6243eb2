"""How much of the per-query recall spread the calibration's strata explain.

Usage (the adversarial-filters page's figures came from this line):

    python benchmarks/bench_strata_spread.py --corpora lowrank-uniform,lowrank-halfspace,\\
clustered-corr,clustered-anti --selectivities 0.3,0.5,1 --index-cache /tmp/arecall-graphs

``auto`` aims a pushdown at the target plus z of the per-query spread σ twice, over √(batch) and
over √(calibration) (`arecall.vector.placement.curves.RecallCurves.aim`). Its audit already sorts
each answer into a stratum by its k-th score (typical, the 5% tail, its deepest 1%), so a batch
could be certified by the strata's means with only the spread *within* them left as noise — a
post-stratified certificate. This benchmark measures what that could save: for every cell
where ``auto`` walks, it pushes ``--spread-queries`` fresh queries drawn like the calibration's
down at its (first) efSearch, splits them by the same quantiles of their k-th scores, and
reports σ, the spread within the strata σ_w and between them σ_b (σ² = σ_w² + σ_b²), and the
most post-stratifying could lower the aim: z·(σ − σ_w)·(1/√batch + 1/√calibration), the aim with
σ_w in place of σ everywhere (an upper bound: the batch's composition varies too, by σ_b/√batch,
and a certificate that conditions on it must leave room for that).
"""

from __future__ import annotations

import math
import sys
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
    _recalls,
)

from arecall.vector import auto
from arecall.vector.adversarial import adversarial_corpus


def strata_spread(
    recall: np.ndarray, kth: np.ndarray, tail_share: float, deep_share: float
) -> dict[str, Any]:
    """The spread of per-query ``recall``, split by the strata of the k-th scores ``kth``
    (below their ``tail_share`` quantile: the tail; below ``deep_share``: its deep part; the
    rest typical): the mean, σ, the spread within the strata and between them (population
    spreads, so σ² = within² + between²), and each stratum's (share, mean recall, spread).

    Examples
    --------
    >>> r = np.array([1.0, 1.0, 0.9, 0.9, 0.5, 0.3])
    >>> out = strata_spread(r, np.arange(6.0)[::-1], 0.4, 0.2)
    >>> round(out["sigma"] ** 2, 6) == round(out["within"] ** 2 + out["between"] ** 2, 6)
    True
    >>> [round(m, 2) for _, m, _ in out["strata"]]
    [0.95, 0.5, 0.3]
    """
    deep = kth < np.quantile(kth, deep_share)
    tail = (kth < np.quantile(kth, tail_share)) & ~deep
    label = np.where(deep, 2, np.where(tail, 1, 0))
    mean = float(recall.mean())
    strata, within, between = [], 0.0, 0.0
    for j in range(3):
        part = recall[label == j]
        if not part.size:
            continue
        share = part.size / recall.size
        strata.append((share, float(part.mean()), float(part.std())))
        within += share * float(part.var())
        between += share * (float(part.mean()) - mean) ** 2
    return {
        "mean": mean,
        "sigma": float(recall.std()),
        "within": math.sqrt(within),
        "between": math.sqrt(between),
        "strata": strata,
    }


def run(args: Any, log: Any) -> list[str]:
    """One table row per cell (corpus × share) where auto walks."""
    lines = [
        f"{args.n:,} × 128, {args.spread_queries:,} fresh queries drawn like the calibration's "
        f"per cell, pushed down at auto's efSearch (planned for {args.queries} queries, "
        f"calibrated on {args.calibration_queries}), k={args.k}",
        "",
        "| corpus | sel. | auto's (first) efSearch | mean recall | σ | σ within strata | "
        "σ between | strata: typical; tail less its deep part; deep (share: mean, spread) | "
        "most the aim could fall |",
        "|---|---|--:|--:|--:|--:|--:|---|--:|",
    ]
    for name in args.names:
        corpus = adversarial_corpus(name, args.n, 128, args.queries, args.seed)
        index = _index(corpus.data.vectors, args)
        planner, _ = _calibrated(corpus, index, args)
        fresh = corpus.data.calibration_queries(args.calibration_queries + args.spread_queries)
        fresh = fresh[args.calibration_queries :]  # none of the calibration's own
        settings = planner.settings
        for share in args.selectivities:
            mask = corpus.mask(share)
            _, plan = auto(index, corpus.data.queries, args.k, mask, planner)
            ef = plan.ef_min if plan.method == "pushdown" else None
            if ef is None:
                log(f"{name} {share:g}: {plan} — no walk; skipped")
                continue
            got = index.search_filtered(fresh, args.k, mask, ef_search=ef)
            truth = index.exact(fresh, args.k, mask)
            out = strata_spread(
                _recalls(got, truth, index, fresh),
                got.scores[:, -1],
                settings.tail_share,
                settings.deep_share,
            )
            scale = 1 / math.sqrt(args.queries) + 1 / math.sqrt(args.calibration_queries)
            fall = planner.z * (out["sigma"] - out["within"]) * scale
            strata = "; ".join(f"{s:.0%}: {m:.3f}, {d:.3f}" for s, m, d in out["strata"])
            lines.append(
                f"| {name} | {share:g} | {ef} | {out['mean']:.3f} "
                f"| {out['sigma']:.4f} | {out['within']:.4f} | {out['between']:.4f} | {strata} "
                f"| {fall:.4f} |"
            )
            log(lines[-1])
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    parser.description = __doc__.split("\n\n")[0]
    parser.add_argument(
        "--spread-queries",
        type=int,
        default=4000,
        help="fresh queries drawn like the calibration's, per cell (at least 100)",
    )
    args = parser.parse_args(argv)
    if args.spread_queries < 100:
        parser.error(f"--spread-queries={args.spread_queries}: must be at least 100")
    args.names = _corpus_names(parser, args)
    _prepare(args)
    _print_report(run(args, _log), args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
