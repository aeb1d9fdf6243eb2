"""Vector stores (one file per store), reached by name from ``experiment`` and ``audit``.

`STORES` is the registry (`arecall.core.registry`): each store's adapter class, imported on
first use, the placements it answers itself (``pre``, the exact scan, is every store's) and the
libraries it runs on. The config check reads what a store answers from here without importing
it (faiss and scipy would cost every stage's process a quarter of a second), and the vector
cache keys its entries on the chosen store's libraries. Adding a store is one module with a
`VectorStore` subclass and one line below. ``make_store(name, **params)`` builds one with
explicit parameters (``audit``); ``store_from_config(index)`` builds the one an ``index`` config
names (``experiment``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from arecall.core.errors import ArecallError
from arecall.core.registry import Registered, Registry, lazy_attributes

if TYPE_CHECKING:
    from arecall.vector.schema import IndexConfig
    from arecall.vector.stores.base import (
        Below,
        InSet,
        Predicate,
        VectorStore,
        check_attributes,
    )
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

#: Store name -> its adapter, the placements it answers and its libraries; one line per store.
STORES = Registry(
    "vector store",
    Registered(
        "chroma",
        "arecall.vector.stores.chroma:ChromaStore",
        answers=("post", "pushdown"),
        libraries=("chromadb",),
    ),
    Registered(
        "faiss",
        "arecall.vector.stores.faiss:FaissStore",
        answers=("post", "pushdown", "auto"),
        libraries=("faiss-cpu",),
    ),
    Registered(
        "lancedb",
        "arecall.vector.stores.lancedb:LanceDBStore",
        answers=("post", "pushdown"),
        libraries=("lancedb",),
    ),
    Registered(
        "milvus",
        "arecall.vector.stores.milvus:MilvusStore",
        answers=("post", "pushdown"),
        libraries=("pymilvus", "milvus-lite"),
    ),
)

# The interface and the adapters by name, imported on first use (the registry is read by every
# config check; the adapters load faiss, LanceDB or Chroma).
_LAZY = {
    "Below": "arecall.vector.stores.base",
    "ChromaStore": "arecall.vector.stores.chroma",
    "FaissStore": "arecall.vector.stores.faiss",
    "InSet": "arecall.vector.stores.base",
    "LanceDBStore": "arecall.vector.stores.lancedb",
    "MilvusStore": "arecall.vector.stores.milvus",
    "Predicate": "arecall.vector.stores.base",
    "VectorStore": "arecall.vector.stores.base",
    "check_attributes": "arecall.vector.stores.base",
}


__getattr__ = lazy_attributes(__name__, _LAZY)


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
        raise ArecallError(f"{key}={name!r}: must be one of {STORES.known()}")
    cls: type[VectorStore] = STORES[name].load()
    return cls


def make_store(name: str, **params: Any) -> VectorStore:
    """Instantiate the adapter registered as ``name`` with keyword ``params``.

    Examples
    --------
    >>> make_store("lancedb").name
    'lancedb'
    """
    return store_class(name)(**params)


def store_from_config(index: IndexConfig, metric: str = "ip") -> VectorStore:
    """The store ``index.store`` names, configured from the ``index`` config, built for
    ``metric`` (``ip`` or ``l2``: the vectors decide it, not the ``index`` group).

    Examples
    --------
    >>> from arecall.vector.schema import IndexConfig
    >>> store_from_config(IndexConfig(name="exact")).name
    'faiss'
    """
    return store_class(index.store, key="index.store").from_config(index, metric)
