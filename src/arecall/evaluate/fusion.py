"""Reciprocal rank fusion of ranked lists and of whole runs, with per-source contributions.

Why: a hybrid system (lexical + vector, say) is usually evaluated through its fused output, and
BM25 scores and cosine similarities are not comparable, so fusion works on ranks only. The
semantics are verity-retrieval's (a test cross-checks them against
``verity.fusion.reciprocal_rank_fusion``):

* a document's score is the **sum** over sources of ``weight / (smoothing + rank)`` (rank
  1-based, weight 1 unless given) — never the max, because agreement between sources is the
  signal RRF exists to capture;
* ties are broken by (−score, −number of sources, id): documents more sources agreed on first,
  then the id, so the order never depends on dict iteration;
* each source's rank is kept as ``contributions`` — the answer to "which retriever put that
  there?";
* ``smoothing`` < 1 and negative weights are errors; a source without a weight counts 1.0 (a
  forgotten weight should not silently drop a source), a weight for an unknown source is an
  error (it would silently do nothing); ``limit`` keeps the top n per query.

`fuse_runs` fuses whole `arecall.io.trec.Run` objects, vectorised over all queries (a query
present in only some runs is fused from those). A source run's ranks are its positions in
arecall's order (score descending, ties by doc id), not its files' rank column. Sums are
accumulated in source order with ``np.bincount``, so they are bit-for-bit the sums verity
computes. Saved as TREC, the fused scores round-trip exactly; only where two fused scores are
*equal* and the source counts decided the order does re-reading (which breaks ties by doc id)
reorder them — `reorderings_on_reload` counts such places.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from arecall.core.errors import ArecallError
from arecall.core.ragged import offsets, positions_in_groups
from arecall.io.trec import Run

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "DEFAULT_SMOOTHING",
    "FusedResult",
    "FusedRuns",
    "fuse_runs",
    "reciprocal_rank_fusion",
    "reorderings_on_reload",
    "weighted_rrf",
]

DEFAULT_SMOOTHING = 60
"""The ``k`` of Cormack et al. (2009) in 1 / (k + rank)."""


@dataclass(frozen=True, slots=True)
class FusedResult:
    """A fused hit: id, summed score, and source name → 1-based rank in that source."""

    id: str
    score: float
    contributions: Mapping[str, int]

    @property
    def source_count(self) -> int:
        """How many sources returned this document."""
        return len(self.contributions)


def _check(
    smoothing: float, weights: Mapping[str, float] | None, sources: Sequence[str], limit: int | None
) -> None:
    if not smoothing >= 1:
        raise ArecallError(f"smoothing must be at least 1, got {smoothing}")
    if limit is not None and (isinstance(limit, bool) or int(limit) != limit or limit < 1):
        raise ArecallError(f"limit must be a positive integer, got {limit!r}")
    for source, weight in (weights or {}).items():
        if source not in sources:
            raise ArecallError(
                f"weight given for unknown source {source!r} (sources: {', '.join(sources)})"
            )
        if not weight >= 0:
            raise ArecallError(f"weight for {source!r} is negative or not a number ({weight})")


def weighted_rrf(
    rankings: Mapping[str, Sequence[str]],
    weights: Mapping[str, float],
    *,
    smoothing: float = DEFAULT_SMOOTHING,
    limit: int | None = None,
) -> list[FusedResult]:
    """RRF with a per-source multiplier: score = Σ weight / (smoothing + rank).

    Examples
    --------
    >>> fused = weighted_rrf({"bm25": ["a", "b"], "vec": ["b", "a"]}, {"vec": 2.0})
    >>> [r.id for r in fused], fused[0].contributions
    (['b', 'a'], {'bm25': 2, 'vec': 1})
    """
    sources = list(rankings)
    _check(smoothing, weights, sources, limit)
    scores: dict[str, float] = {}
    contributions: dict[str, dict[str, int]] = {}
    for source, ranked in rankings.items():
        weight = float(weights.get(source, 1.0))
        for position, doc_id in enumerate(ranked, start=1):
            slot = contributions.setdefault(doc_id, {})
            if source in slot:
                raise ArecallError(f"source {source!r} lists {doc_id!r} twice")
            scores[doc_id] = scores.get(doc_id, 0.0) + weight / (smoothing + position)
            slot[source] = position
    fused = [FusedResult(d, s, contributions[d]) for d, s in scores.items()]
    fused.sort(key=lambda r: (-r.score, -r.source_count, r.id))
    return fused[:limit] if limit is not None else fused


def reciprocal_rank_fusion(
    rankings: Mapping[str, Sequence[str]],
    *,
    smoothing: float = DEFAULT_SMOOTHING,
    limit: int | None = None,
) -> list[FusedResult]:
    """Fuse named ranked lists (best first) by summed reciprocal rank 1 / (smoothing + rank).

    Parameters
    ----------
    rankings : mapping of source name → ranked doc ids
    smoothing : float
        At least 1; larger values flatten the curve.
    limit : int, optional
        Keep only the top ``limit`` fused results.

    Examples
    --------
    >>> fused = reciprocal_rank_fusion({"bm25": ["a", "b"], "vector": ["b", "a"]})
    >>> [r.id for r in fused], fused[0].contributions
    (['a', 'b'], {'bm25': 1, 'vector': 2})
    """
    return weighted_rrf(rankings, {}, smoothing=smoothing, limit=limit)


@dataclass(frozen=True)
class FusedRuns:
    """`fuse_runs`'s result: the fused run and every source's rank for each fused document.

    ``contributions`` has columns ``query_id``, ``doc_id``, ``source``, ``rank`` in fused
    order (sources in the order given).
    """

    run: Run
    contributions: pd.DataFrame


def fuse_runs(
    runs: Mapping[str, Run],
    *,
    smoothing: float = DEFAULT_SMOOTHING,
    weights: Mapping[str, float] | None = None,
    limit: int | None = None,
    name: str = "rrf",
) -> FusedRuns:
    """Reciprocal rank fusion of whole runs, query by query, without a Python loop per query.

    Parameters
    ----------
    runs : mapping of source name → Run
    smoothing : float
    weights : mapping of source name → weight, optional
        The weighted variant; missing sources weigh 1.0.
    limit : int, optional
        Results kept per query.
    name : str
        Tag of the fused run.

    Returns
    -------
    FusedRuns

    Examples
    --------
    >>> a = Run.from_rankings({"q": ["x", "y"]})
    >>> b = Run.from_rankings({"q": ["y", "z"]})
    >>> fused = fuse_runs({"a": a, "b": b})
    >>> fused.run.ranking("q")
    ['y', 'x', 'z']
    >>> fused.contributions.query("doc_id == 'y'")[["source", "rank"]].values.tolist()
    [['a', 2], ['b', 1]]
    """
    sources = list(runs)
    if not sources:
        raise ArecallError("nothing to fuse: no runs given")
    _check(smoothing, weights, sources, limit)
    qids, docs, src, pos = [], [], [], []
    for s, run in enumerate(runs.values()):
        depths = run.depths
        qids.append(run.query_ids.take(pa.array(np.repeat(np.arange(run.n_queries), depths))))
        docs.append(run.doc_ids.take(pa.array(run.doc_codes)))
        src.append(np.full(len(run), s, dtype=np.int64))
        pos.append(positions_in_groups(depths) + 1)
    q_all = pc.dictionary_encode(pa.chunked_array(qids, type=pa.string()).combine_chunks())
    d_all = pc.dictionary_encode(pa.chunked_array(docs, type=pa.string()).combine_chunks())
    q = np.asarray(q_all.indices.to_numpy(), dtype=np.int64)
    d = np.asarray(d_all.indices.to_numpy(), dtype=np.int64)
    source = np.concatenate(src)
    rank = np.concatenate(pos)
    weight = np.asarray([float((weights or {}).get(s, 1.0)) for s in sources])[source]
    n_docs = max(len(d_all.dictionary), 1)
    items, item_of_row = np.unique(q * n_docs + d, return_inverse=True)
    item_of_row = item_of_row.ravel()
    # np.bincount adds in row order, i.e. in source order: the same sums as verity's loop
    score = np.bincount(item_of_row, weights=weight / (smoothing + rank), minlength=len(items))
    count = np.bincount(item_of_row, minlength=len(items))
    item_q, item_d = items // n_docs, items % n_docs
    q_rank = _ranks(q_all.dictionary)
    d_rank = _ranks(d_all.dictionary)
    order = np.lexsort((d_rank[item_d], -count, -score, q_rank[item_q]))
    oq = item_q[order]
    per_query = np.bincount(q_rank[oq], minlength=len(q_all.dictionary))
    position = positions_in_groups(per_query)
    keep = order[position < limit] if limit is not None else order
    kq = item_q[keep]
    kept = np.bincount(q_rank[kq], minlength=len(q_all.dictionary))
    by_rank = np.argsort(q_rank)
    fused = Run(
        query_ids=q_all.dictionary.take(pa.array(by_rank[kept > 0])),
        offsets=offsets(kept[kept > 0]),
        doc_codes=item_d[keep],
        doc_ids=d_all.dictionary,
        scores=score[keep].astype(np.float64),
        name=name,
    )
    # contributions of kept items, in fused order, sources in the order given
    slot = np.full(len(items), -1, dtype=np.int64)
    slot[keep] = np.arange(len(keep))
    mine = slot[item_of_row] >= 0
    rows = np.flatnonzero(mine)
    rows = rows[np.lexsort((source[rows], slot[item_of_row[rows]]))]
    import pandas as pd

    contributions = pd.DataFrame(
        {
            "query_id": q_all.dictionary.take(pa.array(q[rows])).to_pylist(),
            "doc_id": d_all.dictionary.take(pa.array(d[rows])).to_pylist(),
            "source": np.asarray(sources, dtype=object)[source[rows]],
            "rank": rank[rows],
        }
    )
    return FusedRuns(fused, contributions)


def _ranks(values: pa.Array) -> np.ndarray:
    """Rank of each string by code point (0 = smallest)."""
    order = np.asarray(pc.sort_indices(values).to_numpy(), dtype=np.int64)
    out = np.empty(len(order), dtype=np.int64)
    out[order] = np.arange(len(order))
    return out


def reorderings_on_reload(run: Run, *, ties: str = "docid") -> int:
    """How many adjacent results have equal scores but not the reader's tie order.

    A fused (or `Run.from_rankings`) run may order equal scores by source count; after
    `arecall.io.trec.save_run` and `arecall.io.trec.load_run` those places follow the doc id
    instead. Zero means the saved file reproduces the order exactly.

    Examples
    --------
    >>> reorderings_on_reload(Run.from_rankings({"q": [("b", 1.0), ("a", 1.0)]}))
    1
    """
    if len(run) < 2:
        return 0
    same_q = np.repeat(np.arange(run.n_queries), run.depths)
    tied = (same_q[1:] == same_q[:-1]) & (run.scores[1:] == run.scores[:-1])
    if not tied.any():
        return 0
    r = _ranks(run.doc_ids)[run.doc_codes]
    wrong = r[1:] < r[:-1] if ties == "docid" else r[1:] > r[:-1]
    return int(np.count_nonzero(tied & wrong))
