"""What the authorization models share: ACL tables from integer codes, domains, grants.

Every model builds its ACL from integer arrays (one boolean row per principal over the
documents) into categorical columns, so a million documents × a hundred principals takes
seconds and the memory of the grants, not of their strings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from arecall.core.errors import ArecallError
from arecall.data.collection import Collection

if TYPE_CHECKING:
    from arecall.data.authorization.schema import DomainsProfiles

__all__ = [
    "acl_frame",
    "acl_from_masks",
    "domain_codes",
    "grants_of",
    "membership",
    "principal_domains",
    "principals_for",
]


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


def domain_codes(collection: Collection, model: str) -> tuple[np.ndarray, list[str]]:
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
    codes, names = domain_codes(collection, "domains")
    one_hot = sp.csr_matrix(
        (np.ones(len(codes)), (np.arange(len(codes)), codes)), shape=(len(codes), len(names))
    )
    held = np.asarray((collection.acl_matrix().astype(np.float64) @ one_hot).todense())
    whole = held == np.bincount(codes, minlength=len(names))[None, :]
    return {
        str(p): [names[d] for d in np.flatnonzero(whole[i])]
        for i, p in enumerate(collection.principal_names)
    }


def grants_of(
    collection: Collection, cfg: DomainsProfiles, model: str, names: list[str]
) -> dict[str, list[str]]:
    """The grants of ``profiles.grants`` (null: the corpus's principals' domains), each domain
    one the corpus has. That a given mapping is non-empty `DomainsProfiles` checked."""
    grants = cfg.grants
    if grants is None:
        return principal_domains(collection)
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


def principals_for(collection: Collection, names: list[str]) -> pd.DataFrame:
    """The corpus's principal rows for ``names`` (in that order); new names get empty attributes."""
    frame = pd.DataFrame({"principal": pd.Series(names, dtype=object)})
    attrs = collection.principals.assign(principal=collection.principals["principal"].astype(str))
    attrs = attrs.drop(columns=[c for c in ("domains",) if c in attrs.columns])
    merged = frame.merge(attrs, on="principal", how="left", sort=False)
    return merged.reset_index(drop=True)


def membership(grants: Mapping[str, list[str]], names: list[str]) -> np.ndarray:
    index = {n: i for i, n in enumerate(names)}
    member = np.zeros((len(grants), len(names)), dtype=bool)
    for p, domains in enumerate(grants.values()):
        member[p, [index[d] for d in domains if d in index]] = True
    return member
