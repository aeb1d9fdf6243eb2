"""Authorization models: which principals are evaluated and what each may use.

The Hydra group ``profiles`` selects one by ``profiles.name``. Every model produces the
collection's ``principals`` and ``acl`` tables; the ACL is deny-by-default (a document absent
from a principal's grants is not authorized), and nothing downstream knows how it was made. That
is what lets one corpus be measured under several access-control regimes and the numbers be
compared: only the predicate A_p changes.

* ``corpus`` — what the corpus declares (the default). ``profiles.principals`` may name a subset.
* ``open`` — one principal, ``everyone``, authorized for every document: A ≡ 1, so ARecall@K
  must equal Recall@K (a claim the prove stage checks on the run's own data).
* ``domains`` — the seed's model: a principal is granted whole domains (the documents'
  ``domain`` column). ``profiles.grants`` maps principal → domains; when null, the corpus's own
  principals keep the domains they hold: their ``domains`` column if the corpus declares one
  (``corpus=synthetic`` does), otherwise every domain *all* of whose documents the corpus's ACL
  grants them (for the discovery corpus this gives back the seed's profiles exactly). A partial
  grant never widens into a whole-domain one.
* ``clearance`` — attribute-based: grant iff the principal holds the document's domain (as for
  ``domains``) *and* the document's ``sensitivity`` ≤ the principal's ``clearance`` in the order
  ``profiles.levels`` (internal < confidential < restricted). A label outside ``levels`` is an
  error, not a silent deny, because it would change the metric without a trace.
* ``random`` — ``n_principals`` principals ``r0``, …; each sees each document independently with
  probability ``selectivity`` (seeded): the authorization analogue of a selectivity sweep.
* ``acl_file`` — a TSV of ``doc_id<TAB>principal-or-group`` lines, with an optional TSV of
  ``principal<TAB>group`` lines that expands group grants to members (see `read_acl`).

Every model builds its ACL from integer arrays (one boolean row per principal over the
documents) into categorical columns, so a million documents × a hundred principals takes
seconds and the memory of the grants, not of their strings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import scipy.sparse as sp

from arecall.data.collection import Collection
from arecall.core.errors import ArecallError

__all__ = [
    "LEVELS",
    "MODELS",
    "acl_frame",
    "acl_from_masks",
    "apply_profiles",
    "principal_domains",
    "read_acl",
]

LEVELS = ("internal", "confidential", "restricted")  # the seed's sensitivity order, ascending


# -- building blocks ------------------------------------------------------------------------------


def acl_frame(
    principal_codes: np.ndarray,
    doc_codes: np.ndarray,
    principals: Sequence[str] | pd.Series,
    doc_ids: Sequence[str] | pd.Series,
) -> pd.DataFrame:
    """An ACL table from integer codes: row i grants ``doc_ids[doc_codes[i]]`` to a principal.

    Both columns are categorical over the full vocabularies, so a large ACL costs its codes.

    Examples
    --------
    >>> acl_frame(np.array([0, 1]), np.array([1, 0]), ["p", "q"], ["a", "b"]).values.tolist()
    [['p', 'b'], ['q', 'a']]
    """
    return pd.DataFrame(
        {
            "principal": pd.Categorical.from_codes(
                np.asarray(principal_codes), dtype=pd.CategoricalDtype(pd.Index(principals))
            ),
            "doc_id": pd.Categorical.from_codes(
                np.asarray(doc_codes), dtype=pd.CategoricalDtype(pd.Index(doc_ids))
            ),
        }
    )


def acl_from_masks(
    masks: Iterable[np.ndarray],
    principals: Sequence[str] | pd.Series,
    doc_ids: Sequence[str] | pd.Series,
) -> pd.DataFrame:
    """An ACL table from one boolean row over the documents per principal (in order).

    Examples
    --------
    >>> masks = [np.array([True, False, True]), np.array([False, False, False])]
    >>> acl_from_masks(masks, ["p", "q"], ["a", "b", "c"]).values.tolist()
    [['p', 'a'], ['p', 'c']]
    """
    rows, cols = [np.zeros(0, np.int32)], [np.zeros(0, np.int64)]
    for p, mask in zip(range(len(principals)), masks, strict=True):
        docs = np.flatnonzero(mask)
        rows.append(np.full(len(docs), p, dtype=np.int32))
        cols.append(docs.astype(np.int64))
    return acl_frame(np.concatenate(rows), np.concatenate(cols), principals, doc_ids)


def _domain_codes(collection: Collection, model: str) -> tuple[np.ndarray, list[str]]:
    if "domain" not in collection.documents.columns:
        raise ArecallError(
            f"profiles={model}: the corpus's documents have no 'domain' column "
            "(corpus=synthetic, discovery and seed_json have one)"
        )
    codes, names = pd.factorize(collection.documents["domain"].astype(str), sort=True)
    return codes.astype(np.int64), [str(n) for n in names]


def _split_domains(value: Any) -> list[str]:
    if isinstance(value, str):
        return [d.strip() for d in value.split(",") if d.strip()]
    if isinstance(value, list | tuple | np.ndarray):
        return [str(d) for d in value]
    return []


def principal_domains(collection: Collection) -> dict[str, list[str]]:
    """The domains each of the corpus's principals holds (the default of ``profiles.grants``).

    The principals' ``domains`` column (comma-separated or a list) when the corpus declares
    one; otherwise every domain all of whose documents the corpus's ACL grants the principal.

    Examples
    --------
    >>> from arecall.data.sources import load_corpus
    >>> principal_domains(load_corpus({"name": "discovery"}))["external-auditor"]
    ['quality']
    """
    principals = collection.principals
    if "domains" in principals.columns:
        return {
            str(p): _split_domains(d)
            for p, d in zip(principals["principal"], principals["domains"], strict=True)
        }
    codes, names = _domain_codes(collection, "domains")
    one_hot = sp.csr_matrix(
        (np.ones(len(codes)), (np.arange(len(codes)), codes)), shape=(len(codes), len(names))
    )
    held = np.asarray((collection.acl_matrix().astype(np.float64) @ one_hot).todense())
    whole = held == np.bincount(codes, minlength=len(names))[None, :]
    return {
        str(p): [names[d] for d in np.flatnonzero(whole[i])]
        for i, p in enumerate(collection.principal_names)
    }


def _grants(
    collection: Collection, cfg: Mapping[str, Any], model: str, names: list[str]
) -> dict[str, list[str]]:
    grants = cfg.get("grants")
    if grants is None:
        return principal_domains(collection)
    if not isinstance(grants, Mapping) or not grants:
        raise ArecallError(
            "profiles.grants: must be null or a non-empty mapping principal -> list of domains"
        )
    known = set(names)
    out: dict[str, list[str]] = {}
    for principal, domains in grants.items():
        where = f"profiles.grants.{principal}"
        if isinstance(domains, str) or not isinstance(domains, Sequence):
            raise ArecallError(f"{where}: must be a list of domains, got {domains!r}")
        for i, domain in enumerate(domains):
            if str(domain) not in known:
                shown = ", ".join(names[:10]) + (", …" if len(names) > 10 else "")
                raise ArecallError(
                    f"{where}[{i}]: unknown domain {domain!r} (profiles={model}; "
                    f"the corpus has: {shown})"
                )
        out[str(principal)] = [str(d) for d in domains]
    return out


def _principals_for(collection: Collection, names: list[str]) -> pd.DataFrame:
    """The corpus's principal rows for ``names`` (in that order); new names get empty attributes."""
    frame = pd.DataFrame({"principal": pd.Series(names, dtype=object)})
    attrs = collection.principals.assign(principal=collection.principals["principal"].astype(str))
    attrs = attrs.drop(columns=[c for c in ("domains",) if c in attrs.columns])
    merged = frame.merge(attrs, on="principal", how="left", sort=False)
    return merged.reset_index(drop=True)


