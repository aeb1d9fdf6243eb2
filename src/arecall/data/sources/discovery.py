"""The seed's "discovery" corpus: 8 domains × 5 facets = 40 datasets, 24 queries, 4 principals.

Regenerated here record for record (same ids, texts, queries, relevance and grants) so the
pipeline's first table can be checked digit for digit against authorized-recall 0.1.0. Relevance
is by construction — a dataset is relevant to every query of its domain — and each principal is
granted whole domains. The records are built in the seed's JSON layout and go through the same
reader as ``corpus=seed_json``, so there is one path from records to a collection.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:  # the records alone (the corpus's sizes, for a config check) load no scipy
    from arecall.data.collection import Collection
    from arecall.data.sources.schema import DiscoveryConfig

__all__ = ["discovery_collection", "discovery_records"]


class _Domain(NamedTuple):
    name: str
    vocabulary: str
    facets: tuple[str, str, str, str, str]
    sensitivity: str


_DOMAINS = (
    _Domain(
        "purification",
        "purification recovery yield elution buffer capture polish load",
        ("batch records", "step yields", "buffer conditions", "load challenges", "elution pools"),
        "internal",
    ),
    _Domain(
        "chromatography",
        "chromatography column peak resolution retention gradient pooling",
        (
            "peak tables",
            "column performance",
            "gradient profiles",
            "pooling decisions",
            "resolution trends",
        ),
        "internal",
    ),
    _Domain(
        "fermentation",
        "fermentation bioreactor viability titer feed dissolved oxygen",
        (
            "viability curves",
            "titer profiles",
            "feed schedules",
            "oxygen transfer",
            "harvest criteria",
        ),
        "internal",
    ),
    _Domain(
        "analytics",
        "assay analytical potency purity impurity release specification",
        (
            "potency assays",
            "purity results",
            "impurity profiles",
            "release testing",
            "specification limits",
        ),
        "confidential",
    ),
    _Domain(
        "clinical",
        "clinical subject endpoint adverse dose cohort visit",
        (
            "subject observations",
            "endpoint summaries",
            "adverse events",
            "dose cohorts",
            "visit schedules",
        ),
        "restricted",
    ),
    _Domain(
        "supply",
        "supply inventory lot shipment warehouse cold chain logistics",
        (
            "lot inventory",
            "shipment tracking",
            "cold chain excursions",
            "warehouse stock",
            "logistics routes",
        ),
        "internal",
    ),
    _Domain(
        "equipment",
        "equipment calibration maintenance asset downtime utilisation sensor",
        (
            "calibration records",
            "maintenance logs",
            "downtime events",
            "asset utilisation",
            "sensor streams",
        ),
        "internal",
    ),
    _Domain(
        "quality",
        "quality deviation capa audit complaint change control batch disposition",
        ("deviations", "CAPA records", "audit findings", "complaints", "batch disposition"),
        "confidential",
    ),
)

_CAPABILITIES = ("search", "aggregate", "compare", "summarize")
_QUERIES_PER_DOMAIN = 3

# principal -> (clearance, domains granted in full)
_PRINCIPALS = {
    "process-engineer": (
        "confidential",
        ("purification", "chromatography", "fermentation", "equipment"),
    ),
    "analyst": ("confidential", ("analytics", "chromatography", "quality")),
    "clinical-reviewer": ("restricted", ("clinical", "analytics")),
    "external-auditor": ("internal", ("quality",)),
}


def _dataset(domain: _Domain, number: int, facet: str) -> dict[str, Any]:
    return {
        "dataset": f"{domain.name}-{facet.replace(' ', '-').lower()}",
        "domain": domain.name,
        "version": "2026.09.01",
        "revision": f"rev-{domain.name}-{number:02d}",
        "schema_version": "1",
        "description": f"{facet.capitalize()} for {domain.name}: {domain.vocabulary}.",
        "schemas": [facet.replace(" ", "_")],
        "capabilities": [
            {
                "name": cap,
                "effect": "read" if cap in ("search", "compare") else "compute",
                "sensitivity": domain.sensitivity,
                "description": f"{cap} over {facet} in {domain.name}",
            }
            for cap in _CAPABILITIES
        ],
        "prohibited": ["delete_source", "bypass_governance"],
        "policies": [f"POL-{domain.name.upper()[:4]}-001"],
        "freshness": {"maximum_age_s": 86400},
        "age_s": 3600,
        "provenance": {"system": "volume", "source": "synthetic"},
    }


def discovery_records() -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """The corpus as seed-layout records: (datasets, queries, profiles).

    Examples
    --------
    >>> datasets, queries, profiles = discovery_records()
    >>> datasets[0]["dataset"], queries[0]["query"]
    ('purification-batch-records', 'what do the batch records tell us about recovery')
    """
    datasets = [
        _dataset(domain, number, facet)
        for domain in _DOMAINS
        for number, facet in enumerate(domain.facets, start=1)
    ]
    queries = []
    for domain in _DOMAINS:
        members = [d["dataset"] for d in datasets if d["domain"] == domain.name]
        topic = domain.vocabulary.split()[1]
        for facet in domain.facets[:_QUERIES_PER_DOMAIN]:
            queries.append(
                {
                    "query": f"what do the {facet} tell us about {topic}",
                    "domain": domain.name,
                    "relevant": members,
                }
            )
    profiles = {
        name: {
            "principal_class": name,
            "clearance": clearance,
            "grants": {
                d["dataset"]: list(_CAPABILITIES) for d in datasets if d["domain"] in domains
            },
        }
        for name, (clearance, domains) in _PRINCIPALS.items()
    }
    return datasets, queries, profiles


def discovery_collection(cfg: DiscoveryConfig | None = None) -> Collection:
    """The discovery corpus as a `Collection` (``cfg``, the ``corpus`` section, sets nothing).

    Examples
    --------
    >>> c = discovery_collection()
    >>> len(c.documents), len(c.queries), len(c.principals), len(c.qrels)
    (40, 24, 4, 120)
    """
    from arecall.data.sources.seed_json import collection_from_seed

    datasets, queries, profiles = discovery_records()
    return collection_from_seed(datasets, queries, profiles, files=("discovery",) * 3)
