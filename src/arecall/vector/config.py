"""Typed configuration of the vector experiment: the ``index`` group and ``corpus=vectors``.

Each default is declared once, here; ``conf/index/*.yaml`` and ``conf/corpus/vectors.yaml``
hold the same keys, and the functions of :mod:`arecall.vector` take their defaults from these
classes (``ef_construction: int = IndexConfig.ef_construction``) rather than repeating numbers.
Field names match the YAML keys exactly, so the classes can be registered as Hydra structured
configs (``ConfigStore``) for the ``index`` group and ``corpus=vectors``.

List defaults are tuples at module level (``PLACEMENTS``, ``SELECTIVITIES``) because a dataclass
list field needs a ``default_factory`` and so has no class attribute to point a signature at.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = [
    "PLACEMENTS",
    "SELECTIVITIES",
    "STORE_PLACEMENTS",
    "IndexConfig",
    "VectorsCorpusConfig",
    "unanswered_placement",
]

#: Every placement the experiment measures, in table order.
PLACEMENTS: tuple[str, ...] = ("post", "pushdown", "pre", "auto")
#: verity 0.1.1's selectivities (fractions of the corpus a principal may use).
SELECTIVITIES: tuple[float, ...] = (0.01, 0.03, 0.10, 0.30, 1.0)
#: Each vector store (``arecall.vector.stores.STORES``) and the placements it answers itself;
#: ``pre``, the exact scan, is answered for every store. Declared here, beside the config, so
#: a config is checked when it is composed without importing the stores (faiss and scipy: a
#: quarter of a second in every stage's process); the store classes read their own entry.
STORE_PLACEMENTS: dict[str, tuple[str, ...]] = {
    "chroma": ("post", "pushdown"),
    "faiss": ("post", "pushdown", "auto"),
    "lancedb": ("post", "pushdown"),
}


def unanswered_placement(
    store: str, answers: Sequence[str], placements: Sequence[str]
) -> str | None:
    """What is wrong with asking ``store``, which answers ``answers``, for ``placements``
    (``pre``, the exact scan, is every store's), or None: the one rule and wording the config
    check and the experiment share.

    Examples
    --------
    >>> unanswered_placement("chroma", ("post", "pushdown"), ["post", "pre", "auto"])
    "store chroma does not answer 'auto' (it answers post, pushdown and pre)"
    >>> unanswered_placement("faiss", STORE_PLACEMENTS["faiss"], PLACEMENTS) is None
    True
    """
    for placement in placements:
        if placement != "pre" and placement not in answers:
            return (
                f"store {store} does not answer {placement!r} "
                f"(it answers {', '.join(answers)} and pre)"
            )
    return None


@dataclass
class IndexConfig:
    """The ``index`` group: which vector index, its HNSW parameters, what to measure.

    Attributes
    ----------
    name : {"none", "exact", "hnsw"}
        ``exact`` scans everything (every placement is then exact); ``hnsw`` is an HNSW graph;
        ``none`` means no vector index (text corpora ranked by the retriever alone).
    m : int
        HNSW links per node (``M``); verity uses 16.
    ef_construction : int
        HNSW candidate-list size while linking (faiss's default, 40).
    ef_search : int
        HNSW candidate-list size while searching (verity: 64); must be at least ``k``.
    placements : list of str
        Any of ``post``, ``pushdown``, ``pre``, ``auto``.
    target_recall : float
        The recall the ``auto`` planner calibrates for, in (0, 1].
    confidence : float
        How sure ``auto`` must be, per batch, that the batch's mean recall@k is at least
        ``target_recall``, in [0.5, 1): the certificate keeps the matching one-sided normal
        quantile of standard errors (2.58 at 0.995) above the target, and answers exactly what
        it cannot certify. Lower is faster and promises less.
    store : str
        The vector store that holds the index, a name in ``arecall.vector.stores.STORES``
        (``faiss`` is the reference; not in the YAML files, which rely on this default); every
        placement but ``pre`` must be one it answers (``STORE_PLACEMENTS``).

    Examples
    --------
    >>> IndexConfig().ef_construction, IndexConfig(name="exact").placements
    (40, ['post', 'pushdown', 'pre', 'auto'])
    """

    name: str = "hnsw"
    m: int = 16
    ef_construction: int = 40
    ef_search: int = 64
    placements: list[str] = field(default_factory=lambda: list(PLACEMENTS))
    target_recall: float = 0.95
    confidence: float = 0.995
    store: str = "faiss"


@dataclass
class VectorsCorpusConfig:
    """``corpus=vectors``: verity-retrieval 0.1.1's generator and workload.

    Attributes
    ----------
    name : str
        Always ``vectors``.
    n_docs, dims, n_queries, seed : int
        The generator's arguments (Gaussian unit vectors, one uniform draw per document).
    k : int
        Results per query.
    selectivities : list of float
        Each in (0, 1]; a document matches ``s`` iff its draw is below ``s``.

    Examples
    --------
    >>> VectorsCorpusConfig().selectivities
    [0.01, 0.03, 0.1, 0.3, 1.0]
    """

    name: str = "vectors"
    n_docs: int = 2000
    dims: int = 128
    n_queries: int = 50
    seed: int = 42
    k: int = 10
    selectivities: list[float] = field(default_factory=lambda: list(SELECTIVITIES))
