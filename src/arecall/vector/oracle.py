"""Scoring a placement against the exhaustive oracle: recall_loss, returned, short, ARecall, U@K.

Two failures are kept apart on purpose, as verity does. *Recall* below 1 with a full result list
is ordinary approximate search. *Shortfall* — asking for k and getting fewer, with no error — is
a contract violation, and the signature of post-filtering. Averaging them into one number hides
the second inside the first, so ``recall_loss`` returns both.

Relevance. This experiment has no human judgements, so the relevant set of a (query, principal)
pair is the oracle's answer: the k nearest documents the principal may use. R_A (the authorized
relevant items) is then that set itself, and ARecall@K = |R_A ∩ L_K| / |R_A| coincides with
recall against the oracle — by construction, not by accident; the column is computed through
the general definition (with the mask) so that it stays right if the relevance source changes.
That a placement never returns an unauthorized item is a separate guarantee, proved by the
property tests rather than by this column. The other natural choice — R = the unfiltered exact
top-k — would make post-filtering look perfect (it keeps exactly the authorized part of that
set), which hides the very failure the table exists to show.

The definitions are `arecall.core.measures`' (``recall_at_k``, ``authorized_recall_at_k``,
``unusable_fraction_at_k``); the column names and their R = ∅ convention (``vacuous``: 1 when the
oracle returns nothing) are the `arecall.core.measures.VECTOR` registry's.

U@K is computed, as authorized-recall defines it, on the unfiltered ranking: the fraction of the
exact top-K that the principal may not use. It depends on the principal, not on the placement,
and explains post-filtering's shortfall: post returns about (1 − U@K)·K.

GLS, the global-local selectivity (after Amanbayev et al., "Filtered Approximate Nearest
Neighbor Search in Vector Databases", arXiv 2602.11443, 2026), says how strongly a principal's
filter follows its queries. For principal p with authorized set A_p among n documents, global
selectivity s_p = |A_p| / n; for query q with exact unfiltered top-k N_k(q), local selectivity
ℓ_p(q) = |N_k(q) ∩ A_p| / k; and GLS_p = mean_q ℓ_p(q) / s_p. GLS = 1: the filter is
independent of where the queries land; > 1: authorized documents crowd around the queries
(post-filtering returns more than s_p·k); < 1: they avoid them, down to 0 when no unfiltered
neighbour is authorized (post returns nothing, and a graph walk must leave the neighbourhood).
With the same k, mean ℓ_p = 1 − U@K.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from arecall.core.measures import authorized_recall_at_k, recall_at_k
from arecall.vector._checks import check_k, check_mask
from arecall.vector.index import Hits

__all__ = [
    "PlacementScore",
    "authorized_recall",
    "global_local_selectivity",
    "recall_loss",
    "score_hits",
    "tie_aware_recall",
    "unusable_at_k",
]


def recall_loss(approx: Sequence[Hashable], exact: Sequence[Hashable]) -> tuple[float, int]:
    """Overlap recall and shortfall of an approximate result list against the exact one.

    verity's semantics: ``(|ids(approx) ∩ ids(exact)| / |ids(exact)|,
    max(0, len(exact) − len(approx)))``, and ``(1.0, 0)`` when ``exact`` is empty — counted
    over *real, distinct* results. Both lists are stripped first: a negative integer id is
    faiss's padding slot (``-1``: "no result here"), not a result, and a repeated id is one
    result, not two (its later copies are dropped). Counting either as returned would hide a
    shortfall, which is the failure this function exists to expose.

    Parameters
    ----------
    approx, exact : sequence of hashable
        Document ids, best first (the order does not matter here).

    Returns
    -------
    tuple of (float, int)

    Examples
    --------
    >>> recall_loss([1, 2, 9], [1, 2, 3, 4])
    (0.5, 1)
    >>> recall_loss([], [])
    (1.0, 0)
    >>> recall_loss([1, 1, -1], [1, 2, 3])  # a duplicate and a padding slot: one result
    (0.3333333333333333, 2)
    """
    got, want = _real_ids(approx), _real_ids(exact)
    recall = recall_at_k(got, want, max(len(got), 1))  # type: ignore[arg-type]
    return (recall, max(0, len(want) - len(got)))


def _real_ids(ids: Sequence[Hashable]) -> list[Hashable]:
    """``ids`` without padding (negative integers) and without repeats, order kept."""
    out = []
    for i in ids:
        if isinstance(i, int | np.integer) and not isinstance(i, bool) and i < 0:
            continue
        out.append(i.item() if isinstance(i, np.generic) else i)
    return list(dict.fromkeys(out))


def authorized_recall(
    returned: Sequence[int], relevant: Sequence[int], allowed: npt.NDArray[np.bool_]
) -> float:
    """ARecall@K = |R_A ∩ L_K| / |R_A| with R_A = relevant ∩ authorized; 1 when R_A is empty.

    Examples
    --------
    >>> authorized_recall([0, 2], [0, 1, 2], np.array([True, False, True]))
    1.0
    """
    names = [str(d) for d in returned]
    return authorized_recall_at_k(
        names, (str(d) for d in relevant), lambda d: bool(allowed[int(d)]), max(len(names), 1)
    )


def unusable_at_k(unfiltered: Hits, allowed: npt.NDArray[np.bool_], k: int) -> float:
    """Mean U@K: the fraction of each unfiltered top-K the principal may not use.

    Examples
    --------
    >>> h = Hits(np.array([[0, 1]]), np.zeros((1, 2), dtype=np.float32))
    >>> unusable_at_k(h, np.array([True, False]), 2)
    0.5
    """
    k = check_k(k)
    ids = unfiltered.ids[:, :k]
    blocked = (ids >= 0) & ~allowed[np.maximum(ids, 0)]
    return float(blocked.sum(axis=1).mean() / k)


def global_local_selectivity(unfiltered: Hits, allowed: npt.NDArray[np.bool_], k: int) -> float:
    """GLS: the mean share of each query's exact unfiltered top-``k`` the principal may use
    (local selectivity), over the share of the corpus it may use (global selectivity).

    NaN for a principal who may use nothing (no global share to compare with).

    Examples
    --------
    >>> h = Hits(np.array([[0, 1], [0, 2]]), np.zeros((2, 2), dtype=np.float32))
    >>> allowed = np.array([True, False, False, False])  # global share 1/4
    >>> global_local_selectivity(h, allowed, 2)  # local share 1/2 for each query: 2× the global
    2.0
    """
    k = check_k(k)
    share = float(np.mean(allowed)) if allowed.size else 0.0
    if share == 0.0:
        return float("nan")
    ids = unfiltered.ids[:, :k]
    usable = (ids >= 0) & allowed[np.maximum(ids, 0)]
    return float(usable.sum(axis=1).mean() / k / share)


@dataclass(frozen=True)
class PlacementScore:
    """Mean metrics of one placement for one principal (mask) over a batch of queries.

    ``returned`` is the mean number of results (verity's "returned / k" column), ``short`` the
    fraction of queries with a shortfall against the oracle (fewer than k whenever k items are
    authorized).
    """

    returned: float
    recall: float
    short: float
    arecall: float
    u_at_k: float


def score_hits(
    hits: Hits, oracle: Hits, allowed: npt.NDArray[np.bool_], k: int, unfiltered: Hits
) -> PlacementScore:
    """Score ``hits`` against ``oracle`` (the exact authorized top-k) for one mask.

    Parameters
    ----------
    hits : Hits
        The placement's results.
    oracle : Hits
        ``VectorIndex.exact(queries, k, allowed)``.
    allowed : ndarray of bool
        The principal's authorization mask.
    k : int
    unfiltered : Hits
        The exact *unfiltered* top-k, for U@K.

    Examples
    --------
    >>> o = Hits(np.array([[0, 1]]), np.zeros((1, 2), dtype=np.float32))
    >>> h = Hits(np.array([[0, -1]]), np.zeros((1, 2), dtype=np.float32))
    >>> score_hits(h, o, np.array([True, True]), 2, o).recall
    0.5
    """
    k = check_k(k)
    allowed = check_mask(allowed, allowed.shape[0])
    rows, exact_rows = hits.rows(), oracle.rows()
    recalls, shorts, arecalls = [], [], []
    for got, exact in zip(rows, exact_rows, strict=True):
        recall, shortfall = recall_loss(got, exact)
        recalls.append(recall)
        shorts.append(shortfall > 0)
        arecalls.append(authorized_recall(got, exact, allowed))
    return PlacementScore(
        returned=float(hits.returned().mean()),
        recall=float(np.mean(recalls)),
        short=float(np.mean(shorts)),
        arecall=float(np.mean(arecalls)),
        u_at_k=unusable_at_k(unfiltered, allowed, k),
    )


def tie_aware_recall(
    hits: Hits, truth: Hits, vectors: npt.NDArray[np.float32], q: npt.NDArray[np.float32]
) -> npt.NDArray[np.float64]:
    """Each query's recall@k of ``hits`` against the exact ``truth``, counting by score: a
    returned document is a hit when it scores at least the truth's k-th — so an exact duplicate
    of a true neighbour counts as one (both scored by the same kernel, so a tie is bit-exact).
    ann-benchmarks counts recall the same way (a returned item within the k-th true distance).
    Without ties it is :func:`recall_loss`'s recall; the planner calibrates by it, and the
    adversarial benchmark scores every contender by it.

    By ids, a plain search on a corpus of 50-60% exact duplicates plateaued at recall 0.76
    while every answer was as good as the truth's (0.975 by score at efSearch 128): the
    calibration never reached its goal, and ``auto`` never walked. Without ties both counts
    agree.

    Examples
    --------
    >>> v = np.array([[1, 0], [1, 0], [0.6, 0.8], [0, 1]], np.float32)  # 0 and 1 are copies
    >>> q = np.array([[1, 0]], np.float32)
    >>> truth = Hits(np.array([[0, 2]]), np.array([[1.0, 0.6]], np.float32))
    >>> got = Hits(np.array([[1, 2]]), np.array([[1.0, 0.6]], np.float32))
    >>> tie_aware_recall(got, truth, v, q).tolist()
    [1.0]
    """
    t_ids = truth.ids
    n_true = np.count_nonzero(t_ids >= 0, axis=1)
    last = t_ids[np.arange(t_ids.shape[0]), np.maximum(n_true - 1, 0)]
    kth = np.einsum("ij,ij->i", q, vectors[np.maximum(last, 0)])
    ids = hits.ids
    got = np.einsum("ij,ikj->ik", q, vectors[np.maximum(ids, 0)])
    hit = (ids >= 0) & (got >= kth[:, None])
    counted = np.minimum(np.count_nonzero(hit, axis=1), n_true)
    return np.where(n_true > 0, counted / np.maximum(n_true, 1), 1.0).astype(np.float64)
