"""The prove stage: the seed's claims, checked on every run.

Two kinds of check. *Property claims* run over random rankings, K and predicates against both the
per-list definitions (`arecall.core.measures`, `arecall.core.placed_lists`) and the batch code the
pipeline actually used (`arecall.core.placed_lists.place_all`, `arecall.core.scoring.score_pairs`).
*Data claims* check the run's own lists and scores for every query-principal pair and K.

The property search is vectorised: each claim draws its cases from its own seeded generator, and
every claim's cases go through the batch kernels together, in one call, laid side by side as the
queries of one collection (each case on its own block of documents). So a 200-case search per
claim costs a fraction of a second, the same cases are checked on every run, and ``proof.json``
is byte-identical between runs. A failed claim names its smallest counterexample. The deep,
shrinking search over the same claims (Hypothesis, one case per batch call) is in the test suite
(tests/pipeline/test_proof.py); it imports nothing here but the claims.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp
from tqdm import tqdm

from arecall.core.engine import Engine, LocalEngine
from arecall.core.errors import ArecallError
from arecall.core.measures import (
    PIPELINE,
    Judged,
    authorized_recall_at_k,
    ndcg_at_k,
    precision_at_k,
    recall_at_k,
    unusable_fraction_at_k,
)
from arecall.core.placed_lists import PlacedLists, place_all, post_filter, pre_filter
from arecall.core.ranking import rank_queries

if TYPE_CHECKING:
    from arecall.core.ranking import Ranking
from arecall.core.scoring import (
    BAR_CELLS,
    PairScores,
    _score_block,
    block_lists,
    principal_bytes,
    progressed,
    query_scores,
    score_pairs,
)

__all__ = [
    "PROPERTIES",
    "Batched",
    "Case",
    "ClaimResult",
    "RunData",
    "batched",
    "check_properties",
    "check_run",
    "check_run_file",
    "failures",
    "random_cases",
]

#: Cases hold rankings over at most this many items; K goes up to two past it.
MAX_ITEMS = 24
#: The property search's seed (claim i draws from ``default_rng([SEED, i])``).
SEED = 20240917


@dataclass(frozen=True)
class ClaimResult:
    """One checked claim: what it says, how many examples were tried, and a counterexample."""

    claim: str
    statement: str
    kind: str
    examples: int
    passed: bool
    counterexample: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Case:
    """A random ranking over ``n`` items, a predicate (``allowed``), a relevant set and K."""

    ranking: tuple[int, ...]
    allowed: frozenset[int]
    relevant: frozenset[int]
    k: int

    def ids(self) -> tuple[list[str], set[str], set[str]]:
        return (
            [f"d{i}" for i in self.ranking],
            {f"d{i}" for i in self.allowed},
            {f"d{i}" for i in self.relevant},
        )

    @property
    def items(self) -> int:
        """How many items the case mentions (its document universe is 0 … items − 1)."""
        return max([*self.ranking, *self.allowed, *self.relevant, -1]) + 1

    def size(self) -> tuple[int, int, int]:
        """An order on cases, smallest first: the counterexample a failed claim reports."""
        return (len(self.ranking), len(self.allowed) + len(self.relevant), self.k)


def random_cases(n: int, seed: Sequence[int] | int, max_items: int = MAX_ITEMS) -> list[Case]:
    """``n`` random cases from a seeded generator, edge cases included.

    The number of items is uniform in 0 … ``max_items``; the ranking is a random permutation
    cut at a random depth (the whole of it one time in five); each of the predicate and the
    relevant set is empty, everything, or a random subset of random density; K is uniform in
    1 … ``max_items + 2``, so K past the ranking's end is tried too.

    Examples
    --------
    >>> random_cases(2, seed=1) == random_cases(2, seed=1)
    True
    >>> all(1 <= c.k <= MAX_ITEMS + 2 and c.items <= MAX_ITEMS for c in random_cases(50, seed=2))
    True
    """
    rng = np.random.default_rng(seed)
    size = rng.integers(0, max_items + 1, n)
    column = np.arange(max_items)
    inside = column[None, :] < size[:, None]
    order = np.argsort(np.where(inside, rng.random((n, max_items)), 2.0), axis=1, kind="stable")
    depth = np.where(rng.random(n) < 0.2, size, (rng.random(n) * (size + 1)).astype(np.int64))
    mode, density = rng.random((2, n)), rng.random((2, n))
    density = np.where(mode < 0.15, 0.0, np.where(mode < 0.3, 1.0, density))
    member = (rng.random((2, n, max_items)) < density[:, :, None]) & inside[None]
    k = rng.integers(1, max_items + 3, n)
    return [
        Case(
            ranking=tuple(order[c, : depth[c]].tolist()),
            allowed=frozenset(np.flatnonzero(member[0, c]).tolist()),
            relevant=frozenset(np.flatnonzero(member[1, c]).tolist()),
            k=int(k[c]),
        )
        for c in range(n)
    ]


@dataclass(frozen=True)
class Batched:
    """What the pipeline's batch code returned for one case: its lists at K and its metrics."""

    post: list[str]
    pre: list[str]
    metrics: dict[str, float]


