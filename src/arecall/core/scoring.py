"""Every metric for every query-principal pair, K and placement, as array operations.

The per-list definitions and the registry of names are in `arecall.core.measures`; this module
computes the same numbers for all pairs at once from the ranking, the placed lists, the qrels and
the ACL, and a test holds the two to exact agreement (tests/core/test_measures_registry.py).
Relevance of a (query, document) cell is looked up by binary search on sorted
``query * n_docs + doc`` keys, so nothing of size queries × documents is ever materialised.

Means follow the seed (the `arecall.core.measures.PIPELINE` registry, ``vacuous`` convention):
over all query-principal pairs, with Recall = 1 where nothing is relevant and ARecall = 1 where
nothing relevant is authorized (R_A = ∅), and beside it the restricted mean over pairs with
R_A ≠ ∅ and its count (the "excluded" convention: those pairs left out, their number shown).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp
from tqdm import tqdm

from arecall.core.engine import Engine, LocalEngine
from arecall.core.errors import ArecallError
from arecall.core.measures import PIPELINE, per_k_keys
from arecall.core.placed_lists import LIST_FIELDS, PlacedLists, principal_bytes
from arecall.core.ranking import Ranking
from arecall.io.atomic import temporary_directory

__all__ = [
    "BAR_CELLS",
    "PAIRS_ROW_GROUP",
    "PAIR_METRICS",
    "QUERY_METRICS",
    "SEED_K_KEYS",
    "SUMMARY_K_KEYS",
    "BlockSums",
    "PairScores",
    "PairSums",
    "QueryScores",
    "Reduced",
    "block_lists",
    "exact_mean",
    "exact_sum",
    "pairs_frame",
    "principal_bytes",
    "progressed",
    "query_scores",
    "reduce_pairs",
    "score_pairs",
    "summarise",
    "summary_of",
    "write_pairs",
]

#: The per-pair arrays `score_pairs` computes: every registered pipeline measure with a
#: per-list definition, in metrics.json order.
PAIR_METRICS = tuple(
    m.name for m in PIPELINE.values() if m.reference is not None and m.name != "gap"
)

#: Per-K keys of authorized-recall 0.1.0's ``--emit`` JSON (metrics.json keeps their meaning).
SEED_K_KEYS = per_k_keys(PIPELINE, seed_only=True)

#: Every per-K mean `summarise` reports (the seed's, plus what arecall adds).
SUMMARY_K_KEYS = per_k_keys(PIPELINE)


def _on_empty(name: str) -> float:
    """The registered value of measure ``name`` on a pair with nothing (authorized) relevant."""
    value = PIPELINE[name].empty
    if value is None:
        raise ValueError(f"{name}: no R = ∅ convention registered")
    return value


_RECALL, _AUTHORIZED = _on_empty("recall"), _on_empty("arecall_post")

#: Principals × queries × K cells from which a loop over principals shows a progress bar.
BAR_CELLS = 1 << 22


class _Relevance:
    """Binary relevance of (query, doc) cells by binary search on sorted cell keys."""

    def __init__(self, binary: sp.csr_matrix) -> None:
        coo = binary.tocoo()
        self.n_docs = binary.shape[1]
        self.keys = np.sort(coo.row.astype(np.int64) * self.n_docs + coo.col)

    def lookup(self, query: np.ndarray, doc: np.ndarray) -> np.ndarray:
        """Relevance of cells (query[i], doc[i]); doc < 0 (padding) is never relevant."""
        if not len(self.keys):
            return np.zeros(np.shape(doc), dtype=bool)
        probe = query.astype(np.int64) * self.n_docs + np.maximum(doc, 0)
        pos = np.minimum(np.searchsorted(self.keys, probe), len(self.keys) - 1)
        return (self.keys[pos] == probe) & (doc >= 0)

    def ranked(
        self, doc: np.ndarray, rank: np.ndarray, top: np.ndarray, top_rel: np.ndarray
    ) -> np.ndarray:
        """Relevance of cells (q, doc[q, j]) of items said to sit at ``rank[q, j]``.

        Where ``top[q, rank]`` is that document the flag ``top_rel[q, rank]`` is reused (a
        gather, no search); every other item (deeper than ``top``, or a rank that does not
        match) is looked up: the answer is `lookup`'s for every cell, whatever ``rank`` says.
        """
        width = top.shape[1]
        q = np.arange(doc.shape[0], dtype=np.int64)[:, None]
        inside = (rank >= 0) & (rank < width)
        flat = q * width + np.where(inside, rank, 0)
        same = inside & (np.take(top, flat) == doc)
        out = np.take(top_rel, flat) & same
        rest = ~same & (doc >= 0)
        if rest.any():
            out[rest] = self.lookup(np.broadcast_to(q, doc.shape)[rest], doc[rest])
        return out


@dataclass(frozen=True)
class PairScores:
    """Per-pair metrics, arrays of shape (n_principals, n_queries, n_ks), plus per-query MRR."""

    ks: tuple[int, ...]
    metrics: dict[str, np.ndarray]
    reciprocal_rank: np.ndarray
    n_relevant: np.ndarray
    n_authorized_relevant: np.ndarray

    def to_frame(self, query_ids: np.ndarray, principals: np.ndarray) -> pd.DataFrame:
        """Long table: one row per (principal, query, K) (`pairs_frame` of every row)."""
        n_k = len(self.ks)
        columns = {"n_authorized_relevant": np.repeat(self.n_authorized_relevant.ravel(), n_k)}
        columns.update({name: self.metrics[name].ravel() for name in PAIR_METRICS})
        return pairs_frame(
            0,
            columns,
            ks=self.ks,
            n_relevant=self.n_relevant,
            query_ids=query_ids,
            principals=principals,
        )


def pairs_frame(
    first_row: int,
    columns: dict[str, np.ndarray],
    *,
    ks: tuple[int, ...],
    n_relevant: np.ndarray,
    query_ids: np.ndarray,
    principals: np.ndarray,
) -> pd.DataFrame:
    """Rows ``first_row …`` of the per-pair table (principal-major, then query, then K).

    The one definition of the table's layout: ``columns`` holds n_authorized_relevant and every
    `PAIR_METRICS` column for those rows; the principal, query, K and n_relevant columns follow
    from the row numbers. A table written a row group at a time from blocks of principals
    (`write_pairs`) is the bytes of one written whole (`PairScores.to_frame`).
    """
    n_rows = len(columns["n_authorized_relevant"])
    n_q, n_k = len(query_ids), len(ks)
    row = np.arange(first_row, first_row + n_rows, dtype=np.int64)
    pair, k_at = np.divmod(row, n_k)
    principal, query = np.divmod(pair, max(n_q, 1))
    frame = pd.DataFrame(
        {
            "principal": pd.Categorical.from_codes(principal, categories=pd.Index(principals)),
            "query_id": pd.Categorical.from_codes(query, categories=pd.Index(query_ids)),
            "k": np.asarray(ks, dtype=np.int64)[k_at],
            "n_relevant": np.asarray(n_relevant, dtype=np.int64)[query],
            "n_authorized_relevant": np.asarray(columns["n_authorized_relevant"], dtype=np.int64),
        }
    )
    for name in PAIR_METRICS:
        frame[name] = np.asarray(columns[name], dtype=np.float64)
    return frame


@dataclass(frozen=True)
class QueryScores:
    """What every principal's scores share: the authorization-blind, per-query part.

    ``recall``, ``precision``, ``ndcg`` (Q, nK) are the same for every principal;
    `kernel` is what the per-principal block function takes (the top of the ranking, its
    relevance flags, the relevance lookup and matrix, the Ks).
    """

    ks: tuple[int, ...]
    recall: np.ndarray
    precision: np.ndarray
    ndcg: np.ndarray
    reciprocal_rank: np.ndarray
    n_relevant: np.ndarray
    kernel: dict[str, Any]

    def metric(self, name: str) -> np.ndarray:
        """The (Q, nK) values of an authorization-blind measure."""
        return {"recall": self.recall, "precision": self.precision, "ndcg": self.ndcg}[name]


#: The measures of `PAIR_METRICS` that do not depend on the principal.
QUERY_METRICS = ("recall", "precision", "ndcg")


def query_scores(ranking: Ranking, relevance: sp.csr_matrix, ks: tuple[int, ...]) -> QueryScores:
    """The per-query part of `score_pairs` (relevance looked up once, for every principal)."""
    n_q = ranking.n_queries
    k_arr = np.asarray(ks)
    k_max = int(k_arr.max())
    depth = k_max
    padded = ranking.padded(k_max).astype(np.int64)
    qidx = np.arange(n_q)[:, None]

    binary = relevance.copy()
    binary.data = (binary.data > 0).astype(np.float64)
    binary.eliminate_zeros()
    n_rel = np.asarray(binary.sum(axis=1)).ravel()

    relevant = _Relevance(binary)
    rel_flags = relevant.lookup(np.broadcast_to(qidx, padded.shape), padded)
    hits = np.cumsum(rel_flags, axis=1)[:, k_arr - 1]  # (Q, nK)
    safe_rel = np.where(n_rel > 0, n_rel, 1.0)[:, None]
    recall = np.where(n_rel[:, None] > 0, hits / safe_rel, _RECALL)
    precision = hits / k_arr
    discount = 1.0 / np.log2(np.arange(2, depth + 2))
    dcg = np.cumsum(rel_flags * discount, axis=1)[:, k_arr - 1]
    ideal_cum = np.concatenate(([0.0], np.cumsum(discount)))
    ideal = ideal_cum[np.minimum(n_rel[:, None].astype(np.int64), k_arr)]
    ndcg = np.divide(dcg, ideal, out=np.zeros_like(dcg), where=ideal > 0)
    first = ranking.first_relevant
    rr = np.divide(1.0, first, out=np.zeros(n_q), where=first > 0)
    kernel = {
        "top": padded[:, :k_max],
        "rel_flags": rel_flags,
        "relevant": relevant,
        "binary": sp.csr_matrix(binary),
        "ks": tuple(int(k) for k in ks),
    }
    return QueryScores(
        ks=tuple(int(k) for k in ks),
        recall=recall,
        precision=precision,
        ndcg=ndcg,
        reciprocal_rank=rr,
        n_relevant=n_rel.astype(np.int64),
        kernel=kernel,
    )


def score_pairs(
    ranking: Ranking,
    lists: PlacedLists,
    relevance: sp.csr_matrix,
    acl: sp.spmatrix,
    ks: tuple[int, ...],
    engine: Engine | None = None,
) -> PairScores:
    """Compute every per-pair metric of `arecall.core.measures` for all principals, queries and Ks.

    Parameters
    ----------
    ranking : Ranking
        The unfiltered ranking (at least ``max(ks)`` deep, or every positive document).
    lists : PlacedLists
        Post and pre lists from `arecall.core.placed_lists.place_all` at ``max(ks)``.
    relevance : csr_matrix, shape (n_queries, n_docs)
        Relevance grades; any grade > 0 counts as relevant (binary, as the seed).
    acl : sparse bool matrix, shape (n_principals, n_docs)
    ks : tuple of int
    engine : Engine, optional
        Where the per-principal part runs (`arecall.core.engine`): blocks of principals, in this
        process by default or on a cluster; the result is the same array either way. (The
        pipeline's score stage reduces the blocks where they run instead: `reduce_pairs`.)

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from arecall.core.placed_lists import place_all
    >>> from arecall.core.ranking import rank_queries
    >>> acl = sp.csr_matrix([[True, True, False]])
    >>> rel = sp.csr_matrix([[1.0, 1.0, 1.0]])
    >>> ranking = rank_queries([sp.csr_matrix([[0.5, 0.1, 0.9]])], n_queries=1, relevance=rel)
    >>> s = score_pairs(ranking, place_all(ranking, acl, 2), rel, acl, (1, 2))
    >>> s.metrics["arecall_post"].tolist(), s.metrics["arecall_pre"].tolist()
    ([[[0.0, 0.5]]], [[[0.5, 1.0]]])
    """
    q = query_scores(ranking, relevance, ks)
    n_q, k_max = ranking.n_queries, max(q.ks)
    acl_csr = sp.csr_matrix(acl, dtype=bool)
    n_p = acl_csr.shape[0]
    run = engine if engine is not None else LocalEngine()
    bar = n_p > 1 and n_p * n_q * k_max >= BAR_CELLS  # a terminal shows a bar on big runs

    def block_data(start: int, stop: int) -> dict[str, Any]:
        return {
            "lists": {f: getattr(lists, f)[start:stop] for f in LIST_FIELDS},
            "acl": acl_csr[start:stop],
        }

    with tqdm(total=n_p, desc="score", unit="principal", disable=None if bar else True) as t:
        parts = run.map_blocks(
            _score_block,
            n_p,
            shared=q.kernel,
            block_data=progressed(block_data, t),
            per_principal=principal_bytes(n_q, k_max),
        )
    out = {
        name: np.concatenate([part[name] for part in parts])
        if parts
        else np.empty((0, n_q, len(ks)))
        for name in _BLOCK_METRICS
    }
    n_auth_rel = (
        np.concatenate([part["n_auth_rel"] for part in parts])
        if parts
        else np.zeros((0, n_q), dtype=np.int64)
    )

    def per_pair(x: np.ndarray) -> np.ndarray:
        return np.broadcast_to(x[None, :, :], (n_p, *x.shape)).copy()

    metrics = {name: per_pair(q.metric(name)) for name in QUERY_METRICS}
    metrics.update(out)
    return PairScores(
        ks=q.ks,
        metrics=metrics,
        reciprocal_rank=q.reciprocal_rank,
        n_relevant=q.n_relevant,
        n_authorized_relevant=n_auth_rel,
    )


_BLOCK_METRICS = ("unusable", "arecall_post", "arecall_pre", "returned_post", "returned_pre")


def progressed(data: Any, bar: Any) -> Any:
    """A block-data function that also advances a tqdm ``bar`` by each block it makes."""

    def made(start: int, stop: int) -> Any:
        out = data(start, stop)
        bar.update(stop - start)
        return out

    return made


def block_lists(
    start: int, stop: int, block: dict[str, Any], lists_path: str | None
) -> dict[str, np.ndarray]:
    """A block's lists: shipped with it (``block["lists"]``), else its rows of the lists file
    (`PlacedLists.read`: the file is read where the block runs, nothing passes the client)."""
    if block.get("lists") is not None:
        return dict(block["lists"])
    if lists_path is None:
        raise ValueError("a block needs its lists or the lists file")
    return PlacedLists.read(lists_path, start, stop).block()


def _score_block(
    start: int,
    stop: int,
    block: dict[str, Any],
    *,
    top: np.ndarray,
    rel_flags: np.ndarray,
    relevant: _Relevance,
    binary: sp.csr_matrix,
    ks: tuple[int, ...],
    lists_path: str | None = None,
) -> dict[str, np.ndarray]:
    """The authorized metrics of principals ``start … stop − 1`` (shape (block, Q, nK)), and
    their |R_A| per query (``n_auth_rel``, (block, Q)).

    ``top`` is the ranking's first K_max documents per query and ``rel_flags`` their relevance;
    a list item at rank r < K_max whose document is ``top[q, r]`` takes that flag (a gather),
    any other item is looked up by binary search: the same answer as looking every item up.
    The lists come with the block or are read from ``lists_path`` (`block_lists`).
    """
    lists = block_lists(start, stop, block, lists_path)
    acl_rows = sp.csr_matrix(block["acl"], dtype=bool)
    dense_acl = acl_rows.toarray()
    n_auth_rel = np.asarray((sp.csr_matrix(acl_rows, dtype=np.float64) @ binary.T).todense())
    n_q = top.shape[0]
    k_arr = np.asarray(ks)
    out = {name: np.empty((stop - start, n_q, len(ks))) for name in _BLOCK_METRICS}
    for i in range(stop - start):
        shown_unusable = (top >= 0) & ~dense_acl[i, np.maximum(top, 0)]
        out["unusable"][i] = np.cumsum(shown_unusable, axis=1)[:, k_arr - 1] / k_arr
        pre_rel = relevant.ranked(lists["pre"][i], lists["pre_rank"][i], top, rel_flags)
        post_rel = relevant.ranked(lists["post"][i], lists["post_rank"][i], top, rel_flags)
        post_rank = lists["post_rank"][i]
        shown = post_rank >= 0
        # post items are stored in rank order, so "rank < K" is a prefix: count it per K
        in_k = [shown & (post_rank < k) for k in ks]
        post_hits = np.stack([(post_rel & m).sum(axis=1) for m in in_k], axis=1)
        pre_hits = np.cumsum(pre_rel, axis=1)[:, k_arr - 1]
        has = n_auth_rel[i][:, None] > 0
        denom = np.where(has, n_auth_rel[i][:, None], 1.0)
        out["arecall_post"][i] = np.where(has, post_hits / denom, _AUTHORIZED)
        out["arecall_pre"][i] = np.where(has, pre_hits / denom, _AUTHORIZED)
        out["returned_post"][i] = np.stack([m.sum(axis=1) for m in in_k], axis=1) / k_arr
        out["returned_pre"][i] = np.cumsum(lists["pre"][i] >= 0, axis=1)[:, k_arr - 1] / k_arr
    out["n_auth_rel"] = n_auth_rel.astype(np.int64)
    return out


#: Up to this many distinct values, `exact_sum` sums value × count as fractions (cheaper).
_FEW_DISTINCT = 4096


def exact_sum(values: np.ndarray) -> Fraction:
    """The exact sum of float values, as a fraction: what merges across blocks of pairs.

    Each float is an integer mantissa times a power of two; the mantissas are summed exactly per
    exponent (int64 blocks small enough never to overflow, then Python integers). Sums of
    blocks add exactly, so a mean from merged sums is the mean of all the values, whatever
    the blocks (`exact_mean` is this sum over the count, rounded once).

    Examples
    --------
    >>> exact_sum(np.array([0.5, 0.25])) + exact_sum(np.array([0.25]))
    Fraction(1, 1)
    """
    x = np.asarray(values, dtype=np.float64).ravel()
    if not x.size:
        return Fraction(0)
    if not np.isfinite(x).all():
        raise ValueError("exact_sum: values must be finite")
    distinct, counts = np.unique(x, return_counts=True)
    if len(distinct) <= _FEW_DISTINCT:  # recall-like values: few fractions, summed exactly
        return sum(
            (Fraction(v) * c for v, c in zip(distinct.tolist(), counts.tolist(), strict=True)),
            Fraction(0),
        )
    mantissa, exponent = np.frexp(x)
    numerator = np.ldexp(mantissa, 53).astype(np.int64)  # exact: |mantissa| < 1
    total = Fraction(0)
    for e in np.unique(exponent):
        part = numerator[exponent == e]
        blocks = np.add.reduceat(part, np.arange(0, len(part), 512))  # < 2**62 per block
        total += Fraction(sum(int(b) for b in blocks)) * Fraction(2) ** (int(e) - 53)
    return total


def exact_mean(values: np.ndarray) -> float | None:
    """The correctly rounded mean of float values (``None`` for none), like `statistics.mean`.

    Summing in float64 can land one unit in the last place away, which shows as a different
    third decimal when a mean sits on a rounding boundary (0.8625 → 0.862 instead of 0.863);
    the sum here is exact (`exact_sum`) and the one rounding happens at the end.

    Examples
    --------
    >>> exact_mean(np.array([0.1, 0.2, 0.3]))
    0.2
    """
    x = np.asarray(values, dtype=np.float64).ravel()
    if not x.size:
        return None
    return float(exact_sum(x) / x.size)


def _histogram(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct values, how often each occurs) of float values."""
    distinct, counts = np.unique(np.asarray(values, dtype=np.float64).ravel(), return_counts=True)
    return distinct, counts.astype(np.int64)


def _merge_histograms(
    a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    values = np.concatenate([a[0], b[0]])
    distinct, inverse = np.unique(values, return_inverse=True)
    counts = np.bincount(
        inverse.ravel(), weights=np.concatenate([a[1], b[1]]), minlength=len(distinct)
    )
    return distinct, counts.astype(np.int64)


@dataclass
class PairSums:
    """What `summarise` needs of a set of pairs, in a form that merges exactly.

    For each K: the exact sum (`exact_sum`) of every `PAIR_METRICS` measure over the pairs and
    of ARecall^post and ^pre over the pairs with R_A ≠ ∅, and the histograms of Δ = pre − post
    over all pairs and over those (what `arecall.core.significance.delta_significance_counts`
    resamples); the pair counts and Σ|R_A|. A block of principals computes its own where it
    runs (`reduce_pairs`); merged, the sums of all blocks are those of all pairs, whatever the
    blocks, so the metrics are the same bytes on any engine and block size.
    """

    ks: tuple[int, ...]
    n_pairs: int = 0
    n_nonempty: int = 0
    authorized_relevant: int = 0
    sums: dict[str, list[Fraction]] = field(default_factory=dict)
    sums_nonempty: dict[str, list[Fraction]] = field(default_factory=dict)
    gap: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    gap_nonempty: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)

    @classmethod
    def of(
        cls, metrics: dict[str, np.ndarray], n_auth_rel: np.ndarray, ks: tuple[int, ...]
    ) -> PairSums:
        """The sums of pairs given as arrays (principals, queries, nK); ``metrics`` holds the
        measures it sums (every one of `PAIR_METRICS` a block computes)."""
        nonempty = np.asarray(n_auth_rel) > 0
        out = cls(
            ks=tuple(int(k) for k in ks),
            n_pairs=int(nonempty.size),
            n_nonempty=int(nonempty.sum()),
            authorized_relevant=int(np.asarray(n_auth_rel, dtype=np.int64).sum()),
        )
        for name, values in metrics.items():
            out.sums[name] = [exact_sum(values[:, :, i]) for i in range(len(ks))]
        for name in ("arecall_post", "arecall_pre"):
            out.sums_nonempty[name] = [
                exact_sum(metrics[name][:, :, i][nonempty]) for i in range(len(ks))
            ]
        for i in range(len(ks)):
            pre, post = metrics["arecall_pre"][:, :, i], metrics["arecall_post"][:, :, i]
            out.gap.append(_histogram(pre - post))
            out.gap_nonempty.append(_histogram(pre[nonempty] - post[nonempty]))
        return out

    @classmethod
    def of_queries(cls, q: QueryScores, n_principals: int) -> PairSums:
        """The sums of the authorization-blind measures over ``n_principals`` × every query
        (each principal has the same values: the per-query sum, that many times)."""
        return cls(
            ks=q.ks,
            sums={
                name: [exact_sum(q.metric(name)[:, i]) * n_principals for i in range(len(q.ks))]
                for name in QUERY_METRICS
            },
        )

    def __sizeof__(self) -> int:
        """Bytes it holds: what Dask's ``sizeof`` reports for a block's answer (its task
        stream's ``nbytes``, `arecall.core.engine.DaskEngine.shipped`)."""
        fractions = [f for d in (self.sums, self.sums_nonempty) for v in d.values() for f in v]
        arrays = [a for h in (*self.gap, *self.gap_nonempty) for a in h]
        held = sum(sys.getsizeof(f.numerator) + sys.getsizeof(f.denominator) for f in fractions)
        return object.__sizeof__(self) + held + sum(a.nbytes for a in arrays)

    def merge(self, other: PairSums) -> PairSums:
        """These pairs and ``other``'s (exact: fractions and integer counts add)."""
        if other.ks != self.ks:
            raise ValueError(f"merging sums at K={other.ks} into K={self.ks}")

        zero = [Fraction(0)] * len(self.ks)

        def added(a: dict[str, list[Fraction]], b: dict[str, list[Fraction]]) -> dict[str, Any]:
            return {
                n: [x + y for x, y in zip(a.get(n, zero), b.get(n, zero), strict=True)]
                for n in dict.fromkeys([*a, *b])
            }

        def hists(a: list[Any], b: list[Any]) -> list[Any]:
            if not a or not b:
                return list(a or b)
            return [_merge_histograms(x, y) for x, y in zip(a, b, strict=True)]

        return PairSums(
            ks=self.ks,
            n_pairs=self.n_pairs + other.n_pairs,
            n_nonempty=self.n_nonempty + other.n_nonempty,
            authorized_relevant=self.authorized_relevant + other.authorized_relevant,
            sums=added(self.sums, other.sums),
            sums_nonempty=added(self.sums_nonempty, other.sums_nonempty),
            gap=hists(self.gap, other.gap),
            gap_nonempty=hists(self.gap_nonempty, other.gap_nonempty),
        )


def summarise(scores: PairScores, *, n_documents: int) -> dict[str, Any]:
    """Means in the seed's ``--emit`` layout, plus the excluded-pairs count and returned/K.

    Keys: datasets, queries, profiles, pairs, mrr, unauthorized_relevant, total_relevant, and
    ``k`` → {"1": {recall, arecall_post, arecall_pre, precision, ndcg, unusable,
    arecall_post_nonempty, arecall_pre_nonempty, n_nonempty, n_excluded, gap, gap_nonempty,
    returned_post, returned_pre}}. A restricted mean over no pairs is ``None``. The same
    figures as `summary_of` on the merged `PairSums` of any blocks of these pairs.
    """
    sums = PairSums.of(
        {name: scores.metrics[name] for name in PAIR_METRICS},
        scores.n_authorized_relevant,
        scores.ks,
    )
    n_q = scores.metrics["recall"].shape[1]
    return summary_of(
        sums,
        reciprocal_rank=scores.reciprocal_rank,
        n_relevant=scores.n_relevant,
        n_queries=n_q,
        n_documents=n_documents,
    )


def summary_of(
    sums: PairSums,
    *,
    reciprocal_rank: np.ndarray,
    n_relevant: np.ndarray,
    n_queries: int,
    n_documents: int,
) -> dict[str, Any]:
    """`summarise`'s dict from the merged sums of every pair (and the per-query MRR and |R|)."""
    n_pairs = sums.n_pairs
    n_p = n_pairs // n_queries if n_queries else 0

    def mean(total: Fraction, n: int) -> float | None:
        return float(total / n) if n else None

    per_k: dict[str, dict[str, Any]] = {}
    for i, k in enumerate(sums.ks):
        row: dict[str, Any] = {name: mean(sums.sums[name][i], n_pairs) for name in PAIR_METRICS}
        post_nz = mean(sums.sums_nonempty["arecall_post"][i], sums.n_nonempty)
        pre_nz = mean(sums.sums_nonempty["arecall_pre"][i], sums.n_nonempty)
        row["arecall_post_nonempty"] = post_nz
        row["arecall_pre_nonempty"] = pre_nz
        row["n_nonempty"] = sums.n_nonempty
        row["n_excluded"] = n_pairs - sums.n_nonempty
        row["gap"] = row["arecall_pre"] - row["arecall_post"]
        row["gap_nonempty"] = None if pre_nz is None or post_nz is None else pre_nz - post_nz
        per_k[str(k)] = row
    total_relevant = int(np.asarray(n_relevant, dtype=np.int64).sum()) * n_p
    return {
        "datasets": int(n_documents),
        "queries": int(n_queries),
        "profiles": int(n_p),
        "pairs": int(n_pairs),
        "mrr": exact_mean(reciprocal_rank) or 0.0,
        "unauthorized_relevant": total_relevant - sums.authorized_relevant,
        "total_relevant": total_relevant,
        "k": per_k,
    }


# -- the pipeline's score stage: reduced where each block runs -------------------------------------


#: Rows of the per-pair table per Parquet row group: pyarrow's default (``pandas.to_parquet``
#: of the whole table cuts it so), which keeps a table written by row groups the same bytes.
PAIRS_ROW_GROUP = 1 << 20


@dataclass(frozen=True)
class Reduced:
    """What `reduce_pairs` leaves: the merged sums of every pair and the per-query scores."""

    sums: PairSums
    queries: QueryScores
    n_principals: int


def reduce_pairs(
    ranking: Ranking,
    lists_path: str | Path,
    relevance: sp.csr_matrix,
    acl: sp.spmatrix,
    ks: tuple[int, ...],
    *,
    engine: Engine,
    pairs_out: str | Path,
    query_ids: np.ndarray,
    principals: np.ndarray,
) -> Reduced:
    """Score every pair by blocks of principals on ``engine``, reducing each block where it runs.

    Each block reads its principals' lists from ``lists_path`` (`PlacedLists.read`), scores
    them (`_score_block`), writes its rows of the per-pair table to a part file beside
    ``pairs_out`` and sends back only its `PairSums`; the parts are then written into
    ``pairs_out`` a row group at a time (`write_pairs`): the bytes of
    ``score_pairs(...).to_frame(...)`` written whole. Nothing per pair comes back.
    """
    q = query_scores(ranking, relevance, ks)
    n_p, n_q, k_max = PlacedLists.shape_of(lists_path)
    acl_csr = sp.csr_matrix(acl, dtype=bool)
    if acl_csr.shape[0] != n_p or n_q != ranking.n_queries:
        raise ArecallError(
            f"{lists_path}: lists of {n_p} principals × {n_q} queries, but the corpus has "
            f"{acl_csr.shape[0]} × {ranking.n_queries}; run the filter stage again"
        )
    bar = n_p > 1 and n_p * n_q * k_max >= BAR_CELLS
    target = Path(pairs_out).absolute()
    with temporary_directory(target) as where:
        shared = {**q.kernel, "lists_path": str(Path(lists_path).absolute()), "where": str(where)}
        with tqdm(total=n_p, desc="score", unit="principal", disable=None if bar else True) as t:
            parts = engine.map_blocks(
                _reduce_block,
                n_p,
                shared=shared,
                block_data=progressed(lambda s, e: {"acl": acl_csr[s:e]}, t),
                per_principal=principal_bytes(n_q, k_max),
            )
        sums = PairSums.of_queries(q, n_p)
        for part in parts:
            sums = sums.merge(part.sums)
        write_pairs(
            target,
            [(part.start, part.stop, part.path) for part in parts],
            q,
            query_ids=query_ids,
            principals=principals,
        )
    return Reduced(sums=sums, queries=q, n_principals=n_p)


@dataclass(frozen=True)
class BlockSums:
    """One block's answer to `reduce_pairs`: its principals, its part file, its sums."""

    start: int
    stop: int
    path: str
    sums: PairSums

    def __sizeof__(self) -> int:
        return object.__sizeof__(self) + len(self.path) + self.sums.__sizeof__()


def _reduce_block(
    start: int, stop: int, block: dict[str, Any], *, where: str, **kernel: Any
) -> BlockSums:
    """Score principals ``start … stop − 1``, write their rows to a part file, return their sums."""
    from arecall.io.atomic import write_npz

    out = _score_block(start, stop, block, **kernel)
    n_auth = out.pop("n_auth_rel")
    path = str(Path(where) / f"pairs-{start:012d}.npz")
    write_npz(path, {**out, "n_auth_rel": n_auth})
    return BlockSums(start, stop, path, PairSums.of(out, n_auth, kernel["ks"]))


def write_pairs(
    path: str | Path,
    parts: list[tuple[int, int, str]],
    q: QueryScores,
    *,
    query_ids: np.ndarray,
    principals: np.ndarray,
) -> None:
    """The per-pair table from the blocks' part files, one row group at a time.

    Row groups of `PAIRS_ROW_GROUP` rows are cut from the parts (mapped: a group's rows are read,
    no more), so memory holds one group whatever the number of pairs, and the file is the
    bytes pandas writes for the whole table (`PairScores.to_frame`).
    """
    from arecall.io.atomic import npz_member, write_parquet_groups

    n_k = len(q.ks)
    n_q = len(query_ids)
    per_principal = n_q * n_k
    n_rows = (parts[-1][1] if parts else 0) * per_principal
    k_at = np.arange(n_k)

    def rows(lo: int, hi: int) -> dict[str, np.ndarray]:
        """Rows lo … hi − 1 of the table's per-pair columns, from the parts that hold them."""
        pieces: dict[str, list[np.ndarray]] = {}
        for start, stop, name in parts:
            a, b = max(lo, start * per_principal), min(hi, stop * per_principal)
            if a >= b:
                continue
            base = start * per_principal
            for metric in _BLOCK_METRICS:
                flat = npz_member(name, metric).reshape(-1)
                pieces.setdefault(metric, []).append(np.asarray(flat[a - base : b - base]))
            auth = npz_member(name, "n_auth_rel").reshape(-1)
            pair_lo, pair_hi = (a - base) // n_k, (b - base - 1) // n_k + 1
            repeated = np.repeat(np.asarray(auth[pair_lo:pair_hi]), n_k)
            skip = (a - base) - pair_lo * n_k
            pieces.setdefault("n_authorized_relevant", []).append(repeated[skip : skip + b - a])
        out = {name: np.concatenate(p) for name, p in pieces.items()}
        query = (np.arange(lo, hi, dtype=np.int64) // n_k) % max(n_q, 1)
        at = k_at[np.arange(lo, hi) % n_k]
        for name in QUERY_METRICS:
            out[name] = q.metric(name)[query, at]
        return out

    def groups() -> Iterator[pd.DataFrame]:
        if not n_rows:
            empty = {name: np.zeros(0) for name in PAIR_METRICS}
            empty["n_authorized_relevant"] = np.zeros(0, dtype=np.int64)
            yield pairs_frame(
                0,
                empty,
                ks=q.ks,
                n_relevant=q.n_relevant,
                query_ids=query_ids,
                principals=principals,
            )
            return
        for lo in range(0, n_rows, PAIRS_ROW_GROUP):
            hi = min(lo + PAIRS_ROW_GROUP, n_rows)
            yield pairs_frame(
                lo,
                rows(lo, hi),
                ks=q.ks,
                n_relevant=q.n_relevant,
                query_ids=query_ids,
                principals=principals,
            )

    write_parquet_groups(path, groups())
