"""``profiles=random``: ``n_principals`` principals ``r0``, …, each seeing each document
independently with probability ``selectivity`` (seeded): the authorization analogue of a
selectivity sweep.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from arecall.data.authorization.helpers import acl_from_masks
from arecall.data.authorization.schema import RandomProfiles
from arecall.data.collection import Collection

__all__ = ["authorize"]


def authorize(collection: Collection, cfg: RandomProfiles) -> Collection:
    """``n_principals`` principals, each granted each document with probability ``selectivity``
    (ranges checked by `RandomProfiles`, once)."""
    s, n = cfg.selectivity, cfg.n_principals
    rng = np.random.default_rng(cfg.seed)
    n_docs = len(collection.documents)
    width = len(str(n - 1))
    names = [f"r{j:0{width}d}" for j in range(n)]
    masks = (rng.random(n_docs) < s for _ in range(n))
    return replace(
        collection,
        principals=pd.DataFrame({"principal": names, "selectivity": float(s)}),
        acl=acl_from_masks(masks, names, collection.documents["doc_id"]),
    )