def _arrays(cases: Sequence[Case]) -> tuple[sp.csr_matrix, sp.csr_matrix, sp.csr_matrix, int]:
    """The cases as one collection: case c is query c over documents c·W … c·W + W − 1.

    Returns scores (queries × documents, rank 1 scoring highest), the one principal's ACL, the
    relevance matrix, and W.
    """
    width = max([c.items for c in cases] + [1])
    n_docs = len(cases) * width
    lengths = np.array([len(c.ranking) for c in cases], dtype=np.int64)
    docs = np.array([i for c in cases for i in c.ranking], dtype=np.int64)
    offset = np.repeat(np.arange(len(cases), dtype=np.int64) * width, lengths)
    first = np.repeat(np.cumsum(lengths) - lengths, lengths)
    score = np.repeat(lengths, lengths) - (np.arange(len(docs)) - first)  # len … 1: ranked
    indptr = np.concatenate(([0], np.cumsum(lengths)))
    scores = sp.csr_matrix((score.astype(np.float64), docs + offset, indptr), (len(cases), n_docs))
    scores.sort_indices()
    allowed = np.zeros(n_docs, dtype=bool)
    allowed[[c_i * width + i for c_i, c in enumerate(cases) for i in c.allowed]] = True
    rel_rows = [c_i for c_i, c in enumerate(cases) for _ in c.relevant]
    rel_cols = [c_i * width + i for c_i, c in enumerate(cases) for i in sorted(c.relevant)]
    relevance = sp.csr_matrix(
        (np.ones(len(rel_rows)), (rel_rows, rel_cols)), shape=(len(cases), n_docs)
    )
    return scores, sp.csr_matrix(allowed[None, :]), relevance, width


def _kernels(cases: Sequence[Case]) -> tuple[PlacedLists, PairScores, int]:
    """Rank, place and score every case in one call of each batch kernel, as the stages do."""
    scores, acl, relevance, width = _arrays(cases)
    ks = tuple(sorted({c.k for c in cases}))
    ranking = rank_queries([scores], n_queries=len(cases), relevance=relevance)
    lists = place_all(ranking, acl, ks[-1])
    return lists, score_pairs(ranking, lists, relevance, acl, ks), width


def batched(cases: Sequence[Case]) -> list[Batched]:
    """Each case's lists at its K and its metrics from one run of the batch kernels on all.

    Examples
    --------
    >>> case = Case(ranking=(2, 0, 1), allowed=frozenset({0, 1}), relevant=frozenset({0}), k=2)
    >>> (b,) = batched([case])
    >>> b.post, b.pre, b.metrics["arecall_post"], b.metrics["arecall_pre"]
    (['d0'], ['d0', 'd1'], 1.0, 1.0)
    """
    if not cases:
        return []
    lists, scores, width = _kernels(cases)
    column = {k: i for i, k in enumerate(scores.ks)}
    out = []
    for c, case in enumerate(cases):
        base, k = c * width, case.k
        post = lists.post[0, c][(lists.post[0, c] >= 0) & (lists.post_rank[0, c] < k)]
        pre = lists.pre[0, c, :k]
        out.append(
            Batched(
                post=[f"d{i - base}" for i in post.tolist()],
                pre=[f"d{i - base}" for i in pre[pre >= 0].tolist()],
                metrics={name: float(arr[0, c, column[k]]) for name, arr in scores.metrics.items()},
            )
        )
    return out


