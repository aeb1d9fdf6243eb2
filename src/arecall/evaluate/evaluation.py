"""Evaluate any system's output: standard measures equal to ranx's, and the authorized view.

Why this module exists: users have their own retrieval system and its TREC run; they want to
know how much of what it returns each principal may use, without adopting arecall's retrievers.
`evaluate` takes a run (a `arecall.io.trec.Run`, a ranx-style dict, a TREC file, or a retriever
callable), qrels and optionally an ACL, and returns an `Evaluation` with per-query (and
per-query-principal) rows, a summary, the worst pairs to debug, and paired comparisons.

Standard measures — the same numbers as ranx (``recall@k``, ``precision@k``, ``ndcg@k``,
``ndcg_burges@k``, ``mrr@k``, ``map@k``, ``hit_rate@k``) and as trec_eval's cut measures, which
ranx is validated against; a test asserts equality with ranx to 1e-9 on random runs:

* the evaluated queries are those in the qrels (ranx's ``make_comparable``, trec_eval ``-c``);
  run queries without judgments are ignored and counted; a judged query missing from the run
  scores 0 everywhere;
* relevant means relevance >= 1; a judged query with nothing relevant scores **0** on every
  measure and stays in the mean (ranx's and trec_eval's convention — unlike the seed's and
  verity's, which give it 1 or leave it out); the summary counts such queries;
* precision@k divides by k, even when the run returned fewer than k (ranx, trec_eval P_k);
* ``ndcg`` uses linear gain rel / log2(i + 1) (Järvelin; trec_eval's ndcg_cut), ``ndcg_exp``
  exponential gain (2^rel − 1) / log2(i + 1) (Burges; ranx's ndcg_burges), both normalised by
  the ideal ordering of the judged relevant documents at the same cutoff;
* ``mrr@k`` is 1 / rank of the first relevant document within the first k, else 0;
* ``map@k`` sums precision@i at each relevant rank i <= k and divides by the number of
  relevant documents (not by min(R, k)), as trec_eval's map_cut and ranx's map@k do;
* the run order is score descending with ties by doc id (see `arecall.io.trec`).

Authorized view (with an ACL; deny by default — a document the ACL does not list is authorized
to nobody), per query-principal pair, following the seed's definitions: R_A = relevant documents
the principal may use; ``arecall_post@K`` = |R_A ∩ filter(top_K(run))| / |R_A| and
``arecall_pre@K`` = |R_A ∩ top_K(filter(run))| / |R_A|, both **1 when R_A = ∅** (the seed's
convention; the summary also gives the restricted means over pairs with R_A ≠ ∅ and their
count); ``gap@K`` = pre − post (≥ 0; nonzero only where the run is deeper than K);
``unusable@K`` = unauthorized documents among the first K of the unfiltered run, divided by K.
``arecall@K`` is the headline for the chosen placement: ``post`` (the filter runs after
truncation), ``pre`` (before it) or ``as-is`` (the run is what the principal gets, unfiltered:
the same ARecall as post, but the returned list keeps the unauthorized documents U@K counts).

How it runs, and where each part lives: a file is read a block of whole queries at a time
(`arecall.io.trec.read_run`: memory holds a block, not the run; a pipe is read once), each
block is reduced by the kernels (`arecall.evaluate.kernels`, vectorised: no Python loop per
query or per row), the per-query values are kept and the per-pair counts kept, tallied or
spilled (`arecall.evaluate.pairs`), and an `Evaluation` (`arecall.evaluate.result`) reads them;
`arecall.evaluate.inputs` coerces what is given, `arecall.evaluate.report` writes the table.
Blocks, engines and block sizes never change a figure: counts are integers, every float is
computed from them one way, and every mean over more pairs than are kept is summed exactly.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from arecall.core.engine import Engine, LocalEngine
from arecall.core.errors import ArecallError
from arecall.core.placed_lists import PLACEMENTS
from arecall.core.significance import delta_significance, delta_significance_counts, exact_mean
from arecall.evaluate.inputs import (
    DEFAULTS,
    RunSource,
    SearchFunction,
    as_acl,
    as_qrels,
    parse_ks,
    run_source,
)
from arecall.evaluate.kernels import (
    AUTHORIZED_MEASURES,
    STANDARD_MEASURES,
    EvalQrels,
    Prepared,
    authorization_tables,
    joined,
    missing,
    pair_inputs,
    prepare,
    standard,
)
from arecall.evaluate.pairs import (
    BlockResult,
    Retained,
    Spill,
    Tallies,
    pair_values,
    reduce_block,
    retains,
)
from arecall.evaluate.result import Core, Evaluation
from arecall.io.acl import Acl, load_acl
from arecall.io.text import BLOCK
from arecall.io.trec import Qrels, Run, RunNotGrouped, Ties

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "AUTHORIZED_MEASURES",
    "STANDARD_MEASURES",
    "Acl",
    "Evaluation",
    "compare",
    "evaluate",
    "load_acl",
    "parse_ks",
]


class _Accumulator:
    """What the blocks of one run add up to: per-query values, the pairs' tallies (always: the
    summary is computed from them) and, when asked or small enough, every pair's counts."""

    def __init__(
        self,
        judg: EvalQrels,
        acl: Acl | None,
        placement: str,
        engine: Engine,
        keep_pairs: bool,
    ) -> None:
        nq, n_k = judg.n_queries, len(judg.ks)
        self.judg, self.acl, self.placement, self.engine = judg, acl, placement, engine
        self.standard = {m: np.zeros((nq, n_k)) for m in STANDARD_MEASURES}
        self.present = np.zeros(nq, dtype=bool)
        self.depth = np.zeros(nq, dtype=np.int64)
        self.not_judged = 0
        self.retained: Retained | None = None
        self.tallies: Tallies | None = None
        self.spill: Spill | None = None
        self.granted_any = False  # the ACL grants a judged or retrieved document
        self._local = isinstance(engine, LocalEngine)
        self._tables: dict[tuple[int, int], Any] = {}  # kernels.authorization_tables
        self._lock = threading.Lock()
        if acl is not None:
            n_p = len(acl.principals)
            self.tallies = Tallies(n_k)
            # a cluster sends back tallies, never a pair's counts: they stay on the workers'
            # files (a spill) and only when the rows, a comparison or the worst pairs need them
            if self._local and retains(n_p * nq, n_k):
                self.retained = Retained.empty(n_p, nq, n_k)
            elif keep_pairs:
                self.spill = Spill(n_p, nq, n_k)
            judged = acl.doc_patterns(judg.qrels.doc_ids)
            self.granted_any = bool(acl.grants_anyone(judged).any())

    def work(self, run: Run) -> tuple[Prepared, list[BlockResult] | None]:
        """What a block needs computed; thread-safe, so blocks run side by side on this
        machine's engine (a cluster's blocks run on the cluster: `add` asks it, in order)."""
        prepared = prepare(run, self.judg, self.acl)
        local = self.acl is not None and self._local
        return prepared, self.reduced(prepared) if local else None

    def add(self, prepared: Prepared, reduced: list[BlockResult] | None = None) -> None:
        ev = prepared.eval_index
        self.present[ev] = True
        self.depth[ev] = prepared.depth
        self.not_judged += prepared.not_judged
        for m, values in standard(prepared, self.judg).items():
            self.standard[m][ev] = values
        if self.acl is not None:
            self.granted_any = self.granted_any or prepared.rows_matched
            self._store(prepared, reduced if reduced is not None else self.reduced(prepared))

    def _store(self, prepared: Prepared, reduced: list[BlockResult]) -> None:
        """Merge the blocks' tallies (exact) and keep their counts where they are wanted."""
        assert self.tallies is not None and self.acl is not None
        for block in reduced:
            self.tallies.merge(block.tallies)
        ev, n_k = prepared.eval_index, len(self.judg.ks)
        if self.retained is not None or (self.spill is not None and self._local):
            counts = joined([b.counts for b in reduced if b.counts is not None], len(ev), n_k)
            for store in (self.retained, self.spill):
                if store is not None:
                    store.add(ev, counts)
        elif self.spill is not None:
            parts = [(b.start, b.stop, b.part) for b in reduced if b.part is not None]
            self.spill.add_parts(ev, parts)

    def reduced(self, prepared: Prepared) -> list[BlockResult]:
        """Every block of principals' tallies on one block of queries (`arecall.evaluate.
        pairs.reduce_block`), with its counts only where this process keeps them."""
        assert self.acl is not None
        acl, ks = self.acl, self.judg.ks
        n_k = len(ks)
        per_principal = 5 * len(prepared.hit_rank) + prepared.n_queries * (12 * n_k + ks[-1] + 4)
        keeps = self.retained is not None or self.spill is not None
        keep = ("counts" if self._local else "file") if keeps else "none"

        def tables(start: int, stop: int) -> Any:
            with self._lock:
                if (start, stop) not in self._tables:
                    self._tables[(start, stop)] = authorization_tables(acl, start, stop)
                return self._tables[(start, stop)]

        options = {
            "keep": keep,
            "part_prefix": self.spill.part_prefix() if keep == "file" and self.spill else None,
        }
        return self.engine.map_blocks(
            reduce_block,
            len(acl.principals),
            shared={**pair_inputs(prepared, ks), **options},
            block_data=tables,
            per_principal=per_principal,
        )

    def finish(self) -> Core:
        absent = np.flatnonzero(~self.present)
        if self.acl is not None and len(absent):
            gone = missing(self.judg, absent, self.acl)
            self._store(gone, self.reduced(gone))
        return Core(
            query_ids=self.judg.query_ids.to_pylist(),
            present=self.present,
            depth=self.depth,
            n_relevant=self.judg.n_relevant,
            standard=self.standard,
            run_queries_not_judged=self.not_judged,
            retained=self.retained,
            tallies=self.tallies,
            spill=self.spill,
        )


