"""Corpus sources: each turns one kind of input into an `arecall.data.collection.Collection`.

The Hydra group ``corpus`` selects one by ``corpus.name``; `load_corpus` dispatches on it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from arecall.core.schema import select
from arecall.data.collection import Collection
from arecall.data.sources.schema import BeirConfig, DiscoveryConfig, SeedJsonConfig, SyntheticConfig

__all__ = ["SCHEMAS", "SOURCES", "load_corpus"]


def _discovery(cfg: Mapping[str, Any]) -> Collection:
    from arecall.data.sources.discovery import discovery_collection

    return discovery_collection()


def _seed_json(cfg: Mapping[str, Any]) -> Collection:
    from arecall.data.sources.seed_json import read_seed_json

    return read_seed_json(cfg["path"])


def _synthetic(cfg: Mapping[str, Any]) -> Collection:
    from arecall.data.sources.synthetic import synthetic_collection

    return synthetic_collection(cfg)


def _beir(cfg: Mapping[str, Any]) -> Collection:
    from arecall.data.sources.beir import beir_collection

    return beir_collection(cfg)


SOURCES: dict[str, Callable[[Mapping[str, Any]], Collection]] = {
    "discovery": _discovery,
    "seed_json": _seed_json,
    "synthetic": _synthetic,
    "beir": _beir,
}
#: Each source's config schema (the ``corpus`` group's text options).
SCHEMAS: dict[str, type] = {
    "discovery": DiscoveryConfig,
    "seed_json": SeedJsonConfig,
    "synthetic": SyntheticConfig,
    "beir": BeirConfig,
}


def load_corpus(cfg: Mapping[str, Any]) -> Collection:
    """Build the collection the ``corpus`` config section describes (checked by its schema).

    Examples
    --------
    >>> c = load_corpus({"name": "discovery"})
    >>> len(c.documents), len(c.queries), len(c.principals)
    (40, 24, 4)
    """
    section = select(SCHEMAS, cfg, "corpus", "corpus")
    return SOURCES[section["name"]](section)
