"""``profiles=corpus``: what the corpus declares (the default).

``profiles.principals`` may name a subset of the corpus's principals, kept in that order.
"""

from __future__ import annotations

from dataclasses import replace

from arecall.core.errors import ArecallError
from arecall.data.authorization.schema import CorpusProfiles
from arecall.data.collection import Collection

__all__ = ["authorize"]


def authorize(collection: Collection, cfg: CorpusProfiles) -> Collection:
    """The corpus's own principals and grants, optionally only ``profiles.principals`` (a
    non-empty list of names: `CorpusProfiles` checked it)."""
    wanted = cfg.principals
    if wanted is None:
        return collection
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
