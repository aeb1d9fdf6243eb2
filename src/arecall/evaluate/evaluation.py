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

Everything is vectorised over CSR-like arrays (no Python loop per query): relevance is found by
binary search on sorted ``query * n_docs + doc`` keys, and per-query sums are ``np.bincount``.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import scipy.sparse as sp

from arecall.core.engine import Engine, LocalEngine
from arecall.core.errors import ArecallError
from arecall.core.measures import EVALUATE, Kind, column, shown
from arecall.core.placement import PLACEMENTS, Placement
from arecall.core.ragged import expand, positions_in_groups, positions_in_runs
from arecall.core.significance import delta_significance
from arecall.io.acl import read_acl_lines, read_groups
from arecall.io.ids import encode, index_in
from arecall.io.trec import Qrels, Run, Ties, load_qrels, load_run

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

#: Per-query measures, authorization-blind (ranx's and trec_eval's ``trec`` convention).
STANDARD_MEASURES = tuple(m.name for m in EVALUATE.values() if m.kind == Kind.STANDARD)
#: Per query-principal pair measures (the seed's ``vacuous`` convention), with an ACL.
AUTHORIZED_MEASURES = tuple(m.name for m in EVALUATE.values() if m.kind == Kind.AUTHORIZED)

Retriever = Callable[[str], Iterable[Any]]


# -- ACL -----------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Acl:
    """Which principal may use which document; deny by default.

    Attributes
    ----------
    principals : tuple of str
    doc_ids : pyarrow.StringArray
        Documents the ACL names.
    grants : scipy.sparse.csr_matrix of bool, shape (n_principals, n_docs)

    Examples
    --------
    >>> acl = Acl.from_mapping({"alice": ["d1", "d2"], "bob": []})
    >>> sorted(acl.allowed("alice")), acl.allowed("bob"), acl.allowed("carol")
    (['d1', 'd2'], set(), set())
    """

    principals: tuple[str, ...]
    doc_ids: pa.Array
    grants: sp.csr_matrix

    @classmethod
    def from_mapping(
        cls, grants: Mapping[str, Iterable[str]], principals: Sequence[str] | None = None
    ) -> Acl:
        """Build from ``{principal: doc ids}``; ``principals`` defaults to the mapping's keys.

        Examples
        --------
        >>> Acl.from_mapping({"a": ["x"]}, principals=["a", "b"]).principals
        ('a', 'b')
        """
        names = tuple(str(p) for p in (principals if principals is not None else grants))
        docs: list[str] = []
        granted_to: list[str] = []
        for p, granted in grants.items():
            listed = [str(d) for d in granted]
            docs += listed
            granted_to += [str(p)] * len(listed)
        return _acl_from_pairs(docs, granted_to, names, {}, None)

    def allowed(self, principal: str) -> set[str]:
        """The documents ``principal`` may use (empty for an unknown principal)."""
        if principal not in self.principals:
            return set()
        row = self.grants[self.principals.index(principal)]
        return set(self.doc_ids.take(pa.array(row.indices)).to_pylist())

    def mask(self, principal: int, doc_ids: pa.Array) -> np.ndarray:
        """Boolean array: may principal number ``principal`` use each of ``doc_ids``?"""
        return self._mask_codes(principal, index_in(doc_ids, self.doc_ids))

    def _mask_codes(self, principal: int, codes: np.ndarray) -> np.ndarray:
        dense = np.zeros(len(self.doc_ids) + 1, dtype=bool)  # last slot: "not in the ACL"
        dense[self.grants[principal].indices] = True
        return dense[np.where(codes >= 0, codes, len(self.doc_ids))]


def _acl_from_pairs(
    docs: Sequence[str] | pa.Array,
    names: Sequence[str] | pa.Array,
    principals: Sequence[str],
    groups: Mapping[str, set[str]],
    origin: tuple[Path, Sequence[int] | np.ndarray] | None,
) -> Acl:
    """ACL lines (docs[i], names[i]), a name being a principal or a group; ``groups`` maps a
    principal to its groups; ``origin`` = (file, line numbers) enables the name checks."""
    if len(set(principals)) != len(principals):
        dup = next(p for p in principals if list(principals).count(p) > 1)
        raise ArecallError(f"principal {dup!r} is listed twice")
    index = {p: i for i, p in enumerate(principals)}
    doc_codes, doc_vocab = encode(docs)
    name_codes, name_vocab = encode(names)
    name_list = name_vocab.to_pylist()
    if origin is not None:
        group_names = {g for gs in groups.values() for g in gs}
        unknown = [i for i, n in enumerate(name_list) if n not in index and n not in group_names]
        if unknown:
            row = int(np.flatnonzero(np.isin(name_codes, unknown))[0])
            what = "a listed principal nor a group" if group_names else "a listed principal"
            raise ArecallError(
                f"{origin[0]}: line {origin[1][row]}: {name_list[name_codes[row]]!r} is neither "
                f"{what} (principals: {', '.join(principals) or 'none'})"
            )
    # name × doc incidence, then principal × name membership (itself, or one of its groups)
    incidence = sp.csr_matrix(
        (np.ones(len(doc_codes), dtype=np.int32), (name_codes, doc_codes)),
        shape=(len(name_list), len(doc_vocab)),
    )
    name_ids = {n: i for i, n in enumerate(name_list)}
    rows, cols = [], []
    for p, i in index.items():
        for name in {p} | set(groups.get(p, ())):
            if name in name_ids:
                rows.append(i)
                cols.append(name_ids[name])
    member = sp.csr_matrix(
        (np.ones(len(rows), dtype=np.int32), (rows, cols)), shape=(len(index), len(name_ids))
    )
    grants = (member @ incidence).astype(bool).tocsr()
    grants.sort_indices()
    return Acl(tuple(principals), doc_vocab, grants)


