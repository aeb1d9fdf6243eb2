"""Vector stores (one file per store), reached by name from ``experiment`` and ``audit``.

``STORES`` is the registry: adding a store is one module with a `VectorStore` subclass, one
line below and one in ``arecall.vector.config.STORE_PLACEMENTS``. ``make_store(name,
**params)`` builds one with explicit parameters (``audit``); ``store_from_config(index)``
builds the one an ``index`` config names (``experiment``).
"""

from __future__ import annotations

from typing import Any

from arecall.core.errors import ArecallError
from arecall.vector.config import IndexConfig
from arecall.vector.stores.base import Below, InSet, Predicate, VectorStore, check_attributes
from arecall.vector.stores.chroma import ChromaStore
from arecall.vector.stores.faiss import FaissStore
from arecall.vector.stores.lancedb import LanceDBStore
from arecall.vector.stores.milvus import MilvusStore

__all__ = [
    "STORES",
    "Below",
    "ChromaStore",
    "FaissStore",
    "InSet",
    "LanceDBStore",
    "MilvusStore",
    "Predicate",
    "VectorStore",
    "check_attributes",
    "make_store",
    "store_class",
    "store_from_config",
]

#: Store name -> adapter class; one line per store.
STORES: dict[str, type[VectorStore]] = {
    "chroma": ChromaStore,
    "faiss": FaissStore,
    "lancedb": LanceDBStore,
    "milvus": MilvusStore,
}


def store_class(name: str, *, key: str = "store") -> type[VectorStore]:
    """The adapter class registered as ``name``; ``key`` names the setting in the error.

    Examples
    --------
    >>> store_class("faiss").__name__
    'FaissStore'
    >>> store_class("qdrant", key="index.store")
    Traceback (most recent call last):
    ...
    arecall.core.errors.ArecallError: index.store='qdrant': must be one of chroma, faiss, lancedb, \
milvus
    """
    if name not in STORES:
        raise ArecallError(f"{key}={name!r}: must be one of {', '.join(sorted(STORES))}")
    return STORES[name]


def make_store(name: str, **params: Any) -> VectorStore:
    """Instantiate the adapter registered as ``name`` with keyword ``params``.

    Examples
    --------
    >>> make_store("lancedb").name
    'lancedb'
    """
    return store_class(name)(**params)


def store_from_config(index: IndexConfig) -> VectorStore:
    """The store ``index.store`` names, configured from the ``index`` config.

    Examples
    --------
    >>> store_from_config(IndexConfig(name="exact")).name
    'faiss'
    """
    return store_class(index.store, key="index.store").from_config(index)
