"""TREC runs and qrels (TREC and BEIR layouts), and ranx-style dicts, as columnar arrays.

Users bring the output of their own retrieval system as a TREC run (``qid Q0 docid rank score
tag``) and their judgments as TREC qrels (``qid 0 docid rel``) or BEIR qrels
(``query-id<TAB>corpus-id<TAB>score`` with a header). They are read into a CSR-like layout (one
row per line, grouped by query, ``offsets`` delimiting the groups) so that evaluation is a
handful of numpy passes instead of a Python loop per query. This is the one reader of each of
these formats: ``arecall evaluate``, ``arecall fuse`` and the BEIR corpus source all use it.

Conventions, stated because they move numbers:

* **Order.** A run is ranked by score descending; the rank column is ignored, as trec_eval and
  ranx ignore it. Equal scores are ordered by document id ascending (``ties="docid"``, arecall's
  and the seed's convention) or by document id *descending* (``ties="trec_eval"``, what
  trec_eval's ``comp_sim_docno`` does: ``strcmp(ptr2->docno, ptr1->docno)``). Ids compare by
  code point, i.e. by their UTF-8 bytes, as ``strcmp`` does. ranx leaves tied scores in the
  order of an unstable sort, so on tied runs its values are not defined by a convention at all.
* **Strictness.** Every line must have exactly 6 (run) or 4 (TREC qrels) whitespace-separated
  fields, or 3 tab-separated ones (BEIR qrels); ranks and relevance must be integers; scores
  must be finite numbers; a (qid, docid) pair may appear once. Anything else is an
  `ArecallError` naming the file and line — never a silent repair.
* **Text.** Read by `arecall.io.text`: gzip, a UTF-8 BOM, CRLF and blank lines are accepted;
  these formats have no comment lines, and only BEIR qrels have a header (`QRELS_HEADERS`).

Speed: files are parsed by pyarrow's CSV reader (`arecall.io.text.fast_table`, threaded above 1 MB)
when they are single-space or single-tab separated, with the strict pure-Python reader as the
fallback. Whenever the fast path meets anything unexpected, the file is re-read by the fallback,
which names the first offending line; when the fast path succeeds row i is line i + 1 (+ 1 for a
header), so the checks that come after parsing (NaN scores, duplicate pairs) name lines too.
"""

from __future__ import annotations

import itertools
import math
import os
import re
import tempfile
import zlib
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from arecall.core.errors import ArecallError
from arecall.core.ragged import offsets, positions_in_groups
from arecall.io.atomic import atomic_path
from arecall.io.ids import as_strings, encode, index_in
from arecall.io.text import (
    BLOCK,
    CHECKED,
    Chunk,
    Separator,
    check_file,
    chunk_fields,
    chunks,
    parse_chunk,
)

__all__ = [
    "QRELS_HEADERS",
    "TIES",
    "Judgments",
    "Qrels",
    "Run",
    "RunNotGrouped",
    "Ties",
    "concat_runs",
    "index_in",
    "load_qrels",
    "load_run",
    "read_judgments",
    "read_run",
    "read_run_with",
    "save_qrels",
    "save_run",
]

Ties = Literal["docid", "trec_eval"]
T = TypeVar("T")
TIES: tuple[str, ...] = ("docid", "trec_eval")

_RUN_FIELDS = "qid Q0 docid rank score tag"
_QRELS_FIELDS = "qid 0 docid rel"
_BEIR_FIELDS = "query-id<TAB>corpus-id<TAB>score"


# -- helpers over id vocabularies (pyarrow string arrays) ---------------------------------------


def _string_ranks(vocabulary: pa.Array, codes: np.ndarray) -> np.ndarray:
    """Rank (0-based, by code point) of ``vocabulary[codes]`` among the distinct ones given."""
    uniq, inverse = np.unique(codes, return_inverse=True)
    order = np.asarray(pc.sort_indices(vocabulary.take(pa.array(uniq))).to_numpy(), dtype=np.int64)
    rank_of_uniq = np.empty(len(uniq), dtype=np.int64)
    rank_of_uniq[order] = np.arange(len(uniq))
    return rank_of_uniq[inverse.ravel()]


_WS = " \t\n\r\v\f"  # ASCII whitespace: what separates fields (as for C's isspace)


def _check_id(value: str, what: str, where: str) -> None:
    if not value or any(ch in _WS for ch in value):
        raise ArecallError(f"{where}: {what} {value!r} must be non-empty and contain no whitespace")


