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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from arecall.core.errors import ArecallError
from arecall.io.ids import as_strings, encode, index_in
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

    Attributes
    ----------
    principals : tuple of str
    doc_ids : pyarrow.StringArray
        Documents the ACL names (a corpus's documents, in its order, when read for one).
    grants : scipy.sparse.csr_matrix of bool, shape (n_principals, n_docs)
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
    grants: sp.csr_matrix
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

    def allowed(self, principal: str) -> set[str]:
        """The documents ``principal`` may use (empty for an unknown principal)."""
        if principal not in self.principals:
            return set()
        row = self.grants[self.principals.index(principal)]
        return set(self.doc_ids.take(pa.array(row.indices)).to_pylist())

    def mask(self, principal: int, doc_ids: pa.Array) -> np.ndarray:
        """Boolean array: may principal number ``principal`` use each of ``doc_ids``?"""
        codes = index_in(doc_ids, self.doc_ids)
        dense = np.zeros(len(self.doc_ids) + 1, dtype=bool)  # last slot: "not in the ACL"
        dense[self.grants[principal].indices] = True
        return dense[np.where(codes >= 0, codes, len(self.doc_ids))]

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
        rows = np.array([index.get(p, -1) for p in keep], dtype=np.int64)
        known = np.flatnonzero(rows >= 0)
        picked = self.grants[rows[known]].tocoo()
        grants = sp.csr_matrix(
            (np.ones(picked.nnz, dtype=bool), (known[picked.row], picked.col)),
            shape=(len(keep), len(self.doc_ids)),
            dtype=bool,
        )
        grants.sort_indices()
        groups = {p: self.groups[p] for p in keep if p in self.groups}
        return Acl(keep, self.doc_ids, grants, groups)

    # patterns: what the evaluation kernels look documents up in ---------------------------------

    @cached_property
    def _patterns(self) -> tuple[np.ndarray, sp.csr_matrix]:
        """Each document's pattern (the set of principals it is granted to, as a number) and
        the patterns' principals (a pattern × principal matrix): documents granted alike share
        one, so a lookup per retrieved document touches a small table."""
        import scipy.sparse as sp

        by_doc = self.grants.T.tocsr()
        by_doc.sort_indices()
        n_docs = by_doc.shape[0]
        if n_docs == 0:
            return np.zeros(0, dtype=np.int64), sp.csr_matrix((0, len(self.principals)), dtype=bool)
        # a random 64-bit weight per principal; a set's key is the sum of its weights (mod 2**64)
        weights = np.random.default_rng(0x5EED).integers(
            1, 2**63, len(self.principals) + 1, dtype=np.uint64
        )
        sizes = np.diff(by_doc.indptr)
        owner = np.repeat(np.arange(n_docs), sizes)
        key = np.zeros(n_docs, dtype=np.uint64)
        np.add.at(key, owner, weights[by_doc.indices])
        key ^= sizes.astype(np.uint64) * weights[-1]
        _, first, pattern = np.unique(key, return_index=True, return_inverse=True)
        pattern = pattern.ravel().astype(np.int64)
        # a key is a hash: check that every document has exactly its pattern's principals
        same = np.array_equal(sizes, sizes[first][pattern])
        if same and len(by_doc.indices):
            starts = by_doc.indptr[first][pattern]
            position = np.arange(len(by_doc.indices)) - by_doc.indptr[owner]
            same = np.array_equal(by_doc.indices, by_doc.indices[starts[owner] + position])
        if not same:  # a collision (about 2**-64 per pair): one pattern per document, exact
            first, pattern = np.arange(n_docs), np.arange(n_docs)
        return pattern, by_doc[first].tocsr()

    @property
    def n_patterns(self) -> int:
        """Distinct patterns, plus one: the last, "nobody", for documents the ACL does not list."""
        return int(self._patterns[1].shape[0]) + 1

    def grants_anyone(self, patterns: np.ndarray) -> np.ndarray:
        """Whether each of ``patterns`` grants at least one principal."""
        sizes = np.diff(self._patterns[1].indptr)
        return np.r_[sizes > 0, False][patterns]

    def doc_patterns(self, doc_ids: pa.Array) -> np.ndarray:
        """The pattern of each of ``doc_ids`` (``n_patterns - 1``, nobody, where unlisted)."""
        codes = index_in(doc_ids, self.doc_ids)
        pattern = np.r_[self._patterns[0], self.n_patterns - 1]  # -1: the last slot, nobody
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
        members = self._patterns[1][:, start:stop].tocsr()
        width = max(stop - start, 0)
        out = np.zeros((self.n_patterns, (width + 7) // 8), dtype=np.uint8)
        rows = np.repeat(np.arange(members.shape[0]), np.diff(members.indptr))
        np.bitwise_or.at(
            out, (rows, members.indices >> 3), (1 << (members.indices & 7)).astype(np.uint8)
        )
        return out


def expand(
    doc_codes: np.ndarray,
    doc_ids: pa.Array,
    name_codes: np.ndarray,
    name_ids: pa.Array,
    principals: Sequence[str],
    groups: Mapping[str, Sequence[str]],
    *,
    origin: tuple[Path, np.ndarray] | None = None,
) -> Acl:
    """The one expansion of ACL lines into grants: line i grants ``doc_ids[doc_codes[i]]`` to
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
                f"{origin[0]}: line {origin[1][row]}: {name_list[name_codes[row]]!r} is neither "
                f"a listed principal nor a group {where}; principals: "
                f"{', '.join(principals) or 'none'}"
            )
    # name × doc incidence, then principal × name membership (itself, or one of its groups)
    incidence = sp.csr_matrix(
        (np.ones(len(doc_codes), dtype=np.int32), (name_codes, doc_codes)),
        shape=(len(name_list), len(doc_ids)),
    )
    name_index = {n: i for i, n in enumerate(name_list)}
    rows, cols = [], []
    for p, i in index.items():
        for name in {p} | set(groups.get(p, ())):
            if name in name_index:
                rows.append(i)
                cols.append(name_index[name])
    member = sp.csr_matrix(
        (np.ones(len(rows), dtype=np.int32), (rows, cols)), shape=(len(index), len(name_list))
    )
    grants = (member @ incidence).astype(bool).tocsr()
    grants.sort_indices()
    memberships = {p: tuple(sorted(groups[p])) for p in principals if groups.get(p)}
    return Acl(tuple(principals), doc_ids, grants, memberships)


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
