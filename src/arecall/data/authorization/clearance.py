"""``profiles=clearance``: attribute-based, domain held *and* sensitivity ≤ clearance.

Grant iff the principal holds the document's domain (as for ``profiles=domains``) and the
document's ``sensitivity`` ≤ the principal's ``clearance`` in the order ``profiles.levels``
(internal < confidential < restricted). A label outside ``levels`` is an error, not a silent
deny, because it would change the metric without a trace.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from arecall.core.errors import ArecallError
from arecall.data.authorization.helpers import (
    acl_from_masks,
    domain_codes,
    grants_of,
    membership,
    principals_for,
)
from arecall.data.authorization.schema import ClearanceProfiles
from arecall.data.collection import Collection

__all__ = ["authorize"]


def authorize(collection: Collection, cfg: ClearanceProfiles) -> Collection:
    """Domain held and sensitivity at most the principal's clearance (``profiles.levels`` are
    distinct names and ``profiles.clearances`` a mapping: `ClearanceProfiles` checked both)."""
    order = {name: i for i, name in enumerate(cfg.levels)}
    shown = ", ".join(order)
    codes, names = domain_codes(collection, "clearance")
    grants = grants_of(collection, cfg, "clearance", names)
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

    given = cfg.clearances
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
    level: Any
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

    member = membership(grants, names)
    masks = (m[codes] & (doc_level <= c) for m, c in zip(member, clearance, strict=True))
    acl = acl_from_masks(masks, list(grants), collection.documents["doc_id"])
    inverse = list(order)
    principals = principals_for(collection, list(grants))
    principals["clearance"] = [inverse[c] for c in clearance]
    principals["domains"] = [",".join(d) for d in grants.values()]
    return replace(collection, principals=principals, acl=acl)