# -- the two containers --------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Run:
    """A ranked run: for each query, document ids best first with their scores.

    Rows are grouped by query (``offsets[i]:offsets[i+1]`` are query ``query_ids[i]``'s results,
    in rank order) and documents are codes into the ``doc_ids`` vocabulary. Build one with
    `load_run`, `Run.from_dict` or `Run.from_rankings`; the order is fixed at construction.

    Attributes
    ----------
    query_ids : pyarrow.StringArray
        Distinct query ids, one per group.
    offsets : ndarray of int64, shape (n_queries + 1,)
    doc_codes : ndarray of int64, shape (n_rows,)
    doc_ids : pyarrow.StringArray
        Distinct document ids.
    scores : ndarray of float64, shape (n_rows,)
    name : str
        The run tag written in the last TREC column.

    Examples
    --------
    >>> run = Run.from_dict({"q1": {"a": 0.5, "b": 0.9, "c": 0.5}})
    >>> run.ranking("q1")
    ['b', 'a', 'c']
    >>> run.to_dict()
    {'q1': {'b': 0.9, 'a': 0.5, 'c': 0.5}}
    """

    query_ids: pa.Array
    offsets: np.ndarray
    doc_codes: np.ndarray
    doc_ids: pa.Array
    scores: np.ndarray
    name: str = "arecall"

    @property
    def n_queries(self) -> int:
        """Number of queries with at least one result."""
        return len(self.query_ids)

    @property
    def depths(self) -> np.ndarray:
        """Number of results per query, aligned with ``query_ids``."""
        return np.diff(self.offsets)

    def __len__(self) -> int:
        return len(self.doc_codes)

    def _group(self, query_id: str) -> int:
        pos = int(index_in(pa.array([query_id], type=pa.string()), self.query_ids)[0])
        return pos

    def ranking(self, query_id: str) -> list[str]:
        """The ranked document ids of one query (empty if the run lacks it)."""
        g = self._group(query_id)
        if g < 0:
            return []
        codes = self.doc_codes[self.offsets[g] : self.offsets[g + 1]]
        return list(self.doc_ids.take(pa.array(codes)).to_pylist())

    def to_dict(self) -> dict[str, dict[str, float]]:
        """``{qid: {docid: score}}`` in rank order — the dict ranx's ``Run`` accepts."""
        docs = self.doc_ids.take(pa.array(self.doc_codes)).to_pylist()
        scores = self.scores.tolist()
        out: dict[str, dict[str, float]] = {}
        for g, qid in enumerate(self.query_ids.to_pylist()):
            lo, hi = int(self.offsets[g]), int(self.offsets[g + 1])
            out[qid] = dict(zip(docs[lo:hi], scores[lo:hi], strict=True))
        return out

    @classmethod
    def from_dict(
        cls, run: Mapping[str, Mapping[str, float]], *, name: str = "arecall", ties: Ties = "docid"
    ) -> Run:
        """Build from ``{qid: {docid: score}}`` (ranx's dict layout), ranked by score.

        Queries with no results are dropped (a run cannot express them). A NaN or infinite
        score is an `ArecallError`.

        Examples
        --------
        >>> Run.from_dict({"q": {"x": 1.0, "y": 1.0}}, ties="trec_eval").ranking("q")
        ['y', 'x']
        """
        qids: list[str] = []
        docs: list[str] = []
        scores: list[float] = []
        for qid, results in run.items():
            for doc, score in results.items():
                qids.append(str(qid))
                docs.append(str(doc))
                scores.append(_dict_score(score, qid, doc))
        return _build_run(
            qids,
            docs,
            np.asarray(scores, dtype=np.float64),
            name=name,
            ties=ties,
            where="run",
            lines=None,
        )

    @classmethod
    def from_rankings(cls, rankings: Mapping[str, Sequence[Any]], *, name: str = "arecall") -> Run:
        """Build from ``{qid: [docid, ...]}`` or ``{qid: [(docid, score), ...]}``, best first.

        The list order *is* the ranking. Without scores, the i-th of n items gets score n − i;
        given scores must not increase down the list (else re-reading the saved run would
        reorder it). A document listed twice for a query is an `ArecallError`.

        Examples
        --------
        >>> Run.from_rankings({"q": ["b", "a"]}).to_dict()
        {'q': {'b': 2.0, 'a': 1.0}}
        """
        qids: list[str] = []
        docs: list[str] = []
        scores: list[float] = []
        for qid, ranked in rankings.items():
            items = list(ranked)
            seen: set[str] = set()
            previous = math.inf
            for i, item in enumerate(items):
                if isinstance(item, tuple | list):
                    if len(item) != 2:
                        raise ArecallError(
                            f"rankings[{qid!r}][{i}]: expected a doc id or (doc id, score), "
                            f"got {item!r}"
                        )
                    doc, score = str(item[0]), _dict_score(item[1], qid, item[0])
                    if score > previous:
                        raise ArecallError(
                            f"rankings[{qid!r}][{i}]: score {score!r} is higher than the one "
                            "before it; a ranked list must be best first"
                        )
                    previous = score
                else:
                    doc, score = str(item), float(len(items) - i)
                if doc in seen:
                    raise ArecallError(f"rankings[{qid!r}][{i}]: document {doc!r} listed twice")
                seen.add(doc)
                qids.append(str(qid))
                docs.append(doc)
                scores.append(score)
        return _build_run(
            qids,
            docs,
            np.asarray(scores, dtype=np.float64),
            name=name,
            ties="docid",
            where="rankings",
            lines=None,
            keep_order=True,
        )


@dataclass(frozen=True, eq=False)
class Qrels:
    """Relevance judgments: for each query, judged document ids with integer relevance.

    Same layout as `Run` (``offsets`` into ``doc_codes`` / ``relevance``). A document is
    *relevant* when its relevance is at least 1 (ranx's and trec_eval's default level); 0 and
    negative judgments are kept but are not relevant.

    Examples
    --------
    >>> qrels = Qrels.from_dict({"q1": {"a": 2, "b": 0}})
    >>> qrels.to_dict()
    {'q1': {'a': 2, 'b': 0}}
    """

    query_ids: pa.Array
    offsets: np.ndarray
    doc_codes: np.ndarray
    doc_ids: pa.Array
    relevance: np.ndarray

    @property
    def n_queries(self) -> int:
        """Number of judged queries."""
        return len(self.query_ids)

    def __len__(self) -> int:
        return len(self.doc_codes)

    def to_dict(self) -> dict[str, dict[str, int]]:
        """``{qid: {docid: rel}}`` — the dict ranx's ``Qrels`` accepts."""
        docs = self.doc_ids.take(pa.array(self.doc_codes)).to_pylist()
        rels = self.relevance.tolist()
        out: dict[str, dict[str, int]] = {}
        for g, qid in enumerate(self.query_ids.to_pylist()):
            lo, hi = int(self.offsets[g]), int(self.offsets[g + 1])
            out[qid] = dict(zip(docs[lo:hi], rels[lo:hi], strict=True))
        return out

    @classmethod
    def from_dict(cls, qrels: Mapping[str, Mapping[str, int]]) -> Qrels:
        """Build from ``{qid: {docid: rel}}``; relevance must be an integer.

        A query mapped to an empty dict is kept: it is judged, with nothing relevant.

        Examples
        --------
        >>> Qrels.from_dict({"q": {"d": 1}, "empty": {}}).n_queries
        2
        """
        qids: list[str] = []
        docs: list[str] = []
        rels: list[int] = []
        empty: list[str] = []
        for qid, judged in qrels.items():
            if not judged:
                empty.append(str(qid))
            for doc, rel in judged.items():
                if not _is_integer(rel):
                    raise ArecallError(
                        f"qrels[{qid!r}][{doc!r}]: relevance {rel!r} is not an integer"
                    )
                qids.append(str(qid))
                docs.append(str(doc))
                rels.append(int(rel))
        return _build_qrels(
            qids,
            docs,
            np.asarray(rels, dtype=np.int64),
            where="qrels",
            lines=None,
            empty_queries=empty,
        )