def _accumulate(
    source: RunSource,
    judg: EvalQrels,
    acl: Acl | None,
    placement: str,
    engine: Engine,
    keep_pairs: bool,
    *,
    partitioned: bool,
) -> tuple[_Accumulator, str]:
    acc = _Accumulator(judg, acl, placement, engine, keep_pairs)
    name = "arecall"
    try:
        blocks = source.blocks_with(acc.work, partitioned=partitioned, workers=2)
        for i, (run, worked) in enumerate(blocks):
            if i == 0:
                name = run.name
            assert worked is not None
            acc.add(*worked)
    except BaseException:
        if acc.spill is not None:  # an interrupted evaluation leaves no temporary file
            acc.spill.close()
        raise
    return acc, name


def evaluate(
    run_or_retriever: Run
    | Mapping[str, Mapping[str, float]]
    | str
    | os.PathLike[str]
    | SearchFunction,
    qrels: Qrels | Mapping[str, Mapping[str, int]] | str | os.PathLike[str],
    acl: Acl | Mapping[str, Iterable[str]] | str | os.PathLike[str] | None = None,
    k: Iterable[int] | str = DEFAULTS.ks,
    *,
    principals: Sequence[str] | None = None,
    groups: str | os.PathLike[str] | None = None,
    placement: str = DEFAULTS.placement,
    ties: Ties = DEFAULTS.ties,
    significance: bool = True,
    confidence: float = DEFAULTS.confidence,
    n_resamples: int = DEFAULTS.n_resamples,
    seed: int = DEFAULTS.seed,
    engine: Engine | None = None,
    keep_pairs: bool = False,
    keep_run: bool = False,
    block: int = BLOCK,
) -> Evaluation:
    """Score a run (or a retriever) against qrels, and with an ACL, per principal.

    Parameters
    ----------
    run_or_retriever : Run, dict, path or callable
        A `arecall.io.trec.Run`; a ranx-style ``{qid: {docid: score}}``; a TREC run file (or
        a pipe, read once); or a callable ``query_id -> ranked doc ids`` (or ``(doc_id,
        score)`` pairs, best first), called once per judged query.
    qrels : Qrels, dict or path
        ``{qid: {docid: rel}}`` or a TREC qrels file.
    acl : Acl, dict, path or None
        ``{principal: doc ids}``, an `Acl`, or an ACL TSV (``doc_id<TAB>principal``).
    k : iterable of int or str
        Cutoffs, e.g. ``(1, 3, 5, 10)`` or ``"10,100"``.
    principals : sequence of str, optional
        With an ACL file: the principals (ACL lines naming others are errors). With an `Acl`
        or a dict: the principals to evaluate (unknown ones may use nothing).
    groups : path, optional
        ``principal<TAB>group`` TSV, so ACL lines may name groups.
    placement : {"post", "pre", "as-is"}
        Which list ``arecall@K`` and `Evaluation.worst` describe.
    ties : {"docid", "trec_eval"}
        Equal scores ordered by doc id ascending, or descending as trec_eval does (for runs
        given as dicts or files).
    significance, confidence, n_resamples, seed
        Paired bootstrap CI and randomization test of the gap Δ = pre − post in `summary`.
    engine : Engine, optional
        Where the per-principal measures run (`arecall.core.engine`: this process by default,
        or ``DaskEngine(scheduler)`` to shard the principals across a cluster); the resampling
        runs here, so every figure is the same either way.
    keep_pairs : bool
        Keep every pair's counts even when there are too many to hold (`arecall.evaluate.
        pairs`: they are spilled to a temporary file), for `Evaluation.per_pair`, rows,
        `compare` and `worst`.
    keep_run : bool
        A run read from a pipe is copied to a temporary file, so `Evaluation.worst` can list
        what its worst pairs returned.
    block : int
        Bytes of a run file read as one block of queries (memory, not results, depends on it).

    Returns
    -------
    Evaluation

    Examples
    --------
    >>> run = {"q1": {"a": 0.9, "x": 0.8, "b": 0.7}, "q2": {"c": 0.5}}
    >>> qrels = {"q1": {"a": 1, "b": 2}, "q2": {"d": 1}}
    >>> ev = evaluate(run, qrels, k=[2])
    >>> ev.per_query[["query_id", "recall@2", "precision@2"]].values.tolist()
    [['q1', 0.5, 0.5], ['q2', 0.0, 0.0]]
    >>> ev = evaluate(run, qrels, acl={"alice": ["b", "x"]}, k=[2])
    >>> s = ev.summary()["k"]["2"]
    >>> s["arecall_post"], s["arecall_pre"], s["unusable"]
    (0.5, 1.0, 0.5)
    """
    if placement not in PLACEMENTS:
        raise ArecallError(f"placement must be one of {', '.join(PLACEMENTS)}, got {placement!r}")
    ks = parse_ks(k)
    q = as_qrels(qrels)
    a = as_acl(acl, principals, groups)
    source = run_source(run_or_retriever, q, ties, block=block, keep=keep_run)
    judg = EvalQrels.of(q, ks)
    runner = engine if engine is not None else LocalEngine()
    try:
        acc, name = _accumulate(source, judg, a, placement, runner, keep_pairs, partitioned=False)
    except RunNotGrouped as exc:
        if not source.rereadable:
            raise ArecallError(
                f"{exc}; a pipe is read once, so group it by query id first (sort -s -k1,1)"
            ) from None
        acc, name = _accumulate(source, judg, a, placement, runner, keep_pairs, partitioned=True)
    if source.path is not None and not acc.present.any():
        n_run = _n_run_queries(acc)
        raise ArecallError(
            f"{source.path}: no query id matches the qrels ({n_run} queries in the run)"
        )
    if a is not None and isinstance(acl, str | os.PathLike) and not acc.granted_any:
        raise ArecallError(
            f"{acl}: grants none of the documents judged in the qrels or returned in the "
            f"first {ks[-1]} results of the run (ACL lines are doc_id<TAB>principal)"
        )
    core = acc.finish()
    options = {
        "enabled": significance,
        "confidence": confidence,
        "n_resamples": n_resamples,
        "seed": seed,
    }
    return Evaluation(
        source.memory, name, q, a, ks, placement, core, options, rankings=source.reread
    )


