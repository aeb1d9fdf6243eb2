"""``profiles=open``: one principal, ``everyone``, authorized for every document.

A ≡ 1, so ARecall@K must equal Recall@K (a claim the prove stage checks on the run's own data).
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from arecall.data.authorization.schema import OpenProfiles
from arecall.data.collection import Collection

__all__ = ["authorize"]


def authorize(collection: Collection, cfg: OpenProfiles) -> Collection:
    """One principal, ``everyone``, granted every document."""
    return replace(
        collection,
        principals=pd.DataFrame({"principal": ["everyone"]}),
        acl=pd.DataFrame({"principal": "everyone", "doc_id": collection.doc_ids}),
    )