def _is_integer(value: Any) -> bool:
    if isinstance(value, bool | str | bytes):
        return False
    try:
        return float(value).is_integer()
    except (TypeError, ValueError, OverflowError):
        return False


def _dict_score(score: Any, qid: Any, doc: Any) -> float:
    try:
        value = float(score)
    except (TypeError, ValueError):
        raise ArecallError(f"run[{qid!r}][{doc!r}]: score {score!r} is not a number") from None
    if not math.isfinite(value):
        raise ArecallError(f"run[{qid!r}][{doc!r}]: score is {value!r}; scores must be finite")
    return value


# -- building: validation, ordering, grouping ------------------------------------------------------


class Consecutive:
    """The line numbers of rows read from consecutive lines: row i is line ``first + i``.

    What a block pyarrow parsed has; numbers are made only for the rows a message names (a
    whole array per block would cost a write per row for nothing).
    """

    def __init__(self, first: int, n: int) -> None:
        self.first, self.n = first, n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: Any) -> Any:
        return self.first + np.asarray(index) if not isinstance(index, int) else self.first + index

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.arange(self.first, self.first + self.n, dtype=dtype or np.int64)


LineNumbers = np.ndarray | Consecutive


def _line(where: str, lines: LineNumbers | None, row: int) -> str:
    """'FILE: line N' for a file row, or 'WHERE: row N' for in-memory input."""
    if lines is None:
        return f"{where}: row {row}"
    return f"{where}: line {int(lines[row])}"


def _codes(values: Any) -> tuple[np.ndarray, pa.Array]:
    if isinstance(values, tuple):  # already (codes, vocabulary)
        return values
    return encode(values)


def _first_duplicate(key: np.ndarray, order_of: np.ndarray) -> tuple[int, int] | None:
    """(row of the repeated pair's later occurrence that comes first in the input, row of that
    pair's first occurrence), or None; ``order_of`` is each row's position in the input."""
    if len(key) < 2:
        return None
    quick = np.sort(key)
    if not (quick[1:] == quick[:-1]).any():
        return None
    order = np.lexsort((order_of, key))
    sk = key[order]
    dup = np.flatnonzero(sk[1:] == sk[:-1])
    later = order[dup + 1]
    row = int(later[np.argmin(order_of[later])])
    first = int(order[np.searchsorted(sk, key[row])])
    return row, first


def _raise_duplicate(
    q: np.ndarray,
    d: np.ndarray,
    vocabularies: tuple[pa.Array, pa.Array],
    lines: LineNumbers | None,
    where: str,
    what: str,
    order_of: np.ndarray | None = None,
) -> None:
    """An `ArecallError` naming the first repeated (query, document) pair, if there is one.

    ``d`` are codes that identify a document within its query; ``order_of`` gives each row's
    position in the input (default: the rows are in input order), so the pair named is the one
    whose repetition comes first in the file.
    """
    qvocab, dvocab = vocabularies
    key = q.astype(np.int64) * max(len(dvocab), 1) + d
    found = _first_duplicate(key, np.arange(len(q)) if order_of is None else order_of)
    if found is None:
        return
    dup, first = found
    doc, qid = dvocab[int(d[dup])].as_py(), qvocab[int(q[dup])].as_py()
    again = "appears more than once for" if what == "result" else "is judged more than once for"
    also = f" (first at line {int(lines[first])})" if lines is not None else ""
    raise ArecallError(
        f"{_line(where, lines, dup)}: duplicate {what}: document {doc!r} {again} "
        f"query {qid!r}{also}"
    )


def _tie_fix(
    q: np.ndarray,
    s: np.ndarray,
    d: np.ndarray,
    vocab: pa.Array,
    perm: np.ndarray | None,
    ties: Ties,
) -> np.ndarray | None:
    """Reorder rows of equal (query, score) by doc id; ``q, s, d`` are already permuted by
    ``perm`` (None: the identity). Returns the new permutation, or ``perm`` if no row moves."""
    same = (q[1:] == q[:-1]) & (s[1:] == s[:-1])
    if not same.any():
        return perm
    in_tie = np.zeros(len(q), dtype=bool)
    in_tie[:-1] |= same
    in_tie[1:] |= same
    group = np.cumsum(np.concatenate(([True], ~same)))
    idx = np.flatnonzero(in_tie)
    rank = _string_ranks(vocab, d[idx])
    if ties == "trec_eval":
        rank = -rank
    sub = np.lexsort((rank, group[idx]))
    perm = np.arange(len(q)) if perm is None else perm.copy()
    perm[idx] = perm[idx][sub]
    return perm


#: Rows dictionary-encoded at a time (whole queries): a small hash table stays in cache, which
#: makes encoding a block's document ids several times faster than one table for the block.
_ENCODE_ROWS = 1 << 14


