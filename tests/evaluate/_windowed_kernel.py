"""The pair kernel `arecall evaluate` used before the sparse one (up to issue 34's speed work),
kept here as the reference the sparse kernel is checked against
(`tests/evaluate/test_pair_kernel.py`).

It unpacks every principal's authorization of the first kmax results of each query and sums
it rank by rank (cost kmax × principals per query), then scans below kmax window by window
for the relevant results that need it.
"""

from __future__ import annotations

import numpy as np

from arecall.io.acl import Acl

#: Cells (query × result × principal) of the first-K window unpacked at a time.
_WINDOW_CELLS = 1 << 22


def _unpack(bits: np.ndarray, patterns: np.ndarray, n: int) -> np.ndarray:
    """The authorization of principals 0 … n − 1 for each of ``patterns`` (shape + (n,))."""
    return np.unpackbits(bits[patterns], axis=-1, count=n, bitorder="little")


def _running(authorized: np.ndarray) -> np.ndarray:
    """Authorized results among the first r + 1, for (query, r, principal) (a cumulative sum
    over the middle axis, one rank at a time: numpy's own is several times slower there)."""
    out = np.empty(authorized.shape, dtype=np.int16 if authorized.shape[1] < 1 << 15 else np.int32)
    if authorized.shape[1]:
        out[:, 0] = authorized[:, 0]
    for r in range(1, authorized.shape[1]):
        np.add(out[:, r - 1], authorized[:, r], out=out[:, r])
    return out


def _per_query(values: np.ndarray, query: np.ndarray, nq: int) -> np.ndarray:
    """Sums of ``values`` rows (sorted by ``query``) per query: (nq, columns)."""
    import scipy.sparse as sp  # numpy's sums along the first axis are ~20× slower than this

    owner = sp.csr_matrix(
        (np.ones(len(query), dtype=np.float32), (query, np.arange(len(query)))),
        shape=(nq, len(query)),
    )
    # float32 counts are exact below 2**24 (a query's relevant results)
    return np.asarray(owner @ values.astype(np.float32), dtype=np.int32)


def authorization_tables(acl: Acl, start: int, stop: int) -> tuple[np.ndarray, np.ndarray | None]:
    """What `pair_counts` reads for principals ``start … stop − 1``: the patterns' packed bits
    (pattern-major: every principal of a result's pattern at once) and, when it is small
    enough, the same as one byte per (principal, pattern) (principal-major: one principal's
    patterns in one row, for the deep scan's gathers)."""
    bits = acl.pattern_bits(start, stop)
    table = None
    if (stop - start) * bits.shape[0] <= _TABLE_BYTES:
        table = np.ascontiguousarray(
            np.unpackbits(bits, axis=1, count=stop - start, bitorder="little").T
        )
    return bits, table


