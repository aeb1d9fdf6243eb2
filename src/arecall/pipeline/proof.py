"""The prove stage: the seed's claims, checked on every run.

Two kinds of check. *Property claims* run Hypothesis over random rankings, K and predicates
against both the per-list definitions (`arecall.core.measures`, `arecall.core.placement`) and the
batch code the pipeline actually used (`arecall.core.placement.place_all`,
`arecall.core.scoring.score_pairs`).
*Data claims* check the run's own lists and scores for every query-principal pair and K.
Hypothesis runs derandomized with no example database (and its caches in a temporary directory,
not the working directory), so the same code checks the same examples and ``proof.json`` is
byte-identical between runs. A failed claim names its counterexample.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir, storage_directory

from arecall.core.errors import ArecallError
from arecall.core.measures import (
    authorized_recall_at_k,
    ndcg_at_k,
    precision_at_k,
    recall_at_k,
    unusable_fraction_at_k,
)
from arecall.core.placement import PlacedLists, place_all, post_filter, pre_filter
from arecall.core.ranking import rank_queries
from arecall.core.scoring import PairScores, score_pairs

__all__ = ["Case", "ClaimResult", "RunData", "check_properties", "check_run", "failures"]


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


@st.composite
def cases(draw: Any, max_items: int = 24) -> Case:
    n = draw(st.integers(min_value=0, max_value=max_items))
    items = list(range(n))
    ranked = draw(st.permutations(items))
    depth = draw(st.integers(min_value=0, max_value=n))
    subset = st.frozensets(st.sampled_from(items)) if items else st.just(frozenset[int]())
    return Case(
        ranking=tuple(ranked[:depth]),
        allowed=draw(subset),
        relevant=draw(subset),
        k=draw(st.integers(min_value=1, max_value=max_items + 2)),
    )


def _batch(case: Case) -> tuple[PlacedLists, PairScores]:
    n = max([*case.ranking, *case.allowed, *case.relevant, 0]) + 1
    scores = np.zeros((1, n))
    scores[0, list(case.ranking)] = np.arange(len(case.ranking), 0, -1)  # descending = ranked
    acl = sp.csr_matrix(np.isin(np.arange(n), list(case.allowed))[None, :].astype(bool))
    rel = sp.csr_matrix(np.isin(np.arange(n), list(case.relevant))[None, :].astype(np.float64))
    ranking = rank_queries([sp.csr_matrix(scores)], n_queries=1, relevance=rel)
    lists = place_all(ranking, acl, case.k)
    return lists, score_pairs(ranking, lists, rel, acl, (case.k,))


def _post_subset_of_pre(case: Case) -> bool:
    ranking, allowed, _ = case.ids()
    return set(post_filter(ranking, allowed.__contains__, case.k)) <= set(
        pre_filter(ranking, allowed.__contains__, case.k)
    )


def _gap_non_negative(case: Case) -> bool:
    ranking, allowed, relevant = case.ids()
    ok = allowed.__contains__
    post = authorized_recall_at_k(post_filter(ranking, ok, case.k), relevant, ok, case.k)
    pre = authorized_recall_at_k(pre_filter(ranking, ok, case.k), relevant, ok, case.k)
    _, batch = _batch(case)
    m = batch.metrics
    return pre - post >= 0 and float((m["arecall_pre"] - m["arecall_post"]).min()) >= 0


def _open_equals_recall(case: Case) -> bool:
    ranking, _, relevant = case.ids()
    everything = set(ranking) | relevant
    return authorized_recall_at_k(
        ranking, relevant, everything.__contains__, case.k
    ) == recall_at_k(ranking, relevant, case.k)


def _in_unit_interval(case: Case) -> bool:
    ranking, allowed, relevant = case.ids()
    ok, k = allowed.__contains__, case.k
    values = [
        recall_at_k(ranking, relevant, k),
        precision_at_k(ranking, relevant, k),
        ndcg_at_k(ranking, relevant, k),
        unusable_fraction_at_k(ranking, ok, k),
        authorized_recall_at_k(post_filter(ranking, ok, k), relevant, ok, k),
        authorized_recall_at_k(pre_filter(ranking, ok, k), relevant, ok, k),
    ]
    _, batch = _batch(case)
    values += [float(v) for arr in batch.metrics.values() for v in arr.ravel()]
    return all(0.0 <= v <= 1.0 for v in values)


def _batch_equals_reference(case: Case) -> bool:
    ranking, allowed, relevant = case.ids()
    ok, k = allowed.__contains__, case.k
    lists, batch = _batch(case)
    m = {name: float(arr.ravel()[0]) for name, arr in batch.metrics.items()}
    post_ids = [
        f"d{i}"
        for i, r in zip(lists.post[0, 0], lists.post_rank[0, 0], strict=True)
        if i >= 0 and r < k
    ]
    pre_ids = [f"d{i}" for i in lists.pre[0, 0] if i >= 0]
    return (
        post_ids == post_filter(ranking, ok, k)
        and pre_ids == pre_filter(ranking, ok, k)
        and m["recall"] == recall_at_k(ranking, relevant, k)
        and m["precision"] == precision_at_k(ranking, relevant, k)
        and abs(m["ndcg"] - ndcg_at_k(ranking, relevant, k)) <= 1e-12
        and m["unusable"] == unusable_fraction_at_k(ranking, ok, k)
        and m["arecall_post"] == authorized_recall_at_k(post_ids, relevant, ok, k)
        and m["arecall_pre"] == authorized_recall_at_k(pre_ids, relevant, ok, k)
    )


PROPERTIES: tuple[tuple[str, str, Callable[[Case], bool]], ...] = (
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


def _run_property(
    name: str, statement: str, claim: Callable[[Case], bool], max_examples: int
) -> ClaimResult:
    tried = 0
    last: list[Case] = []

    @settings(
        max_examples=max_examples,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )
    @given(cases())
    def check(case: Case) -> None:
        nonlocal tried
        tried += 1
        last[:] = [case]
        assert claim(case)

    try:
        check()
    except AssertionError:
        return ClaimResult(name, statement, "property", tried, False, repr(last[0]))
    except Exception as exc:  # the code under test crashed: that refutes the claim too
        detail = f"{last[0]!r} raised {type(exc).__name__}: {exc}"
        return ClaimResult(name, statement, "property", tried, False, detail)
    return ClaimResult(name, statement, "property", tried, True)


@contextmanager
def _hypothesis_home_in_a_temporary_directory() -> Iterator[None]:
    """Send Hypothesis's on-disk caches to a directory deleted afterwards.

    Even with no example database, Hypothesis caches the constants it reads from local modules
    under ``./.hypothesis``; a pipeline stage must not leave that in the user's working
    directory. The cache only saves time, so the examples tried are the same either way.
    """
    previous = storage_directory(intent_to_write=False).home_directory
    with tempfile.TemporaryDirectory(prefix="arecall-hypothesis-") as home:
        set_hypothesis_home_dir(home)
        try:
            yield
        finally:
            set_hypothesis_home_dir(previous)


def check_properties(max_examples: int = 300) -> list[ClaimResult]:
    """Run every property claim with Hypothesis, writing nothing in the working directory.

    Examples
    --------
    >>> [r.passed for r in check_properties(max_examples=5)]
    [True, True, True, True, True]
    """
    if max_examples <= 0:
        raise ArecallError(f"evaluation.proof.max_examples: must be positive, got {max_examples}")
    with _hypothesis_home_in_a_temporary_directory():
        return [_run_property(n, s, c, max_examples) for n, s, c in PROPERTIES]


@dataclass(frozen=True)
class RunData:
    """One run's placed lists and scores, with the names a counterexample is reported by.

    ``authorized`` is the dense (principals × documents) predicate; lists and scores are
    indexed (principal, query, ...) as in `PlacedLists` and `PairScores`.
    """

    lists: PlacedLists
    scores: PairScores
    authorized: np.ndarray
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


def _run_post_subset_of_pre(run: RunData) -> ClaimResult:
    """post ⊆ pre, per K: every post item (rank < K) is among the first K pre items.

    Pre ranks ascend within a list, so query * (width + 1) + rank is sorted already: binary
    search, no sort. One principal at a time keeps the temporaries to queries × K.
    """
    lists, ks = run.lists, run.scores.ks
    n_p, n_q, _ = lists.pre.shape
    width = int(max(lists.pre_rank.max(initial=0), lists.post_rank.max(initial=0))) + 1
    row = np.arange(n_q, dtype=np.int64)[:, None] * (width + 1)
    bad: str | None = None
    for p, k in ((p, k) for p in range(n_p) for k in ks):
        pre_rank = lists.pre_rank[p, :, :k]
        keys = (row + np.where(pre_rank >= 0, pre_rank, width)).ravel()
        in_post = (lists.post[p] >= 0) & (lists.post_rank[p] < k)
        probe = row + np.where(in_post, lists.post_rank[p], 0)
        pos = np.minimum(np.searchsorted(keys, probe), len(keys) - 1)
        found = (keys[pos] == probe) & (lists.pre[p, :, :k].ravel()[pos] == lists.post[p])
        missing = in_post & ~found
        if missing.any():
            q, j = (int(x[0]) for x in np.nonzero(missing))
            item = run.doc_ids[lists.post[p, q, j]]
            bad = f"{run.where(p, q, k)}: post item {item!r} not in pre"
            break
    return ClaimResult(
        "run_post_subset_of_pre",
        "post ⊆ pre on this run's lists",
        "data",
        run.pairs * len(ks),
        bad is None,
        bad,
    )


def _run_gap_non_negative(run: RunData) -> ClaimResult:
    """Δ@K = ARecall^pre@K − ARecall^post@K ≥ 0 in the run's own scores."""
    scores = run.scores
    gap = scores.metrics["arecall_pre"] - scores.metrics["arecall_post"]
    neg = np.argwhere(gap < 0)
    bad: str | None = None
    if len(neg):
        p, q, i = (int(x) for x in neg[0])
        bad = f"{run.where(p, q, scores.ks[i])}: Δ = {gap[p, q, i]:+.6f}"
    return ClaimResult(
        "run_gap_non_negative",
        "Δ@K ≥ 0 for every pair on this run",
        "data",
        run.pairs * len(scores.ks),
        bad is None,
        bad,
    )