def load_acl(
    path: str | os.PathLike[str],
    *,
    groups: str | os.PathLike[str] | None = None,
    principals: Sequence[str] | None = None,
) -> Acl:
    """Read an ACL TSV (``doc_id<TAB>principal`` lines) and optionally a groups TSV.

    An ACL line may name a principal or, when ``groups`` is given (``principal<TAB>group``
    lines), a group: every member may then use the document. A document the ACL does not list
    is authorized to nobody. Both files are read by `arecall.io.acl` (the reader the corpus
    sources use): header lines, comments, BOM, CRLF, gzip and errors are handled as there.

    Parameters
    ----------
    path : path-like
    groups : path-like, optional
    principals : sequence of str, optional
        The principals to evaluate. When given, an ACL line naming anything else (that is not
        a group) is an error; when omitted, they are every non-group name in the ACL and every
        principal in the groups file, sorted.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "acl.tsv").write_text("d1\\tstaff\\nd2\\tbob\\n")
    >>> _ = (d / "groups.tsv").write_text("alice\\tstaff\\nbob\\tstaff\\n")
    >>> acl = load_acl(d / "acl.tsv", groups=d / "groups.tsv")
    >>> acl.principals, sorted(acl.allowed("bob")), sorted(acl.allowed("alice"))
    (('alice', 'bob'), ['d1', 'd2'], ['d1'])
    """
    grants = read_acl_lines(path)
    membership: dict[str, set[str]] = {}
    if groups is not None:
        pairs = read_groups(groups)
        for principal, group in zip(pairs.first.to_pylist(), pairs.second.to_pylist(), strict=True):
            membership.setdefault(principal, set()).add(group)
    group_names = {g for gs in membership.values() for g in gs}
    if principals is None:
        named = set(pc.unique(grants.second).to_pylist())
        principals = sorted({n for n in named if n not in group_names} | set(membership))
    return _acl_from_pairs(
        grants.first, grants.second, list(principals), membership, (grants.path, grants.lines)
    )


def _as_acl(acl: Any, principals: Sequence[str] | None, groups: Any) -> Acl | None:
    if acl is None:
        if principals is not None or groups is not None:
            raise ArecallError("principals or groups were given without an ACL")
        return None
    if isinstance(acl, Acl):
        if groups is not None:
            raise ArecallError("groups apply when reading an ACL file, not to an Acl object")
        if principals is None:
            return acl
        keep = tuple(principals)
        empty = sp.csr_matrix((1, len(acl.doc_ids)), dtype=bool)
        rows = [acl.grants[acl.principals.index(p)] if p in acl.principals else empty for p in keep]
        grants = (
            sp.vstack(rows, format="csr")
            if rows
            else sp.csr_matrix((0, len(acl.doc_ids)), dtype=bool)
        )
        return Acl(keep, acl.doc_ids, sp.csr_matrix(grants, dtype=bool))
    if isinstance(acl, Mapping):
        return Acl.from_mapping(acl, principals)
    return load_acl(acl, groups=groups, principals=principals)


# -- inputs --------------------------------------------------------------------------------------


def _as_qrels(qrels: Any) -> Qrels:
    if isinstance(qrels, Qrels):
        return qrels
    if isinstance(qrels, Mapping):
        return Qrels.from_dict(qrels)
    return load_qrels(qrels)


def _as_run(run: Any, qrels: Qrels, ties: Ties) -> Run:
    if isinstance(run, Run):
        return run
    if isinstance(run, Mapping):
        return Run.from_dict(run, ties=ties)
    if isinstance(run, str | os.PathLike):
        loaded = load_run(run, ties=ties)
        if not (index_in(loaded.query_ids, qrels.query_ids) >= 0).any():
            raise ArecallError(
                f"{run}: no query id matches the qrels ({loaded.n_queries} queries in the run)"
            )
        return loaded
    if callable(run):
        rankings = {}
        for qid in qrels.query_ids.to_pylist():
            ranked = list(run(qid))
            if ranked:
                rankings[qid] = ranked
        if not rankings:
            raise ArecallError("the retriever returned nothing for every judged query")
        return Run.from_rankings(rankings, name=getattr(run, "__name__", "retriever"))
    raise ArecallError(
        f"cannot evaluate a {type(run).__name__}: expected a Run, a {{qid: {{docid: score}}}} "
        "dict, a TREC run path or a callable query_id -> ranked doc ids"
    )


