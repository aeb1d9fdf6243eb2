"""ACL and groups files, and the ACL they make: one reader, one expansion, one type.

* ACL: ``doc_id<TAB>principal-or-group`` lines. An optional header is the first data line
  when its first field (lower-cased) is one of `ACL_HEADERS` (``doc_id``, ``corpus-id``, ...).
* Groups: ``principal<TAB>group`` lines. An optional header is the first data line when its
  first field (lower-cased) is one of `GROUPS_HEADERS`. A name may not be both a member and a
  group (nested groups are not supported).

Both are read by `arecall.io.text` with ``comments=True``: gzip, a UTF-8 BOM, CRLF, blank lines
and ``#`` comment lines (a line whose first character is ``#``; so an id cannot start with
``#`` in these files) are handled the same on every path. Fields are split on tabs and trimmed
of surrounding whitespace; an empty field, a wrong field count or a file without a single grant
(empty, or only a header, blank lines or comments) is an `ArecallError` naming the file and line.
A file is read once, a block at a time, and kept as integer codes, so an ACL of tens of
millions of grants costs its codes, not its text (and a pipe can be read).

`load_acl` is the one expansion both products use (``arecall evaluate`` and the corpus
sources, through `arecall.data.authorization.read_acl`): a name in the ACL that is a group of
the groups file grants its members; any other name is a principal. The result is an `Acl`:
deny by default — a document no line names is authorized to nobody. The one difference between
the products is explicit: a corpus passes its ``documents``, and a line naming another id is an
error; ``arecall evaluate`` has no universe of documents, so an ACL may name documents the run
and the qrels never mention.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from arecall.core.errors import ArecallError
from arecall.io.ids import Lookup, as_strings, encode, index_in
from arecall.io.text import Chunk, check_file, chunk_fields, chunks, parse_chunk

if TYPE_CHECKING:  # scipy loads with an ACL: an evaluation without one never needs it
    import scipy.sparse as sp

__all__ = [
    "ACL_HEADERS",
    "GROUPS_HEADERS",
    "Acl",
    "Pairs",
    "load_acl",
    "read_acl_lines",
    "read_groups",
]

ACL_HEADERS = ("doc_id", "doc-id", "docid", "corpus-id", "corpus_id")
GROUPS_HEADERS = ("principal",)
_ACL_FIELDS = ("doc_id", "principal")
_GROUPS_FIELDS = ("principal", "group")
_WS = " \t\n\r\v\f"
_LOOKUP_LOCK = threading.Lock()


# -- reading the files ----------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Pairs:
    """The lines of a two-column TSV, in file order, as codes.

    Attributes
    ----------
    path : Path
    first, second : ndarray of int64
        Codes of the two fields of each line into ``first_ids`` / ``second_ids``.
    first_ids, second_ids : pyarrow.StringArray
        The distinct values of each field.
    lines : ndarray of int64
        Each line's number, for messages about it.
    """

    path: Path
    first: np.ndarray
    second: np.ndarray
    first_ids: pa.Array
    second_ids: pa.Array
    lines: np.ndarray

    def strings(self, column: str) -> pa.Array:
        """The field of every line as strings (``"first"`` or ``"second"``)."""
        codes, ids = (
            (self.first, self.first_ids) if column == "first" else (self.second, self.second_ids)
        )
        return ids.take(pa.array(codes))


class _Vocabulary:
    """Distinct strings met so far, block by block, and each block's codes into them."""

    def __init__(self, fixed: pa.Array | None = None) -> None:
        self.fixed = fixed  # a given universe: strings outside it get -1
        self.parts: list[pa.Array] = [] if fixed is None else [fixed]
        self.size = 0 if fixed is None else len(fixed)
        self._all: pa.Array | None = fixed

    def codes(self, values: pa.Array) -> np.ndarray:
        local, distinct = encode(values)
        if self.fixed is not None:
            return index_in(distinct, self.fixed)[local]
        known = index_in(distinct, self.values()) if self.size else np.full(len(distinct), -1)
        new = np.flatnonzero(known < 0)
        if len(new):
            known[new] = self.size + np.arange(len(new))
            self.parts.append(distinct.take(pa.array(new)))
            self.size += len(new)
            self._all = None
        return known[local]

    def values(self) -> pa.Array:
        if self._all is None:
            self._all = (
                pa.concat_arrays(self.parts) if self.parts else pa.array([], type=pa.string())
            )
        return self._all


