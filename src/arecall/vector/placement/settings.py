"""Every tuned number of the ``auto`` planner, in one typed config.

Each field's docstring gives, in order: one line on what it trades; how its value was chosen
(the measurement, on the 2-core benchmark machine with BLAS and faiss on one thread); and the
command that reproduces that measurement. ``BENCH`` in those commands stands for::

    .venv/bin/python benchmarks/bench_adversarial.py --n 100000 --threads 1 \
        --index-cache /tmp/arecall-graphs

(``BENCH --n 1000000 --queries 100 --min-calls 6 --min-time 0.2`` where a line says 1M), and
``--set NAME=VALUE`` runs the same cells with one setting changed, for the comparison the line
describes. Values that bound memory or a cache rather than trade speed for recall say so.

The planner reads these numbers from here and nowhere else: an
`~arecall.vector.placement.planner.AutoPlanner` carries its ``settings`` (default
:data:`DEFAULTS`), and so do the `~arecall.vector.placement.cells.Cells` it probes with, so a
what-if is ``replace(planner, settings=replace(planner.settings, ...))`` (what ``--set``
does, before calibrating). The per-batch confidence is not here: it is the promise itself, a
setting of the index config (``index.confidence``, `arecall.vector.schema.IndexConfig`),
carried by the planner.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from arecall.core.errors import ArecallError

__all__ = ["DEFAULTS", "PlannerSettings"]

# What each setting must be for the planner to mean anything by it, by kind: a count of at
# least one; a count that may be 0 (a cache turned off); a share strictly between 0 and 1; a
# share that may be the whole; a positive number; a non-negative one; a multiple above 1.
# Every field is in exactly one (``tests/vector/test_planner_settings.py`` holds it to that).
_AT_LEAST_ONE = frozenset(
    [
        "calibration_queries",
        "ladder_start",
        "ladder_steps",
        "share_steps",
        "share_min_docs",
        "synthetic_fit",
        "exact_rounds",
        "cells_max",
        "fit_per_cell",
        "kmeans_iterations",
        "verdict_per_cell",
        "probe_max",
        "block_rows",
        "share_grid_halvings",
        "list_ef_max",
        "cost_repeats",
        "overhead_calls",
        "overhead_batch",
        "sample_min",
        "pilot_min",
        "first_ef_rungs",
        "count_stride",
        "count_looks",
    ]
)
_AT_LEAST_ZERO = frozenset(["verdicts_kept", "memo_entries"])
_OPEN_SHARE = frozenset(
    ["tail_share", "deep_share", "shift_level", "slope_shares", "second_look_shares"]
)
_SHARE = frozenset(["gather_below", "slope_floor", "sample_share", "pilot_share"])
_POSITIVE = frozenset(
    [
        "graph_cost",
        "concentrated_cells",
        "cells_per_sqrt_n",
        "probe_distances",
        "scan_pass",
        "walk_doubt",
        "eager_discount",
    ]
)
_NON_NEGATIVE = frozenset(
    ["margin", "independence_z", "list_read", "landmark_tie", "pooled_share_z", "cost_min_time"]
)
_ABOVE_ONE = frozenset(["escalate_factor", "second_look_factor", "cost_efs"])


@dataclass(frozen=True)
class PlannerSettings:
    """The planner's tuned numbers (the module docstring says how to read each one).

    Each is checked when the settings are made (``--set`` in the benchmarks, or
    ``dataclasses.replace`` in code): a value the planner cannot mean anything by — a count
    below one, a share outside (0, 1), a negative price — is refused in one line naming the
    setting, rather than turning into a plan that silently misreads it.

    Examples
    --------
    >>> PlannerSettings(sample_min=8).sample_min
    8
    >>> PlannerSettings(tail_share=1.5)
    Traceback (most recent call last):
    ...
    arecall.core.errors.ArecallError: planner setting tail_share=1.5: must be a share in (0, 1)
    """

    # -- calibration ------------------------------------------------------------------------
    calibration_queries: int = 400
    """More held-out queries steady ``ef_base`` and shrink the calibration's part of the aim,
    at calibration time (3-11 s at 100,000). Five draws of 100 put ``ef_base`` at 46-216 on
    100,000 clustered vectors (scored recall 0.924 at 46); five draws of 400 gave
    0.962-0.969. 1,600 walked 8-9% lower on the low-rank cells (3 of 8 over 1.1x the steady
    pushdown against 4) and calibrated in 14 s against 4.
    ``BENCH --corpora clustered-corr --selectivities 1 --calibration-queries 100 --seed S``,
    S = 1..5, against the default; ``BENCH --corpora lowrank-uniform,lowrank-halfspace
    --calibration-queries 1600 --workload-queries 1000``."""
    graph_cost: float = 16.0
    """Where nothing was timed (the reproducible experiment), what a graph distance is priced
    at in scan distances: 11-18 measured at 1M x 128.
    ``.venv/bin/python benchmarks/bench_vector.py --n-docs 1000000``."""
    margin: float = 0.02
    """Recall calibrated above the target (the aim keeps half to all of it): deeper walks for
    a batch's noise. The gap once measured between held-out and scored queries on the
    clustered corpus. ``BENCH --corpora clustered-corr --selectivities 1 --set margin=0``."""
    ladder_start: int = 16
    """First calibrated efSearch above k (16 * 2^(j/steps)): only where the rungs fall, not a
    trade (2^4, the first power of two above the default k = 10).
    ``BENCH --set ladder_start=12``."""
    ladder_steps: int = 4
    """Rungs per doubling of efSearch: finer rungs plan closer to the efSearch that suffices
    (at most 19% above it) and cost calibration time; a sqrt(2) ladder (2 steps) planned 41%
    above and cost up to 1.3x the best pushdown. ``BENCH --set ladder_steps=2``."""
    share_steps: int = 2
    """Uniform-filter shares calibrated per halving (2^(-j/2)): finer doubles calibration
    time; sqrt(2) apart, interpolating in log share is close
    (``tests/vector/test_vector_placement.py -k interpolates``). ``BENCH --set share_steps=4``."""
    share_min_docs: int = 4
    """Smallest calibrated share holds this many times k documents: calibration time against
    shares so small a scan answers them in well under a millisecond (chosen, not measured).
    ``BENCH --selectivities 0.001,0.01`` (every plan there scans)."""
    tail_share: float = 0.05
    """Calibration queries in the tail (lowest k-th score), certified by the tail's own
    recall: a larger tail certifies more answers below the mean, a smaller one is noisier
    (20 of 400 queries). 100,000 clustered vectors, efSearch 77: the tail's recall 0.735
    against 0.976 for all. ``BENCH --corpora shifted --set tail_share=0.1``."""
    deep_share: float = 0.01
    """The tail's deepest part, certified by its own recall and tested for shift on its own:
    a batch from one tight cluster had 5 of 43 answers there (calibration: 1%) at recall
    0-0.1 while the tail as a whole looked ordinary.
    ``BENCH --corpora tight-few --selectivities 1 --set deep_share=0.02``."""
    shift_level: float = 0.002
    """False-alarm rate of the shift tests (the batch's tail and deep counts against
    beta-binomials, half each): an alarm costs a scan of the answers it leaves uncertified,
    a miss is silent. Held to its level on 20,000 simulated batches drawn like the
    calibration (``tests/vector/test_vector_shifted.py -k rings_no_more_often``).
    ``BENCH --corpora adversarial,shifted --set shift_level=0.02``."""
    synthetic_fit: int = 10_000
    """Documents the synthetic calibration queries' Gaussian is fitted to, where no held-out
    queries exist: a cost bound (an SVD of 10,000 x d), not a speed-recall trade (not
    measured). ``.venv/bin/python benchmarks/bench_vector.py`` (the experiment's
    calibration)."""

    concentrated_cells: float = 16.0
    """Fewer effective cells than this (the inverse sum of squared cell shares of the
    answers' best documents) and a batch is concentrated: one neighbourhood's graph, one draw
    of recall, so a sample is searched deeper. Batches drawn like the documents spread over
    100+ cells at 100,000 vectors, one tight cluster's queries over 1-10.
    ``BENCH --corpora tight-few --selectivities 1 --set concentrated_cells=4``."""
    exact_rounds: int = 3
    """Rounds of a concentrated batch's exact check (the first: the fewest checks a perfect
    sample certifies with, 101 of 200; each next: half of what is left) before the rest is
    scanned: more rounds stop closer to the checks a batch needs and pay more passes over the
    authorized vectors. One tight cluster's batch of 200 at 100%: certified in the second
    round (151 checked, 0.973-0.976; delivered 0.993-0.994).
    ``BENCH --corpora tight-few --selectivities 1 --set exact_rounds=1``."""

    # -- cells ----------------------------------------------------------------------------------
    cells_per_sqrt_n: float = 2.0
    """Coarse cells per sqrt(documents): finer than most corpora's topic structure, so a cell
    rarely straddles two groups a filter treats differently, at a probe distance a cell.
    ``BENCH --corpora clustered-anti,clustered-corr --set cells_per_sqrt_n=1``."""
    cells_max: int = 1024
    """At most this many cells: bounds the probe (1.8 scan distances a cell and query) at a
    million documents (1,000 at 2 sqrt(n)). ``BENCH --n 1000000 ... --set cells_max=512`` (1M)."""
    fit_per_cell: int = 40
    """Documents sampled per cell to fit the centroids, then every document assigned: fit
    time against how closely the cells follow the density (chosen, not measured: the cells
    only need to follow it). ``BENCH --n 1000000 ... --set fit_per_cell=200`` (1M)."""
    kmeans_iterations: int = 8
    """Lloyd iterations of the cell fit: calibration time against converged cells (chosen,
    not measured: the cells only need to follow the density).
    ``BENCH --corpora clustered-corr --set kmeans_iterations=20``."""
    verdict_per_cell: int = 64
    """Documents a cell the independence test counts: fewer is faster (0.1 ms at a million
    against 3-6 ms counting all), and a filter that follows the data still moves whole cells
    to 0 or 1. ``BENCH --n 1000000 ... --corpora lowrank-uniform --set verdict_per_cell=1000000``
    (1M)."""
    probe_max: int = 4
    """Most cells a query's probe averages (it reads the first walk's list's scale): one cell
    at 100,000 vectors erred by 0.000 on both clustered corpora, four by 0.02-0.04.
    ``BENCH --corpora clustered-anti --selectivities 0.5 --set probe_max=1``."""
    independence_z: float = 5.0
    """Binomial standard deviations a cell's count may stray and still pass the independence
    test: lower sends more independent filters down the general plan (an independent filter
    over 1,000 cells fails at 5 below 10^-3). ``BENCH --corpora lowrank-uniform,verity
    --set independence_z=3``."""
    verdicts_kept: int = 64
    """Masks whose independence verdict (and cell counts) is remembered: a memory bound (8 MB
    at a million documents); a principal's next batch repeats its mask, and the lookup took
    8 us against the count's 43. ``BENCH --corpora lowrank-uniform --set verdicts_kept=0``."""
    gather_below: float = 0.125
    """Below this share a mask's cell counts gather the authorized ids; above, a weighted
    bincount (the gather's branches mispredict: 9 ms against 3.5 ms at a million and 50%).
    ``BENCH --n 1000000 ... --corpora clustered-corr --set gather_below=1`` (1M)."""
    block_rows: int = 16384
    """Rows scored against the centroids per block: a memory bound on the score matrix
    (16,384 x 1,024 float32 = 64 MB), not a speed trade.
    ``BENCH --n 1000000 ... --set block_rows=4096`` (1M)."""

    # -- the cost model -------------------------------------------------------------------------
    probe_distances: float = 1.8
    """Scan distances a query's probe costs per cell: measured 1.7-1.9 at 100,000 clustered
    vectors; priced at 1, 1,000 queries at 30% walked 319 priced at 1.00x the scan and ran
    1.10-1.27x. ``BENCH --corpora clustered-corr --selectivities 0.3 --queries 1000
    --set probe_distances=1``."""
    share_grid_halvings: int = 16
    """Local selectivities a walk is priced at: 1 down to 2^-16 on the ladder's steps, below
    any share a walk can pay at (a pricing table, not a trade).
    ``BENCH --selectivities 0.001 --set share_grid_halvings=10``."""
    scan_pass: float = 8.0
    """Where not timed (``AutoPlanner.scan_pass``), a scan's pass over the authorized vectors
    in query-shares of a batch scan: one query alone took 8 queries' share of a 200-query scan
    at 50,000 x 128 (timed: 10-22 at 100,000).
    ``.venv/bin/python benchmarks/bench_scan.py --n 100000``."""
    slope_floor: float = 0.25
    """Least a query taken out of a batch scan is priced to save of its share: a timed slope
    below it is noise (measured 0.70-0.86 at 100,000, 0.50-0.60 at a million).
    ``BENCH`` (the info table's "scan slopes")."""
    walk_doubt: float = 2.0
    """Weight on a walk's price where a plan mixes walks with a scan: higher scans more mixed
    cells. Replayed after a scan, walks took 2.06x their warm price (clustered-corr 50%) and
    the mixed plan ran 1.07x the scan; weighed at 2 it scans (1.01-1.02x).
    ``BENCH --corpora clustered-corr --selectivities 0.5 --set walk_doubt=1.15``."""
    list_read: float = 0.03
    """What reading a batch's top-ef lists adds to its walks: 0.25 ms a 100 lists against
    9.5 ms of walks (1M, efSearch 38). ``BENCH --n 1000000 ... --corpora lowrank-uniform``
    (1M; the direct plan's list walk)."""
    list_ef_max: int = 256
    """Largest efSearch a list walk is timed at against pushdown: its heap grows with
    efSearch, and at a million vectors it cost as much as the selector saves at 96.
    ``BENCH --n 1000000 ... --corpora lowrank-uniform --set list_ef_max=1024`` (1M)."""
    slope_shares: tuple[float, ...] = (0.125, 0.25, 0.5)
    """Shares of the documents a batch scan's slope is timed at (interpolated between): more
    cost ``measure_graph_costs`` time. ``BENCH`` (the info table's "scan slopes")."""
    cost_efs: tuple[int, ...] = (64, 256, 1024, 4096, 16384)
    """efSearch values (with ``ef_base``, each at least k) a graph distance is timed at: one
    costs 21 scan distances at 64 and 70-87 at 9,742 on 1M clustered vectors; priced flat,
    auto pushed down at 100% on the clustered corpora and ran 1.8-2.3x the scan.
    ``BENCH --n 1000000 ... --corpora clustered-corr --set cost_efs=64`` (1M)."""
    cost_min_time: float = 0.2
    """Seconds each contender of a cost measurement accumulates: longer is steadier and
    slower to calibrate; the fastest of 5 calls, not interleaved, moved the graph cost from 30
    to 37. ``BENCH --corpora lowrank-uniform --set cost_min_time=0.02``."""
    cost_repeats: int = 3
    """Fewest timed calls of each contender of a cost measurement (with ``cost_min_time``); the
    graph costs are the median of at least ``2·cost_repeats + 1`` rounds of a walk and a scan
    timed back to back: more is steadier and slower to calibrate.
    ``BENCH --corpora lowrank-uniform --set cost_repeats=1``."""
    overhead_calls: int = 5
    """Fewest timed calls of the plan's bookkeeping measurement: it is a difference of two
    times, noisier than either. ``BENCH`` (the info table's "plan upkeep")."""
    overhead_batch: int = 8
    """The small batch (beside the calibration batch) the bookkeeping is timed on, so its
    price is a part per call plus a part per query: a one-query call carried the whole
    200-query price and always scanned (20x a fixed pushdown inside authorized clusters).
    ``BENCH --corpora clustered-corr --selectivities 0.3 --queries 1``."""
    eager_discount: float = 100.0
    """The bookkeeping is timed on a plan whose walks are priced this many times cheaper, so
    that it probes every query and walks wherever its cells are authorized: the most
    bookkeeping a plan does (a measurement device, not a trade).
    ``BENCH`` (the info table's "plan upkeep")."""

    landmark_tie: float = 1e-4
    """Share of the scores' scale within which a landmark ties a walk's best answer rather
    than outscoring it (a stuck walk falls short by far more): the worst float32 rounding of
    a 1,024-dimensional product is ~6e-5 of it, and at 100,000 vectors an ulp between BLAS's
    and faiss's score of the same document turned a retry into a scan (chosen, not tuned).
    ``BENCH --corpora clustered-anti --selectivities 1 --set landmark_tie=0``."""

    # -- the plan -------------------------------------------------------------------------------
    sample_min: int = 16
    """Queries whose lists check a filter independent of the cells against the queries:
    more is surer and walks more lists; 16 lists at efSearch 128 and 10% are 2,048 draws,
    enough to tell 8% from 10% at three standard errors.
    ``BENCH --corpora lowrank-uniform --set sample_min=32``."""
    sample_share: float = 0.125
    """Share of a batch in that sample above 2 x ``sample_min`` queries.
    ``BENCH --corpora lowrank-uniform --queries 1000 --set sample_share=0.0625``."""
    pooled_share_z: float = 3.0
    """Standard errors the sample's pooled authorized share may fall below the filter's size
    and still be read as independent of the queries: lower sends more batches to the general
    plan. ``BENCH --corpora lowrank-uniform,lowrank-halfspace --set pooled_share_z=2``."""
    pilot_min: int = 4
    """Queries walked first where the filter follows the data: a larger pilot risks more
    failed walks, a smaller one learns less; at 1M and a 50% half-space, 57 walks then 100
    scans ran 2.8x the scan. ``BENCH --n 1000000 ... --corpora lowrank-halfspace
    --selectivities 0.5 --set pilot_min=57`` (1M)."""
    pilot_share: float = 0.0625
    """Share of the planned walks in the pilot (at least ``pilot_min``).
    ``BENCH --corpora clustered-corr --queries 1000 --set pilot_share=0.25``."""
    escalate_factor: float = 2.0
    """A retried walk's efSearch is at least this multiple of its first: larger lifts more
    answers in one retry at a higher price each.
    ``BENCH --corpora clustered-corr,shifted --set escalate_factor=4``."""
    second_look_shares: tuple[float, ...] = (0.05, 0.1)
    """Shares of the calibration queries (lowest k-th score) a plain search may look at again:
    on 100,000 clustered vectors the lowest tenth held two thirds of the recall lost.
    ``BENCH --corpora clustered-anti,clustered-corr --selectivities 1
    --set second_look_shares=0.05``."""
    second_look_factor: int = 4
    """The second look's efSearch over the first: 39 then 182 returned 0.970 at 0.81x a plain
    search at 77. ``BENCH --corpora clustered-anti,clustered-corr --selectivities 1
    --set second_look_factor=2``."""
    first_ef_rungs: int = 12
    """Ladder rungs above a query's needed efSearch its first walk is priced at (up to 8x): a
    pricing table's width, not a trade.
    ``BENCH --corpora clustered-corr --set first_ef_rungs=4``."""
    memo_entries: int = 4096
    """Answers a planner remembers per (share, efSearch, batch size) before clearing: a memory
    bound, not a trade. ``BENCH --corpora lowrank-uniform --set memo_entries=0``."""
    count_stride: int = 4096
    """Every this-many-th entry of a mask is looked at first, to tell a sparse mask (listed)
    from a dense one (counted: 30 us at a million; listing 100,000 ids took 0.56 ms).
    ``BENCH --n 1000000 ... --corpora lowrank-uniform --selectivities 0.1`` (1M)."""
    count_looks: int = 16
    """Fewest strided looks (entries ``count_stride`` apart) a mask needs before they are
    trusted: below, every mask is listed (at most 65,536 entries; chosen, not measured).
    ``BENCH --n 20000 --selectivities 0.001,0.01``."""

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            for item in value if isinstance(value, tuple) else (value,):
                wrong = _wrong(field.name, item, str(field.type))
                if wrong:
                    raise ArecallError(f"planner setting {field.name}={_shown(value)}: {wrong}")
            if isinstance(value, tuple) and not value:
                raise ArecallError(f"planner setting {field.name}=(): needs at least one value")
        if self.deep_share >= self.tail_share:
            raise ArecallError(
                f"planner settings deep_share={self.deep_share!r}, tail_share={self.tail_share!r}:"
                " the deep part must be a smaller share than the tail it is part of"
            )