def _n_run_queries(acc: _Accumulator) -> int:
    return acc.not_judged + int(np.count_nonzero(acc.present))


# -- comparing two evaluations -------------------------------------------------------------------


def compare(
    a: Evaluation,
    b: Evaluation,
    *,
    measures: Sequence[str] | None = None,
    confidence: float = DEFAULTS.confidence,
    n_resamples: int = DEFAULTS.n_resamples,
    seed: int = DEFAULTS.seed,
) -> pd.DataFrame:
    """Paired comparison of two evaluations on the same queries (and principals): Δ = A − B.

    Each measure is paired per query (standard measures) or per query-principal pair
    (authorized ones); for every K it reports both means, Δ, its bootstrap CI and the
    randomization-test p-value.

    Parameters
    ----------
    a, b : Evaluation
        Same ks, same judged queries; with ACLs, the same principals.
    measures : sequence of str, optional
        Default: the standard measures, plus ``arecall`` and ``unusable`` when both have an
        ACL.

    Returns
    -------
    pandas.DataFrame
        Columns ``k``, ``measure``, ``mean_a``, ``mean_b``, ``mean_diff``, ``low``, ``high``,
        ``p_value``, ``n``.

    Examples
    --------
    >>> qrels = {"q1": {"a": 1}, "q2": {"b": 1}}
    >>> good = evaluate({"q1": {"a": 1.0}, "q2": {"b": 1.0}}, qrels, k=[1])
    >>> bad = evaluate({"q1": {"x": 1.0}, "q2": {"b": 1.0}}, qrels, k=[1])
    >>> row = compare(good, bad, measures=["recall"]).iloc[0]
    >>> float(row.mean_diff), float(row.p_value)
    (0.5, 1.0)
    """
    if a.ks != b.ks:
        raise ArecallError(f"cannot compare evaluations at different ks: {a.ks} and {b.ks}")
    if a._core.query_ids != b._core.query_ids:
        raise ArecallError("cannot compare evaluations over different judged queries")
    both_acl = a.acl is not None and b.acl is not None
    if both_acl and a.principals != b.principals:
        raise ArecallError("cannot compare evaluations over different principals")
    if measures is None:
        measures = [*STANDARD_MEASURES, *(("arecall", "unusable") if both_acl else ())]
    rows = []
    for k in a.ks:
        for m in measures:
            if m not in STANDARD_MEASURES and not both_acl:
                raise ArecallError(f"measure {m!r} needs an ACL on both evaluations")
            options = {"confidence": confidence, "n_resamples": n_resamples, "seed": seed}
            mean_a, mean_b, sig = _paired(a, b, m, k, options)
            rows.append(
                {
                    "k": k,
                    "measure": m,
                    "mean_a": mean_a,
                    "mean_b": mean_b,
                    "mean_diff": sig["mean_diff"],
                    "low": sig["low"],
                    "high": sig["high"],
                    "p_value": sig["p_value"],
                    "n": sig["n"],
                }
            )
    import pandas as pd

    return pd.DataFrame(rows)