def _header_line(blocks: Iterable[Chunk], kept: list[Chunk], headers: Sequence[str]) -> int:
    """The number of the header line (the first data line, if it looks like one), else 0."""
    for chunk in blocks:
        kept.append(chunk)
        for number, parts in chunk_fields(chunk, "tab", comments=True):
            return number if parts[0].lower() in headers else 0
    return 0


def _pairs(
    path: str | os.PathLike[str],
    names: tuple[str, str],
    headers: Sequence[str],
    *,
    first_universe: pa.Array | None = None,
) -> Pairs:
    p = check_file(path)
    layout = f"{names[0]}<TAB>{names[1]}"
    blocks = chunks(p)
    kept: list[Chunk] = []
    header = _header_line(blocks, kept, headers)
    vocabularies = (_Vocabulary(first_universe), _Vocabulary())
    codes: tuple[list[np.ndarray], list[np.ndarray]] = ([], [])
    numbers: list[np.ndarray] = []
    for chunk in itertools.chain(kept, blocks):
        skip = 1 if header == chunk.first_line else 0
        table = None
        if header <= chunk.first_line:  # a header after blank or comment lines: strict reader
            table = parse_chunk(chunk, "tab", {}, 2, skip=skip, comments=True)
        if table is not None:
            columns = (table["f0"].chunk(0), table["f1"].chunk(0))
            start = chunk.first_line + skip
            lines = np.arange(start, start + table.num_rows, dtype=np.int64)
        else:
            a: list[str] = []
            b: list[str] = []
            n: list[int] = []
            for number, parts in chunk_fields(chunk, "tab", comments=True):
                if number == header:
                    continue
                if len(parts) != 2:
                    raise ArecallError(
                        f"{p}: line {number}: expected 2 tab-separated fields ({layout}), "
                        f"found {len(parts)}"
                    )
                for name, value in zip(names, parts, strict=True):
                    if not value:
                        raise ArecallError(f"{p}: line {number}: empty {name}")
                a.append(parts[0])
                b.append(parts[1])
                n.append(number)
            columns = (as_strings(a), as_strings(b))
            lines = np.asarray(n, dtype=np.int64)
        if not len(lines):
            continue
        for i in (0, 1):
            codes[i].append(vocabularies[i].codes(columns[i]))
        numbers.append(lines)
        if first_universe is not None and (codes[0][-1] < 0).any():
            row = int(np.flatnonzero(codes[0][-1] < 0)[0])
            raise ArecallError(
                f"{p}: line {lines[row]}: {columns[0][row].as_py()!r} is not a document id of "
                "the corpus"
            )
    if not numbers:
        what = f"line {header}: only a header" if header else "line 1: the file is empty"
        raise ArecallError(f"{p}: {what}; expected {layout} lines")
    return Pairs(
        p,
        np.concatenate(codes[0]),
        np.concatenate(codes[1]),
        vocabularies[0].values(),
        vocabularies[1].values(),
        np.concatenate(numbers),
    )


def read_acl_lines(path: str | os.PathLike[str], *, documents: pa.Array | None = None) -> Pairs:
    """The ``doc_id<TAB>principal-or-group`` lines of an ACL file.

    With ``documents`` (a corpus's ids), ``first`` codes are positions in it and a line naming
    another id is an error.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "acl.tsv"
    >>> text = "\\ufeffcorpus-id\\tprincipal\\r\\n# staff\\r\\nd1\\tstaff\\r\\n"
    >>> _ = p.write_bytes(text.encode())
    >>> acl = read_acl_lines(p)
    >>> acl.strings("first").to_pylist(), acl.strings("second").to_pylist(), acl.lines.tolist()
    (['d1'], ['staff'], [3])
    """
    return _pairs(path, _ACL_FIELDS, ACL_HEADERS, first_universe=documents)


def read_groups(path: str | os.PathLike[str]) -> Pairs:
    """The ``principal<TAB>group`` lines of a groups file; nested groups are refused.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "groups.tsv"
    >>> _ = p.write_text("principal\\tgroup\\nalice\\tstaff\\nstaff\\tall\\n")
    >>> read_groups(p)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    arecall.core.errors.ArecallError: /...groups.tsv: line 3: 'staff' is both a principal and a ...
    """
    pairs = _pairs(path, _GROUPS_FIELDS, GROUPS_HEADERS)
    nested = pc.is_in(pairs.strings("first"), value_set=pairs.second_ids)
    nested_rows = np.flatnonzero(nested.to_numpy(zero_copy_only=False))
    if len(nested_rows):
        i = int(nested_rows[0])
        raise ArecallError(
            f"{pairs.path}: line {pairs.lines[i]}: "
            f"{pairs.first_ids[int(pairs.first[i])].as_py()!r} is both a principal and a group "
            "(nested groups are not supported)"
        )
    return pairs