def parse_ks(k: Iterable[int] | str) -> tuple[int, ...]:
    """Cutoffs as a sorted tuple of distinct positive ints (``"1,3,5"`` is accepted).

    Examples
    --------
    >>> parse_ks("10,1,5"), parse_ks([3])
    ((1, 5, 10), (3,))
    """
    items = [x.strip() for x in k.split(",")] if isinstance(k, str) else list(k)
    out = []
    for item in items:
        try:
            value = int(item)
            if isinstance(item, float | str) and str(value) != str(item).strip():
                raise ValueError
        except (TypeError, ValueError):
            raise ArecallError(f"k: {item!r} is not a positive integer") from None
        if value <= 0:
            raise ArecallError(f"k: {item!r} is not a positive integer")
        out.append(value)
    if not out:
        raise ArecallError("k: no cutoffs given")
    return tuple(sorted(set(out)))


# -- the vectorised core -------------------------------------------------------------------------


def _ratio(num: np.ndarray, den: np.ndarray, empty: float | None) -> np.ndarray:
    """num / den, ``empty`` (the measure's R = ∅ value) where den == 0."""
    den = np.asarray(den, dtype=np.float64)
    safe = np.where(den > 0, den, 1.0)
    return np.where(den > 0, num / safe, np.nan if empty is None else empty)


def _bincount(index: np.ndarray, n: int, weights: np.ndarray | None = None) -> np.ndarray:
    return np.bincount(index, weights=weights, minlength=n).astype(np.float64)[:n]


@dataclass
class _Rows:
    """Run rows of evaluated queries (all kept, or only the relevant ones), in eval indices."""

    query: np.ndarray  # eval index per row
    rank: np.ndarray  # 0-based position in the unfiltered ranking
    row: np.ndarray  # row index into the run


@dataclass
class _Hits(_Rows):
    """The relevant rows among the kept ones, with what the standard measures need."""

    grade: np.ndarray  # relevance grade, float
    nth: np.ndarray  # 0-based count of relevant rows before, same query


@dataclass
class _Judgments:
    """The qrels in eval indices: relevant rows, the ideal ordering and the lookup keys."""

    row_query: np.ndarray  # eval index of every qrels row
    is_relevant: np.ndarray  # per qrels row: relevance >= 1
    n_relevant: np.ndarray  # per eval query
    ideal_query: np.ndarray  # relevant rows by (query, grade descending)
    ideal_grade: np.ndarray
    ideal_pos: np.ndarray  # 0-based position in the ideal ordering of its query
    keys: np.ndarray  # sorted query * n_docs + doc of the relevant rows
    gains: np.ndarray  # grade per key
    n_docs: int


@dataclass
class _Core:
    query_ids: list[str]
    group: np.ndarray  # run group per eval query, -1 if missing from the run
    depth: np.ndarray
    n_relevant: np.ndarray
    standard: dict[str, np.ndarray]  # measure -> (n_queries, n_ks)
    authorized: dict[str, np.ndarray] = field(default_factory=dict)  # -> (P, n_queries, n_ks)
    n_authorized_relevant: np.ndarray | None = None  # (P, n_queries)
    run_queries_not_judged: int = 0


def _align(run: Run, qrels: Qrels) -> tuple[pa.Array, np.ndarray, np.ndarray, int]:
    """Eval order (judged query ids, sorted), each qrels group's eval index, each eval query's
    run group (-1: missing from the run) and the number of run queries without judgments."""
    nq = qrels.n_queries
    order = np.asarray(pc.sort_indices(qrels.query_ids).to_numpy(), dtype=np.int64)
    eval_ids = qrels.query_ids.take(pa.array(order))
    eval_of_qgroup = np.empty(nq, dtype=np.int64)
    eval_of_qgroup[order] = np.arange(nq)
    run_eval = index_in(run.query_ids, eval_ids)
    judged = run_eval >= 0
    group = np.full(nq, -1, dtype=np.int64)
    group[run_eval[judged]] = np.flatnonzero(judged)
    return eval_ids, eval_of_qgroup, group, int(np.count_nonzero(~judged))


def _judgments(qrels: Qrels, eval_of_qgroup: np.ndarray) -> _Judgments:
    nq = qrels.n_queries
    qe = np.repeat(eval_of_qgroup, np.diff(qrels.offsets))
    is_rel = qrels.relevance >= 1
    rel_q, rel_g, rel_doc = qe[is_rel], qrels.relevance[is_rel], qrels.doc_codes[is_rel]
    n_rel = np.bincount(rel_q, minlength=nq)
    ideal = np.lexsort((-rel_g, rel_q))
    n_docs = max(len(qrels.doc_ids), 1)
    keys = rel_q * n_docs + rel_doc
    key_order = np.argsort(keys, kind="stable")
    return _Judgments(
        row_query=qe,
        is_relevant=is_rel,
        n_relevant=n_rel,
        ideal_query=rel_q[ideal],
        ideal_grade=rel_g[ideal].astype(np.float64),
        ideal_pos=positions_in_groups(n_rel),
        keys=keys[key_order],
        gains=rel_g[key_order],
        n_docs=n_docs,
    )