def _exact(values: np.ndarray) -> float:
    distinct, counts = np.unique(values, return_counts=True)
    return exact_mean(distinct, counts)


#: Pairs compared at a time when the evaluations' pairs are tallied, not kept.
_COMPARE_PAIRS = 1 << 22


def _paired(
    a: Evaluation, b: Evaluation, measure: str, k: int, options: Mapping[str, Any]
) -> tuple[float, float, dict[str, Any]]:
    """(mean of A, mean of B, significance of A − B) for one measure at one cutoff.

    Kept values are compared whole, as they always were; pairs that were tallied (too many
    to keep) are read back a slice of principals at a time into histograms of A, B and A − B,
    with exact means.
    """
    kept = measure in STANDARD_MEASURES or (
        a._core.retained is not None and b._core.retained is not None
    )
    if kept:
        x, y = a.values(measure, k), b.values(measure, k)
        # exact means, as tallied pairs have: kept or spilled (a cluster), the same figures
        return _exact(x), _exact(y), delta_significance(x, y, **options)
    j = a.ks.index(k)
    tallies: list[dict[float, int]] = [{}, {}, {}]
    n_p = len(a.principals)
    step = max(1, _COMPARE_PAIRS // max(len(a._core.query_ids), 1))
    for start in range(0, n_p, step):
        stop = min(start + step, n_p)
        x = pair_values(measure, a._pair_counts(start, stop), j, k, a.placement).ravel()
        y = pair_values(measure, b._pair_counts(start, stop), j, k, b.placement).ravel()
        for tally, values in zip(tallies, (x, y, x - y), strict=True):
            distinct, counts = np.unique(values, return_counts=True)
            for v, c in zip(distinct.tolist(), counts.tolist(), strict=True):
                tally[v] = tally.get(v, 0) + c
    arrays = [
        (np.array(list(t), dtype=np.float64), np.array(list(t.values()), dtype=np.int64))
        for t in tallies
    ]
    return (
        exact_mean(*arrays[0]),
        exact_mean(*arrays[1]),
        delta_significance_counts(*arrays[2], **options),
    )
