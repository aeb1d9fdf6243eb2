"""``profiles=domains``: the seed's model, a principal is granted whole domains.

``profiles.grants`` maps principal → domains (the documents' ``domain`` column); when null, the
corpus's own principals keep the domains they hold (`principal_domains`): their ``domains``
column if the corpus declares one, otherwise every domain *all* of whose documents the corpus's
ACL grants them. A partial grant never widens into a whole-domain one.
"""

from __future__ import annotations

from dataclasses import replace

from arecall.data.authorization.helpers import (
    acl_from_masks,
    domain_codes,
    grants_of,
    membership,
    principals_for,
)
from arecall.data.authorization.schema import DomainsProfiles
from arecall.data.collection import Collection

__all__ = ["authorize"]


def authorize(collection: Collection, cfg: DomainsProfiles) -> Collection:
    """Each principal granted every document of the domains ``profiles.grants`` gives it."""
    codes, names = domain_codes(collection, "domains")
    grants = grants_of(collection, cfg, "domains", names)
    member = membership(grants, names)
    acl = acl_from_masks((m[codes] for m in member), list(grants), collection.documents["doc_id"])
    principals = principals_for(collection, list(grants))
    principals["domains"] = [",".join(d) for d in grants.values()]
    return replace(collection, principals=principals, acl=acl)
