"""arecall — Authorized Recall@K as a reproducible experiment pipeline.

Of what a retrieval system returns, how much may the person who asked actually use? The public
API is the per-list metrics and placements (predicates are ``Callable[[str], bool]``); the
vectorised all-pairs versions live in `arecall.core.placed_lists` and `arecall.core.scoring`, the
pipeline in `arecall.pipeline`.

Examples
--------
>>> from arecall import authorized_recall_at_k, post_filter, pre_filter
>>> ranking, allowed = ["x", "a", "y", "b"], {"a", "b"}.__contains__
>>> post_filter(ranking, allowed, 2), pre_filter(ranking, allowed, 2)
(['a'], ['a', 'b'])
>>> authorized_recall_at_k(pre_filter(ranking, allowed, 2), {"a", "b", "y"}, allowed, 2)
1.0
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from arecall.core.registry import lazy_attributes

# Public names and the module defining each, imported on first use: `import arecall` (which every
# ``arecall`` command and DVC stage does) loads nothing, not even numpy.
_LAZY = {
    "ArecallError": "arecall.core.errors",
    "Authorized": "arecall.core.measures",
    "Placement": "arecall.core.placed_lists",
    "authorized_recall_at_k": "arecall.core.measures",
    "ndcg_at_k": "arecall.core.measures",
    "post_filter": "arecall.core.filters",
    "pre_filter": "arecall.core.filters",
    "precision_at_k": "arecall.core.measures",
    "recall_at_k": "arecall.core.measures",
    "reciprocal_rank": "arecall.core.measures",
    "unusable_fraction_at_k": "arecall.core.measures",
}

if TYPE_CHECKING:
    from arecall.core.errors import ArecallError
    from arecall.core.filters import post_filter, pre_filter
    from arecall.core.measures import (
        Authorized,
        authorized_recall_at_k,
        ndcg_at_k,
        precision_at_k,
        recall_at_k,
        reciprocal_rank,
        unusable_fraction_at_k,
    )
    from arecall.core.placed_lists import Placement

__version__ = "0.1.0"

__all__ = [
    "ArecallError",
    "Authorized",
    "Placement",
    "__version__",
    "authorized_recall_at_k",
    "ndcg_at_k",
    "post_filter",
    "pre_filter",
    "precision_at_k",
    "recall_at_k",
    "reciprocal_rank",
    "unusable_fraction_at_k",
]


__getattr__ = lazy_attributes(__name__, _LAZY)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