def _batch(case: Case) -> tuple[PlacedLists, PairScores]:
    """One case alone through the batch kernels, at its own K (for check_run's examples)."""
    n = case.items + (case.items == 0)
    scores = np.zeros((1, n))
    scores[0, list(case.ranking)] = np.arange(len(case.ranking), 0, -1)  # descending = ranked
    acl = sp.csr_matrix(np.isin(np.arange(n), list(case.allowed))[None, :].astype(bool))
    rel = sp.csr_matrix(np.isin(np.arange(n), list(case.relevant))[None, :].astype(np.float64))
    ranking = rank_queries([sp.csr_matrix(scores)], n_queries=1, relevance=rel)
    lists = place_all(ranking, acl, case.k)
    return lists, score_pairs(ranking, lists, rel, acl, (case.k,))


Claim = Callable[[Case, Batched], bool]


def _post_subset_of_pre(case: Case, batch: Batched) -> bool:
    ranking, allowed, _ = case.ids()
    return set(post_filter(ranking, allowed.__contains__, case.k)) <= set(
        pre_filter(ranking, allowed.__contains__, case.k)
    )


def _gap_non_negative(case: Case, batch: Batched) -> bool:
    ranking, allowed, relevant = case.ids()
    ok = allowed.__contains__
    post = authorized_recall_at_k(post_filter(ranking, ok, case.k), relevant, ok, case.k)
    pre = authorized_recall_at_k(pre_filter(ranking, ok, case.k), relevant, ok, case.k)
    m = batch.metrics
    return pre - post >= 0 and m["arecall_pre"] - m["arecall_post"] >= 0


def _open_equals_recall(case: Case, batch: Batched) -> bool:
    ranking, _, relevant = case.ids()
    everything = set(ranking) | relevant
    return authorized_recall_at_k(
        ranking, relevant, everything.__contains__, case.k
    ) == recall_at_k(ranking, relevant, case.k)


def _in_unit_interval(case: Case, batch: Batched) -> bool:
    ranking, allowed, relevant = case.ids()
    ok, k = allowed.__contains__, case.k
    values = [
        recall_at_k(ranking, relevant, k),
        precision_at_k(ranking, relevant, k),
        ndcg_at_k(ranking, relevant, k),
        unusable_fraction_at_k(ranking, ok, k),
        authorized_recall_at_k(post_filter(ranking, ok, k), relevant, ok, k),
        authorized_recall_at_k(pre_filter(ranking, ok, k), relevant, ok, k),
        *batch.metrics.values(),
    ]
    return all(0.0 <= v <= 1.0 for v in values)


def _batch_equals_reference(case: Case, batch: Batched) -> bool:
    """The lists equal the per-list placements, and every measure the batch kernels report
    equals its registered per-list definition (`arecall.core.measures.PIPELINE`): a measure
    added to the registry is proved here with no line of its own."""
    ranking, allowed, relevant = case.ids()
    ok, k = allowed.__contains__, case.k
    if batch.post != post_filter(ranking, ok, k) or batch.pre != pre_filter(ranking, ok, k):
        return False
    judged = Judged(ranking, dict.fromkeys(relevant, 1.0), ok)
    for name, value in batch.metrics.items():
        reference = PIPELINE[name].reference if name in PIPELINE else None
        if reference is None or abs(value - reference(judged, k)) > 1e-12:
            return False
    return True


#: The property claims: name, statement, and the check of one case against its batch result.
PROPERTIES: tuple[tuple[str, str, Claim], ...] = (
    (
        "post_subset_of_pre",
        "L_K^post ⊆ L_K^pre for every ranking, K and predicate",
        _post_subset_of_pre,
    ),
    (
        "gap_non_negative",
        "Δ@K = ARecall^pre@K − ARecall^post@K ≥ 0 (reference and batch code)",
        _gap_non_negative,
    ),
    ("open_predicate_equals_recall", "A ≡ 1 ⇒ ARecall@K = Recall@K", _open_equals_recall),
    (
        "metrics_in_unit_interval",
        "every metric lies in [0, 1] (reference and batch code)",
        _in_unit_interval,
    ),
    (
        "batch_equals_reference",
        "the pipeline's batch code equals the per-list definitions",
        _batch_equals_reference,
    ),
)