def _codes_by_query(docs: Any, offsets_: np.ndarray) -> tuple[np.ndarray, pa.Array]:
    """Document codes that identify a document within its query, and the strings they name.

    Encoded a few thousand rows (whole queries) at a time: the vocabulary may hold an id more
    than once (once per slice), but never twice for one query, which is what the duplicate
    check, the tie order and every lookup through the vocabulary need.
    """
    if isinstance(docs, tuple):
        return docs
    values = as_strings(docs)
    n = len(values)
    if n <= _ENCODE_ROWS:
        return encode(values)
    cuts = np.unique(
        np.concatenate(
            ([0, n], offsets_[np.searchsorted(offsets_, np.arange(_ENCODE_ROWS, n, _ENCODE_ROWS))])
        )
    )
    codes = np.empty(n, dtype=np.int64)
    parts, base = [], 0
    for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True):
        encoded = pc.dictionary_encode(values.slice(a, b - a))
        codes[a:b] = np.asarray(encoded.indices.to_numpy(), dtype=np.int64) + base
        parts.append(encoded.dictionary)
        base += len(encoded.dictionary)
    return codes, pa.concat_arrays(parts)


def _build_run(
    qids: Any,
    docs: Any,
    scores: np.ndarray,
    *,
    name: str,
    ties: Ties,
    where: str,
    lines: LineNumbers | None,
    keep_order: bool = False,
) -> Run:
    if ties not in TIES:
        raise ArecallError(f"ties must be one of {', '.join(TIES)}, got {ties!r}")
    q, qvocab = _codes(qids)
    if len(q) == 0:
        at = f"{where}: line 1" if lines is not None else where
        raise ArecallError(f"{at}: no results; expected lines '{_RUN_FIELDS}'")
    bad = np.flatnonzero(~np.isfinite(scores))
    if len(bad):
        row = int(bad[0])
        raise ArecallError(
            f"{_line(where, lines, row)}: score is {float(scores[row])!r}; "
            "scores must be finite numbers"
        )
    order_of = None
    if not bool(np.all(q[1:] >= q[:-1])):  # codes are in first-appearance order
        group = np.argsort(q, kind="stable")  # each query's rows together, in input order
        q, scores, order_of = q[group], scores[group], group
        lines = lines[group] if lines is not None else None
        docs = (docs[0][group], docs[1]) if isinstance(docs, tuple) else _take(docs, group)
    counts = np.bincount(q, minlength=len(qvocab))
    bounds = offsets(counts)
    d, dvocab = _codes_by_query(docs, bounds)
    _raise_duplicate(q, d, (qvocab, dvocab), lines, where, "result", order_of)
    perm: np.ndarray | None = None  # None: the rows are in rank order already (the usual run)
    if not keep_order:
        ordered = bool(np.all((q[1:] != q[:-1]) | (scores[1:] <= scores[:-1])))
        if ordered:
            perm = _tie_fix(q, scores, d, dvocab, None, ties)
        else:
            perm = np.lexsort((-scores, q))
            perm = _tie_fix(q[perm], scores[perm], d[perm], dvocab, perm, ties)
    return Run(
        query_ids=qvocab,
        offsets=bounds,
        doc_codes=d if perm is None else d[perm],
        doc_ids=dvocab,
        scores=np.ascontiguousarray(scores if perm is None else scores[perm], dtype=np.float64),
        name=name,
    )


def _take(values: Any, index: np.ndarray) -> pa.Array:
    return as_strings(values).take(pa.array(index))


def _build_qrels(
    qids: Any,
    docs: Any,
    rels: np.ndarray,
    *,
    where: str,
    lines: np.ndarray | None,
    empty_queries: Sequence[str] = (),
    check_duplicates: bool = True,
) -> Qrels:
    q, qvocab = _codes(qids)
    d, dvocab = _codes(docs)
    if len(q) == 0 and not empty_queries:
        at = f"{where}: line 1" if lines is not None else where
        raise ArecallError(f"{at}: no judgments; expected lines '{_QRELS_FIELDS}'")
    if check_duplicates:
        _raise_duplicate(q, d, (qvocab, dvocab), lines, where, "judgment")
    if empty_queries:
        known = set(qvocab.to_pylist())
        extra = [e for e in dict.fromkeys(empty_queries) if e not in known]
        qvocab = pa.concat_arrays([qvocab.cast(pa.string()), pa.array(extra, type=pa.string())])
    perm = np.argsort(q, kind="stable")
    q, d, rels = q[perm], d[perm], rels[perm]
    counts = np.bincount(q, minlength=len(qvocab))
    return Qrels(
        query_ids=qvocab,
        offsets=offsets(counts),
        doc_codes=d,
        doc_ids=dvocab,
        relevance=np.ascontiguousarray(rels, dtype=np.int64),
    )


# -- reading files ---------------------------------------------------------------------------------

QRELS_HEADERS = ("query-id", "query_id", "qid")
"""A BEIR qrels header: the first data line, when its first field (lower-cased) is one of these."""


def _integer(text: str, what: str, path: Path, number: int) -> int:
    try:
        if "_" in text:
            raise ValueError
        value = int(text)
        if not -(2**63) <= value < 2**63:
            raise ValueError
        return value
    except ValueError:
        raise ArecallError(f"{path}: line {number}: {what} {text!r} is not an integer") from None


def _number(text: str, what: str, path: Path, number: int) -> float:
    try:
        if "_" in text:
            raise ValueError
        return float(text)
    except ValueError:
        raise ArecallError(f"{path}: line {number}: {what} {text!r} is not a number") from None