def _membership(grants: Mapping[str, list[str]], names: list[str]) -> np.ndarray:
    index = {n: i for i, n in enumerate(names)}
    member = np.zeros((len(grants), len(names)), dtype=bool)
    for p, domains in enumerate(grants.values()):
        member[p, [index[d] for d in domains if d in index]] = True
    return member


# -- the models -----------------------------------------------------------------------------------


def _corpus(collection: Collection, cfg: Mapping[str, Any]) -> Collection:
    wanted: Sequence[str] | None = cfg.get("principals")
    if wanted is None:
        return collection
    if isinstance(wanted, str) or not all(isinstance(p, str) for p in wanted) or not wanted:
        raise ArecallError("profiles.principals: must be null or a non-empty list of names")
    known = set(collection.principal_names)
    for i, name in enumerate(wanted):
        if name not in known:
            raise ArecallError(
                f"profiles.principals[{i}]: unknown principal {name!r} "
                f"(the corpus declares: {', '.join(sorted(known))})"
            )
    order = {name: i for i, name in enumerate(wanted)}
    principals = collection.principals[collection.principals["principal"].isin(order)]
    principals = principals.sort_values("principal", key=lambda s: s.map(order))
    acl = collection.acl[collection.acl["principal"].isin(order)]
    return replace(
        collection, principals=principals.reset_index(drop=True), acl=acl.reset_index(drop=True)
    )