def _batched_or_crash(cases: Sequence[Case]) -> list[Batched] | tuple[Case | None, str]:
    """`batched` on all cases, or — if the kernels crash — the smallest case that crashes them."""
    try:
        return batched(cases)
    except Exception as exc:  # the code under test crashed: find a case that shows it alone
        for case in sorted(cases, key=Case.size):
            try:
                batched([case])
            except Exception as alone:
                return case, f"raised {type(alone).__name__}: {alone}"
        return None, f"the batch of {len(cases)} cases raised {type(exc).__name__}: {exc}"


def check_cases(
    name: str,
    statement: str,
    claim: Claim,
    cases: Sequence[Case],
    results: list[Batched] | tuple[Case | None, str] | None = None,
) -> ClaimResult:
    """Check one claim on ``cases``; a failure names the smallest failing case.

    ``results`` are the cases' batch results if already computed (`check_properties` runs the
    kernels once for every claim), else they are computed here. A crash of the code under test,
    batch or reference, refutes the claim too.

    Examples
    --------
    >>> name, statement, claim = PROPERTIES[0]
    >>> check_cases(name, statement, claim, random_cases(20, seed=0)).passed
    True
    """
    if results is None:
        results = _batched_or_crash(cases)
    if isinstance(results, tuple):
        bad, detail = results
        example = detail if bad is None else f"{bad!r} {detail}"
        return ClaimResult(name, statement, "property", len(cases), False, example)
    failed: list[tuple[tuple[int, int, int], int, str]] = []
    for i, (case, batch) in enumerate(zip(cases, results, strict=True)):
        try:
            if not claim(case, batch):
                failed.append((case.size(), i, repr(case)))
        except Exception as exc:
            failed.append((case.size(), i, f"{case!r} raised {type(exc).__name__}: {exc}"))
    if failed:
        return ClaimResult(name, statement, "property", len(cases), False, min(failed)[2])
    return ClaimResult(name, statement, "property", len(cases), True)


def check_properties(max_examples: int = 300) -> list[ClaimResult]:
    """Check every property claim on ``max_examples`` random cases of its own.

    Every claim's cases go through the batch kernels in one call; the per-list definitions run
    per case. Nothing is written anywhere.

    Examples
    --------
    >>> [r.passed for r in check_properties(max_examples=5)]
    [True, True, True, True, True]
    """
    if max_examples <= 0:
        raise ArecallError(f"evaluation.proof.max_examples: must be positive, got {max_examples}")
    drawn = [random_cases(max_examples, seed=(SEED, i)) for i in range(len(PROPERTIES))]
    everything = [case for cases in drawn for case in cases]
    results = _batched_or_crash(everything)
    out = []
    for i, ((name, statement, claim), cases) in enumerate(zip(PROPERTIES, drawn, strict=True)):
        if isinstance(results, tuple):
            out.append(check_cases(name, statement, claim, cases))  # find this claim's crash
            continue
        mine = results[i * max_examples : (i + 1) * max_examples]
        out.append(check_cases(name, statement, claim, cases, mine))
    return out


@dataclass(frozen=True)
class RunData:
    """One run's placed lists and scores, with the names a counterexample is reported by.

    ``authorized`` is the (principals × documents) predicate, a sparse bool matrix (dense at
    a million documents it would be the largest array of the stage); lists and scores are
    indexed (principal, query, ...) as in `PlacedLists` and `PairScores`.
    """

    lists: PlacedLists
    scores: PairScores
    authorized: sp.csr_matrix
    query_ids: np.ndarray
    principals: np.ndarray
    doc_ids: np.ndarray

    @property
    def pairs(self) -> int:
        """The number of query-principal pairs."""
        n_p, n_q, _ = self.lists.pre.shape
        return n_p * n_q

    def where(self, p: int, q: int, k: int | None = None) -> str:
        """Name a pair (and K) for a counterexample."""
        at = f", K={k}" if k is not None else ""
        return f"principal {self.principals[p]!r}, query {self.query_ids[q]!r}{at}"