def _field_count(
    parts: list[str], n_fields: int, layout: str, path: Path, number: int, *, tab: bool
) -> None:
    if len(parts) != n_fields:
        kind = "tab-separated fields" if tab else "fields"
        raise ArecallError(
            f"{path}: line {number}: expected {n_fields} {kind} ({layout}), found {len(parts)}"
        )
    if tab:
        for name, value in zip(layout.split("<TAB>"), parts, strict=True):
            if not value:
                raise ArecallError(f"{path}: line {number}: empty {name}")


@dataclass(frozen=True)
class _RunRows:
    """The rows of one block of a run file, in file order."""

    qids: pa.Array
    docs: pa.Array
    scores: np.ndarray
    lines: LineNumbers
    tag: str


_RUN_TYPES = {1: CHECKED, 3: pa.int64(), 4: pa.float64(), 5: CHECKED}


def _run_rows(chunk: Chunk) -> _RunRows | None:
    """One block's rows: pyarrow's parse, or the strict reader where it would differ."""
    p = chunk.path
    table = parse_chunk(chunk, "whitespace", _RUN_TYPES, 6)
    if table is not None:
        tag = table["f5"].chunk(0)[0].as_py().decode("utf-8")
        return _RunRows(
            table["f0"].chunk(0),
            table["f2"].chunk(0),
            np.asarray(table["f4"].chunk(0).to_numpy(), dtype=np.float64),
            Consecutive(chunk.first_line, table.num_rows),
            tag,
        )
    qids: list[str] = []
    docs: list[str] = []
    scores: list[float] = []
    lines: list[int] = []
    tag = None
    for number, parts in chunk_fields(chunk, "whitespace"):
        _field_count(parts, 6, _RUN_FIELDS, p, number, tab=False)
        _integer(parts[3], "rank", p, number)
        scores.append(_number(parts[4], "score", p, number))
        qids.append(parts[0])
        docs.append(parts[2])
        lines.append(number)
        if tag is None:
            tag = parts[5]
    if tag is None:
        return None  # only blank lines
    return _RunRows(
        as_strings(qids),
        as_strings(docs),
        np.asarray(scores, dtype=np.float64),
        np.asarray(lines, dtype=np.int64),
        tag,
    )


_FIRST_FIELD = re.compile(rb"[ \t\r\v\f]*([^ \t\n\r\v\f]*)")


def _query_cut(data: bytes | bytearray, end: int) -> int:
    """Where a block ending at ``end`` should stop so that its last query's lines move to the
    next block: the start of that query's first line (0: the block is one query, read on)."""

    def qid(start: int) -> bytes:
        match = _FIRST_FIELD.match(data, start)
        return match.group(1) if match else b""

    def line_start(at: int) -> int:
        return data.rfind(b"\n", 0, at) + 1

    last = line_start(end - 1)
    while last > 0 and not qid(last):  # trailing blank lines belong to no query
        last = line_start(last - 1)
    target = qid(last)
    if not target:
        return end

    def same(start: int) -> bool:
        value = qid(start)
        return not value or value == target

    # the last query's lines are a suffix (in a grouped run): binary search for its start ...
    lo, hi = 0, last
    while lo < hi:
        mid = (lo + hi) // 2
        start = line_start(mid)
        if same(start):
            hi = start
        else:
            lo = data.find(b"\n", mid) + 1
    # ... then step back over any line the search jumped (a blank line inside the query)
    while hi > 0 and same(line_start(hi - 1)):
        hi = line_start(hi - 1)
    return hi


class RunNotGrouped(ArecallError):
    """A query's results continue after another query's: the run is not grouped by query."""


#: A query's results are read together; past this many bytes of them, the run is refused.
MAX_QUERY = 1 << 28


