"""``profiles=acl_file``: grants from a TSV file of ``doc_id<TAB>principal-or-group`` lines.

An optional TSV of ``principal<TAB>group`` lines (``profiles.groups``) expands group grants to
members; the files are read by `arecall.data.authorization.helpers.read_acl`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from arecall.core.errors import ArecallError
from arecall.data.authorization.helpers import read_acl
from arecall.data.collection import Collection

__all__ = ["authorize"]


def authorize(collection: Collection, cfg: Mapping[str, Any]) -> Collection:
    """The principals and grants of the ACL file ``profiles.path``."""
    path = cfg["path"]
    if not path:
        raise ArecallError("profiles.path: required for profiles=acl_file (a TSV file)")
    principals, acl = read_acl(path, collection.documents["doc_id"], groups=cfg["groups"])
    if principals.empty:
        raise ArecallError(f"{path}: names no principal")
    return replace(collection, principals=principals, acl=acl)