def _subset_violation(
    pre: np.ndarray,
    pre_rank: np.ndarray,
    post: np.ndarray,
    post_rank: np.ndarray,
    ks: np.ndarray,
    width: int,
) -> np.ndarray:
    """Where post ⊄ pre: for each post item, whether it is missing from the pre list at the
    smallest K that shows it (rows are (principal, query) pairs, columns list slots).

    An item at rank r is in post at every K > r, and the pre list at K is its first K items, so
    "post ⊆ pre at every K" is, per item, "found in pre at a slot below the smallest K > r".
    An item sitting in the same slot of the pre list (same document, same rank) below that K
    is found without a search — in correct lists every post item is — and every other item is
    searched for: pre ranks ascend within a list, so row * (width + 1) + rank is sorted
    already, and one binary search finds it or shows it missing. Returns that smallest K per
    missing item, 0 where the item is fine.
    """
    rows, k_max = pre.shape
    at = np.searchsorted(ks, post_rank, side="right")  # first K index with K > rank
    in_post = (post >= 0) & (post_rank >= 0) & (at < len(ks))
    k_first = ks[np.minimum(at, len(ks) - 1)]
    slot = np.arange(k_max)[None, :]
    found = (pre == post) & (pre_rank == post_rank) & (slot < k_first)
    rest = in_post & ~found
    if rest.any():
        row = np.arange(rows, dtype=np.int64)[:, None] * (width + 1)
        keys = (row + np.where(pre_rank >= 0, pre_rank, width)).ravel()
        probe = (row + np.where(in_post, post_rank, 0))[rest]
        pos = np.minimum(np.searchsorted(keys, probe), len(keys) - 1)
        found[rest] = (
            (keys[pos] == probe) & (pre.ravel()[pos] == post[rest]) & (pos % k_max < k_first[rest])
        )
    return np.where(in_post & ~found, k_first, 0)


def _check_block(
    start: int,
    stop: int,
    block: dict[str, Any],
    *,
    ks: tuple[int, ...],
    width: int | None = None,
    lists_path: str | None = None,
    kernel: dict[str, Any] | None = None,
) -> dict[str, tuple[Any, ...] | None]:
    """The first counterexample of each data claim among principals start … stop − 1.

    Returns ``subset``: (principal, query, slot, K, document) of the first pair (principal,
    then K, then query and slot) whose post list at K holds an item its pre list at K lacks;
    ``leak``: (principal, 0 for pre / 1 for post, query, slot, document) of the first
    unauthorized item; ``gap``: (principal, query, K index, Δ) of the first Δ@K < 0 — ``None``
    where the claim holds for the whole block. The lists come with the block or are read from
    ``lists_path`` where the block runs; Δ comes with it (``block["gap"]``) or is scored there
    from the lists (``kernel``: `arecall.core.scoring.query_scores`'s). Nothing per pair
    comes back.
    """
    lists = block_lists(start, stop, block, lists_path)
    n_b, n_q, k_max = lists["pre"].shape
    if width is None:  # any width above every rank finds the same items
        width = int(max(lists["pre_rank"].max(initial=0), lists["post_rank"].max(initial=0))) + 1
    k_arr = np.asarray(ks, dtype=np.int64)
    flat = {name: a.reshape(n_b * n_q, k_max) for name, a in lists.items()}
    bad_k = _subset_violation(
        flat["pre"], flat["pre_rank"], flat["post"], flat["post_rank"], k_arr, width
    ).reshape(n_b, n_q, k_max)
    subset = None
    bad = bad_k > 0
    if bad.any():
        i = int(np.flatnonzero(bad.any(axis=(1, 2)))[0])
        k = int(bad_k[i][bad[i]].min())
        q, j = (int(x[0]) for x in np.nonzero(bad_k[i] == k))
        subset = (start + i, q, j, k, int(lists["post"][i, q, j]))
    dense = sp.csr_matrix(block["acl"], dtype=bool).toarray()
    who = np.arange(n_b)[:, None, None]
    leaks = []
    for name in ("pre", "post"):
        items = lists[name]
        leaks.append((items >= 0) & ~dense[who, np.maximum(items, 0)])
    leak = None
    any_leak = np.stack([x.any(axis=(1, 2)) for x in leaks], axis=1)  # (block, pre/post)
    if any_leak.any():
        i, which = (int(x[0]) for x in np.nonzero(any_leak))
        q, j = (int(x[0]) for x in np.nonzero(leaks[which][i]))
        leak = (start + i, which, q, j, int(lists[("pre", "post")[which]][i, q, j]))
    if block.get("gap") is not None:
        gap = block["gap"]
    else:
        if kernel is None:
            raise ValueError("a block needs its Δ or the scoring kernel")
        scored = _score_block(start, stop, {"lists": lists, "acl": block["acl"]}, **kernel)
        gap = scored["arecall_pre"] - scored["arecall_post"]
    neg = np.argwhere(gap < 0)
    first_gap = None
    if len(neg):
        i, q, at = (int(x) for x in neg[0])
        first_gap = (start + i, q, at, float(gap[i, q, at]))
    return {"subset": subset, "leak": leak, "gap": first_gap}


