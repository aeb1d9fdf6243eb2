"""Every tuned number of the ``auto`` planner, in one typed config.

Each field says what it trades and how its value was chosen; the figures are measurements on
the 2-core benchmark machine, reproduced by ``benchmarks/bench_adversarial.py`` (``--n 100000``
unless a line says 1M) with BLAS and faiss on one thread. The planner reads these numbers from
here and nowhere else: an `~arecall.vector.placement.planner.AutoPlanner` carries its
``settings`` (default :data:`DEFAULTS`), and so do the `~arecall.vector.placement.cells.Cells`
it probes with, so a what-if is ``replace(planner, settings=replace(planner.settings, ...))``.

The per-batch confidence is not here: it is the promise itself, a setting of the index config
(``index.confidence``, `arecall.vector.config.IndexConfig`), carried by the planner.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULTS", "PlannerSettings"]


@dataclass(frozen=True)
class PlannerSettings:
    """The planner's tuned numbers (see the module docstring for how each was measured)."""

    # -- calibration ------------------------------------------------------------------------
    calibration_queries: int = 400
    """Held-out queries calibrated on: more steadies ``ef_base`` and costs calibration time.
    Five draws of 100 put ``ef_base`` at 46-216 on 100,000 clustered vectors (scored recall
    0.924 at 46); five draws of 400 gave 0.962-0.969 (``--calibration-queries``)."""
    graph_cost: float = 16.0
    """Scan distances one graph distance costs, where nothing was timed (the reproducible
    experiment): 11-18 measured at 1M x 128 (``benchmarks/bench_vector.py --n-docs 1000000``)."""
    margin: float = 0.02
    """Recall kept above the target at calibration (the aim keeps half to all of it): the gap
    once measured between held-out and scored queries on the clustered corpus (0.02)."""
    ladder_start: int = 16
    """First efSearch of the calibration ladder above k (16 * 2^(j/steps))."""
    ladder_steps: int = 4
    """Ladder rungs per doubling of efSearch: a planned efSearch is at most 19% above the one
    that suffices; a sqrt(2) ladder (2 steps) left 41% and cost up to 1.3x the best pushdown."""
    share_steps: int = 2
    """Uniform-filter shares calibrated per halving (2^(-j/2), sqrt(2) apart): interpolating in
    log share between two is close (``test_filtered_recall_interpolates_...``); finer doubles
    calibration time."""
    share_min_docs: int = 4
    """Smallest calibrated share holds this many times k documents: below, every plan scans."""
    tail_share: float = 0.05
    """The calibration's tail: queries whose k-th returned score is below this quantile at a
    calibration point are certified by the tail's own recall, not the mean (100,000 clustered
    vectors, efSearch 77: tail 0.735 against 0.976 for all). 5% puts 20 of 400 queries in it."""
    deep_share: float = 0.01
    """The tail's deepest part, certified by its own recall and tested for shift on its own: a
    batch from one tight cluster had 5 of 43 answers there (calibration: 1%) at recall 0-0.1
    while the tail as a whole looked ordinary."""
    shift_level: float = 0.002
    """False-alarm rate of the shift tests (a batch's tail and deep-tail counts against
    beta-binomials, half each): an alarm only costs searching again or scanning the answers it
    leaves uncertified; the misses it guards against are silent."""

    concentrated_cells: float = 16.0
    """A batch whose answers' best documents fall in fewer effective cells than this (the
    inverse sum of squared cell shares) is concentrated: its queries share one neighbourhood's
    graph, so their recall is one draw, not an average of independent ones, and the
    calibration's margin does not cover it. Batches drawn like the documents spread over 100+
    cells at 100,000 vectors; one tight cluster's queries over 1-10."""
    spot_factor: float = 4.0
    """A concentrated batch's sample is walked again at this multiple of its efSearch; the
    first answers' recall against the top-k of both walks bounds their recall from above, and
    a sample bounded below the goal sends the batch to the scan."""

    # -- cells ----------------------------------------------------------------------------------
    cells_per_sqrt_n: float = 2.0
    """Coarse cells per sqrt(documents): finer than most corpora's topic structure, so a cell
    rarely straddles two groups a filter treats differently; the probe costs a distance each."""
    cells_max: int = 1024
    """At most this many cells (probe cost: 1.8 scan distances a cell and query)."""
    fit_per_cell: int = 40
    """Documents sampled per cell to fit the centroids (k-means), then every document assigned."""
    kmeans_iterations: int = 8
    """Lloyd iterations of the cell fit: the cells only need to follow the density."""
    verdict_per_cell: int = 64
    """Documents a cell the independence test counts: 0.1 ms at a million (3-6 ms counting all),
    and a filter that follows the data still moves whole cells to 0 or 1."""
    probe_max: int = 4
    """Most cells a query's probe averages: the probe reads the first walk's list's scale
    (one cell at 100,000 vectors erred by 0.000 on both clustered corpora, four by 0.02-0.04)."""
    independence_z: float = 5.0
    """Binomial standard deviations a cell's count may stray from its share and still pass the
    independence test: an independent filter over 1,000 cells fails it below 10^-3."""
    verdicts_kept: int = 64
    """Masks whose independence verdict is remembered (8 MB at a million documents): a
    principal's next batch repeats its mask; the lookup took 8 us against the count's 43."""
    gather_below: float = 0.125
    """Below this share of the documents a mask's cell counts gather the authorized cells'
    ids; above, a weighted bincount (the gather's branches mispredict: 9 ms against 3.5 ms at
    a million and 50%)."""
    block_rows: int = 16384
    """Queries or documents scored against the centroids per block: bounds the score matrix."""

    # -- the cost model -------------------------------------------------------------------------
    probe_distances: float = 1.8
    """Scan distances a query's local-selectivity probe costs per cell: measured 1.7-1.9 at
    100,000 clustered vectors; priced at 1, 1,000 queries at 30% walked 319 priced at 1.00x the
    scan and ran 1.10-1.27x."""
    share_grid_halvings: int = 16
    """Local selectivities a walk is priced at: 1 down to 2^-16, on the ladder's steps."""
    scan_pass: float = 8.0
    """A scan's pass over the authorized vectors in query-shares of a batch scan, where it was
    not timed (``AutoPlanner.scan_pass``): one query alone took 8 queries' share of a 200-query
    scan at 50,000 x 128."""
    walk_doubt: float = 2.0
    """Weight on a walk's price where a plan for a filter that follows the data mixes walks
    with a scan: replayed after a scan, walks took 2.06x their warm price (clustered-corr 50%)
    and the mixed plan ran 1.07x the scan; weighed at 2 it scans (1.01-1.02x)."""
    list_read: float = 0.03
    """What reading a batch's top-ef lists adds to its walks: 0.25 ms a 100 lists against
    9.5 ms of walks (1M, efSearch 38; ``--n 1000000``)."""
    list_ef_max: int = 256
    """Largest efSearch at which a list walk is timed against pushdown: its heap grows with
    efSearch, and at a million vectors it cost as much as the selector saves at 96."""
    slope_shares: tuple[float, ...] = (0.125, 0.25, 0.5)
    """Shares of the documents at which a batch scan's slope is timed."""
    cost_efs: tuple[int, ...] = (64, 256, 1024, 4096, 16384)
    """efSearch values (with ``ef_base``, each at least k) at which a graph distance is timed:
    one costs 21 scan distances at 64 and 70-87 at 9,742 on 1M clustered vectors."""
    cost_min_time: float = 0.2
    """Seconds each contender of a cost measurement accumulates: the fastest of 5 calls, not
    interleaved, moved the graph cost from 30 to 37 between measurements."""
    cost_repeats: int = 3
    """Fewest timed calls of each contender of a cost measurement."""
    overhead_batch: int = 8
    """The small batch, beside the calibration batch, the plan's own bookkeeping is timed on,
    so its price is a part per call plus a part per query (a one-query call carried the whole
    200-query price and always scanned: 20x a fixed pushdown on queries inside authorized
    clusters)."""

    # -- the plan -------------------------------------------------------------------------------
    sample_min: int = 16
    """Queries whose lists check a filter independent of the cells against the queries (or
    ``sample_share`` of the batch): 16 lists at efSearch 128 and 10% are 2,048 draws, enough to
    tell 8% from 10% at three standard errors."""
    sample_share: float = 0.125
    """Share of a batch in the sample above 2 x ``sample_min`` queries."""
    pooled_share_z: float = 3.0
    """Binomial standard errors the sample's pooled authorized share may fall below the
    filter's size and still be read as independent of the queries."""
    pilot_min: int = 4
    """Queries walked first where the filter follows the data (or ``pilot_share`` of those
    planned): at 1M and a 50% half-space, 57 walks then 100 scans ran 2.8x the scan."""
    pilot_share: float = 0.0625
    """Share of the planned walks in the pilot."""
    escalate_factor: float = 2.0
    """A retried walk's efSearch is at least this multiple of its first."""
    second_look_shares: tuple[float, ...] = (0.05, 0.1)
    """Shares of the calibration queries (lowest k-th score) a plain search may look at again:
    on 100,000 clustered vectors the lowest tenth held two thirds of the recall lost."""
    second_look_factor: int = 4
    """The second look's efSearch over the first (39 then 182: 0.970 at 0.81x the plain 77)."""
    first_ef_rungs: int = 12
    """Ladder rungs above a query's needed efSearch its first walk is priced at (up to 8x)."""
    memo_entries: int = 4096
    """Answers a planner remembers per (share, efSearch, batch size) before clearing."""
    count_stride: int = 4096
    """Every this-many-th entry of a mask is looked at first, to tell a sparse mask (listed)
    from a dense one (counted: 30 us at a million; listing 100,000 ids took 0.56 ms)."""


#: The settings every planner uses unless given others.
DEFAULTS = PlannerSettings()
