"""Per-list retrieval metrics, Authorized Recall@K among them, defined over a predicate.

These are the reference definitions: plain Python over one ranked list, written to be read.
The pipeline computes the same quantities for every query-principal pair at once in
`arecall.core.scoring`; a test holds the two to exact agreement.

Conventions (stated, because they move the mean):

* ``authorized_recall_at_k`` is 1.0 when nothing relevant is authorized (R_A = ∅): a system is
  not faulted for not surfacing what it must not surface. Reports always show the restricted mean
  over pairs with R_A ≠ ∅ and its count beside it.
* ``recall_at_k`` is 1.0 on an empty relevant set, for the same reason and so that
  ARecall@K = Recall@K when every item is authorized.
* ``precision_at_k`` and ``unusable_fraction_at_k`` divide by K, never by what came back, so a
  short list cannot flatter them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

__all__ = [
    "Authorized",
    "authorized_recall_at_k",
    "ndcg_at_k",
    "precision_at_k",
    "recall_at_k",
    "reciprocal_rank",
    "unusable_fraction_at_k",
]

Authorized = Callable[[str], bool]
"""An authorization predicate: may this principal use the item with this id?"""


def _check_k(k: int) -> None:
    if k <= 0:
        raise ValueError(f"k must be a positive integer, got {k}")


def recall_at_k(retrieved: Sequence[str], relevant: Iterable[str], k: int) -> float:
    """Recall@K = |R ∩ L_K| / |R|, authorization-blind; 1.0 when R is empty.

    Examples
    --------
    >>> recall_at_k(["a", "b", "c"], {"a", "c", "z"}, 2)
    0.3333333333333333
    """
    _check_k(k)
    rel = set(relevant)
    if not rel:
        return 1.0
    return len(rel.intersection(retrieved[:k])) / len(rel)


def authorized_recall_at_k(
    retrieved: Sequence[str], relevant: Iterable[str], authorized: Authorized, k: int
) -> float:
    """ARecall@K = |R_A ∩ L_K| / |R_A| with R_A = {d ∈ R : authorized(d)}; 1.0 when R_A = ∅.

    Retrieved-but-unauthorized items are neither credited nor penalised here; they are
    `unusable_fraction_at_k`. With ``authorized`` identically true this is `recall_at_k`.

    Examples
    --------
    >>> allowed = {"a", "b"}.__contains__
    >>> authorized_recall_at_k(["c", "a"], {"a", "b", "c"}, allowed, 2)
    0.5
    """
    _check_k(k)
    allowed_relevant = {d for d in set(relevant) if authorized(d)}
    if not allowed_relevant:
        return 1.0
    return len(allowed_relevant.intersection(retrieved[:k])) / len(allowed_relevant)


def unusable_fraction_at_k(retrieved: Sequence[str], authorized: Authorized, k: int) -> float:
    """U@K = |{d ∈ L_K : ¬authorized(d)}| / K: the share of the K slots the asker cannot use.

    Computed on the unfiltered ranking: it measures what an authorization-blind system shows.

    Examples
    --------
    >>> unusable_fraction_at_k(["a", "x", "y"], {"a"}.__contains__, 4)
    0.5
    """
    _check_k(k)
    return sum(1 for d in retrieved[:k] if not authorized(d)) / k


def precision_at_k(retrieved: Sequence[str], relevant: Iterable[str], k: int) -> float:
    """P@K = |R ∩ L_K| / K (divides by K, not by the length of the list).

    Examples
    --------
    >>> precision_at_k(["a", "b"], {"a"}, 4)
    0.25
    """
    _check_k(k)
    return len(set(relevant).intersection(retrieved[:k])) / k


def reciprocal_rank(retrieved: Sequence[str], relevant: Iterable[str]) -> float:
    """1 / rank of the first relevant item; 0.0 when none is retrieved.

    Examples
    --------
    >>> reciprocal_rank(["x", "a"], {"a"})
    0.5
    """
    rel = set(relevant)
    for rank, item in enumerate(retrieved, start=1):
        if item in rel:
            return 1.0 / rank
    return 0.0


def ndcg_at_k(retrieved: Sequence[str], relevant: Iterable[str], k: int) -> float:
    """Binary nDCG@K with log2(rank + 1) discount; 0.0 when R is empty.

    Examples
    --------
    >>> round(ndcg_at_k(["x", "a"], {"a"}, 2), 4)
    0.6309
    """
    _check_k(k)
    rel = set(relevant)
    dcg = sum(
        1.0 / math.log2(rank + 1) for rank, item in enumerate(retrieved[:k], start=1) if item in rel
    )
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(len(rel), k) + 1))
    return dcg / ideal if ideal else 0.0