def _run_claims(run: RunData, engine: Engine | None) -> list[ClaimResult]:
    """post ⊆ pre per K, Δ ≥ 0 and no unauthorized item, by blocks of principals (any engine)."""
    lists, ks = run.lists, run.scores.ks
    n_p, n_q, k_max = lists.pre.shape
    width = int(max(lists.pre_rank.max(initial=0), lists.post_rank.max(initial=0))) + 1
    acl = sp.csr_matrix(run.authorized, dtype=bool)
    runner = engine if engine is not None else LocalEngine()
    bar = n_p > 1 and n_p * n_q * width >= BAR_CELLS  # a terminal shows a bar on big runs
    metrics = run.scores.metrics

    def block_data(start: int, stop: int) -> dict[str, Any]:
        return {
            "lists": {
                f: getattr(lists, f)[start:stop] for f in ("pre", "pre_rank", "post", "post_rank")
            },
            "acl": acl[start:stop],
            "gap": metrics["arecall_pre"][start:stop] - metrics["arecall_post"][start:stop],
        }

    with tqdm(total=n_p, desc="prove", unit="principal", disable=None if bar else True) as t:
        found = runner.map_blocks(
            _check_block,
            n_p,
            shared={"ks": ks, "width": width},
            block_data=progressed(block_data, t),
            per_principal=principal_bytes(n_q, k_max),
        )
    return _claims(found, n_pairs=run.pairs, ks=ks, where=run.where, doc_ids=run.doc_ids)


def _claims(
    found: list[dict[str, Any]],
    *,
    n_pairs: int,
    ks: tuple[int, ...],
    where: Callable[..., str],
    doc_ids: np.ndarray,
) -> list[ClaimResult]:
    """The data claims from the blocks' first counterexamples (blocks in principal order, so
    the first is the one a single pass finds, whatever the engine and block size)."""
    subset, leak, gap = (
        next((f[name] for f in found if f[name] is not None), None)
        for name in ("subset", "leak", "gap")
    )
    bad_subset = bad_leak = bad_gap = None
    if subset is not None:
        p, q, _, k, doc = subset
        bad_subset = f"{where(p, q, k)}: post item {doc_ids[doc]!r} not in pre"
    if leak is not None:
        p, which, q, _, doc = leak
        name = ("pre", "post")[which]
        bad_leak = f"{where(p, q)}: {name} list holds unauthorized {doc_ids[doc]!r}"
    if gap is not None:
        p, q, i, value = gap
        bad_gap = f"{where(p, q, ks[i])}: Δ = {value:+.6f}"
    return [
        ClaimResult(
            "run_post_subset_of_pre",
            "post ⊆ pre on this run's lists",
            "data",
            n_pairs * len(ks),
            bad_subset is None,
            bad_subset,
        ),
        ClaimResult(
            "run_gap_non_negative",
            "Δ@K ≥ 0 for every pair on this run",
            "data",
            n_pairs * len(ks),
            bad_gap is None,
            bad_gap,
        ),
        ClaimResult(
            "run_lists_authorized",
            "no pre or post list holds an unauthorized item",
            "data",
            n_pairs,
            bad_leak is None,
            bad_leak,
        ),
    ]