def _open(collection: Collection, cfg: Mapping[str, Any]) -> Collection:
    return replace(
        collection,
        principals=pd.DataFrame({"principal": ["everyone"]}),
        acl=pd.DataFrame({"principal": "everyone", "doc_id": collection.doc_ids}),
    )


def _domains(collection: Collection, cfg: Mapping[str, Any]) -> Collection:
    codes, names = _domain_codes(collection, "domains")
    grants = _grants(collection, cfg, "domains", names)
    member = _membership(grants, names)
    acl = acl_from_masks((m[codes] for m in member), list(grants), collection.documents["doc_id"])
    principals = _principals_for(collection, list(grants))
    principals["domains"] = [",".join(d) for d in grants.values()]
    return replace(collection, principals=principals, acl=acl)


def _levels(cfg: Mapping[str, Any]) -> dict[str, int]:
    levels = cfg.get("levels") or list(LEVELS)
    if (
        isinstance(levels, str)
        or not isinstance(levels, Sequence)
        or not all(isinstance(x, str) and x for x in levels)
        or len(set(levels)) != len(levels)
    ):
        raise ArecallError(
            f"profiles.levels: must be a list of distinct level names, lowest first, got {levels!r}"
        )
    return {name: i for i, name in enumerate(levels)}


def _clearance(collection: Collection, cfg: Mapping[str, Any]) -> Collection:
    order = _levels(cfg)
    shown = ", ".join(order)
    codes, names = _domain_codes(collection, "clearance")
    grants = _grants(collection, cfg, "clearance", names)
    if "sensitivity" not in collection.documents.columns:
        raise ArecallError(
            "profiles=clearance: the corpus's documents have no 'sensitivity' column"
        )
    labels, uniques = pd.factorize(collection.documents["sensitivity"].astype(str))
    for u in uniques:
        if str(u) not in order:
            doc = collection.doc_ids[np.flatnonzero(labels == list(uniques).index(u))[0]]
            raise ArecallError(
                f"documents: sensitivity {str(u)!r} of document {doc!r} is not one of "
                f"profiles.levels ({shown})"
            )
    doc_level = np.array([order[str(u)] for u in uniques], dtype=np.int64)[labels]

    given = cfg.get("clearances")
    if given is not None and not isinstance(given, Mapping):
        raise ArecallError("profiles.clearances: must be null or a mapping principal -> level")
    declared: dict[str, Any] = {}
    if "clearance" in collection.principals.columns:
        declared = dict(
            zip(
                collection.principals["principal"].astype(str),
                collection.principals["clearance"],
                strict=True,
            )
        )
    clearance = []
    for p in grants:
        if given is not None and p in given:
            level, where = given[p], f"profiles.clearances.{p}"
        else:
            level, where = declared.get(p), f"principals: clearance of {p!r}"
        if level is None or (isinstance(level, float) and np.isnan(level)):
            raise ArecallError(
                f"profiles.clearances.{p}: principal {p!r} has no clearance "
                "(set it here or in the corpus's principals)"
            )
        if str(level) not in order:
            raise ArecallError(f"{where}: {str(level)!r} is not one of profiles.levels ({shown})")
        clearance.append(order[str(level)])

    member = _membership(grants, names)
    masks = (m[codes] & (doc_level <= c) for m, c in zip(member, clearance, strict=True))
    acl = acl_from_masks(masks, list(grants), collection.documents["doc_id"])
    inverse = list(order)
    principals = _principals_for(collection, list(grants))
    principals["clearance"] = [inverse[c] for c in clearance]
    principals["domains"] = [",".join(d) for d in grants.values()]
    return replace(collection, principals=principals, acl=acl)


