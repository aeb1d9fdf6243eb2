"""The vectorised kernels of ``evaluate``: one block of whole queries at a time.

Why blocks: a run is read a block of queries at a time (`arecall.io.trec.read_run`), so memory
holds one block, never the run. Everything a query's measures need is in its block and the
qrels: `EvalQrels` is what is computed once from the qrels; `prepare` turns a block into the
arrays the kernels take (which rows are relevant, at what rank; with an ACL, each retrieved
document's authorization pattern); `standard` gives the standard measures of the block's
queries and `pair_counts` the integer counts behind every authorized measure of every
(principal, query) pair. No loop runs per query or per row in Python.

The counts are integers, so any split into blocks of queries (and, on a cluster, of
principals) gives the same numbers; every float is computed from them the same way
(`arecall.evaluate.result`), so the figures do not depend on the block size or the engine.

Authorized counts, per (principal p, query q, cutoff K), with A_p the documents p may use:

* ``n_auth`` = |R ∩ A_p|, the judged relevant documents p may use;
* ``post`` = relevant documents of A_p among the first K results (filter after truncation);
* ``pre`` = relevant documents of A_p among the first K results *of A_p* (filter first): a
  relevant result at rank r counts when fewer than K results before it are in A_p;
* ``unusable`` = results among the first K that are not in A_p.

Every count is a sum over results of "may p use this result", and a result's authorization is
its pattern (`arecall.io.acl.Acl`): so each is a sparse product of results counted per pattern
with the (pattern × principal) grants, for all principals at once (`_authorized`). ``pre`` is the
only one that looks past the first K: for a relevant result at rank r it needs p's results
before r, the running sum of those products over each query's results down to its deepest
relevant one (`_above`). The cost follows the grants of the results read, not principals ×
depth.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from arecall.core.measures import EVALUATE, Kind
from arecall.core.ragged import offsets, positions_in_groups, positions_in_runs
from arecall.io.acl import Acl
from arecall.io.ids import index_in
from arecall.io.trec import Qrels, Run

if TYPE_CHECKING:  # scipy loads with an ACL: an evaluation without one never needs it
    import scipy.sparse as sp

__all__ = [
    "AUTHORIZED_MEASURES",
    "STANDARD_MEASURES",
    "EvalQrels",
    "Prepared",
    "pair_counts",
    "prepare",
    "ratio",
    "standard",
]

#: Per-query measures, authorization-blind (ranx's and trec_eval's ``trec`` convention).
STANDARD_MEASURES = tuple(m.name for m in EVALUATE.values() if m.kind == Kind.STANDARD)
#: Per query-principal pair measures (the seed's ``vacuous`` convention), with an ACL.
AUTHORIZED_MEASURES = tuple(m.name for m in EVALUATE.values() if m.kind == Kind.AUTHORIZED)


def ratio(num: np.ndarray, den: np.ndarray, empty: float | None) -> np.ndarray:
    """num / den, ``empty`` (the measure's R = ∅ value) where den == 0."""
    den = np.asarray(den, dtype=np.float64)
    safe = np.where(den > 0, den, 1.0)
    return np.where(den > 0, num / safe, np.nan if empty is None else empty)


def _bincount(index: np.ndarray, n: int, weights: np.ndarray | None = None) -> np.ndarray:
    return np.bincount(index, weights=weights, minlength=n).astype(np.float64)[:n]


# -- what the qrels give, once ---------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class EvalQrels:
    """The qrels in eval order (judged query ids, sorted): what every block's kernels read.

    Attributes
    ----------
    query_ids : pyarrow.StringArray
        The evaluated queries, sorted (eval index i is ``query_ids[i]``).
    n_relevant : ndarray of int64
        Relevant judgments (grade >= 1) per eval query.
    rel_offsets, rel_docs, rel_grade : ndarray
        Each eval query's relevant judgments: codes into the qrels' ``doc_ids`` and grades.
    idcg, idcg_exp : ndarray of float64, shape (n_queries, n_ks)
        The ideal DCG of each query at each K, linear and exponential gain.
    """

    qrels: Qrels
    ks: tuple[int, ...]
    query_ids: pa.Array
    n_relevant: np.ndarray
    rel_offsets: np.ndarray
    rel_docs: np.ndarray
    rel_grade: np.ndarray
    idcg: np.ndarray
    idcg_exp: np.ndarray

    @classmethod
    def of(cls, qrels: Qrels, ks: tuple[int, ...]) -> EvalQrels:
        nq = qrels.n_queries
        order = np.asarray(pc.sort_indices(qrels.query_ids).to_numpy(), dtype=np.int64)
        eval_of_qgroup = np.empty(nq, dtype=np.int64)
        eval_of_qgroup[order] = np.arange(nq)
        qe = np.repeat(eval_of_qgroup, np.diff(qrels.offsets))
        is_rel = qrels.relevance >= 1
        rel_q, rel_g, rel_doc = qe[is_rel], qrels.relevance[is_rel], qrels.doc_codes[is_rel]
        n_rel = np.bincount(rel_q, minlength=nq)
        by_query = np.argsort(rel_q, kind="stable")
        ideal = np.lexsort((-rel_g, rel_q))
        ideal_query, ideal_grade = rel_q[ideal], rel_g[ideal].astype(np.float64)
        ideal_pos = positions_in_groups(n_rel)
        ideal_discount = 1.0 / np.log2(ideal_pos + 2.0)
        idcg = np.zeros((nq, len(ks)))
        idcg_exp = np.zeros((nq, len(ks)))
        for j, k in enumerate(ks):
            im = ideal_pos < k
            idcg[:, j] = _bincount(ideal_query[im], nq, (ideal_grade * ideal_discount)[im])
            gain = 2.0**ideal_grade - 1.0
            idcg_exp[:, j] = _bincount(ideal_query[im], nq, (gain * ideal_discount)[im])
        return cls(
            qrels=qrels,
            ks=ks,
            query_ids=qrels.query_ids.take(pa.array(order)),
            n_relevant=n_rel,
            rel_offsets=offsets(n_rel),
            rel_docs=rel_doc[by_query],
            rel_grade=rel_g[by_query],
            idcg=idcg,
            idcg_exp=idcg_exp,
        )

    @property
    def n_queries(self) -> int:
        return len(self.query_ids)


# -- one block, prepared ---------------------------------------------------------------------------


@dataclass(eq=False)
class Prepared:
    """One block of a run, reduced to what the kernels need (local query = index in the block's
    judged queries, in block order).

    ``top_pat``, ``hit_pat``, ``deep_*`` and ``rel_*`` are set only with an ACL.
    """

    eval_index: np.ndarray  # eval index of each judged query of the block
    depth: np.ndarray  # results per judged query
    not_judged: int  # the block's queries without judgments
    hit_query: np.ndarray  # local query of each relevant result, by query then rank
    hit_rank: np.ndarray  # 0-based rank
    hit_grade: np.ndarray  # relevance grade, float
    rows_matched: bool = False  # whether the ACL grants any of the first kmax results
    top_pat: np.ndarray | None = None  # (n, kmax) pattern of the first kmax results
    hit_pat: np.ndarray | None = None
    deep_pat: np.ndarray | None = None  # (n, width): results kmax … deepest hit, padded
    rel_query: np.ndarray | None = None  # relevant judgments of the block's queries
    rel_pat: np.ndarray | None = None

    @property
    def n_queries(self) -> int:
        return len(self.eval_index)


def _per_row(look_up: Callable[[pa.Array], np.ndarray], run: Run, rows: np.ndarray) -> np.ndarray:
    """``look_up`` (document ids -> values) of the document of each of ``rows``, looking up
    each distinct document once: the whole block's vocabulary when the rows cover about as
    many (a block read from a file has its own), else the documents the rows use."""
    if len(run.doc_ids) <= len(rows):
        return look_up(run.doc_ids)[run.doc_codes[rows]]
    used, where = np.unique(run.doc_codes[rows], return_inverse=True)
    return look_up(run.doc_ids.take(pa.array(used)))[where.ravel()]


def _relevant_rows(
    run: Run, local: np.ndarray, rows: np.ndarray, judg: EvalQrels, eval_index: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Which of ``rows`` (of local queries ``local``) are judged relevant, and their grades."""
    starts, stops = judg.rel_offsets[eval_index], judg.rel_offsets[eval_index + 1]
    sizes = stops - starts
    picked = np.repeat(starts, sizes) + positions_in_groups(sizes)
    if not len(picked) or not len(rows):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    # the block's relevant documents, as a small vocabulary the run's ids are looked up in
    codes, inverse = np.unique(judg.rel_docs[picked], return_inverse=True)
    vocab = judg.qrels.doc_ids.take(pa.array(codes))
    keys = np.repeat(np.arange(len(eval_index)), sizes) * len(codes) + inverse.ravel()
    order = np.argsort(keys, kind="stable")
    keys, grades = keys[order], judg.rel_grade[picked][order]
    found = _per_row(lambda ids: index_in(ids, vocab), run, rows)
    candidate = np.flatnonzero(found >= 0)
    probe = local[candidate] * len(codes) + found[candidate]
    pos = np.minimum(np.searchsorted(keys, probe), len(keys) - 1)
    ok = keys[pos] == probe
    return rows[candidate[ok]], grades[pos[ok]]


def prepare(run: Run, judg: EvalQrels, acl: Acl | None) -> Prepared:
    """The kernels' view of one block: judged queries, their relevant results and, with an ACL,
    the authorization pattern of each result a pair may need."""
    ks = judg.ks
    kmax = ks[-1]
    found = index_in(run.query_ids, judg.query_ids)
    judged = np.flatnonzero(found >= 0)
    eval_index = found[judged]
    starts = run.offsets[judged]
    depth = run.offsets[judged + 1] - starts
    # without an ACL only the first kmax results matter; with one, every relevant result does
    seen = depth if acl is not None else np.minimum(depth, kmax)
    local = np.repeat(np.arange(len(judged)), seen)
    rank = positions_in_groups(seen)
    rows = np.repeat(starts, seen) + rank
    hit_rows, grade = _relevant_rows(run, local, rows, judg, eval_index)
    # rows are by query then rank, and the hits keep that order
    where = np.searchsorted(rows, hit_rows)
    prepared = Prepared(
        eval_index=eval_index,
        depth=depth,
        not_judged=int(len(found) - len(judged)),
        hit_query=local[where],
        hit_rank=rank[where],
        hit_grade=grade.astype(np.float64),
    )
    if acl is not None:
        _patterns(prepared, run, starts, judg, acl, kmax)
    return prepared


def _patterns(
    prepared: Prepared, run: Run, starts: np.ndarray, judg: EvalQrels, acl: Acl, kmax: int
) -> None:
    """Each result's authorization pattern (`arecall.io.acl.Acl.doc_patterns`), for the rows
    the pair kernel may read: the first kmax, the relevant ones, and the rows between kmax and
    each query's deepest relevant result."""
    nobody = acl.n_patterns - 1
    depth = prepared.depth
    deepest = np.zeros(len(depth), dtype=np.int64)
    np.maximum.at(deepest, prepared.hit_query, prepared.hit_rank)
    deep_len = np.maximum(np.minimum(depth, deepest) - kmax, 0)
    top = np.arange(kmax)[None, :] < depth[:, None]
    top_rows = np.where(top, starts[:, None] + np.arange(kmax)[None, :], 0)
    deep_rows = np.repeat(starts + kmax, deep_len) + positions_in_groups(deep_len)
    hit_rows = starts[prepared.hit_query] + prepared.hit_rank
    needed = np.concatenate([top_rows[top], deep_rows, hit_rows])
    pattern = _per_row(acl.doc_patterns, run, needed)
    n_top = int(top.sum())
    top_pat = np.full(top.shape, nobody, dtype=np.int64)
    top_pat[top] = pattern[:n_top]
    prepared.rows_matched = bool(acl.grants_anyone(pattern[:n_top]).any())
    prepared.top_pat = top_pat
    deep = np.full((len(depth), int(deep_len.max(initial=0))), nobody, dtype=np.int32)
    deep[np.arange(deep.shape[1])[None, :] < deep_len[:, None]] = pattern[
        n_top : n_top + len(deep_rows)
    ]
    prepared.deep_pat = deep
    prepared.hit_pat = pattern[n_top + len(deep_rows) :]
    # the relevant judgments of the block's queries (|R ∩ A_p| needs them, retrieved or not)
    ev = prepared.eval_index
    sizes = judg.rel_offsets[ev + 1] - judg.rel_offsets[ev]
    picked = np.repeat(judg.rel_offsets[ev], sizes) + positions_in_groups(sizes)
    docs, inverse = np.unique(judg.rel_docs[picked], return_inverse=True)
    rel_pattern = acl.doc_patterns(judg.qrels.doc_ids.take(pa.array(docs)))
    prepared.rel_query = np.repeat(np.arange(len(ev)), sizes)
    prepared.rel_pat = rel_pattern[inverse.ravel()]


def missing(judg: EvalQrels, eval_index: np.ndarray, acl: Acl | None) -> Prepared:
    """Judged queries the run never returned: depth 0, nothing retrieved (a block of their own,
    so their pairs get |R ∩ A_p| like every other)."""
    empty = np.zeros(0, dtype=np.int64)
    prepared = Prepared(
        eval_index=eval_index,
        depth=np.zeros(len(eval_index), dtype=np.int64),
        not_judged=0,
        hit_query=empty,
        hit_rank=empty,
        hit_grade=np.zeros(0),
    )
    if acl is not None:
        kmax = judg.ks[-1]
        prepared.top_pat = np.full((len(eval_index), kmax), acl.n_patterns - 1, dtype=np.int64)
        prepared.hit_pat = empty
        prepared.deep_pat = np.zeros((len(eval_index), 0), dtype=np.int32)
        sizes = judg.rel_offsets[eval_index + 1] - judg.rel_offsets[eval_index]
        picked = np.repeat(judg.rel_offsets[eval_index], sizes) + positions_in_groups(sizes)
        docs, inverse = np.unique(judg.rel_docs[picked], return_inverse=True)
        rel_pattern = acl.doc_patterns(judg.qrels.doc_ids.take(pa.array(docs)))
        prepared.rel_query = np.repeat(np.arange(len(eval_index)), sizes)
        prepared.rel_pat = rel_pattern[inverse.ravel()]
    return prepared


# -- standard measures -----------------------------------------------------------------------------


def standard(prepared: Prepared, judg: EvalQrels) -> dict[str, np.ndarray]:
    """Every standard measure per (local query, K), each R = ∅ value from the registry."""
    ks = judg.ks
    nq = prepared.n_queries
    ev = prepared.eval_index
    n_rel = judg.n_relevant[ev]
    hq, hrank, hrel = prepared.hit_query, prepared.hit_rank, prepared.hit_grade
    nth = positions_in_runs(hq)
    first = nth == 0
    discount = 1.0 / np.log2(hrank + 2.0)
    std = {m: np.zeros((nq, len(ks))) for m in STANDARD_MEASURES}
    empty = {m: EVALUATE[m].empty for m in STANDARD_MEASURES}
    for j, k in enumerate(ks):
        m = hrank < k
        n_hits = _bincount(hq[m], nq)
        std["recall"][:, j] = ratio(n_hits, n_rel, empty["recall"])
        std["precision"][:, j] = n_hits / k
        std["hit_rate"][:, j] = n_hits > 0
        for name, gain, idcg in (
            ("ndcg", hrel, judg.idcg[ev, j]),
            ("ndcg_exp", 2.0**hrel - 1.0, judg.idcg_exp[ev, j]),
        ):
            dcg = _bincount(hq[m], nq, (gain * discount)[m])
            std[name][:, j] = ratio(dcg, idcg, empty[name])
        firsts = m & first
        std["mrr"][:, j] = _bincount(hq[firsts], nq, 1.0 / (hrank[firsts] + 1.0))
        ap = _bincount(hq[m], nq, ((nth + 1.0) / (hrank + 1.0))[m])
        std["map"][:, j] = ratio(ap, n_rel, empty["map"])
    return std


# -- authorized counts -----------------------------------------------------------------------------

#: Cells (relevant result × principal) of the prefix counts computed at a time.
_PREFIX_CELLS = 1 << 23


def authorization_tables(acl: Acl, start: int, stop: int) -> sp.csr_matrix:
    """What `pair_counts` reads for principals ``start … stop − 1``: which of them each
    authorization pattern grants, as an int32 sparse (pattern × principal) matrix whose last
    row is nobody's pattern (empty), so that counts of results per pattern times it are counts
    of authorized results per principal."""
    import scipy.sparse as sp

    granted = acl.members[:, start:stop].astype(np.int32)
    nobody = sp.csr_matrix((1, stop - start), dtype=np.int32)
    return sp.vstack([granted, nobody], format="csr")


def _authorized(
    members: sp.csr_matrix, rows: np.ndarray, patterns: np.ndarray, n_rows: int
) -> np.ndarray:
    """Authorized results per (row, principal): rows of results (``rows[i]`` holds a result of
    pattern ``patterns[i]``) counted per pattern, times which principals each pattern grants.

    A sparse product: the work follows the grants of the patterns present, not principals ×
    results (int32 throughout, so the counts are exact)."""
    import scipy.sparse as sp

    per_pattern = sp.csr_matrix(
        (np.ones(len(rows), dtype=np.int32), (rows, patterns)),
        shape=(n_rows, members.shape[0]),
    )  # repeated (row, pattern) entries add up
    return np.asarray((per_pattern @ members).toarray(), dtype=np.int32)


def pair_counts(
    start: int,
    stop: int,
    members: sp.csr_matrix,
    *,
    ks: tuple[int, ...],
    depth: np.ndarray,
    top_pat: np.ndarray,
    hit_query: np.ndarray,
    hit_rank: np.ndarray,
    hit_pat: np.ndarray,
    deep_pat: np.ndarray,
    rel_query: np.ndarray,
    rel_pat: np.ndarray,
) -> dict[str, np.ndarray]:
    """``n_auth``, ``post``, ``pre`` and ``unusable`` of principals ``start … stop − 1`` (which
    of them each pattern grants: ``members``, `authorization_tables`) on one block.

    Every count is a sparse product of results counted per authorization pattern with
    ``members`` (`_authorized`): ``unusable`` from the first K results of each query, ``post``
    from the relevant ones among them, ``n_auth`` from the relevant judgments. ``pre`` needs,
    for each relevant result, the authorized results above it (`_above`).

    Returns int32 arrays shaped (principals, queries, K) — ``n_auth`` (principals, queries).
    """
    n_p, nq, n_k = stop - start, len(depth), len(ks)
    unusable = np.zeros((n_p, nq, n_k), dtype=np.int32)
    post = np.zeros((n_p, nq, n_k), dtype=np.int32)
    pre = np.zeros((n_p, nq, n_k), dtype=np.int32)
    queries = np.arange(nq)
    for j, k in enumerate(ks):
        # top_pat is padded with nobody's pattern past a query's depth: it grants no one
        authorized = _authorized(members, np.repeat(queries, k), top_pat[:, :k].ravel(), nq)
        shown = np.minimum(k, depth).astype(np.int32)
        unusable[:, :, j] = (shown[:, None] - authorized).T
        top = hit_rank < k
        post[:, :, j] = _authorized(members, hit_query[top], hit_pat[top], nq).T
    if len(hit_rank):
        _pre(pre, members, ks, top_pat, hit_query, hit_rank, hit_pat, deep_pat)
    n_auth = _authorized(members, rel_query, rel_pat, nq).T
    return {"n_auth": n_auth, "post": post, "pre": pre, "unusable": unusable}


def _pre(
    pre: np.ndarray,
    members: sp.csr_matrix,
    ks: tuple[int, ...],
    top_pat: np.ndarray,
    hit_query: np.ndarray,
    hit_rank: np.ndarray,
    hit_pat: np.ndarray,
    deep_pat: np.ndarray,
) -> None:
    """Fill ``pre`` (principals, queries, K): a relevant result at rank r counts for principal
    p at K when p may use it and fewer than K of the results above it are p's.

    The results above each relevant result are the segments between consecutive relevant
    results of a query (a query's results down to its deepest relevant one, once); authorized
    counts per segment (`_authorized`) summed down each query give every relevant result's
    prefix count. Done a slice of whole queries at a time, to bound the (result × principal)
    arrays.
    """
    n_p, kmax = pre.shape[0], ks[-1]
    bounds = np.searchsorted(hit_query, np.arange(len(top_pat) + 1))
    step = max(1, _PREFIX_CELLS // max(n_p, 1))
    a = 0
    while a < len(top_pat):  # a slice of queries holding about `step` relevant results
        b = max(a + 1, int(np.searchsorted(bounds, bounds[a] + step, side="right")) - 1)
        b = min(b, len(top_pat))
        lo, hi = int(bounds[a]), int(bounds[b])
        if hi > lo:
            query, rank = hit_query[lo:hi], hit_rank[lo:hi]
            above = _above(members, kmax, top_pat, deep_pat, query, rank)
            may = _authorized(members, np.arange(hi - lo), hit_pat[lo:hi], hi - lo) > 0
            owner = query - a
            for j, k in enumerate(ks):
                pre[:, a:b, j] = _per_query(may & (above < k), owner, b - a).T
        a = b


def _above(
    members: sp.csr_matrix,
    kmax: int,
    top_pat: np.ndarray,
    deep_pat: np.ndarray,
    query: np.ndarray,
    rank: np.ndarray,
) -> np.ndarray:
    """min(kmax, p's results above each relevant result) per (relevant result, principal p),
    for relevant results sorted by query then rank. ``deep_pat[q, i]`` is the pattern of
    query q's result at rank kmax + i (it reaches each query's deepest relevant result)."""
    first = np.r_[True, query[1:] != query[:-1]]
    seg_start = np.where(first, 0, np.r_[0, rank[:-1]])
    seg_len = rank - seg_start
    owner = np.repeat(np.arange(len(rank)), seg_len)
    at = np.repeat(seg_start, seg_len) + positions_in_groups(seg_len)
    of = query[owner]
    pattern = top_pat[of, np.minimum(at, kmax - 1)]
    deep = at >= kmax
    if deep.any():
        pattern[deep] = deep_pat[of[deep], at[deep] - kmax]
    per_segment = _authorized(members, owner, pattern, len(rank))
    above = np.cumsum(per_segment, axis=0, dtype=np.int32)
    # each query's sums start at its first relevant result
    starts = np.flatnonzero(first)
    before_query = np.zeros((len(starts), above.shape[1]), dtype=np.int32)
    before_query[1:] = above[starts[1:] - 1]
    above -= np.repeat(before_query, np.diff(np.r_[starts, len(rank)]), axis=0)
    return np.minimum(above, kmax)


def _per_query(values: np.ndarray, query: np.ndarray, nq: int) -> np.ndarray:
    """Sums of ``values`` rows (sorted by ``query``) per query: (nq, columns)."""
    import scipy.sparse as sp  # numpy's sums along the first axis are ~20× slower than this

    owner = sp.csr_matrix(
        (np.ones(len(query), dtype=np.float32), (query, np.arange(len(query)))),
        shape=(nq, len(query)),
    )
    # float32 counts are exact below 2**24 (a query's relevant results)
    return np.asarray(owner @ values.astype(np.float32), dtype=np.int32)


def pair_inputs(prepared: Prepared, ks: tuple[int, ...]) -> dict[str, Any]:
    """The arrays every block of principals shares, for `pair_counts`."""
    return {
        "ks": ks,
        "depth": prepared.depth,
        "top_pat": prepared.top_pat,
        "hit_query": prepared.hit_query,
        "hit_rank": prepared.hit_rank,
        "hit_pat": prepared.hit_pat,
        "deep_pat": prepared.deep_pat,
        "rel_query": prepared.rel_query,
        "rel_pat": prepared.rel_pat,
    }


def joined(
    parts: list[Mapping[str, np.ndarray]], n_queries: int, n_ks: int
) -> dict[str, np.ndarray]:
    """The blocks of principals' counts, joined in principal order."""
    if not parts:
        return {
            "n_auth": np.zeros((0, n_queries), dtype=np.int32),
            **{
                n: np.zeros((0, n_queries, n_ks), dtype=np.int32)
                for n in ("post", "pre", "unusable")
            },
        }
    return {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}
