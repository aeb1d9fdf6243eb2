"""Vector-store adapters for the filter-placement audit (one file per store).

``make_store(name, **params)`` builds an adapter by name, so a Hydra config can pick one.
"""

from __future__ import annotations

from typing import Any

from arecall.core.errors import ArecallError
from arecall.vector.stores.base import Below, VectorStore
from arecall.vector.stores.lancedb import LanceDBStore

__all__ = ["STORES", "Below", "LanceDBStore", "VectorStore", "make_store"]

STORES: dict[str, type[VectorStore]] = {"lancedb": LanceDBStore}


def make_store(name: str, **params: Any) -> VectorStore:
    """Instantiate the adapter registered as ``name``.

    Examples
    --------
    >>> make_store("lancedb").name
    'lancedb'
    """
    if name not in STORES:
        raise ArecallError(f"store={name!r}: must be one of {', '.join(sorted(STORES))}")
    return STORES[name](**params)