def pair_counts(
    start: int,
    stop: int,
    tables: tuple[np.ndarray, np.ndarray | None],
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
    """``n_auth``, ``post``, ``pre`` and ``unusable`` of principals ``start … stop − 1`` (whose
    authorization patterns ``tables`` holds, `authorization_tables`) on one block.

    Returns int32 arrays shaped (principals, queries, K) — ``n_auth`` (principals, queries).
    """
    bits, table = tables
    n_p, nq, n_k, kmax = stop - start, len(depth), len(ks), ks[-1]
    karr = np.asarray(ks)
    unusable = np.zeros((n_p, nq, n_k), dtype=np.int32)
    post = np.zeros((n_p, nq, n_k), dtype=np.int32)
    pre = np.zeros((n_p, nq, n_k), dtype=np.int32)
    hit_auth = _unpack(bits, hit_pat, n_p).astype(bool)  # (hits, principals)
    small = np.int16 if kmax < 1 << 15 else np.int32
    before = np.full((len(hit_rank), n_p), kmax, dtype=small)  # authorized results above
    base = np.zeros((nq, n_p), dtype=small)  # authorized among the first kmax
    step = max(1, _WINDOW_CELLS // max(kmax * n_p, 1))
    for a in range(0, nq, step):
        b = min(a + step, nq)
        counted = _running(_unpack(bits, top_pat[a:b], n_p))
        shown = np.minimum(karr[None, :], depth[a:b, None])  # results in the first K
        at = np.take_along_axis(counted, np.maximum(shown - 1, 0)[:, :, None], axis=1)
        authorized = np.where(shown[:, :, None] > 0, at, 0)  # (queries, K, principals)
        unusable[:, a:b, :] = (shown[:, :, None] - authorized).transpose(2, 0, 1)
        base[a:b] = counted[:, kmax - 1, :]
        mine = np.flatnonzero((hit_query >= a) & (hit_query < b) & (hit_rank < kmax))
        top_rank = hit_rank[mine]
        above = counted[hit_query[mine] - a, np.maximum(top_rank - 1, 0), :]
        before[mine] = np.where(top_rank[:, None] > 0, above, 0)
    deep = np.flatnonzero(hit_rank >= kmax)
    if len(deep):
        before[deep] = _deep_before(
            bits, table, base, hit_auth[deep], hit_query[deep], hit_rank[deep], deep_pat, kmax
        )  # fmt: skip
    for j, k in enumerate(ks):
        post[:, :, j] = _per_query(hit_auth & (hit_rank[:, None] < k), hit_query, nq).T
        pre[:, :, j] = _per_query(hit_auth & (before < k), hit_query, nq).T
    n_auth = _per_query(_unpack(bits, rel_pat, n_p), rel_query, nq).T
    return {"n_auth": n_auth, "post": post, "pre": pre, "unusable": unusable}


#: Cells (pair × result) of one window of the deep scan.
_SCAN_CELLS = 1 << 20
#: Bytes of the principal × pattern table the deep scan reads, unpacked; past it, packed bits.
_TABLE_BYTES = 1 << 26


def _deep_before(
    bits: np.ndarray,
    table: np.ndarray | None,
    base: np.ndarray,
    auth: np.ndarray,
    query: np.ndarray,
    rank: np.ndarray,
    deep_pat: np.ndarray,
    kmax: int,
) -> np.ndarray:
    """min(kmax, authorized results above) for relevant results below the first kmax.

    Only pairs (query, principal) with an authorized relevant result down there and fewer than
    kmax authorized results in the first kmax are scanned, window by window, each pair until it
    has kmax (then no deeper result can count for any K) or passes its deepest such result.
    ``deep_pat[q, i]`` is the pattern of query q's result at rank kmax + i (padded with
    nobody's pattern, which grants no one).
    """
    out = np.full(auth.shape, kmax, dtype=base.dtype)
    h_idx, p_idx = np.nonzero(auth & (base < kmax)[query])
    if not len(h_idx):
        return out
    if not deep_pat.shape[1]:  # every such result is at rank kmax: nothing above to scan
        deep_pat = np.full((len(deep_pat), 1), bits.shape[0] - 1, dtype=np.int32)
    # the pairs to scan (by principal: the gathers then stay in one principal's table row), and
    # for each the deepest rank it must reach
    nq = len(deep_pat)
    pair_key = p_idx.astype(np.int64) * nq + query[h_idx]
    pairs, task_pair = np.unique(pair_key, return_inverse=True)
    task_pair = task_pair.ravel()
    pair_p, pair_q = pairs // nq, pairs % nq
    end = np.zeros(len(pairs), dtype=np.int64)
    np.maximum.at(end, task_pair, rank[h_idx])
    count = base[pair_q, pair_p].astype(np.int64)  # authorized results above the window
    task_rank = rank[h_idx]
    task_order = np.argsort(task_rank, kind="stable")
    result = np.full(len(h_idx), kmax, dtype=np.int64)
    # whether principal p may use pattern u: one byte each when that is small, else the bits
    n_pat = bits.shape[0]
    flat_table = table.ravel() if table is not None else None  # principal-major
    byte, shift = pair_p >> 3, (pair_p & 7).astype(np.uint8)
    deep_flat, deep_width = deep_pat.ravel(), deep_pat.shape[1]
    active = np.arange(len(pairs))
    lo, t, width_cap = kmax, 0, 32
    while len(active):
        width = int(min(width_cap, max(8, _SCAN_CELLS // len(active))))
        hi = lo + width
        columns = np.arange(lo - kmax, hi - kmax)
        inside = columns < deep_pat.shape[1]
        pats = deep_flat[(pair_q[active] * deep_width)[:, None] + np.where(inside, columns, 0)]
        if flat_table is not None:
            bit = flat_table[(pair_p[active] * n_pat)[:, None] + pats]
        else:
            bit = (bits[pats, byte[active, None]] >> shift[active, None]) & 1
        if not inside.all():  # past every query's deepest relevant result: nothing to count
            bit[:, ~inside] = 0
        running = np.cumsum(bit, axis=1, dtype=np.int32)
        # relevant results whose rank falls in this window: authorized results above them
        t_end = t + int(np.searchsorted(task_rank[task_order[t:]], hi))
        tasks = task_order[t:t_end]
        t = t_end
        if len(tasks):
            where = np.full(len(pairs), -1, dtype=np.int64)
            where[active] = np.arange(len(active))
            row = where[task_pair[tasks]]
            live = row >= 0
            offset = task_rank[tasks[live]] - lo
            within = np.where(offset > 0, running[row[live], np.maximum(offset - 1, 0)], 0)
            result[tasks[live]] = np.minimum(count[active[row[live]]] + within, kmax)
        count[active] += running[:, -1]
        keep = (count[active] < kmax) & (end[active] >= hi)  # a result at rank hi: next window
        active = active[keep]
        lo, width_cap = hi, min(width_cap * 2, 1024)
    out[h_idx, p_idx] = result
    return out
