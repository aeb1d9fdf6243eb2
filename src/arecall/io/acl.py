"""ACL and groups files: the one reader of each, for ``arecall evaluate`` and the corpus sources.

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
Deny by default is the callers' rule: a document no line names is authorized to nobody.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from arecall.core.errors import ArecallError
from arecall.core.ragged import expand, offsets
from arecall.io.ids import as_strings, encode, index_in
from arecall.io.text import check_file, fast_table, fields, lines

__all__ = ["ACL_HEADERS", "GROUPS_HEADERS", "Pairs", "read_acl", "read_acl_lines", "read_groups"]

ACL_HEADERS = ("doc_id", "doc-id", "docid", "corpus-id", "corpus_id")
GROUPS_HEADERS = ("principal",)
_ACL_FIELDS = ("doc_id", "principal")
_GROUPS_FIELDS = ("principal", "group")
_WS = " \t\n\r\v\f"


@dataclass(frozen=True, eq=False)
class Pairs:
    """The lines of a two-column TSV, in file order.

    Attributes
    ----------
    path : Path
    first, second : pyarrow.StringArray
        The two fields of each line (document and principal-or-group; member and group).
    lines : ndarray of int64
        Each line's number, for messages about it.
    """

    path: Path
    first: pa.Array
    second: pa.Array
    lines: np.ndarray


def _pairs(path: str | os.PathLike[str], names: tuple[str, str], headers: Sequence[str]) -> Pairs:
    p = check_file(path)
    layout = f"{names[0]}<TAB>{names[1]}"
    start = next(lines(p, comments=True), None)
    header = 0
    if start is not None and start[1].split("\t")[0].strip(_WS).lower() in headers:
        header = start[0]
    table = fast_table(p, "tab", {}, 2, skip=header, comments=True) if header in (0, 1) else None
    if table is not None:
        first, second = table["f0"].combine_chunks(), table["f1"].combine_chunks()
        numbers = np.arange(1, table.num_rows + 1, dtype=np.int64) + header
    else:
        a: list[str] = []
        b: list[str] = []
        n: list[int] = []
        for number, parts in fields(p, "tab", comments=True):
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
        first, second, numbers = as_strings(a), as_strings(b), np.asarray(n, dtype=np.int64)
    if len(numbers) == 0:
        what = f"line {header}: only a header" if header else "line 1: the file is empty"
        raise ArecallError(f"{p}: {what}; expected {layout} lines")
    return Pairs(p, first, second, numbers)


def read_acl_lines(path: str | os.PathLike[str]) -> Pairs:
    """The ``doc_id<TAB>principal-or-group`` lines of an ACL file.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "acl.tsv"
    >>> text = "\\ufeffcorpus-id\\tprincipal\\r\\n# staff\\r\\nd1\\tstaff\\r\\n"
    >>> _ = p.write_bytes(text.encode())
    >>> acl = read_acl_lines(p)
    >>> acl.first.to_pylist(), acl.second.to_pylist(), acl.lines.tolist()
    (['d1'], ['staff'], [3])
    """
    return _pairs(path, _ACL_FIELDS, ACL_HEADERS)


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
    nested = pc.is_in(pairs.first, value_set=pairs.second).to_numpy(zero_copy_only=False)
    if nested.any():
        i = int(np.flatnonzero(nested)[0])
        raise ArecallError(
            f"{pairs.path}: line {pairs.lines[i]}: {pairs.first[i].as_py()!r} is both a principal "
            "and a group (nested groups are not supported)"
        )
    return pairs


def read_acl(
    path: str | os.PathLike[str],
    doc_ids: Sequence[str] | pd.Series,
    *,
    groups: str | os.PathLike[str] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A collection's principals and ACL table from an ACL file (and a groups file).

    A name in the ACL that is a group of the groups file grants its members; any other name is
    a principal. The principals are every member of the groups file and every non-group name of
    the ACL, sorted. Documents no line names are authorized to nobody (deny by default).

    Parameters
    ----------
    path : path
        The ACL TSV (see `read_acl_lines`).
    doc_ids : sequence of str
        The collection's document ids; a line naming another id is an error.
    groups : path, optional
        The memberships TSV (see `read_groups`).

    Returns
    -------
    principals, acl : DataFrame
        ``principal`` (and ``groups``, comma-separated); ``principal``, ``doc_id``, both
        categorical over the full vocabularies.

    Raises
    ------
    ArecallError
        Naming the file and line: wrong column count, empty field, unknown document id, a
        name used both as principal and group, a file without a grant.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "acl.tsv").write_text("doc_id\\tprincipal\\na\\tann\\nb\\tstaff\\n")
    >>> _ = (d / "groups.tsv").write_text("bob\\tstaff\\n")
    >>> principals, acl = read_acl(d / "acl.tsv", ["a", "b", "c"], groups=d / "groups.tsv")
    >>> principals["principal"].tolist(), acl.values.tolist()
    (['ann', 'bob'], [['ann', 'a'], ['bob', 'b']])
    """
    from arecall.data.authorization import acl_frame  # the data layer builds ACL tables

    grants = read_acl_lines(path)
    docs, names, numbers = grants.first, grants.second, grants.lines
    universe = pa.array(np.asarray(doc_ids, dtype=object), type=pa.string())
    found = index_in(docs, universe)
    unknown = found < 0
    if unknown.any():
        i = int(np.flatnonzero(unknown)[0])
        raise ArecallError(
            f"{grants.path}: line {numbers[i]}: {docs[i].as_py()!r} is not a document id of the "
            "corpus"
        )
    name_codes, name_vocabulary = encode(names)
    distinct = [str(n) for n in name_vocabulary.to_pylist()]  # few: principals and groups
    members: dict[str, list[str]] = {}
    if groups is not None:
        memberships = read_groups(groups)
        for member, group in zip(
            memberships.first.to_pylist(), memberships.second.to_pylist(), strict=True
        ):
            if member not in members.setdefault(group, []):
                members[group].append(member)
    # who each distinct name grants: its members if it is a group, else itself
    grantees = [members.get(n, [n]) for n in distinct]
    principal_names = sorted(
        {m for ms in members.values() for m in ms} | {n for n in distinct if n not in members}
    )
    code = {p: i for i, p in enumerate(principal_names)}
    flat = np.array([code[m] for ms in grantees for m in ms], dtype=np.int64)
    count = np.array([len(ms) for ms in grantees], dtype=np.int64)
    start = offsets(count)[:-1]
    repeat = count[name_codes]  # one output row per (line, grantee)
    p_codes = flat[expand(start[name_codes], repeat)]
    d_codes = np.repeat(found, repeat)
    n_docs = max(len(universe), 1)
    keys = np.sort(p_codes * n_docs + d_codes)  # by principal, then document
    keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))]
    acl = acl_frame(keys // n_docs, keys % n_docs, principal_names, doc_ids)
    of: dict[str, list[str]] = {}
    for group, ms in members.items():
        for m in ms:
            of.setdefault(m, []).append(group)
    principals = pd.DataFrame(
        {
            "principal": principal_names,
            "groups": [",".join(sorted(of.get(p, []))) for p in principal_names],
        }
    )
    return principals, acl