def _random(collection: Collection, cfg: Mapping[str, Any]) -> Collection:
    s = cfg.get("selectivity", 0.1)
    if isinstance(s, bool) or not isinstance(s, int | float) or not 0.0 < s <= 1.0:
        raise ArecallError(f"profiles.selectivity: must be a number in (0, 1], got {s!r}")
    n = cfg.get("n_principals", 4)
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise ArecallError(f"profiles.n_principals: must be a positive integer, got {n!r}")
    seed = cfg.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ArecallError(f"profiles.seed: must be a non-negative integer, got {seed!r}")
    rng = np.random.default_rng(seed)
    n_docs = len(collection.documents)
    width = len(str(n - 1))
    names = [f"r{j:0{width}d}" for j in range(n)]
    masks = (rng.random(n_docs) < s for _ in range(n))
    return replace(
        collection,
        principals=pd.DataFrame({"principal": names, "selectivity": float(s)}),
        acl=acl_from_masks(masks, names, collection.documents["doc_id"]),
    )


def _acl_file(collection: Collection, cfg: Mapping[str, Any]) -> Collection:
    path = cfg.get("path")
    if not path:
        raise ArecallError("profiles.path: required for profiles=acl_file (a TSV file)")
    principals, acl = read_acl(path, collection.documents["doc_id"], groups=cfg.get("groups"))
    if principals.empty:
        raise ArecallError(f"{path}: names no principal")
    return replace(collection, principals=principals, acl=acl)


MODELS = {
    "corpus": _corpus,
    "open": _open,
    "domains": _domains,
    "clearance": _clearance,
    "random": _random,
    "acl_file": _acl_file,
}


def apply_profiles(collection: Collection, cfg: Mapping[str, Any]) -> Collection:
    """Return ``collection`` with the principals and ACL of the ``profiles`` config section.

    Examples
    --------
    >>> from arecall.data.sources import load_corpus
    >>> c = apply_profiles(load_corpus({"name": "discovery"}), {"name": "open"})
    >>> list(c.principal_names), int(c.acl_matrix().sum())
    (['everyone'], 40)
    """
    name = cfg.get("name")
    if name not in MODELS:
        known = ", ".join(sorted(MODELS))
        raise ArecallError(f"profiles.name: unknown authorization model {name!r} (known: {known})")
    return MODELS[str(name)](collection, cfg)


# -- ACL files ------------------------------------------------------------------------------------

_ACL_HEADERS = {"doc_id", "doc-id", "docid", "corpus-id", "corpus_id"}


def _strict_tsv(path: Path, fields: str, header: set[str]) -> tuple[list[list[str]], list[int]]:
    """Lines of exactly two tab-separated non-empty fields, with their line numbers.

    Blank lines are skipped; a first line whose first field (lower-cased) is in ``header`` is
    a header and skipped. Anything else names the file and line.
    """
    rows: list[list[str]] = []
    lines: list[int] = []
    first = True
    try:
        with path.open(encoding="utf-8", newline="") as fh:
            for number, raw in enumerate(fh, start=1):
                line = raw.rstrip("\r\n")
                if not line.strip():
                    continue
                parts = line.split("\t")
                if first and parts[0].strip().lower() in header:
                    first = False
                    continue
                first = False
                if len(parts) != 2:
                    raise ArecallError(
                        f"{path}: line {number}: expected 2 tab-separated fields ({fields}), "
                        f"got {len(parts)}"
                    )
                for name, value in zip(fields.split(), parts, strict=True):
                    if not value.strip():
                        raise ArecallError(f"{path}: line {number}: empty {name}")
                rows.append(parts)
                lines.append(number)
    except UnicodeDecodeError:
        raise ArecallError(f"{path}: not UTF-8 text") from None
    return rows, lines


