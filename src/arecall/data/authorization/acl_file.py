"""``profiles=acl_file``: grants from a TSV file of ``doc_id<TAB>principal-or-group`` lines.

An optional TSV of ``principal<TAB>group`` lines (``profiles.groups``) expands group grants to
members; the files are read by `read_acl`, which the BEIR source uses too.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from arecall.core.errors import ArecallError
from arecall.data.authorization.helpers import acl_frame
from arecall.data.authorization.schema import AclFileProfiles
from arecall.data.collection import Collection
from arecall.io.acl import load_acl

__all__ = ["authorize", "read_acl"]


def authorize(collection: Collection, cfg: AclFileProfiles) -> Collection:
    """The principals and grants of the ACL file ``profiles.path`` (required: `AclFileProfiles`
    refused a missing one)."""
    path = cfg.path
    assert path is not None
    principals, acl = read_acl(path, collection.documents["doc_id"], groups=cfg.groups)
    if principals.empty:
        raise ArecallError(f"{path}: names no principal")
    return replace(collection, principals=principals, acl=acl)


def read_acl(
    path: str | os.PathLike[str],
    doc_ids: Sequence[str] | pd.Series,
    *,
    groups: str | os.PathLike[str] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A collection's principals and ACL table from an ACL file (and a groups file).

    The files are read and expanded by `arecall.io.acl.load_acl` (the expansion ``arecall
    evaluate`` uses), with the collection's documents as the universe: a line naming another
    document id is an error. The principals are every member of the groups file and every
    non-group name of the ACL, sorted; documents no line names are authorized to nobody.

    Returns
    -------
    principals, acl : DataFrame
        ``principal`` and ``groups`` (comma-separated); ``principal``, ``doc_id``, both
        categorical over the full vocabularies, sorted by principal then document.

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
    acl = load_acl(path, groups=groups, documents=pd.Index(doc_ids).astype(str).tolist())
    grants = acl.grants
    owners = np.repeat(np.arange(grants.shape[0]), np.diff(grants.indptr))
    names = list(acl.principals)
    table = acl_frame(owners, grants.indices, names, doc_ids)
    principals = pd.DataFrame(
        {"principal": names, "groups": [",".join(acl.groups.get(p, ())) for p in names]}
    )
    return principals, table
