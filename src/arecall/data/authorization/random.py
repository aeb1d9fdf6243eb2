"""``profiles=random``: ``n_principals`` principals ``r0``, …, each seeing each document
independently with probability ``selectivity`` (seeded): the authorization analogue of a
selectivity sweep.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from arecall.core.errors import ArecallError
from arecall.data.authorization.helpers import acl_from_masks
from arecall.data.collection import Collection

__all__ = ["authorize"]


def authorize(collection: Collection, cfg: Mapping[str, Any]) -> Collection:
    """``n_principals`` principals, each granted each document with probability ``selectivity``."""
    s = cfg["selectivity"]
    if isinstance(s, bool) or not isinstance(s, int | float) or not 0.0 < s <= 1.0:
        raise ArecallError(f"profiles.selectivity: must be a number in (0, 1], got {s!r}")
    n = cfg["n_principals"]
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise ArecallError(f"profiles.n_principals: must be a positive integer, got {n!r}")
    seed = cfg["seed"]
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