def _fast_tsv(path: Path, header: set[str]) -> tuple[pa.Array, pa.Array, np.ndarray] | None:
    """The same lines through pyarrow's CSV reader, or None if anything is out of the ordinary.

    Blank lines, a wrong field count, an empty or blank field or a byte that is not UTF-8 all
    send the file to `_strict_tsv`, which names the line; when this succeeds, data row i is line
    ``i + 1 + skip``.
    """
    with path.open("rb") as fh:
        first = fh.readline().decode("utf-8", errors="replace")
    skip = int(first.split("\t")[0].strip().lower() in header)
    try:
        table = pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(column_names=["a", "b"], skip_rows=skip),
            parse_options=pacsv.ParseOptions(
                delimiter="\t", quote_char=False, escape_char=False, ignore_empty_lines=False
            ),
            convert_options=pacsv.ConvertOptions(
                column_types={"a": pa.string(), "b": pa.string()}, strings_can_be_null=False
            ),
        )
    except (pa.ArrowInvalid, UnicodeDecodeError):
        return None
    a, b = table["a"].combine_chunks(), table["b"].combine_chunks()
    for column in (a, b):
        if (
            len(column)
            and pc.any(pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(column)), 0)).as_py()
        ):
            return None
    return a, b, np.arange(len(a), dtype=np.int64) + 1 + skip


def _tsv(path: Path, fields: str, header: set[str]) -> tuple[pa.Array, pa.Array, np.ndarray]:
    """Two string columns and each row's line number (see `_strict_tsv` for the rules)."""
    if not path.is_file():
        raise ArecallError(f"{path}: file not found")
    fast = _fast_tsv(path, header)
    if fast is not None:
        return fast
    rows, lines = _strict_tsv(path, fields, header)
    return (
        pa.array([r[0] for r in rows], type=pa.string()),
        pa.array([r[1] for r in rows], type=pa.string()),
        np.asarray(lines, dtype=np.int64),
    )


def read_acl(
    path: str | Path,
    doc_ids: Sequence[str] | pd.Series,
    *,
    groups: str | Path | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read ``doc_id<TAB>principal-or-group`` lines (and ``principal<TAB>group`` memberships).

    A name in the ACL that is a group of the groups file grants its members; any other name is
    a principal. The principals are every member of the groups file and every non-group name of
    the ACL, sorted. Documents no line names are authorized to nobody (deny by default).

    Parameters
    ----------
    path : path
        The ACL TSV; an optional first line whose first field is ``doc_id`` (or ``corpus-id``)
        is a header.
    doc_ids : sequence of str
        The collection's document ids; a line naming another id is an error.
    groups : path, optional
        The memberships TSV; an optional header starts with ``principal``. A name may not be
        both a member and a group (nested groups are not supported).

    Returns
    -------
    principals, acl : DataFrame
        ``principal`` (and ``groups``, comma-separated); ``principal``, ``doc_id``.

    Raises
    ------
    ArecallError
        Naming the file and line: wrong column count, empty field, unknown document id, a
        name used both as principal and group.

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
    acl_path = Path(path)
    docs, names, lines = _tsv(acl_path, "doc_id principal", _ACL_HEADERS)
    universe = pa.array(np.asarray(doc_ids, dtype=object), type=pa.string())
    found = pc.index_in(docs, value_set=universe).to_numpy(zero_copy_only=False)
    unknown = np.isnan(found.astype(np.float64))
    if unknown.any():
        i = int(np.flatnonzero(unknown)[0])
        raise ArecallError(
            f"{acl_path}: line {lines[i]}: {docs[i].as_py()!r} is not a document id of the corpus"
        )
    encoded = pc.dictionary_encode(names)
    name_codes = encoded.indices.to_numpy().astype(np.int64)
    distinct = [str(n) for n in encoded.dictionary.to_pylist()]  # few: principals and groups
    members: dict[str, list[str]] = {}
    if groups is not None:
        gpath = Path(groups)
        member_col, group_col, glines = _tsv(gpath, "principal group", {"principal"})
        nested = pc.is_in(member_col, value_set=group_col).to_numpy(zero_copy_only=False)
        if nested.any():
            i = int(np.flatnonzero(nested)[0])
            raise ArecallError(
                f"{gpath}: line {glines[i]}: {member_col[i].as_py()!r} is both a principal and "
                "a group (nested groups are not supported)"
            )
        for member, group in zip(member_col.to_pylist(), group_col.to_pylist(), strict=True):
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
    start = np.concatenate(([0], np.cumsum(count)[:-1]))
    repeat = count[name_codes]  # one output row per (line, grantee)
    first = np.repeat(np.cumsum(repeat) - repeat, repeat)
    p_codes = flat[np.repeat(start[name_codes], repeat) + np.arange(int(repeat.sum())) - first]
    d_codes = np.repeat(found.astype(np.int64), repeat)
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
