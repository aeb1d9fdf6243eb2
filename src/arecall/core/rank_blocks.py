"""Ranking by block: queries in blocks over the fitted retriever, documents in shards, on any
engine (`arecall.core.engine`), giving the bytes of the one-process ranking.

Why: the rank stage held one process for the whole query set (about 70 minutes for 10^6
queries over 10^6 documents). A query's ranking depends on its own scores only, so the queries
are cut into blocks that rank anywhere; each block writes its part of the ranking to a file
(nothing per query comes back through the engine), and the parts are joined in block order into
the ranking file, one array at a time (`write_npz_pieces`), byte-identical to `rank_queries` over
the whole set.

Where one process cannot hold every document's vectors, the documents are cut into *shards*
too (``doc_shards``): each shard scores the queries against its own documents and keeps, per
query, its first entries in the project's order (rounded score descending, document id
ascending) — at least the head, each principal's first ``k_max`` authorized documents and the
first relevant one. A query block then merges the shards' entries, which are the full ranking's
first entries up to the shallowest point where a shard stopped (the *exact prefix*). A query
whose ranking reaches past that prefix (a principal's pre list, or its first relevant document,
is deeper than some shard's cut) is ranked again from every shard's whole row: so the merge is
exact for every query, ties included, whatever the shards. The merged entries go through the
same `_rank_block` as the unsharded ranking, with the full ranking's length.

Per-block files live in a temporary directory beside the ranking file
(`arecall.io.atomic.temporary_directory`: removed afterwards whatever happened, on SIGTERM, and
after a kill -9 by the next run); on a Dask cluster the workers write there, so they must see
that directory (a cluster on one machine, or a shared file system).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from tqdm import tqdm

from arecall.core.engine import Engine, blocks_of
from arecall.core.errors import ArecallError
from arecall.core.ragged import offsets
from arecall.core.ranking import (
    _FIELD_TYPES,
    RANKING_FIELDS,
    _dense_acl,
    _first_relevant,
    _pre_needs,
    _rank_block,
    _ranking_of,
    _sorted_block,
    rank_queries,
)
from arecall.io.atomic import temporary_directory, write_npz, write_npz_pieces

__all__ = ["RankSettings", "auto_block", "rank_by_block"]

#: Score cells (queries × documents) one block may hold when ``block_queries`` is automatic.
BLOCK_CELLS = 1 << 26


@dataclass(frozen=True)
class RankSettings:
    """How deep to rank and how to score: what every block needs besides its queries.

    Attributes
    ----------
    n_docs : int
    depth : int or None
        As `rank_queries`'s ``depth``.
    k_max : int
    every_entry : bool
        Rank every stored entry (a dense retriever), not only positive scores.
    chunk : int
        Queries per ``retriever.score`` call.
    """

    n_docs: int
    depth: int | None
    k_max: int
    every_entry: bool = False
    chunk: int = 1024

    @property
    def head_depth(self) -> int | None:
        return None if self.depth is None else max(self.depth, self.k_max)


def auto_block(n_docs: int, chunk: int) -> int:
    """Queries per block when ``block_queries`` is 0: as many as keep a block's scores (and,
    at worst, its whole kept ranking) near `BLOCK_CELLS` cells, never fewer than one chunk.

    Examples
    --------
    >>> auto_block(1_000_000, 64), auto_block(1_000, 1024)
    (67, 67108)
    """
    return max(chunk, BLOCK_CELLS // max(n_docs, 1))


def rank_by_block(
    retriever: Any,
    inputs: Sequence[str],
    out: str | Path,
    *,
    settings: RankSettings,
    engine: Engine,
    block_queries: int,
    doc_shards: int = 1,
    acl: sp.spmatrix | None = None,
    relevance: sp.spmatrix | None = None,
    shard_of: Callable[[Any, int, int], Any] | None = None,
) -> dict[str, int]:
    """Rank every query of ``inputs`` in blocks on ``engine`` and write the ranking to ``out``.

    Parameters
    ----------
    retriever : fitted retriever
        Its ``score(inputs[a:b])`` gives queries × documents scores.
    inputs : sequence of str
        What ``retriever.score`` takes per query (texts, or a keyed retriever's ids).
    out : path
        The ranking file: the bytes `Ranking.save` writes for `rank_queries` over every query.
    settings : RankSettings
    engine : Engine
        Where blocks run; its ``block`` setting, if any, wins over ``block_queries``.
    block_queries : int
        Queries per block (`auto_block` when 0).
    doc_shards : int
        Document shards (1: every block scores every document at once).
    acl, relevance : sparse matrices, optional
        Principals × documents and queries × documents.
    shard_of : callable, optional
        ``(retriever, start, stop) -> retriever`` of documents ``start:stop``
        (`arecall.retrievers.document_shard`); needed when ``doc_shards`` > 1.

    Returns
    -------
    dict
        `Ranking.sizes` summed over the blocks, and the entries the file stores:
        ``stored_ranked`` (ranked) and ``stored_tails`` (tails).
    """
    out = Path(out).absolute()  # workers write beside it: not relative to their own cwd
    n_queries = len(inputs)
    block = block_queries or auto_block(settings.n_docs, settings.chunk)
    allowed = None if acl is None or settings.depth is None else _dense_acl(acl)
    rel = (
        sp.csr_matrix((n_queries, settings.n_docs), dtype=bool)
        if relevance is None
        else sp.csr_matrix(relevance).sorted_indices()
    )
    with temporary_directory(out) as where:
        spans = engine.spans(n_queries, block)
        common = {"settings": settings, "where": str(where), "allowed": allowed}
        if doc_shards <= 1:
            results = engine.map_blocks(
                _rank_query_block,
                n_queries,
                shared={**common, "retriever": retriever},
                block_data=lambda s, e: (list(inputs[s:e]), rel[s:e]),
                size=block,
            )
        else:
            if shard_of is None:
                raise ArecallError("rank_by_block: doc_shards > 1 needs shard_of")
            results = _rank_sharded(
                retriever, inputs, rel, (spans, block), engine, common, doc_shards, shard_of
            )
        lengths = _join_files([where / _block_name(s) for s, _ in spans], n_queries, out)
    sizes = {k: sum(r[k] for r in results) for k in results[0]} if results else {"queries": 0}
    return {
        **sizes,
        "stored_ranked": lengths["doc_index"],
        "stored_tails": lengths["tail_doc"],
    }


def _block_name(start: int) -> str:
    return f"block-{start:012d}.npz"


def _score_chunks(retriever: Any, inputs: Sequence[str], chunk: int) -> Iterator[sp.spmatrix]:
    """The retriever's scores, chunk by chunk; a bar past one chunk, on a terminal only (tqdm's
    ``disable=None``: none into a redirected stderr, a worker's log included)."""
    bar = len(inputs) > chunk
    for a in tqdm(
        range(0, len(inputs), chunk), desc="rank", unit="chunk", disable=None if bar else True
    ):
        yield retriever.score(inputs[a : a + chunk])


def _rank_query_block(
    start: int,
    stop: int,
    data: tuple[list[str], sp.csr_matrix],
    *,
    retriever: Any,
    settings: RankSettings,
    where: str,
    allowed: np.ndarray | None,
) -> dict[str, int]:
    """One block of queries over every document: rank, write its part, return its sizes."""
    inputs, rel = data
    ranking = rank_queries(
        _score_chunks(retriever, inputs, settings.chunk),
        n_queries=stop - start,
        depth=settings.depth,
        acl=allowed,
        k_max=settings.k_max,
        relevance=rel,
        every_entry=settings.every_entry,
        first_query=start,
    )
    ranking.save(Path(where) / _block_name(start))
    return dict(ranking.sizes)


def _join_files(paths: list[Path], n_queries: int, out: Path) -> dict[str, int]:
    """The blocks' ranking files joined in order into ``out``, one array at a time; returns
    each array's length."""
    lengths: dict[str, int] = dict.fromkeys(RANKING_FIELDS, 0)
    for path in paths:
        with np.load(path, allow_pickle=False) as z:
            for f in RANKING_FIELDS:
                lengths[f] += len(z[f]) - (1 if f == "indptr" else 0)
    lengths["indptr"] += 1
    if lengths["indptr"] != n_queries + 1:  # pragma: no cover - a block lost: never written
        raise ArecallError(f"{out}: the blocks held {lengths['indptr'] - 1} of {n_queries} queries")

    def pieces(field: str) -> Callable[[], Iterator[np.ndarray]]:
        def gen() -> Iterator[np.ndarray]:
            base = 0
            if field == "indptr":
                yield np.zeros(1, np.int64)
            for path in paths:
                with np.load(path, allow_pickle=False) as z:
                    part = z[field]
                if field == "indptr":
                    yield part[1:] + base
                    base += int(part[-1])
                else:
                    yield part

        return gen

    write_npz_pieces(out, {f: (_FIELD_TYPES[f], (lengths[f],), pieces(f)) for f in RANKING_FIELDS})
    return lengths


# -- document shards --------------------------------------------------------------------------


def _rank_sharded(
    retriever: Any,
    inputs: Sequence[str],
    rel: sp.csr_matrix,
    blocking: tuple[list[tuple[int, int]], int],
    engine: Engine,
    common: dict[str, Any],
    doc_shards: int,
    shard_of: Callable[[Any, int, int], Any],
) -> list[dict[str, int]]:
    """Shards' first entries, merged per query block; queries the prefix cannot settle ranked
    again from the shards' whole rows (see the module docstring)."""
    spans, block = blocking
    settings: RankSettings = common["settings"]
    doc_spans = blocks_of(settings.n_docs, max(1, -(-settings.n_docs // doc_shards)))
    shared = {**common, "inputs": list(inputs), "rel": rel, "spans": spans}

    def shards(a: int, b: int) -> list[tuple[int, int, Any]]:
        return [(i, doc_spans[i][0], shard_of(retriever, *doc_spans[i])) for i in range(a, b)]

    def rel_rows(s: int, e: int) -> sp.csr_matrix:
        return rel[s:e]

    merge = {**common, "n_shards": len(doc_spans)}
    engine.map_blocks(_shard_entries, len(doc_spans), shared=shared, block_data=shards, size=1)
    first = engine.map_blocks(
        _merge_block, len(inputs), shared=merge, block_data=rel_rows, size=block
    )
    unsettled = {s: r for (s, _), (r, _) in zip(spans, first, strict=True) if len(r)}
    sizes = [found for _, found in first]
    if unsettled:
        engine.map_blocks(
            _shard_entries,
            len(doc_spans),
            shared={**shared, "only": unsettled},
            block_data=shards,
            size=1,
        )
        again = engine.map_blocks(
            _merge_block,
            len(inputs),
            shared={**merge, "whole": unsettled},
            block_data=rel_rows,
            size=block,
        )
        for i, (left, found) in enumerate(again):
            if len(left):  # pragma: no cover - whole rows always settle a query
                raise ArecallError(f"document shards: {len(left)} queries unsettled by whole rows")
            if spans[i][0] in unsettled:
                sizes[i] = found
    return sizes


def _entries_name(shard: int, start: int, whole: bool) -> str:
    return f"{'whole' if whole else 'first'}-{shard:05d}-{start:012d}.npz"


def _shard_entries(
    a: int,
    b: int,
    shards: list[tuple[int, int, Any]],
    *,
    inputs: list[str],
    rel: sp.csr_matrix,
    spans: list[tuple[int, int]],
    settings: RankSettings,
    where: str,
    allowed: np.ndarray | None,
    only: dict[int, np.ndarray] | None = None,
) -> int:
    """Shards ``a:b``: per query block, each shard's first entries (``only``: the whole rows of
    the queries named per block), written to a file per shard and block."""
    for shard, d0, retriever in shards:
        for s, e in spans:
            rows_wanted = None if only is None else only.get(s)
            if only is not None and rows_wanted is None:
                continue
            picked = (
                list(inputs[s:e]) if rows_wanted is None else [inputs[s + r] for r in rows_wanted]
            )
            block_rel = rel[s:e] if rows_wanted is None else rel[s:e][rows_wanted]
            parts = [
                _first_entries(
                    chunk,
                    d0,
                    block_rel[c : c + settings.chunk],
                    settings,
                    allowed,
                    only is not None,
                )
                for c, chunk in zip(
                    range(0, len(picked), settings.chunk),
                    _score_chunks(retriever, picked, settings.chunk),
                    strict=True,
                )
            ]
            write_npz(
                Path(where) / _entries_name(shard, s, only is not None),
                _stacked(parts, rows_wanted),
            )
    return b - a


def _first_entries(
    scores: sp.spmatrix,
    d0: int,
    rel: sp.csr_matrix,
    settings: RankSettings,
    allowed: np.ndarray | None,
    whole: bool,
) -> dict[str, np.ndarray]:
    """One shard's ranked entries of a chunk of queries, cut where the merge needs no more
    (``whole``: every entry), with each row's length, whether it is whole, and its last doc."""
    n_rows = scores.shape[0]
    rows, docs, vals, rank = _sorted_block(sp.csr_matrix(scores), settings.every_entry)
    docs = (docs.astype(np.int64) + d0).astype(np.int32)
    n_pos = np.bincount(rows, minlength=n_rows).astype(np.int64)
    head = settings.head_depth
    if whole or head is None:
        cut = n_pos.copy()
    else:
        cut = np.minimum(n_pos, head)
        if allowed is not None:
            for _ in _pre_needs(rows, docs, rank, allowed, settings.k_max, cut):
                pass
        cut = np.maximum(cut, _first_relevant(rows, docs, rank, rel, n_rows))
    keep = rank < cut[rows]
    last = keep & (rank == cut[rows] - 1) & (cut[rows] < n_pos[rows])
    boundary = np.full(n_rows, -1, np.int64)
    boundary[rows[last]] = docs[last]
    return {
        "rows": rows[keep],
        "docs": docs[keep],
        "scores": vals[keep],
        "n_positive": n_pos,
        "boundary": boundary,
    }


def _stacked(
    parts: list[dict[str, np.ndarray]], rows_wanted: np.ndarray | None
) -> dict[str, np.ndarray]:
    """Chunks' entries as one block's (rows numbered in the block; ``rows_wanted`` maps the
    picked queries back to their rows)."""
    out: dict[str, list[np.ndarray]] = {
        k: [] for k in ("rows", "docs", "scores", "n_positive", "boundary")
    }
    first = 0
    for part in parts:
        out["rows"].append(part["rows"] + first)
        first += len(part["n_positive"])
        for k in ("docs", "scores", "n_positive", "boundary"):
            out[k].append(part[k])
    joined = {
        k: np.concatenate(v) if v else np.zeros(0, np.int64 if k != "scores" else np.float64)
        for k, v in out.items()
    }
    picked = np.arange(first) if rows_wanted is None else np.asarray(rows_wanted, np.int64)
    joined["rows"] = picked[joined["rows"].astype(np.int64)]
    joined["picked"] = picked
    return joined


def _merge_block(
    start: int,
    stop: int,
    rel: sp.csr_matrix,
    *,
    settings: RankSettings,
    where: str,
    allowed: np.ndarray | None,
    n_shards: int,
    whole: dict[int, np.ndarray] | None = None,
) -> tuple[np.ndarray, dict[str, int]]:
    """Merge the shards' entries of one query block; write its ranking if every query is
    settled. Returns the unsettled rows (block-relative) and the block's sizes."""
    n_rows = stop - start
    redo = None if whole is None else whole.get(start)
    if whole is not None and redo is None:  # settled on the first pass: written then
        return np.zeros(0, np.int64), {}
    rows, docs, vals = [], [], []
    n_pos = np.zeros(n_rows, np.int64)
    boundaries: list[tuple[np.ndarray, np.ndarray]] = []
    for shard in range(n_shards):
        with np.load(Path(where) / _entries_name(shard, start, False), allow_pickle=False) as z:
            first = {k: z[k] for k in z.files}
        if redo is not None:
            with np.load(Path(where) / _entries_name(shard, start, True), allow_pickle=False) as z:
                again = {k: z[k] for k in z.files}
            drop = np.isin(first["rows"], redo)
            for k in ("rows", "docs", "scores"):
                first[k] = np.concatenate([first[k][~drop], again[k]])
            first["boundary"][redo] = -1
        rows.append(first["rows"])
        docs.append(first["docs"])
        vals.append(first["scores"])
        n_pos += first["n_positive"]
        cut = np.flatnonzero(first["boundary"] >= 0)
        boundaries.append((cut, first["boundary"][cut]))
    r = np.concatenate(rows).astype(np.int64)
    d = np.concatenate(docs).astype(np.int64)
    v = np.concatenate(vals)
    order = np.lexsort((d, r))
    union = sp.csr_matrix(
        (v[order], d[order].astype(np.int32), offsets(np.bincount(r, minlength=n_rows))),
        shape=(n_rows, settings.n_docs),
    )
    block = _rank_block(
        union,
        0,
        settings.head_depth,
        allowed,
        settings.k_max,
        rel,
        every_entry=True,
        n_positive=n_pos,
    )
    exact = _exact_prefix(union, boundaries, n_pos, settings)
    settled = (block.needed <= exact) & (block.first_relevant <= exact)
    if not settled.all():
        return np.flatnonzero(~settled), {}
    ranking = _ranking_of([block], n_rows, first_query=start)
    ranking.save(Path(where) / _block_name(start))
    return np.zeros(0, np.int64), dict(ranking.sizes)


def _exact_prefix(
    union: sp.csr_matrix,
    boundaries: list[tuple[np.ndarray, np.ndarray]],
    n_pos: np.ndarray,
    settings: RankSettings,
) -> np.ndarray:
    """Per row, how many of the merged entries are surely the full ranking's first ones: up to
    the earliest last entry of a shard that stopped short (every entry, if none did)."""
    rows, docs, _, rank = _sorted_block(union, True)
    exact = n_pos.copy()
    cut_rows = np.concatenate([c for c, _ in boundaries]) if boundaries else np.zeros(0, np.int64)
    if not len(cut_rows):
        return exact
    cut_docs = np.concatenate([b for _, b in boundaries])
    n = max(settings.n_docs, 1)
    keys = rows * n + docs.astype(np.int64)
    order = np.argsort(keys, kind="stable")
    at = order[np.searchsorted(keys[order], cut_rows.astype(np.int64) * n + cut_docs)]
    np.minimum.at(exact, cut_rows, rank[at] + 1)
    return exact