# -- the ACL --------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Acl:
    """Which principal may use which document; deny by default.

    Kept as patterns: documents named on the same ACL lines (the same set of principals and
    groups) share a pattern, and a pattern lists its principals. A group ACL of a million
    documents granted to a hundred groups is a hundred patterns, not the tens of millions of
    (principal, document) grants it expands to; `grants` expands it when asked.

    Attributes
    ----------
    principals : tuple of str
    doc_ids : pyarrow.StringArray
        Documents the ACL names (a corpus's documents, in its order, when read for one).
    doc_pattern : ndarray of int64
        Each document's pattern.
    members : scipy.sparse.csr_matrix of bool, shape (n_patterns, n_principals)
        The principals each pattern grants.
    groups : dict of str to tuple of str
        Each principal's groups (from the groups file; empty without one).

    Examples
    --------
    >>> acl = Acl.from_mapping({"alice": ["d1", "d2"], "bob": []})
    >>> sorted(acl.allowed("alice")), acl.allowed("bob"), acl.allowed("carol")
    (['d1', 'd2'], set(), set())
    """

    principals: tuple[str, ...]
    doc_ids: pa.Array
    doc_pattern: np.ndarray
    members: sp.csr_matrix
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

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
        doc_codes, doc_ids = encode(docs)
        name_codes, name_ids = encode(granted_to)
        return expand(doc_codes, doc_ids, name_codes, name_ids, names, {})

    @cached_property
    def grants(self) -> sp.csr_matrix:
        """The expanded grants, principal × document (bool): one entry per grant."""
        import scipy.sparse as sp

        n_docs = len(self.doc_pattern)
        by_pattern = sp.csr_matrix(
            (np.ones(n_docs, dtype=bool), (self.doc_pattern, np.arange(n_docs))),
            shape=(self.members.shape[0], n_docs),
        )
        grants = (self.members.T.tocsr().astype(np.int32) @ by_pattern.astype(np.int32)).astype(
            bool
        )
        grants = grants.tocsr()
        grants.sort_indices()
        return grants

    def _patterns_of(self, principal: str) -> np.ndarray:
        if principal not in self.principals:
            return np.zeros(0, dtype=np.int64)
        column = self.members[:, self.principals.index(principal)]
        return np.asarray(column.nonzero()[0], dtype=np.int64)

    def allowed(self, principal: str) -> set[str]:
        """The documents ``principal`` may use (empty for an unknown principal)."""
        rows = np.flatnonzero(np.isin(self.doc_pattern, self._patterns_of(principal)))
        return set(self.doc_ids.take(pa.array(rows)).to_pylist())

    def mask(self, principal: int, doc_ids: pa.Array) -> np.ndarray:
        """Boolean array: may principal number ``principal`` use each of ``doc_ids``?"""
        patterns = self._patterns_of(self.principals[principal])
        return np.isin(self.doc_patterns(doc_ids), patterns)

    def select(self, principals: Sequence[str]) -> Acl:
        """The ACL of ``principals`` (in that order); one the ACL does not know may use nothing.

        Examples
        --------
        >>> Acl.from_mapping({"a": ["x"], "b": ["y"]}).select(["b", "z"]).allowed("b")
        {'y'}
        """
        import scipy.sparse as sp

        keep = tuple(principals)
        index = {p: i for i, p in enumerate(self.principals)}
        columns = np.array([index.get(p, -1) for p in keep], dtype=np.int64)
        known = np.flatnonzero(columns >= 0)
        picked = self.members[:, columns[known]].tocoo()
        members = sp.csr_matrix(
            (np.ones(picked.nnz, dtype=bool), (picked.row, known[picked.col])),
            shape=(self.members.shape[0], len(keep)),
            dtype=bool,
        )
        groups = {p: self.groups[p] for p in keep if p in self.groups}
        return Acl(keep, self.doc_ids, self.doc_pattern, members, groups)

    # what the evaluation kernels look documents up in --------------------------------------------

    @property
    def n_patterns(self) -> int:
        """Patterns, plus one: the last, "nobody", for documents the ACL does not list."""
        return int(self.members.shape[0]) + 1

    def grants_anyone(self, patterns: np.ndarray) -> np.ndarray:
        """Whether each of ``patterns`` grants at least one principal."""
        sizes = np.diff(self.members.indptr)
        return np.r_[sizes > 0, False][patterns]

    @cached_property
    def _doc_lookup(self) -> Lookup:
        """The ACL's documents hashed once: an evaluation looks a block of a run up in them
        at a time (re-hashing a million documents per block cost more than the look-up)."""
        return Lookup(self.doc_ids)

    def doc_patterns(self, doc_ids: pa.Array) -> np.ndarray:
        """The pattern of each of ``doc_ids`` (``n_patterns - 1``, nobody, where unlisted)."""
        with _LOOKUP_LOCK:  # blocks are prepared in threads: hash the documents once
            lookup = self._doc_lookup
        codes = lookup(doc_ids)
        pattern = np.r_[self.doc_pattern, self.n_patterns - 1]  # -1: the last slot, nobody
        return pattern[codes]

    def pattern_bits(self, start: int, stop: int) -> np.ndarray:
        """Packed bits (little-endian per byte), pattern × principals ``start … stop − 1``.

        Row u, bit j: pattern u grants principal ``start + j``; the last row is nobody's.

        Examples
        --------
        >>> acl = Acl.from_mapping({"a": ["x", "y"], "b": ["y"]})
        >>> [np.unpackbits(r, count=2, bitorder="little").tolist() for r in acl.pattern_bits(0, 2)]
        [[1, 0], [1, 1], [0, 0]]
        """
        members = self.members[:, start:stop].tocsr()
        width = max(stop - start, 0)
        out = np.zeros((self.n_patterns, (width + 7) // 8), dtype=np.uint8)
        rows = np.repeat(np.arange(members.shape[0]), np.diff(members.indptr))
        np.bitwise_or.at(
            out, (rows, members.indices >> 3), (1 << (members.indices & 7)).astype(np.uint8)
        )
        return out


def _distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values, sorted: ``np.unique`` by a sort (numpy 2's ``np.unique`` hashes
    here, about 100× slower on the million (document, name) keys of a large ACL)."""
    ordered = np.sort(values)
    return ordered[np.r_[True, ordered[1:] != ordered[:-1]]] if len(ordered) else ordered


def _set_patterns(
    owner: np.ndarray, items: np.ndarray, n_owners: int, n_items: int
) -> tuple[np.ndarray, np.ndarray]:
    """Number each owner's set of items (pairs ``(owner[i], items[i])``, repeats allowed):
    (pattern of each owner, one owner having each pattern). Owners with equal sets share one.

    A set's key is the sum of a random 64-bit weight per item (mod 2**64); keys are checked
    against the sets themselves, so a collision (about 2**-64 per pair) only costs patterns.
    """
    key = _distinct(owner.astype(np.int64) * max(n_items, 1) + items)
    owner, items = key // max(n_items, 1), key % max(n_items, 1)
    weights = np.random.default_rng(0x5EED).integers(1, 2**63, n_items + 1, dtype=np.uint64)
    sizes = np.bincount(owner, minlength=n_owners)
    hashed = np.zeros(n_owners, dtype=np.uint64)
    np.add.at(hashed, owner, weights[items])
    hashed ^= sizes.astype(np.uint64) * weights[-1]
    _, first, pattern = np.unique(hashed, return_index=True, return_inverse=True)
    pattern = pattern.ravel().astype(np.int64)
    starts = np.r_[0, np.cumsum(sizes)[:-1]]
    same = np.array_equal(sizes, sizes[first][pattern])
    if same and len(items):
        position = np.arange(len(items)) - starts[owner]
        same = np.array_equal(items, items[starts[first][pattern][owner] + position])
    if not same:
        return np.arange(n_owners), np.arange(n_owners)
    return pattern, first


def expand(
    doc_codes: np.ndarray,
    doc_ids: pa.Array,
    name_codes: np.ndarray,
    name_ids: pa.Array,
    principals: Sequence[str],
    groups: Mapping[str, Sequence[str]],
    *,
    origin: tuple[Path, Any] | None = None,
) -> Acl:
    """The one expansion of ACL lines: line i grants ``doc_ids[doc_codes[i]]`` to
    ``name_ids[name_codes[i]]`` — a principal, or a group whose members (``groups`` maps a
    principal to its groups) it then grants. ``origin`` = (file, line numbers) turns a name
    that is neither a listed principal nor a group into an error naming its line.

    Examples
    --------
    >>> acl = expand(np.array([0, 1]), pa.array(["d1", "d2"]), np.array([0, 1]),
    ...              pa.array(["staff", "bob"]), ["alice", "bob"], {"alice": ["staff"]})
    >>> sorted(acl.allowed("alice")), sorted(acl.allowed("bob"))
    (['d1'], ['d2'])
    """
    import scipy.sparse as sp

    if len(set(principals)) != len(principals):
        dup = next(p for p in principals if list(principals).count(p) > 1)
        raise ArecallError(f"principal {dup!r} is listed twice")
    index = {p: i for i, p in enumerate(principals)}
    name_list = [str(n) for n in name_ids.to_pylist()]  # few: principals and groups
    group_names = {g for gs in groups.values() for g in gs}
    if origin is not None:
        unknown = [i for i, n in enumerate(name_list) if n not in index and n not in group_names]
        if unknown:
            row = int(np.flatnonzero(np.isin(name_codes, unknown))[0])
            where = "of the groups file" if group_names else "(no groups file was given)"
            raise ArecallError(
                f"{origin[0]}: line {int(origin[1][row])}: {name_list[name_codes[row]]!r} is "
                f"neither a listed principal nor a group {where}; principals: "
                f"{', '.join(principals) or 'none'}"
            )
    # each document's set of names, numbered: documents named on the same lines share one
    doc_pattern, first = _set_patterns(
        np.asarray(doc_codes, dtype=np.int64), np.asarray(name_codes, dtype=np.int64),
        len(doc_ids), len(name_list),
    )  # fmt: skip
    keyed = _distinct(np.asarray(doc_codes, dtype=np.int64) * max(len(name_list), 1) + name_codes)
    docs_of, names_of = keyed // max(len(name_list), 1), keyed % max(len(name_list), 1)
    representative = np.full(len(doc_ids), -1, dtype=np.int64)
    representative[first] = np.arange(len(first))
    keep = representative[docs_of] >= 0
    pattern_names = sp.csr_matrix(
        (np.ones(int(keep.sum()), dtype=np.int32), (representative[docs_of[keep]], names_of[keep])),
        shape=(len(first), len(name_list)),
    )
    # name × principal: a principal's own name, and each of its groups
    name_index = {n: i for i, n in enumerate(name_list)}
    rows, cols = [], []
    for p, i in index.items():
        for name in {p} | set(groups.get(p, ())):
            if name in name_index:
                rows.append(name_index[name])
                cols.append(i)
    grants_of = sp.csr_matrix(
        (np.ones(len(rows), dtype=np.int32), (rows, cols)), shape=(len(name_list), len(index))
    )
    members = (pattern_names @ grants_of).astype(bool).tocsr()
    members.sort_indices()
    memberships = {p: tuple(sorted(groups[p])) for p in principals if groups.get(p)}
    return Acl(tuple(principals), doc_ids, doc_pattern, members, memberships)


def load_acl(
    path: str | os.PathLike[str],
    *,
    groups: str | os.PathLike[str] | None = None,
    principals: Sequence[str] | None = None,
    documents: Sequence[str] | pa.Array | None = None,
) -> Acl:
    """Read an ACL TSV (``doc_id<TAB>principal`` lines) and optionally a groups TSV.

    An ACL line may name a principal or, when ``groups`` is given (``principal<TAB>group``
    lines), a group: every member may then use the document. A document the ACL does not list
    is authorized to nobody. Both files are read by `arecall.io.text`: header lines, comments,
    BOM, CRLF, gzip and errors are handled as there.

    Parameters
    ----------
    path : path-like
    groups : path-like, optional
    principals : sequence of str, optional
        The principals to evaluate. When given, an ACL line naming anything else (that is not
        a group) is an error; when omitted, they are every non-group name in the ACL and every
        principal in the groups file, sorted.
    documents : sequence of str, optional
        A corpus's document ids: the ACL's ``doc_ids`` are then these (in this order), and a
        line naming another id is an error.

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
    universe = (
        None
        if documents is None
        else as_strings(list(documents) if not isinstance(documents, pa.Array) else documents)
    )
    lines = read_acl_lines(path, documents=universe)
    membership: dict[str, list[str]] = {}
    if groups is not None:
        pairs = read_groups(groups)
        members = pairs.first_ids.to_pylist()
        names = pairs.second_ids.to_pylist()
        for m, g in zip(pairs.first.tolist(), pairs.second.tolist(), strict=True):
            if names[g] not in membership.setdefault(members[m], []):
                membership[members[m]].append(names[g])
    group_names = {g for gs in membership.values() for g in gs}
    if principals is None:
        named = set(lines.second_ids.to_pylist())
        principals = sorted({n for n in named if n not in group_names} | set(membership))
    return expand(
        lines.first,
        lines.first_ids,
        lines.second,
        lines.second_ids,
        list(principals),
        membership,
        origin=(lines.path, lines.lines),
    )
