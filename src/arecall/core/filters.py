"""The authorization predicate and the two ways to apply it to one ranked list.

``post``: L_K = filter(top_K(ranking)); ``pre``: L_K = top_K(filter(ranking)). The measures
(`arecall.core.measures`) and the whole-run placement (`arecall.core.placed_lists`) both build on
these definitions, which depend on nothing else in arecall — so neither imports the other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

__all__ = ["Authorized", "post_filter", "pre_filter"]

Authorized = Callable[[str], bool]
"""An authorization predicate: may this principal use the item with this id?"""


def post_filter(ranking: Sequence[str], authorized: Authorized, k: int) -> list[str]:
    """Truncate to K, then drop unauthorized items.

    Examples
    --------
    >>> post_filter(["x", "a", "b"], {"a", "b"}.__contains__, 2)
    ['a']
    """
    if k <= 0:
        raise ValueError(f"k must be a positive integer, got {k}")
    return [d for d in ranking[:k] if authorized(d)]


def pre_filter(ranking: Sequence[str], authorized: Authorized, k: int) -> list[str]:
    """Drop unauthorized items, then truncate to K.

    Examples
    --------
    >>> pre_filter(["x", "a", "b"], {"a", "b"}.__contains__, 2)
    ['a', 'b']
    """
    if k <= 0:
        raise ValueError(f"k must be a positive integer, got {k}")
    return [d for d in ranking if authorized(d)][:k]