def check_run(
    lists: PlacedLists,
    scores: PairScores,
    acl: sp.spmatrix,
    *,
    query_ids: np.ndarray,
    principals: np.ndarray,
    doc_ids: np.ndarray,
    engine: Engine | None = None,
) -> list[ClaimResult]:
    """Check the run's own lists and scores for every query-principal pair and K.

    The property search checks the code on random cases; this checks the arrays this run
    actually wrote, so a bug the search missed still cannot reach the reports. The per-list
    claims run by blocks of principals on ``engine`` (`arecall.core.engine`; this process by
    default); the first counterexample is the same whatever the engine and block size.
    (`check_run_file` checks a lists file where the blocks run, for the prove stage.)

    Examples
    --------
    >>> case = Case(ranking=(2, 0, 1), allowed=frozenset({0, 1}), relevant=frozenset({0}), k=2)
    >>> lists, scores = _batch(case)
    >>> names = {"query_ids": np.array(["q1"], dtype=object),
    ...          "principals": np.array(["ann"], dtype=object),
    ...          "doc_ids": np.array(["d0", "d1", "d2"], dtype=object)}
    >>> for r in check_run(lists, scores, sp.csr_matrix([[True, True, False]]), **names):
    ...     print(r.claim, r.examples, r.passed)
    run_post_subset_of_pre 1 True
    run_gap_non_negative 1 True
    run_lists_authorized 1 True
    >>> check_run(lists, scores, sp.csr_matrix([[False, True, False]]), **names)[2].counterexample
    "principal 'ann', query 'q1': pre list holds unauthorized 'd0'"
    """
    run = RunData(
        lists,
        scores,
        sp.csr_matrix(acl, dtype=bool),
        query_ids=query_ids,
        principals=principals,
        doc_ids=doc_ids,
    )
    return _run_claims(run, engine)


def check_run_file(
    lists_path: str | Path,
    ranking: Ranking,
    relevance: sp.spmatrix,
    acl: sp.spmatrix,
    ks: tuple[int, ...],
    *,
    query_ids: np.ndarray,
    principals: np.ndarray,
    doc_ids: np.ndarray,
    engine: Engine,
) -> list[ClaimResult]:
    """`check_run`'s claims on the lists file the filter stage wrote, each block of principals
    checked where it runs: it reads its own lists from the file, scores them again (the batch
    code on this run's lists, independently of what the score stage wrote) and sends back its
    first counterexamples only. The same claims and counterexamples as `check_run` on the
    loaded lists and `arecall.core.scoring.score_pairs`' scores, whatever the engine.
    """
    n_p, n_q, k_max = PlacedLists.shape_of(lists_path)
    acl_csr = sp.csr_matrix(acl, dtype=bool)
    if acl_csr.shape[0] != n_p or n_q != ranking.n_queries:
        raise ArecallError(
            f"{lists_path}: lists of {n_p} principals × {n_q} queries, but the corpus has "
            f"{acl_csr.shape[0]} × {ranking.n_queries}; run the filter stage again"
        )
    kernel = query_scores(ranking, sp.csr_matrix(relevance), ks).kernel
    bar = n_p > 1 and n_p * n_q * k_max >= BAR_CELLS

    def where(p: int, q: int, k: int | None = None) -> str:
        at = f", K={k}" if k is not None else ""
        return f"principal {principals[p]!r}, query {query_ids[q]!r}{at}"

    with tqdm(total=n_p, desc="prove", unit="principal", disable=None if bar else True) as t:
        found = engine.map_blocks(
            _check_block,
            n_p,
            shared={
                "ks": tuple(int(k) for k in ks),
                "lists_path": str(Path(lists_path).absolute()),
                "kernel": kernel,
            },
            block_data=progressed(lambda s, e: {"acl": acl_csr[s:e]}, t),
            per_principal=principal_bytes(n_q, k_max),
        )
    return _claims(found, n_pairs=n_p * n_q, ks=tuple(ks), where=where, doc_ids=doc_ids)


def failures(results: list[ClaimResult]) -> list[ClaimResult]:
    """The claims that did not hold."""
    return [r for r in results if not r.passed]
