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

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp
from tqdm import tqdm

from arecall.core.engine import Engine, LocalEngine
from arecall.core.measures import PIPELINE, per_k_keys
from arecall.core.placed_lists import PlacedLists
from arecall.core.ranking import Ranking

__all__ = [
    "BAR_CELLS",
    "PAIR_METRICS",
    "SEED_K_KEYS",
    "SUMMARY_K_KEYS",
    "PairScores",
    "exact_mean",
    "principal_bytes",
    "progressed",
    "score_pairs",
    "summarise",
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
        """Long table: one row per (principal, query, K)."""
        n_p, n_q, n_k = self.metrics["recall"].shape
        frame = pd.DataFrame(
            {
                "principal": pd.Categorical.from_codes(
                    np.repeat(np.arange(n_p), n_q * n_k), categories=pd.Index(principals)
                ),
                "query_id": pd.Categorical.from_codes(
                    np.tile(np.repeat(np.arange(n_q), n_k), n_p), categories=pd.Index(query_ids)
                ),
                "k": np.tile(np.asarray(self.ks, dtype=np.int64), n_p * n_q),
                "n_relevant": np.tile(np.repeat(self.n_relevant, n_k), n_p),
                "n_authorized_relevant": np.repeat(self.n_authorized_relevant.ravel(), n_k),
            }
        )
        for name in PAIR_METRICS:
            frame[name] = self.metrics[name].ravel()
        return frame


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
        process by default or on a cluster; the result is the same array either way.

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
    allowed = sp.csr_matrix(acl, dtype=np.float64)
    n_auth_rel = np.asarray((allowed @ binary.T).todense())  # (P, Q)

    # query-level, authorization-blind
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

    # per principal, by blocks of principals (bounded memory; a cluster takes a block per task)
    acl_csr = sp.csr_matrix(acl, dtype=bool)
    n_p = acl_csr.shape[0]
    run = engine if engine is not None else LocalEngine()
    bar = n_p > 1 and n_p * n_q * k_max >= BAR_CELLS  # a terminal shows a bar on big runs

    def block_data(start: int, stop: int) -> dict[str, Any]:
        return {
            "lists": {f: getattr(lists, f)[start:stop] for f in _LIST_FIELDS},
            "acl": acl_csr[start:stop],
            "n_auth_rel": n_auth_rel[start:stop],
        }

    shared = {"top": padded[:, :k_max], "rel_flags": rel_flags, "relevant": relevant, "ks": ks}
    with tqdm(total=n_p, desc="score", unit="principal", disable=None if bar else True) as t:
        parts = run.map_blocks(
            _score_block,
            n_p,
            shared=shared,
            block_data=progressed(block_data, t),
            per_principal=principal_bytes(n_q, k_max),
        )
    out = {
        name: np.concatenate([part[name] for part in parts])
        if parts
        else np.empty((0, n_q, len(ks)))
        for name in _BLOCK_METRICS
    }

    def per_pair(x: np.ndarray) -> np.ndarray:
        return np.broadcast_to(x[None, :, :], (n_p, *x.shape)).copy()

    metrics = {
        "recall": per_pair(recall),
        "precision": per_pair(precision),
        "ndcg": per_pair(ndcg),
        **out,
    }
    return PairScores(
        ks=tuple(int(k) for k in ks),
        metrics=metrics,
        reciprocal_rank=rr,
        n_relevant=n_rel.astype(np.int64),
        n_authorized_relevant=n_auth_rel.astype(np.int64),
    )


_LIST_FIELDS = ("post", "post_rank", "pre", "pre_rank")
_BLOCK_METRICS = ("unusable", "arecall_post", "arecall_pre", "returned_post", "returned_pre")


#: Bytes of temporaries per list cell (query × rank) of one principal in a block: the lists'
#: slices and the per-principal arrays of `_score_block` and the proof's checks. On this
#: machine's engine a block is then about 2^22 cells (`arecall.core.engine.LOCAL_BLOCK_BYTES`).
CELL_BYTES = 64


def principal_bytes(n_q: int, k_max: int) -> int:
    """Bytes one principal's block temporaries take: the engine sizes its blocks from them."""
    return CELL_BYTES * max(1, n_q * k_max)


def progressed(data: Any, bar: Any) -> Any:
    """A block-data function that also advances a tqdm ``bar`` by each block it makes."""

    def made(start: int, stop: int) -> Any:
        out = data(start, stop)
        bar.update(stop - start)
        return out

    return made


def _score_block(
    start: int,
    stop: int,
    block: dict[str, Any],
    *,
    top: np.ndarray,
    rel_flags: np.ndarray,
    relevant: _Relevance,
    ks: tuple[int, ...],
) -> dict[str, np.ndarray]:
    """The authorized metrics of principals ``start … stop − 1`` (shape (block, Q, nK)).

    ``top`` is the ranking's first K_max documents per query and ``rel_flags`` their relevance;
    a list item at rank r < K_max whose document is ``top[q, r]`` takes that flag (a gather),
    any other item is looked up by binary search: the same answer as looking every item up.
    """
    lists, dense_acl = block["lists"], block["acl"].toarray()
    n_auth_rel = block["n_auth_rel"]
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
    return out


#: Up to this many distinct values, `exact_mean` sums value × count as fractions (cheaper).
_FEW_DISTINCT = 4096


def exact_mean(values: np.ndarray) -> float | None:
    """The correctly rounded mean of float values (``None`` for none), like `statistics.mean`.

    Summing in float64 can land one unit in the last place away, which shows as a different
    third decimal when a mean sits on a rounding boundary (0.8625 → 0.862 instead of 0.863).
    Each float is an integer mantissa times a power of two; the mantissas are summed exactly per
    exponent (int64 blocks small enough never to overflow, then Python integers), and the one
    rounding happens at the end.

    Examples
    --------
    >>> exact_mean(np.array([0.1, 0.2, 0.3]))
    0.2
    """
    x = np.asarray(values, dtype=np.float64).ravel()
    if not x.size:
        return None
    if not np.isfinite(x).all():
        raise ValueError("exact_mean: values must be finite")
    distinct, counts = np.unique(x, return_counts=True)
    if len(distinct) <= _FEW_DISTINCT:  # recall-like values: few fractions, summed exactly
        exact = sum(
            (Fraction(v) * c for v, c in zip(distinct.tolist(), counts.tolist(), strict=True)),
            Fraction(0),
        )
        return float(exact / x.size)
    mantissa, exponent = np.frexp(x)
    numerator = np.ldexp(mantissa, 53).astype(np.int64)  # exact: |mantissa| < 1
    total = Fraction(0)
    for e in np.unique(exponent):
        part = numerator[exponent == e]
        blocks = np.add.reduceat(part, np.arange(0, len(part), 512))  # < 2**62 per block
        total += Fraction(sum(int(b) for b in blocks)) * Fraction(2) ** (int(e) - 53)
    return float(total / x.size)


def summarise(scores: PairScores, *, n_documents: int) -> dict[str, Any]:
    """Means in the seed's ``--emit`` layout, plus the excluded-pairs count and returned/K.

    Keys: datasets, queries, profiles, pairs, mrr, unauthorized_relevant, total_relevant, and
    ``k`` → {"1": {recall, arecall_post, arecall_pre, precision, ndcg, unusable,
    arecall_post_nonempty, arecall_pre_nonempty, n_nonempty, n_excluded, gap, gap_nonempty,
    returned_post, returned_pre}}. A restricted mean over no pairs is ``None``.
    """
    m = scores.metrics
    n_p, n_q, _ = m["recall"].shape
    nonempty = scores.n_authorized_relevant > 0  # (P, Q)
    per_k: dict[str, dict[str, Any]] = {}
    for i, k in enumerate(scores.ks):
        row: dict[str, Any] = {name: exact_mean(m[name][:, :, i]) for name in PAIR_METRICS}
        post_nz = exact_mean(m["arecall_post"][:, :, i][nonempty])
        pre_nz = exact_mean(m["arecall_pre"][:, :, i][nonempty])
        row["arecall_post_nonempty"] = post_nz
        row["arecall_pre_nonempty"] = pre_nz
        row["n_nonempty"] = int(nonempty.sum())
        row["n_excluded"] = int(nonempty.size - nonempty.sum())
        row["gap"] = row["arecall_pre"] - row["arecall_post"]
        row["gap_nonempty"] = None if pre_nz is None or post_nz is None else pre_nz - post_nz
        per_k[str(k)] = row
    total_relevant = int(scores.n_relevant.sum()) * n_p
    return {
        "datasets": int(n_documents),
        "queries": int(n_q),
        "profiles": int(n_p),
        "pairs": int(n_p * n_q),
        "mrr": exact_mean(scores.reciprocal_rank) or 0.0,
        "unauthorized_relevant": total_relevant - int(scores.n_authorized_relevant.sum()),
        "total_relevant": total_relevant,
        "k": per_k,
    }