def _kept_rows(run: Run, group: np.ndarray, lengths: np.ndarray) -> _Rows:
    """The first ``lengths[q]`` run rows of every eval query present in the run."""
    present = group >= 0
    starts, kept = run.offsets[group[present]], lengths[present]
    return _Rows(
        query=np.repeat(np.flatnonzero(present), kept),
        rank=positions_in_groups(kept),
        row=expand(starts, kept),
    )


def _relevant_hits(run: Run, rows: _Rows, qrels: Qrels, judg: _Judgments) -> _Hits:
    """The kept rows judged relevant (relevance of cell (query, doc) by binary search)."""
    grade = np.zeros(len(rows.row), dtype=np.int64)
    if len(judg.keys) and len(rows.row):
        code = index_in(run.doc_ids, qrels.doc_ids)[run.doc_codes[rows.row]]
        probe = rows.query * judg.n_docs + np.maximum(code, 0)
        pos = np.minimum(np.searchsorted(judg.keys, probe), len(judg.keys) - 1)
        found = (judg.keys[pos] == probe) & (code >= 0)
        grade = np.where(found, judg.gains[pos], 0)
    hit = np.flatnonzero(grade > 0)
    query = rows.query[hit]
    return _Hits(
        query=query,
        rank=rows.rank[hit],
        row=rows.row[hit],
        grade=grade[hit].astype(np.float64),
        nth=positions_in_runs(query),
    )


def _standard(hits: _Hits, judg: _Judgments, ks: tuple[int, ...]) -> dict[str, np.ndarray]:
    """Every standard measure per (eval query, K), each R = ∅ value from the registry."""
    nq = len(judg.n_relevant)
    n_rel, hq, hrank, hrel = judg.n_relevant, hits.query, hits.rank, hits.grade
    first = hits.nth == 0
    discount = 1.0 / np.log2(hrank + 2.0)
    ideal_discount = 1.0 / np.log2(judg.ideal_pos + 2.0)
    ideal_g = judg.ideal_grade
    std = {m: np.zeros((nq, len(ks))) for m in STANDARD_MEASURES}
    empty = {m: EVALUATE[m].empty for m in STANDARD_MEASURES}
    for j, k in enumerate(ks):
        m = hrank < k
        n_hits = _bincount(hq[m], nq)
        std["recall"][:, j] = _ratio(n_hits, n_rel, empty["recall"])
        std["precision"][:, j] = n_hits / k
        std["hit_rate"][:, j] = n_hits > 0
        im = judg.ideal_pos < k
        for name, gain, igain in (
            ("ndcg", hrel, ideal_g),
            ("ndcg_exp", 2.0**hrel - 1.0, 2.0**ideal_g - 1.0),
        ):
            dcg = _bincount(hq[m], nq, (gain * discount)[m])
            idcg = _bincount(judg.ideal_query[im], nq, (igain * ideal_discount)[im])
            std[name][:, j] = _ratio(dcg, idcg, empty[name])
        firsts = m & first
        std["mrr"][:, j] = _bincount(hq[firsts], nq, 1.0 / (hrank[firsts] + 1.0))
        ap = _bincount(hq[m], nq, ((hits.nth + 1.0) / (hrank + 1.0))[m])
        std["map"][:, j] = _ratio(ap, n_rel, empty["map"])
    return std


def _compute(
    run: Run,
    qrels: Qrels,
    ks: tuple[int, ...],
    acl: Acl | None,
    placement: str,
    engine: Engine | None = None,
) -> _Core:
    """Every measure for every judged query (and principal), from the run's flat arrays."""
    eval_ids, eval_of_qgroup, group, not_judged = _align(run, qrels)
    depth = np.where(group >= 0, run.depths[np.maximum(group, 0)], 0)
    judg = _judgments(qrels, eval_of_qgroup)
    # the pre placement needs every row, not just the first kmax
    rows = _kept_rows(run, group, depth if acl is not None else np.minimum(depth, ks[-1]))
    hits = _relevant_hits(run, rows, qrels, judg)
    core = _Core(
        query_ids=eval_ids.to_pylist(),
        group=group,
        depth=depth,
        n_relevant=judg.n_relevant,
        standard=_standard(hits, judg, ks),
        run_queries_not_judged=not_judged,
    )
    if acl is not None:
        starts = run.offsets[np.maximum(group, 0)]
        _authorized(core, run, qrels, acl, ks, placement, judg, hits, rows, starts, engine)
    return core


