"""Corpus sources: each turns one kind of input into an `arecall.data.collection.Collection`.

The Hydra group ``corpus`` selects one by ``corpus.name``; `load_corpus` dispatches on it.
`SOURCES` is the registry (`arecall.core.registry`): each source's function (the ``corpus``
section → a `Collection`, imported on first use) and its schema, which also says what the
settings fix of the collection's size before it is built
(`arecall.data.sources.schema.SourceSchema`).
Adding a source is one module with that function, its schema in `arecall.data.sources.schema`
and one line below.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from arecall.core.registry import Registered, Registry
from arecall.core.schema import select
from arecall.data.sources.schema import (
    BeirConfig,
    DiscoveryConfig,
    SeedJsonConfig,
    SourceSchema,
    SyntheticConfig,
)

if TYPE_CHECKING:
    from arecall.data.collection import Collection

__all__ = ["SOURCES", "load_corpus"]

#: Source name -> its function (``corpus`` section -> Collection) and schema; one line each.
SOURCES = Registry(
    "corpus",
    Registered("discovery", "arecall.data.sources.discovery:discovery_collection", DiscoveryConfig),
    Registered("seed_json", "arecall.data.sources.seed_json:seed_json_collection", SeedJsonConfig),
    Registered("synthetic", "arecall.data.sources.synthetic:synthetic_collection", SyntheticConfig),
    Registered("beir", "arecall.data.sources.beir:beir_collection", BeirConfig),
)


def load_corpus(cfg: SourceSchema | Mapping[str, Any]) -> Collection:
    """Build the collection the ``corpus`` config section describes: the checked section (its
    source's schema instance, as the stages pass it) or a plain one, checked here.

    Examples
    --------
    >>> c = load_corpus({"name": "discovery"})
    >>> len(c.documents), len(c.queries), len(c.principals)
    (40, 24, 4)
    """
    section = select(SOURCES.schemas(), cfg, "corpus", "corpus")
    collection: Collection = SOURCES[section.name].load()(section)
    return collection
