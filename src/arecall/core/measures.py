"""Per-list retrieval measures, Authorized Recall@K among them, and the registry of their names.

The definitions are plain Python over one ranked list, written to be read. The batch engines
compute the same quantities for every query(-principal) pair at once — `arecall.core.scoring`
for the pipeline, `arecall.evaluate.evaluation` for ``arecall evaluate``, `arecall.vector.oracle`
for the vector-index table — and tests/core/test_measures_registry.py holds each of them to the
definition registered here.

The registry (`PIPELINE`, `EVALUATE`, `VECTOR`) gives each measure its name, kind, R = ∅
convention and name formats: the per-K key of metrics.json and of the ``evaluate`` summary
(`Measure.name`), the ``evaluate`` column (`column`: ``arecall_pre@5``), the MLflow metric
(`mlflow_key`: ``arecall_pre_at_5``) and the table header (`Measure.heading`). To add a measure:
write its definition here and add one `Measure` line to the registry of the engine reporting it
(and its batch kernel to that engine).

Conventions (stated, because they move the mean):

* ``authorized_recall_at_k`` is 1.0 when nothing relevant is authorized (R_A = ∅): a system is
  not faulted for not surfacing what it must not surface. Reports always show the restricted mean
  over pairs with R_A ≠ ∅ and its count beside it.
* ``recall_at_k`` is 1.0 on an empty relevant set by default (`Convention.VACUOUS`, the
  pipeline's ``recall``), for the same reason and so that ARecall@K = Recall@K when every item is
  authorized; ``arecall evaluate``'s ``recall`` passes ``empty=0.0`` (`Convention.TREC`, as ranx
  and trec_eval).
* ``precision_at_k`` and ``unusable_fraction_at_k`` divide by K, never by what came back, so a
  short list cannot flatter them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = [
    "EVALUATE",
    "PIPELINE",
    "VECTOR",
    "Authorized",
    "Convention",
    "Judged",
    "Kind",
    "Measure",
    "authorized_recall_at_k",
    "average_precision_at_k",
    "column",
    "hit_rate_at_k",
    "mlflow_key",
    "mlflow_metrics",
    "ndcg_at_k",
    "per_k_keys",
    "precision_at_k",
    "recall_at_k",
    "reciprocal_rank",
    "returned_fraction_at_k",
    "shown",
    "unusable_fraction_at_k",
]

Authorized = Callable[[str], bool]
"""An authorization predicate: may this principal use the item with this id?"""


def _check_k(k: int) -> None:
    if k <= 0:
        raise ValueError(f"k must be a positive integer, got {k}")


def recall_at_k(
    retrieved: Sequence[str], relevant: Iterable[str], k: int, *, empty: float = 1.0
) -> float:
    """Recall@K = |R ∩ L_K| / |R|, authorization-blind; ``empty`` (1.0, vacuous) when R is empty.

    Examples
    --------
    >>> recall_at_k(["a", "b", "c"], {"a", "c", "z"}, 2)
    0.3333333333333333
    >>> recall_at_k(["a"], set(), 1), recall_at_k(["a"], set(), 1, empty=0.0)
    (1.0, 0.0)
    """
    _check_k(k)
    rel = set(relevant)
    if not rel:
        return empty
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


def ndcg_at_k(
    retrieved: Sequence[str],
    relevant: Iterable[str] | Mapping[str, float],
    k: int,
    *,
    exponential: bool = False,
) -> float:
    """nDCG@K with log2(rank + 1) discount, normalised by the ideal ordering; 0.0 when R is empty.

    ``relevant`` as a set gives binary gain (the pipeline's); as ``{doc: grade}`` the gain is the
    grade (Järvelin, trec_eval's ``ndcg_cut``) or, with ``exponential``, 2^grade − 1 (Burges,
    ranx's ``ndcg_burges``).

    Examples
    --------
    >>> round(ndcg_at_k(["x", "a"], {"a"}, 2), 4)
    0.6309
    >>> round(ndcg_at_k(["b", "a"], {"a": 2, "b": 1}, 2), 4), ndcg_at_k(["a"], {"a": 3}, 1)
    (0.8597, 1.0)
    """
    _check_k(k)
    grades = dict(relevant) if isinstance(relevant, Mapping) else dict.fromkeys(relevant, 1.0)
    gain = {d: (2.0**g - 1.0 if exponential else float(g)) for d, g in grades.items()}
    dcg = sum(
        gain[item] / math.log2(rank + 1)
        for rank, item in enumerate(retrieved[:k], start=1)
        if item in gain
    )
    best = sorted(gain.values(), reverse=True)[:k]
    ideal = sum(g / math.log2(rank + 1) for rank, g in enumerate(best, start=1))
    return dcg / ideal if ideal else 0.0


def average_precision_at_k(retrieved: Sequence[str], relevant: Iterable[str], k: int) -> float:
    """AP@K: precision at each relevant rank i ≤ K, summed, divided by |R|; 0.0 when R is empty.

    Divides by |R|, not by min(|R|, K), as trec_eval's ``map_cut`` and ranx's ``map@k`` do.

    Examples
    --------
    >>> average_precision_at_k(["a", "x", "b"], {"a", "b", "c"}, 3)
    0.5555555555555555
    """
    _check_k(k)
    rel = set(relevant)
    if not rel:
        return 0.0
    hits, total = 0, 0.0
    for rank, item in enumerate(retrieved[:k], start=1):
        if item in rel:
            hits += 1
            total += hits / rank
    return total / len(rel)


def hit_rate_at_k(retrieved: Sequence[str], relevant: Iterable[str], k: int) -> float:
    """1.0 when anything relevant is among the first K, else 0.0.

    Examples
    --------
    >>> hit_rate_at_k(["x", "a"], {"a"}, 1), hit_rate_at_k(["x", "a"], {"a"}, 2)
    (0.0, 1.0)
    """
    _check_k(k)
    return 1.0 if set(relevant).intersection(retrieved[:k]) else 0.0


def returned_fraction_at_k(returned: Sequence[str], k: int) -> float:
    """|L_K| / K: how much of the K slots a placement filled (1.0 for a full list).

    Examples
    --------
    >>> returned_fraction_at_k(["a"], 4)
    0.25
    """
    _check_k(k)
    return len(returned[:k]) / k


# -- the registry --------------------------------------------------------------------------------


class Kind(StrEnum):
    """What a measure is computed over."""

    STANDARD = "standard"  #: one ranked list per query, authorization-blind
    AUTHORIZED = "authorized"  #: one query-principal pair (needs an ACL)
    COUNT = "count"  #: a number of pairs or queries, not a mean


class Convention(StrEnum):
    """The value a measure takes when nothing is relevant (R = ∅; R_A = ∅ for authorized ones).

    Both are in use and they move the mean, so every registered measure says which it follows.
    """

    VACUOUS = "vacuous"  #: 1 — nothing to find, nothing missed (the seed, verity, the pipeline)
    TREC = "trec"  #: 0 — trec_eval's and ranx's convention (``arecall evaluate``)
    NONE = "none"  #: the value does not divide by |R| (precision, U@K, returned/K, counts)


@dataclass(frozen=True)
class Judged:
    """One ranked list as a per-list definition sees it: what a registry reference is given.

    ``relevance`` holds graded judgments; each engine's ``relevant`` threshold is the measure's
    (the pipeline: grade > 0; ``evaluate``: grade >= 1, the same for integer grades).
    ``placement`` picks the list the headline ``arecall`` describes in ``evaluate``.
    """

    ranking: Sequence[str]
    relevance: Mapping[str, float]
    authorized: Authorized = field(default=lambda d: True)
    placement: str = "post"

    def relevant(self, threshold: float = 0.0) -> set[str]:
        """Judged documents with grade > ``threshold``."""
        return {d for d, g in self.relevance.items() if g > threshold}

    def graded(self, threshold: float = 0.0) -> dict[str, float]:
        """Grades of the judged documents with grade > ``threshold``."""
        return {d: g for d, g in self.relevance.items() if g > threshold}


Reference = Callable[[Judged, int], float]


@dataclass(frozen=True)
class Measure:
    """One registered measure: its name, kind, R = ∅ convention, formats and definition.

    Attributes
    ----------
    name : str
        The per-K key in metrics.json / the ``evaluate`` summary (``arecall_pre`` under "5").
    kind : Kind
    convention : Convention
        Its value when nothing (authorized and) relevant exists; `empty` gives it as a number.
    header : str
        The column header of the human-readable tables (``{k}`` is replaced by K).
    reference : callable or None
        The per-list definition, ``reference(judged, k) -> float``; the batch kernels are
        tested against it (tests/core/test_measures_registry.py). None for counts.
    restricted : bool
        Also reported as a mean over pairs with R_A ≠ ∅ only, under `nonempty_key`.
    seed : bool
        A key of authorized-recall 0.1.0's ``--emit`` JSON.
    per_k : bool
        Reported once per cutoff K.
    """

    name: str
    kind: Kind
    convention: Convention
    header: str
    reference: Reference | None = None
    restricted: bool = False
    seed: bool = False
    per_k: bool = True

    @property
    def empty(self) -> float | None:
        """The value on R = ∅: 1.0 (vacuous), 0.0 (trec) or None (no convention needed)."""
        return {Convention.VACUOUS: 1.0, Convention.TREC: 0.0}.get(self.convention)

    @property
    def nonempty_key(self) -> str:
        """The key of the mean restricted to pairs with R_A ≠ ∅ (``arecall_pre_nonempty``)."""
        return f"{self.name}_nonempty"

    def column(self, k: int) -> str:
        """``evaluate``'s per-query/per-pair column: ``arecall_pre@5``."""
        return column(self.name, k)

    def mlflow(self, k: int | str) -> str:
        """MLflow metric name: ``arecall_pre_at_5``."""
        return mlflow_key(self.name, k)

    def heading(self, k: int | str | None = None) -> str:
        """The table header (with K filled in where it has a ``{k}``)."""
        return self.header.format(k=k)


def shown(value: float | None, spec: str = ".3f") -> str:
    """How a measure's value is printed in a table: ``–`` where it is undefined (None).

    Examples
    --------
    >>> shown(0.85314), shown(None), shown(0.5, ".4f")
    ('0.853', '–', '0.5000')
    """
    return "–" if value is None else format(value, spec)


def column(name: str, k: int) -> str:
    """A per-K column name of ``evaluate``'s tables: ``<name>@<k>``.

    Examples
    --------
    >>> column("arecall_pre", 5)
    'arecall_pre@5'
    """
    return f"{name}@{k}"


def mlflow_key(name: str, k: int | str) -> str:
    """A per-K MLflow metric name: ``<name>_at_<k>`` (MLflow keys cannot hold ``@``).

    Examples
    --------
    >>> mlflow_key("arecall_pre", 5)
    'arecall_pre_at_5'
    """
    return f"{name}_at_{k}"


def mlflow_metrics(per_k: Mapping[str, Mapping[str, Any]], keys: Iterable[str]) -> dict[str, float]:
    """Flatten per-K rows to MLflow metrics: ``<key>_at_<k>`` and the gap's significance.

    The one flattener of per-K results for MLflow (``arecall run`` and ``arecall evaluate``):
    ``keys`` are logged when present and not None; every ``significance`` entry of a row gives
    ``<name>_ci_low_at_<k>``, ``<name>_ci_high_at_<k>`` and ``<name>_p_value_at_<k>``.

    Examples
    --------
    >>> row = {"gap": 0.25, "n": None, "significance": {"gap": {"low": 0, "high": 1,
    ...        "p_value": 0.5}}}
    >>> mlflow_metrics({"5": row}, ["gap", "n"])  # doctest: +NORMALIZE_WHITESPACE
    {'gap_at_5': 0.25, 'gap_ci_low_at_5': 0.0, 'gap_ci_high_at_5': 1.0,
     'gap_p_value_at_5': 0.5}
    """
    keys = tuple(keys)
    flat: dict[str, float] = {}
    for k, row in per_k.items():
        for key in keys:
            if row.get(key) is not None:
                flat[mlflow_key(key, k)] = float(row[key])
        for name, sig in (row.get("significance") or {}).items():
            flat[mlflow_key(f"{name}_ci_low", k)] = float(sig["low"])
            flat[mlflow_key(f"{name}_ci_high", k)] = float(sig["high"])
            flat[mlflow_key(f"{name}_p_value", k)] = float(sig["p_value"])
    return flat


def per_k_keys(registry: Mapping[str, Measure], *, seed_only: bool = False) -> tuple[str, ...]:
    """Every per-K key a registry reports: each name, then its restricted mean if any.

    Examples
    --------
    >>> per_k_keys(PIPELINE, seed_only=True)[:4]
    ('recall', 'precision', 'ndcg', 'unusable')
    """
    out: list[str] = []
    for m in registry.values():
        if not m.per_k or (seed_only and not m.seed):
            continue
        out.append(m.name)
        if m.restricted:
            out.append(m.nonempty_key)
    return tuple(out)


def _placed(j: Judged, placement: str, k: int) -> list[str]:
    from arecall.core.placement import post_filter, pre_filter  # placement imports Authorized

    if placement == "pre":
        return pre_filter(j.ranking, j.authorized, k)
    if placement == "post":
        return post_filter(j.ranking, j.authorized, k)
    return list(j.ranking[:k])  # "as-is": the unfiltered list


def _arecall(placement: str, threshold: float) -> Reference:
    def ref(j: Judged, k: int) -> float:
        where = j.placement if placement == "headline" else placement
        return authorized_recall_at_k(
            _placed(j, "post" if where == "as-is" else where, k),
            j.relevant(threshold),
            j.authorized,
            k,
        )

    return ref


def _gap(threshold: float) -> Reference:
    def ref(j: Judged, k: int) -> float:
        return _arecall("pre", threshold)(j, k) - _arecall("post", threshold)(j, k)

    return ref


def _registry(*measures: Measure) -> dict[str, Measure]:
    return {m.name: m for m in measures}


_V, _T, _N = Convention.VACUOUS, Convention.TREC, Convention.NONE
_S, _A, _C = Kind.STANDARD, Kind.AUTHORIZED, Kind.COUNT

#: The pipeline's measures (metrics.json, reports/, MLflow), in metrics.json order. The seed's
#: convention: ``recall`` and ``arecall_*`` are 1 when nothing (authorized) is relevant.
#: Relevant means grade > 0.
PIPELINE: dict[str, Measure] = _registry(
    Measure("recall", _S, _V, "Recall", lambda j, k: recall_at_k(j.ranking, j.relevant(), k),
            seed=True),
    Measure("precision", _S, _N, "P@K",
            lambda j, k: precision_at_k(j.ranking, j.relevant(), k), seed=True),
    Measure("ndcg", _S, _T, "nDCG", lambda j, k: ndcg_at_k(j.ranking, j.relevant(), k),
            seed=True),
    Measure("unusable", _A, _N, "unusable in top-K",
            lambda j, k: unusable_fraction_at_k(j.ranking, j.authorized, k), seed=True),
    Measure("arecall_post", _A, _V, "ARecall post", _arecall("post", 0.0), restricted=True,
            seed=True),
    Measure("arecall_pre", _A, _V, "ARecall pre", _arecall("pre", 0.0), restricted=True,
            seed=True),
    Measure("returned_post", _A, _N, "post returned/K",
            lambda j, k: returned_fraction_at_k(_placed(j, "post", k), k)),
    Measure("returned_pre", _A, _N, "pre returned/K",
            lambda j, k: returned_fraction_at_k(_placed(j, "pre", k), k)),
    Measure("n_nonempty", _C, _N, "n", seed=True),
    Measure("n_excluded", _C, _N, "excluded"),
    Measure("gap", _A, _V, "gap", _gap(0.0), restricted=True, seed=True),
)  # fmt: skip

#: ``arecall evaluate``'s measures, in its summary order. Standard measures follow ranx and
#: trec_eval: 0 on a query with nothing relevant (``trec``); the authorized ones follow the
#: seed (``vacuous``). Relevant means grade >= 1.
EVALUATE: dict[str, Measure] = _registry(
    Measure("recall", _S, _T, "recall", lambda j, k: recall_at_k(j.ranking, j.relevant(0.5), k,
            empty=0.0)),
    Measure("precision", _S, _N, "P@K",
            lambda j, k: precision_at_k(j.ranking, j.relevant(0.5), k)),
    Measure("ndcg", _S, _T, "nDCG", lambda j, k: ndcg_at_k(j.ranking, j.graded(0.5), k)),
    Measure("ndcg_exp", _S, _T, "nDCG-exp",
            lambda j, k: ndcg_at_k(j.ranking, j.graded(0.5), k, exponential=True)),
    Measure("mrr", _S, _T, "MRR", lambda j, k: reciprocal_rank(j.ranking[:k], j.relevant(0.5))),
    Measure("map", _S, _T, "MAP",
            lambda j, k: average_precision_at_k(j.ranking, j.relevant(0.5), k)),
    Measure("hit_rate", _S, _T, "hit", lambda j, k: hit_rate_at_k(j.ranking, j.relevant(0.5), k)),
    Measure("arecall", _A, _V, "ARecall", _arecall("headline", 0.5), restricted=True),
    Measure("arecall_post", _A, _V, "post", _arecall("post", 0.5), restricted=True),
    Measure("arecall_pre", _A, _V, "pre", _arecall("pre", 0.5), restricted=True),
    Measure("gap", _A, _V, "gap", _gap(0.5), restricted=True),
    Measure("unusable", _A, _N, "U@K",
            lambda j, k: unusable_fraction_at_k(j.ranking, j.authorized, k)),
    Measure("n_nonempty", _C, _N, "n"),
    Measure("n_deeper", _C, _N, "deeper"),
)  # fmt: skip

#: The vector-index table (reports/vector_search.*): one placement of an index against the
#: exhaustive oracle, whose answer is the relevant set. ``recall`` and ``arecall`` are
#: verity's overlap recall, 1 when the oracle returns nothing (vacuous).
VECTOR: dict[str, Measure] = _registry(
    Measure("returned", _A, _N, "returned / {k}"),
    Measure("recall", _A, _V, "recall",
            lambda j, k: recall_at_k(j.ranking, j.relevant(), max(len(j.ranking), 1))),
    Measure("short", _A, _N, "short"),
    Measure("arecall", _A, _V, "ARecall@{k}",
            lambda j, k: authorized_recall_at_k(j.ranking, j.relevant(), j.authorized,
                                                max(len(j.ranking), 1))),
    Measure("u_at_k", _A, _N, "U@{k}",
            lambda j, k: unusable_fraction_at_k(j.ranking, j.authorized, k)),
)  # fmt: skip