def _authorized(
    core: _Core,
    run: Run,
    qrels: Qrels,
    acl: Acl,
    ks: tuple[int, ...],
    placement: str,
    judg: _Judgments,
    hits: _Rows,
    every: _Rows,
    starts: np.ndarray,
    engine: Engine | None = None,
) -> None:
    """The authorized measures per (principal, eval query, K), by blocks of principals.

    Each block needs the run's and qrels' arrays (the same for every block: sent once to each
    worker of a cluster) and its principals' ACL rows; the blocks' arrays are joined in order,
    so the result does not depend on the engine or the block size.
    """
    nq, n_p = len(core.query_ids), len(acl.principals)
    top = every.rank < ks[-1]
    shared = {
        "ks": ks,
        "nq": nq,
        "n_acl_docs": len(acl.doc_ids),
        "run_codes": index_in(run.doc_ids, acl.doc_ids)[run.doc_codes],  # ACL code per run row
        "qrel_codes": index_in(qrels.doc_ids, acl.doc_ids)[qrels.doc_codes],
        "relevant_query": judg.row_query[judg.is_relevant],
        "relevant_rows": np.flatnonzero(judg.is_relevant),
        "hit_query": hits.query,
        "hit_rank": hits.rank,
        "hit_row": hits.row,
        "hit_start": starts[hits.query],  # first run row of each hit's query
        "top_q": every.query[top],
        "top_rank": every.rank[top],
        "top_row": every.row[top],
    }
    runner = engine if engine is not None else LocalEngine()
    size = max(1, _BLOCK_CELLS // max(1, len(run.doc_codes)))
    parts = runner.map_blocks(
        _authorized_block,
        n_p,
        shared=shared,
        block_data=lambda s, e: acl.grants[s:e],
        size=size,
    )
    names = ("arecall_post", "arecall_pre", "unusable", "n_auth")
    joined = {
        name: np.concatenate([part[name] for part in parts])
        if parts
        else np.zeros((0, nq, len(ks)) if name != "n_auth" else (0, nq))
        for name in names
    }
    n_auth = joined.pop("n_auth").astype(np.int64)
    out: dict[str, np.ndarray] = {m: np.zeros((n_p, nq, len(ks))) for m in AUTHORIZED_MEASURES}
    out.update(joined)
    out["gap"] = out["arecall_pre"] - out["arecall_post"]
    out["arecall"] = out["arecall_pre" if placement == Placement.PRE else "arecall_post"].copy()
    core.authorized = out
    core.n_authorized_relevant = n_auth


#: Run rows × principals per local block of `_authorized`.
_BLOCK_CELLS = 1 << 24


def _authorized_block(
    start: int,
    stop: int,
    grants: sp.csr_matrix,
    *,
    ks: tuple[int, ...],
    nq: int,
    n_acl_docs: int,
    run_codes: np.ndarray,
    qrel_codes: np.ndarray,
    relevant_query: np.ndarray,
    relevant_rows: np.ndarray,
    hit_query: np.ndarray,
    hit_rank: np.ndarray,
    hit_row: np.ndarray,
    hit_start: np.ndarray,
    top_q: np.ndarray,
    top_rank: np.ndarray,
    top_row: np.ndarray,
) -> dict[str, np.ndarray]:
    """ARecall post and pre, U@K and |R_A| of principals ``start … stop − 1`` (one at a time)."""
    n_b, n_k = stop - start, len(ks)
    empty = EVALUATE["arecall_post"].empty, EVALUATE["arecall_pre"].empty
    out = {m: np.zeros((n_b, nq, n_k)) for m in ("arecall_post", "arecall_pre", "unusable")}
    n_auth = np.zeros((n_b, nq), dtype=np.int64)
    dense = np.zeros(n_acl_docs + 1, dtype=bool)  # last slot: "not in the ACL"
    run_slot = np.where(run_codes >= 0, run_codes, n_acl_docs)
    qrel_slot = np.where(qrel_codes >= 0, qrel_codes, n_acl_docs)[relevant_rows]
    for i in range(n_b):
        dense[:] = False
        dense[grants.indices[grants.indptr[i] : grants.indptr[i + 1]]] = True
        allowed_row = dense[run_slot]
        before = np.cumsum(allowed_row) - allowed_row  # authorized rows before, whole run
        auth_rank = before[hit_row] - before[hit_start]
        hit_ok = allowed_row[hit_row]
        ra = np.bincount(relevant_query[dense[qrel_slot]], minlength=nq)
        n_auth[i] = ra
        denied_top = ~allowed_row[top_row]
        for j, k in enumerate(ks):
            post = _bincount(hit_query[hit_ok & (hit_rank < k)], nq)
            pre = _bincount(hit_query[hit_ok & (auth_rank < k)], nq)
            out["arecall_post"][i, :, j] = _ratio(post, ra, empty[0])
            out["arecall_pre"][i, :, j] = _ratio(pre, ra, empty[1])
            out["unusable"][i, :, j] = _bincount(top_q[denied_top & (top_rank < k)], nq) / k
    return {**out, "n_auth": n_auth}


# -- results -------------------------------------------------------------------------------------


def _mean(x: np.ndarray) -> float | None:
    return float(x.mean()) if x.size else None


class Evaluation:
    """The result of `evaluate`: per-query(-principal) rows, a summary, the worst pairs.

    Attributes
    ----------
    ks : tuple of int
    placement : str
    principals : tuple of str
        Empty without an ACL.
    per_query : pandas.DataFrame
        One row per judged query: ``query_id``, ``n_relevant``, ``depth`` (results in the
        run) and ``<measure>@<k>`` for every standard measure.
    per_pair : pandas.DataFrame or None
        With an ACL, one row per (principal, query): ``n_authorized_relevant`` and
        ``<measure>@<k>`` for ``arecall``, ``arecall_post``, ``arecall_pre``, ``gap``,
        ``unusable``.
    """

    def __init__(
        self,
        run: Run,
        qrels: Qrels,
        acl: Acl | None,
        ks: tuple[int, ...],
        placement: str,
        core: _Core,
        significance: Mapping[str, Any],
    ) -> None:
        self.run, self.qrels, self.acl = run, qrels, acl
        self.ks, self.placement = ks, placement
        self.principals: tuple[str, ...] = acl.principals if acl is not None else ()
        self._core = core
        self._significance = dict(significance)

    # tables ----------------------------------------------------------------------------------

    @cached_property
    def per_query(self) -> pd.DataFrame:
        c = self._core
        data: dict[str, Any] = {
            "query_id": c.query_ids,
            "n_relevant": c.n_relevant,
            "depth": c.depth,
        }
        for m in STANDARD_MEASURES:
            for j, k in enumerate(self.ks):
                data[column(m, k)] = c.standard[m][:, j]
        return pd.DataFrame(data)

    @cached_property
    def per_pair(self) -> pd.DataFrame | None:
        c = self._core
        if self.acl is None or c.n_authorized_relevant is None:
            return None
        n_p, nq = len(self.principals), len(c.query_ids)
        data: dict[str, Any] = {
            "principal": np.repeat(np.asarray(self.principals, dtype=object), nq),
            "query_id": np.tile(np.asarray(c.query_ids, dtype=object), n_p),
            "n_relevant": np.tile(c.n_relevant, n_p),
            "n_authorized_relevant": c.n_authorized_relevant.ravel(),
            "depth": np.tile(c.depth, n_p),
        }
        for m in AUTHORIZED_MEASURES:
            for j, k in enumerate(self.ks):
                data[column(m, k)] = c.authorized[m][:, :, j].ravel()
        return pd.DataFrame(data)

    @property
    def rows(self) -> pd.DataFrame:
        """`per_pair` with an ACL, else `per_query`."""
        return self.per_pair if self.per_pair is not None else self.per_query

    def values(self, measure: str, k: int) -> np.ndarray:
        """Per-query (standard measure) or per-pair (authorized measure) values at ``k``."""
        j = self._k_index(k)
        if measure in STANDARD_MEASURES:
            return self._core.standard[measure][:, j]
        if measure in AUTHORIZED_MEASURES and self._core.authorized:
            return self._core.authorized[measure][:, :, j].ravel()
        raise ArecallError(f"unknown measure {measure!r} for this evaluation")

    def _k_index(self, k: int) -> int:
        if k not in self.ks:
            raise ArecallError(f"k={k} was not evaluated (ks: {', '.join(map(str, self.ks))})")
        return self.ks.index(k)

    # summary ---------------------------------------------------------------------------------

    @cached_property
    def _summary(self) -> dict[str, Any]:
        c = self._core
        out: dict[str, Any] = {
            "run": self.run.name,
            "queries": len(c.query_ids),
            "queries_without_relevant": int(np.count_nonzero(c.n_relevant == 0)),
            "queries_missing_from_run": int(np.count_nonzero(c.group < 0)),
            "run_queries_not_judged": c.run_queries_not_judged,
        }
        if self.acl is not None and c.n_authorized_relevant is not None:
            nonempty = (c.n_authorized_relevant > 0).ravel()
            out.update(
                placement=self.placement,
                principals=list(self.principals),
                pairs=int(nonempty.size),
                pairs_without_authorized_relevant=int(np.count_nonzero(~nonempty)),
            )
        out["k"] = {}
        for j, k in enumerate(self.ks):
            row: dict[str, Any] = {
                m: float(c.standard[m][:, j].mean()) if len(c.query_ids) else None
                for m in STANDARD_MEASURES
            }
            if self.acl is not None and c.n_authorized_relevant is not None:
                nonempty = (c.n_authorized_relevant > 0).ravel()
                for m in AUTHORIZED_MEASURES:
                    values = c.authorized[m][:, :, j].ravel()
                    row[m] = _mean(values)
                    if EVALUATE[m].restricted:
                        row[EVALUATE[m].nonempty_key] = _mean(values[nonempty])
                row["n_nonempty"] = int(np.count_nonzero(nonempty))
                row["n_deeper"] = int(np.count_nonzero(c.depth > k)) * len(self.principals)
                if self._significance.get("enabled", True) and nonempty.size:
                    pre = c.authorized["arecall_pre"][:, :, j].ravel()
                    post = c.authorized["arecall_post"][:, :, j].ravel()
                    sig = {"gap": _delta(pre, post, self._significance)}
                    if nonempty.any():
                        sig["gap_nonempty"] = _delta(
                            pre[nonempty], post[nonempty], self._significance
                        )
                    row["significance"] = sig
            out["k"][str(k)] = row
        return out

    def summary(self) -> dict[str, Any]:
        """Means per K and the counts behind them, as a JSON-ready dict.

        Top level: ``run``, ``queries``, ``queries_without_relevant`` (scored 0, in the means),
        ``queries_missing_from_run`` (scored 0), ``run_queries_not_judged`` (ignored); with an
        ACL also ``placement``, ``principals``, ``pairs`` and
        ``pairs_without_authorized_relevant``. ``k`` maps each cutoff (as a string) to the mean
        of every measure; with an ACL also the ``*_nonempty`` restricted means, ``n_nonempty``,
        ``n_deeper`` (pairs whose run is deeper than K, where the gap can be nonzero) and
        ``significance`` → ``gap`` / ``gap_nonempty`` → paired bootstrap CI and randomization
        p-value of Δ = pre − post (`arecall.core.significance.delta_significance`).
        """
        return copy.deepcopy(self._summary)

    def summary_frame(self) -> pd.DataFrame:
        """The per-K means as a DataFrame (one row per K), significance flattened."""
        rows = []
        for k, row in self._summary["k"].items():
            flat = {"k": int(k)}
            for key, value in row.items():
                if key == "significance":
                    for name, sig in value.items():
                        for part in ("low", "high", "p_value"):
                            flat[f"{name}_{part}"] = sig[part]
                else:
                    flat[key] = value
            rows.append(flat)
        return pd.DataFrame(rows)

    def table(self) -> str:
        """The summary as fixed-width text, in the layout of the seed's table."""
        return _format_table(self._summary)

    # debugging -------------------------------------------------------------------------------

    def worst(self, n: int = 5, k: int | None = None) -> pd.DataFrame:
        """The ``n`` lowest-scoring pairs at ``k`` (default: the largest K), to debug first.

        Ranked by ``arecall@k`` with an ACL (over pairs with R_A ≠ ∅), else by ``recall@k``
        (over queries with relevant documents); ties by query id then principal. Columns:
        ``query_id``, ``principal`` (with an ACL), the measure, ``n_relevant``, ``returned``
        (the ids the principal gets at K under the placement) and ``missed`` (relevant — and
        authorized — ids not returned, most relevant first).

        Examples
        --------
        >>> ev = evaluate({"q": {"a": 2.0, "b": 1.0}}, {"q": {"b": 1, "c": 1}}, k=[1])
        >>> ev.worst(1)[["query_id", "recall@1", "returned", "missed"]].to_dict("records")
        [{'query_id': 'q', 'recall@1': 0.0, 'returned': ['a'], 'missed': ['b', 'c']}]
        """
        k = self.ks[-1] if k is None else k
        self._k_index(k)
        frame = self.rows
        if self.per_pair is not None:
            measure, count = column("arecall", k), "n_authorized_relevant"
            keys = ["query_id", "principal"]
        else:
            measure, count = column("recall", k), "n_relevant"
            keys = ["query_id"]
        picked = frame[frame[count] > 0].sort_values([measure, *keys], kind="stable").head(n)
        returned, missed = [], []
        for _, r in picked.iterrows():
            got, miss = self._lists(str(r["query_id"]), r.get("principal"), k)
            returned.append(got)
            missed.append(miss)
        cols = [*keys, measure, count]
        out = picked[cols].reset_index(drop=True)
        out["returned"] = returned
        out["missed"] = missed
        return out

    def _lists(self, qid: str, principal: Any, k: int) -> tuple[list[str], list[str]]:
        ranking = self.run.ranking(qid)
        judged = self.qrels_for(qid)
        relevant = sorted((d for d, r in judged.items() if r >= 1), key=lambda d: (-judged[d], d))
        if self.acl is None or principal is None:
            got = ranking[:k]
        else:
            ok = self.acl.allowed(str(principal))
            relevant = [d for d in relevant if d in ok]
            if self.placement == "pre":
                got = [d for d in ranking if d in ok][:k]
            elif self.placement == "post":
                got = [d for d in ranking[:k] if d in ok]
            else:
                got = ranking[:k]
        returned = set(got)
        return got, [d for d in relevant if d not in returned]

    def qrels_for(self, qid: str) -> dict[str, int]:
        """The judgments of one query (empty if it has none)."""
        g = int(index_in(pa.array([qid], type=pa.string()), self.qrels.query_ids)[0])
        if g < 0:
            return {}
        lo, hi = int(self.qrels.offsets[g]), int(self.qrels.offsets[g + 1])
        docs = self.qrels.doc_ids.take(pa.array(self.qrels.doc_codes[lo:hi])).to_pylist()
        return dict(zip(docs, self.qrels.relevance[lo:hi].tolist(), strict=True))


def _delta(a: np.ndarray, b: np.ndarray, options: Mapping[str, Any]) -> dict[str, Any]:
    return delta_significance(
        a,
        b,
        confidence=options.get("confidence", 0.95),
        n_resamples=options.get("n_resamples", 9999),
        seed=options.get("seed", 0),
    )


def evaluate(
    run_or_retriever: Run | Mapping[str, Mapping[str, float]] | str | os.PathLike[str] | Retriever,
    qrels: Qrels | Mapping[str, Mapping[str, int]] | str | os.PathLike[str],
    acl: Acl | Mapping[str, Iterable[str]] | str | os.PathLike[str] | None = None,
    k: Iterable[int] | str = (1, 3, 5, 10),
    *,
    principals: Sequence[str] | None = None,
    groups: str | os.PathLike[str] | None = None,
    placement: str = "post",
    ties: Ties = "docid",
    significance: bool = True,
    confidence: float = 0.95,
    n_resamples: int = 9999,
    seed: int = 0,
    engine: Engine | None = None,
) -> Evaluation:
    """Score a run (or a retriever) against qrels, and with an ACL, per principal.

    Parameters
    ----------
    run_or_retriever : Run, dict, path or callable
        A `arecall.io.trec.Run`; a ranx-style ``{qid: {docid: score}}``; a TREC run file; or a
        callable ``query_id -> ranked doc ids`` (or ``(doc_id, score)`` pairs, best first),
        called once per judged query.
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
        runs here on the joined per-pair arrays, so every figure is the same either way.

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
    q = _as_qrels(qrels)
    a = _as_acl(acl, principals, groups)
    r = _as_run(run_or_retriever, q, ties)
    core = _compute(r, q, ks, a, placement, engine)
    options = {
        "enabled": significance,
        "confidence": confidence,
        "n_resamples": n_resamples,
        "seed": seed,
    }
    return Evaluation(r, q, a, ks, placement, core, options)


# -- comparing two evaluations -------------------------------------------------------------------


def compare(
    a: Evaluation,
    b: Evaluation,
    *,
    measures: Sequence[str] | None = None,
    confidence: float = 0.95,
    n_resamples: int = 9999,
    seed: int = 0,
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
            x, y = a.values(m, k), b.values(m, k)
            sig = delta_significance(
                x, y, confidence=confidence, n_resamples=n_resamples, seed=seed
            )
            rows.append(
                {
                    "k": k,
                    "measure": m,
                    "mean_a": float(x.mean()),
                    "mean_b": float(y.mean()),
                    "mean_diff": sig["mean_diff"],
                    "low": sig["low"],
                    "high": sig["high"],
                    "p_value": sig["p_value"],
                    "n": sig["n"],
                }
            )
    return pd.DataFrame(rows)


# -- text rendering ------------------------------------------------------------------------------


def _count(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun`` in agreement.

    Examples
    --------
    >>> _count(1, "pair"), _count(2, "query", "queries")
    ('1 pair', '2 queries')
    """
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def _format_table(s: Mapping[str, Any]) -> str:
    lines = [
        f"run: {s['run']}  queries: {s['queries']} judged "
        f"({s['queries_without_relevant']} without relevant documents and "
        f"{s['queries_missing_from_run']} missing from the run, scored 0 as ranx/trec_eval do; "
        f"{s['run_queries_not_judged']} run queries without judgments ignored)",
        "",
        f"{'K':>5} " + " ".join(f"{EVALUATE[m].heading():>8}" for m in STANDARD_MEASURES),
    ]
    for k, r in s["k"].items():
        lines.append(f"{k:>5} " + " ".join(f"{shown(r[m], '.4f'):>8}" for m in STANDARD_MEASURES))
    if "principals" in s:
        empty = s["pairs_without_authorized_relevant"]
        lines += [
            "",
            f"authorized view: {_count(len(s['principals']), 'principal')} × "
            f"{_count(s['queries'], 'query', 'queries')} = {_count(s['pairs'], 'pair')}; "
            f"placement {s['placement']}; {_count(empty, 'pair')} with nothing relevant "
            f"authorized {'scores' if empty == 1 else 'score'} ARecall 1",
            "",
            f"{'K':>5} {'ARecall':>8} {'post':>8} {'pre':>8} {'gap':>8} {'95% CI of gap':>19} "
            f"{'p':>7} {'U@K':>7} {'deeper':>7}",
        ]
        for k, r in s["k"].items():
            lines.append(_gap_line(k, r, "", show_u=True))
        lines += [
            "",
            "excluding pairs where nothing relevant is authorized "
            f"(n={next(iter(s['k'].values()))['n_nonempty']} of {s['pairs']}):",
            f"{'K':>5} {'ARecall':>8} {'post':>8} {'pre':>8} {'gap':>8} {'95% CI of gap':>19} "
            f"{'p':>7}",
        ]
        for k, r in s["k"].items():
            lines.append(_gap_line(k, r, "_nonempty", show_u=False))
    return "\n".join(lines) + "\n"


def _gap_line(k: str, r: Mapping[str, Any], suffix: str, *, show_u: bool) -> str:
    sig = (r.get("significance") or {}).get(f"gap{suffix}")
    ci = f"[{sig['low']:+.4f}, {sig['high']:+.4f}]" if sig else "–"
    p = f"{sig['p_value']:.3g}" if sig else "–"
    gap = r.get(f"gap{suffix}")
    cells = [
        f"{k:>5}",
        f"{shown(r.get(f'arecall{suffix}'), '.4f'):>8}",
        f"{shown(r.get(f'arecall_post{suffix}'), '.4f'):>8}",
        f"{shown(r.get(f'arecall_pre{suffix}'), '.4f'):>8}",
        f"{shown(gap, '+.4f'):>8}",
        f"{ci:>19}",
        f"{p:>7}",
    ]
    if show_u:
        cells += [f"{shown(r.get('unusable'), '.4f'):>7}", f"{r.get('n_deeper', 0):>7}"]
    return " ".join(cells)