def _bucket_count(path: Path, block: int) -> int:
    try:
        size = path.stat().st_size * (4 if _gzipped(path) else 1)
    except OSError:
        size = block
    return int(min(4096, max(1, -(-2 * size // block))))


def _gzipped(path: Path) -> bool:
    with path.open("rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


def _partitioned(path: Path, block: int) -> Iterator[_RunRows]:
    """The rows of an ungrouped run, one bucket of whole queries at a time: each row is written
    to the temporary file of its query's bucket (a hash of the query id), then each bucket is
    read back whole. One extra write and read of the run; memory stays a bucket's."""
    n = _bucket_count(path, block)
    with tempfile.TemporaryDirectory(prefix="arecall-run-") as tmp:
        writers: dict[int, Any] = {}
        schema = pa.schema(
            [("q", pa.string()), ("d", pa.string()), ("s", pa.float64()), ("l", pa.int64())]
        )
        tag = None
        try:
            for chunk in chunks(path, block):
                rows = _run_rows(chunk)
                if rows is None:
                    continue
                tag = rows.tag if tag is None else tag
                qcodes, qvocab = encode(rows.qids)
                of_query = np.array(
                    [zlib.crc32(q.encode()) % n for q in qvocab.to_pylist()], dtype=np.int64
                )
                bucket = of_query[qcodes]
                batch = pa.record_batch(
                    [rows.qids, rows.docs, pa.array(rows.scores), pa.array(np.asarray(rows.lines))],
                    schema=schema,
                )
                for b in np.unique(bucket).tolist():
                    if b not in writers:
                        writers[b] = pa.ipc.new_stream(str(Path(tmp) / f"{b}.arrow"), schema)
                    writers[b].write_batch(batch.filter(pa.array(bucket == b)))
        finally:
            for writer in writers.values():
                writer.close()
        for b in sorted(writers):
            with pa.ipc.open_stream(str(Path(tmp) / f"{b}.arrow")) as reader:
                table = reader.read_all().combine_chunks()
            yield _RunRows(
                table["q"].combine_chunks(),
                table["d"].combine_chunks(),
                np.asarray(table["s"].to_numpy(), dtype=np.float64),
                np.asarray(table["l"].to_numpy(), dtype=np.int64),
                tag or "arecall",
            )


def read_run(
    path: str | os.PathLike[str],
    *,
    ties: Ties = "docid",
    name: str | None = None,
    block: int = BLOCK,
    partitioned: bool = False,
    workers: int = 1,
) -> Iterator[Run]:
    """A TREC run file as blocks of whole queries (each a `Run`), read once, front to back.

    This is how ``arecall evaluate`` reads a run of any length: a block is about ``block``
    bytes of lines, parsed by pyarrow (the strict reader where pyarrow would read it
    differently; the messages are the same), ordered as `load_run` orders it. Each block's
    ``doc_ids`` may list an id more than once (codes identify a document within its query).

    A run file is grouped by query in practice; one whose query appears again after another
    query's results raises `RunNotGrouped` when that is seen. ``partitioned=True`` reads such a
    file anyway (each row is first written to the temporary file of its query's bucket, then
    every bucket is read whole): it reads the file once more, so it needs a file, not a pipe.
    ``workers`` threads parse blocks side by side (the order of the blocks is kept).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "run.trec"
    >>> _ = p.write_text("q1 Q0 a 1 0.5 sys\\nq1 Q0 b 2 0.9 sys\\nq2 Q0 c 1 1 sys\\n")
    >>> [(b.query_ids.to_pylist(), b.ranking("q1")) for b in read_run(p, block=20)]
    [(['q1'], ['b', 'a']), (['q2'], [])]
    """
    for run, _ in read_run_with(
        path, None, ties=ties, name=name, block=block, partitioned=partitioned, workers=workers
    ):
        yield run


def read_run_with(
    path: str | os.PathLike[str],
    then: Callable[[Run], T] | None,
    *,
    ties: Ties = "docid",
    name: str | None = None,
    block: int = BLOCK,
    partitioned: bool = False,
    workers: int = 1,
) -> Iterator[tuple[Run, T | None]]:
    """`read_run`, with ``then(block)`` computed in the thread that built each block.

    Why: a block read, parsed and reduced by one thread, while other threads take the next
    blocks, keeps ``workers`` blocks in memory and every core busy; the results come back in
    block order, and the check that queries are grouped still runs in file order.
    """
    p = check_file(path)
    where = str(p)
    seen: set[str] = set()
    found = False
    for (qids, lines), run, extra in _blocks(p, ties, name, block, partitioned, workers, then):
        ids = run.query_ids.to_pylist()
        if not partitioned:
            again = seen.intersection(ids)
            if again:
                first = min(again, key=ids.index)
                row = int(np.flatnonzero(pc.equal(qids, first).to_numpy(zero_copy_only=False))[0])
                raise RunNotGrouped(
                    f"{where}: line {int(lines[row])}: results of query {first!r} continue "
                    "after other queries' results: the run is not grouped by query id"
                )
            seen.update(ids)
        found = True
        yield run, extra
    if not found:
        raise ArecallError(f"{where}: line 1: no results; expected lines '{_RUN_FIELDS}'")


_Built = tuple[tuple[pa.Array, LineNumbers], Run, Any]


def _blocks(
    p: Path,
    ties: Ties,
    name: str | None,
    block: int,
    partitioned: bool,
    workers: int,
    then: Callable[[Run], Any] | None,
) -> Iterator[_Built]:
    """((query ids, lines), run, ``then(run)``) of each block in order; with ``workers`` > 1,
    blocks are parsed, built (and given to ``then``) side by side in threads (pyarrow and
    numpy release the GIL) while the file is read on."""
    where = str(p)
    parts: Iterator[_RunRows | Chunk]
    if partitioned:
        parts = _partitioned(p, block)
    else:
        parts = chunks(p, block, cut=_query_cut, group=MAX_QUERY, what="of one query's results")
    first = cast("_RunRows | Chunk | None", next(parts, None))
    if first is None:
        return
    rows0 = _run_rows(first) if isinstance(first, Chunk) else first
    tag = name
    if tag is None:  # the first line's tag names the run; a first block of blank lines: later
        tag = rows0.tag if rows0 is not None else None

    def build(part: _RunRows | Chunk, rows: _RunRows | None = None) -> _Built | None:
        rows = rows if rows is not None else (_run_rows(part) if isinstance(part, Chunk) else part)
        if rows is None:
            return None
        run = _build_run(
            rows.qids,
            rows.docs,
            rows.scores,
            name=tag if tag is not None else rows.tag,
            ties=ties,
            where=where,
            lines=rows.lines,
        )
        return (rows.qids, rows.lines), run, then(run) if then is not None else None

    done = build(first, rows0)
    del first, rows0
    if done is not None:
        yield done
    if workers <= 1:
        for part in parts:
            if (done := build(part)) is not None:
                yield done
        return
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="arecall-read") as pool:
        pending: deque[Future[_Built | None]] = deque()
        try:
            for part in parts:
                pending.append(pool.submit(build, part))
                del part
                while len(pending) >= workers:
                    if (done := pending.popleft().result()) is not None:
                        yield done
            while pending:
                if (done := pending.popleft().result()) is not None:
                    yield done
        finally:
            for future in pending:
                future.cancel()


def concat_runs(blocks: Sequence[Run], name: str | None = None) -> Run:
    """One `Run` of the queries of ``blocks`` (each query in one block), with one vocabulary."""
    if len(blocks) == 1 and name is None:
        only = blocks[0]
        codes, vocabulary = encode(only.doc_ids.take(pa.array(only.doc_codes)))
        return Run(only.query_ids, only.offsets, codes, vocabulary, only.scores, only.name)
    docs = pa.concat_arrays([b.doc_ids.take(pa.array(b.doc_codes)) for b in blocks])
    codes, vocabulary = encode(docs)
    sizes = np.concatenate([np.diff(b.offsets) for b in blocks])
    return Run(
        query_ids=pa.concat_arrays([b.query_ids.cast(pa.string()) for b in blocks]),
        offsets=offsets(sizes),
        doc_codes=codes,
        doc_ids=vocabulary,
        scores=np.concatenate([b.scores for b in blocks]),
        name=name if name is not None else blocks[0].name,
    )


def load_run(path: str | os.PathLike[str], *, ties: Ties = "docid", name: str | None = None) -> Run:
    """Read a TREC run file (``qid Q0 docid rank score tag`` per line; gzip allowed).

    Lines are read by `arecall.io.text` (BOM, CRLF, blank lines, gzip; no comments, no
    header). The rank must be an integer but is otherwise ignored (see the module notes). The
    whole run is held in memory; `read_run` reads one block of queries at a time.

    Parameters
    ----------
    path : path-like
    ties : {"docid", "trec_eval"}
        How equal scores are ordered: doc id ascending (default) or descending (trec_eval).
    name : str, optional
        Run name; defaults to the tag of the first line.

    Returns
    -------
    Run

    Raises
    ------
    ArecallError
        On a missing or empty file, a line without 6 fields, a rank that is not an integer, a
        score that is not a number, a NaN or infinite score, or a repeated (qid, docid) pair —
        naming the file and line.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "run.trec"
    >>> _ = p.write_text("q1 Q0 a 1 0.5 sys\\nq1 Q0 b 2 0.9 sys\\n")
    >>> load_run(p).ranking("q1"), load_run(p).name
    (['b', 'a'], 'sys')
    """
    try:
        blocks = list(read_run(path, ties=ties, name=name))
    except RunNotGrouped as exc:
        if not Path(path).is_file():
            raise ArecallError(f"{exc} (a pipe is read once: sort it by query id first)") from None
        blocks = list(read_run(path, ties=ties, name=name, partitioned=True))
    return concat_runs(blocks)


@dataclass(frozen=True, eq=False)
class Judgments:
    """The lines of a qrels file, in file order: what every qrels reader starts from.

    Attributes
    ----------
    path : Path
    query_ids, doc_ids : pyarrow.StringArray
        One entry per judgment line.
    relevance : ndarray of int64
    lines : ndarray of int64
        The line number of each judgment, for messages about it.
    """

    path: Path
    query_ids: pa.Array
    doc_ids: pa.Array
    relevance: np.ndarray
    lines: np.ndarray


def _first_data_line(
    path: Path, blocks: Iterator[Chunk], kept: list[Chunk]
) -> tuple[int, str] | None:
    """The first non-blank line, reading (and keeping) blocks until one holds it."""
    for chunk in blocks:
        kept.append(chunk)
        for number, raw in chunk.lines():
            text = _decode_line(raw, path, number)
            if text.strip(_WS):
                return number, text
    return None


def _decode_line(raw: bytes | bytearray, path: Path, number: int) -> str:
    try:
        return raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        raise ArecallError(f"{path}: line {number}: not valid UTF-8") from None


def _qrels_layout(path: Path, first: tuple[int, str] | None) -> tuple[str, int]:
    """("beir" or "trec", the header's line number or 0), from the first data line."""
    if first is None:
        return "trec", 0
    number, text = first
    tabbed = text.split("\t")
    if len(tabbed) == 3:
        header = tabbed[0].strip(_WS).lower() in QRELS_HEADERS
        return "beir", number if header else 0
    if len(text.split()) == 4:
        return "trec", 0
    raise ArecallError(
        f"{path}: line {number}: neither BEIR qrels ({_BEIR_FIELDS}) nor TREC qrels "
        f"({_QRELS_FIELDS})"
    )


def read_judgments(path: str | os.PathLike[str]) -> Judgments:
    """Read TREC or BEIR qrels, chosen by the first data line, strictly and in file order.

    * TREC: ``qid 0 docid rel``, whitespace-separated, no header.
    * BEIR: ``query-id<TAB>corpus-id<TAB>score``; the first data line is a header when its
      first field (lower-cased) is one of `QRELS_HEADERS`.

    In both, relevance must be an integer and a (query, document) pair may be judged once;
    lines are read by `arecall.io.text` (BOM, CRLF, blank lines, gzip; no comments), once and
    block by block (pyarrow's parse, the strict reader for a block it would read differently).

    Raises
    ------
    ArecallError
        Naming the file and line: a layout that is neither, a wrong field count, an empty
        field, a relevance that is not an integer, a repeated pair, no judgment at all.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "test.tsv"
    >>> _ = p.write_text("query-id\\tcorpus-id\\tscore\\nq1\\td1\\t1\\nq1\\td2\\t0\\n")
    >>> j = read_judgments(p)
    >>> j.doc_ids.to_pylist(), j.relevance.tolist(), j.lines.tolist()
    (['d1', 'd2'], [1, 0], [2, 3])
    """
    p = check_file(path)
    blocks = chunks(p)
    kept: list[Chunk] = []
    layout, header = _qrels_layout(p, _first_data_line(p, blocks, kept))
    tab = layout == "beir"
    sep: Separator = "tab" if tab else "whitespace"
    n_fields, doc_at, rel_at = (3, 1, 2) if tab else (4, 2, 3)
    fields_text = _BEIR_FIELDS if tab else _QRELS_FIELDS
    q_parts, d_parts, r_parts, l_parts = [], [], [], []
    for chunk in itertools.chain(kept, blocks):
        skip = 1 if header == chunk.first_line else 0
        table = None
        if header <= chunk.first_line:  # a header after blank lines: the strict reader
            table = parse_chunk(chunk, sep, {rel_at: pa.int64()}, n_fields, skip=skip)
        if table is not None:
            q_parts.append(table["f0"].chunk(0))
            d_parts.append(table[f"f{doc_at}"].chunk(0))
            r_parts.append(np.asarray(table[f"f{rel_at}"].chunk(0).to_numpy(), dtype=np.int64))
            start = chunk.first_line + skip
            l_parts.append(np.arange(start, start + table.num_rows, dtype=np.int64))
            continue
        q_list: list[str] = []
        d_list: list[str] = []
        r_list: list[int] = []
        l_list: list[int] = []
        for number, parts in chunk_fields(chunk, sep):
            if number == header:
                continue
            _field_count(parts, n_fields, fields_text, p, number, tab=tab)
            r_list.append(_integer(parts[rel_at], "relevance", p, number))
            q_list.append(parts[0])
            d_list.append(parts[doc_at])
            l_list.append(number)
        q_parts.append(as_strings(q_list))
        d_parts.append(as_strings(d_list))
        r_parts.append(np.asarray(r_list, dtype=np.int64))
        l_parts.append(np.asarray(l_list, dtype=np.int64))
    lines = np.concatenate(l_parts) if l_parts else np.zeros(0, dtype=np.int64)
    if len(lines) == 0:
        raise ArecallError(f"{p}: line 1: no judgments; expected lines '{fields_text}'")
    qids = pa.concat_arrays(q_parts)
    docs = pa.concat_arrays(d_parts)
    rels = np.concatenate(r_parts)
    q, qvocab = encode(qids)
    d, dvocab = encode(docs)
    _raise_duplicate(q, d, (qvocab, dvocab), lines, str(p), "judgment")
    return Judgments(p, qids, docs, rels, lines)


def load_qrels(path: str | os.PathLike[str]) -> Qrels:
    """Read a qrels file, TREC (``qid 0 docid rel``) or BEIR TSV, into `Qrels`.

    See `read_judgments` for the layouts and the checks.

    Raises
    ------
    ArecallError
        On a missing or empty file, a line without 4 (TREC) or 3 (BEIR) fields, a relevance
        that is not an integer or a repeated (qid, docid) pair — naming the file and line.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "qrels.txt"
    >>> _ = p.write_text("q1 0 a 2\\nq1 0 b 0\\n")
    >>> load_qrels(p).to_dict()
    {'q1': {'a': 2, 'b': 0}}
    """
    judged = read_judgments(path)
    return _build_qrels(
        encode(judged.query_ids),
        encode(judged.doc_ids),
        judged.relevance,
        where=str(judged.path),
        lines=judged.lines,
        check_duplicates=False,
    )


# -- writing files ---------------------------------------------------------------------------------


def _check_ids(ids: pa.Array, what: str, where: str) -> None:
    bad = pc.or_(pc.equal(pc.utf8_length(ids), 0), pc.match_substring_regex(ids, r"[ \t\n\r\v\f]"))
    if len(ids) and pc.any(bad).as_py():
        value = ids.filter(bad)[0].as_py()
        _check_id(value, what, where)


def _write_table(path: str | os.PathLike[str], columns: dict[str, Any]) -> None:
    table = pa.table(columns)
    with atomic_path(path) as tmp:
        pacsv.write_csv(
            table,
            tmp,
            write_options=pacsv.WriteOptions(
                include_header=False, delimiter=" ", quoting_style="none"
            ),
        )


def save_run(run: Run, path: str | os.PathLike[str], *, tag: str | None = None) -> None:
    """Write ``run`` as a TREC run file, atomically; ranks are 1-based positions.

    Scores are written in their shortest round-trip form, so `load_run` reads back the same
    order — except where two scores are equal and the in-memory order was not the tie rule's
    (possible only for a `Run.from_rankings` or a fused run).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "run.trec"
    >>> save_run(Run.from_dict({"q": {"a": 1.5}}, name="bm25"), p)
    >>> p.read_text()
    'q Q0 a 1 1.5 bm25\\n'
    """
    where = str(path)
    name = tag if tag is not None else run.name
    _check_id(name, "run tag", where)
    _check_ids(run.query_ids, "query id", where)
    _check_ids(run.doc_ids, "document id", where)
    depths = run.depths
    qcodes = np.repeat(np.arange(run.n_queries), depths)
    ranks = positions_in_groups(depths) + 1
    _write_table(
        path,
        {
            "qid": run.query_ids.take(pa.array(qcodes)),
            "q0": pa.array(np.full(len(run), "Q0", dtype=object), type=pa.string()),
            "docid": run.doc_ids.take(pa.array(run.doc_codes)),
            "rank": pa.array(ranks),
            "score": pa.array(run.scores),
            "tag": pa.array(np.full(len(run), name, dtype=object), type=pa.string()),
        },
    )


def save_qrels(qrels: Qrels, path: str | os.PathLike[str]) -> None:
    """Write ``qrels`` as a TREC qrels file (``qid 0 docid rel``), atomically.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "qrels.txt"
    >>> save_qrels(Qrels.from_dict({"q": {"a": 1}}), p)
    >>> p.read_text()
    'q 0 a 1\\n'
    """
    where = str(path)
    _check_ids(qrels.query_ids, "query id", where)
    _check_ids(qrels.doc_ids, "document id", where)
    counts = np.diff(qrels.offsets)
    qcodes = np.repeat(np.arange(qrels.n_queries), counts)
    _write_table(
        path,
        {
            "qid": qrels.query_ids.take(pa.array(qcodes)),
            "iter": pa.array(np.zeros(len(qrels), dtype=np.int64)),
            "docid": qrels.doc_ids.take(pa.array(qrels.doc_codes)),
            "rel": pa.array(qrels.relevance),
        },
    )