def _run_lists_authorized(run: RunData) -> ClaimResult:
    """No pre or post list holds an item its principal may not see."""
    n_p = run.lists.pre.shape[0]
    bad: str | None = None
    for p, name in ((p, name) for p in range(n_p) for name in ("pre", "post")):
        items = getattr(run.lists, name)[p]
        leak = (items >= 0) & ~run.authorized[p, np.maximum(items, 0)]
        if leak.any():
            q, j = (int(x[0]) for x in np.nonzero(leak))
            bad = f"{run.where(p, q)}: {name} list holds unauthorized {run.doc_ids[items[q, j]]!r}"
            break
    return ClaimResult(
        "run_lists_authorized",
        "no pre or post list holds an unauthorized item",
        "data",
        run.pairs,
        bad is None,
        bad,
    )


DATA_CLAIMS: tuple[Callable[[RunData], ClaimResult], ...] = (
    _run_post_subset_of_pre,
    _run_gap_non_negative,
    _run_lists_authorized,
)


def check_run(
    lists: PlacedLists,
    scores: PairScores,
    acl: sp.spmatrix,
    *,
    query_ids: np.ndarray,
    principals: np.ndarray,
    doc_ids: np.ndarray,
) -> list[ClaimResult]:
    """Check the run's own lists and scores for every query-principal pair and K.

    The property search checks the code on random cases; this checks the arrays this run
    actually wrote, so a bug the search missed still cannot reach the reports.

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
        np.asarray(acl.toarray(), dtype=bool),
        query_ids=query_ids,
        principals=principals,
        doc_ids=doc_ids,
    )
    return [claim(run) for claim in DATA_CLAIMS]


def failures(results: list[ClaimResult]) -> list[ClaimResult]:
    """The claims that did not hold."""
    return [r for r in results if not r.passed]