def _shown(value: object) -> str:
    """A setting's value as ``--set`` would spell it (a tuple as comma-separated values)."""
    if isinstance(value, tuple):
        return ",".join(repr(v) for v in value) or "()"
    return repr(value)


def _wrong(name: str, value: object, kind: str) -> str | None:
    """What is wrong with one value of setting ``name`` (of annotated type ``kind``), or
    ``None``."""
    integral = "int" in kind
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"must be {'an integer' if integral else 'a number'}"
    if integral and not isinstance(value, int):
        return "must be an integer"
    if not math.isfinite(value):
        return "must be finite"
    checks = (
        (_AT_LEAST_ONE, value >= 1, "must be at least 1"),
        (_AT_LEAST_ZERO, value >= 0, "must be at least 0"),
        (_OPEN_SHARE, 0 < value < 1, "must be a share in (0, 1)"),
        (_SHARE, 0 < value <= 1, "must be a share in (0, 1]"),
        (_POSITIVE, value > 0, "must be positive"),
        (_NON_NEGATIVE, value >= 0, "must not be negative"),
        (_ABOVE_ONE, value > 1, "must be above 1"),
    )
    for group, ok, message in checks:
        if name in group:
            return None if ok else message
    raise AssertionError(f"planner setting {name} has no range")  # every field has one


#: The settings every planner uses unless given others.
DEFAULTS = PlannerSettings()
