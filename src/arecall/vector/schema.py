"""Typed configuration of the vector experiment: the ``index`` group and ``corpus=vectors``.

Each default is declared once, here; ``conf/index/*.yaml`` and ``conf/corpus/vectors.yaml``
hold the same keys, and the functions of :mod:`arecall.vector` take their defaults from these
classes (``ef_construction: int = IndexConfig.ef_construction``) rather than repeating numbers.
Field names match the YAML keys exactly, so the classes can be registered as Hydra structured
configs (``ConfigStore``) for the ``index`` group and ``corpus=vectors``.

List defaults are tuples at module level (``SEARCH_PLACEMENTS``, ``SELECTIVITIES``) because a
dataclass list field needs a ``default_factory`` and so has no class attribute to point a
signature at. ``SEARCH_PLACEMENTS`` are where a filter sits relative to an ANN search; the
placements of a filter relative to a ranked list's truncation (post, pre, as-is) are another
vocabulary, `arecall.core.placed_lists.PLACEMENTS`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from arecall.core.schema import POSITIVE, Rule, interval, one_of, setting

__all__ = [
    "SEARCH_PLACEMENTS",
    "SELECTIVITIES",
    "ExactIndexConfig",
    "IndexConfig",
    "NoIndexConfig",
    "VectorsCorpusConfig",
    "as_index_config",
    "unanswered_placement",
]

#: Every search placement the experiment measures, in table order.
SEARCH_PLACEMENTS: tuple[str, ...] = ("post", "pushdown", "pre", "auto")
#: verity 0.1.1's selectivities (fractions of the corpus a principal may use).
SELECTIVITIES: tuple[float, ...] = (0.01, 0.03, 0.10, 0.30, 1.0)

_FRACTION = interval(0.0, 1.0, low_open=True)


def _registered_store(name: Any) -> bool:
    """Whether ``name`` is a store in the registry (read at check time: a store registered at
    run time is known)."""
    from arecall.vector.stores import STORES

    return isinstance(name, str) and name in STORES


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
    >>> unanswered_placement("faiss", ("post", "pushdown", "auto"), SEARCH_PLACEMENTS) is None
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
class NoIndexConfig:
    """``index=none``: no vector index; text corpora are ranked by the retriever alone."""

    name: str = "none"


@dataclass
class ExactIndexConfig:
    """``index=exact``: faiss IndexFlatIP, an exhaustive scan (every placement is then exact).

    Attributes
    ----------
    placements : list of str
        Any of ``post``, ``pushdown``, ``pre`` (the exact scan of the authorized subset),
        ``auto``.
    target_recall : float
        The recall the ``auto`` planner calibrates for, in (0, 1].
    confidence : float
        How sure ``auto`` must be, per batch, that the batch's mean recall@k is at least
        ``target_recall``, in [0.5, 1): the certificate keeps the matching one-sided normal
        quantile (2.58 at 0.995) of the batch's standard error and of the calibration's own
        above the target, so the promise holds for the calibration at hand unless that
        calibration is among the unluckiest 1 - ``confidence``, and answers exactly what it
        cannot certify. Lower is faster and promises less.
    store : str
        The vector store that holds the index, a name in ``arecall.vector.stores.STORES``
        (``faiss`` is the reference; not in the YAML files, which rely on this default); every
        placement but ``pre`` must be one it answers (its ``answers`` there).
    """

    name: str = "exact"
    placements: list[str] = setting(  # noqa: RUF009 (a dataclass field)
        list(SEARCH_PLACEMENTS), each=one_of(*SEARCH_PLACEMENTS), nonempty=True
    )
    target_recall: float = setting(0.95, _FRACTION)
    confidence: float = setting(0.995, interval(0.5, 1.0, high_open=True))
    store: str = "faiss"

    def problems(self) -> Iterator[tuple[str, str, Any]]:
        """A registered store, and every placement but ``pre`` (the exact scan, any store's)
        one it answers: checked with the config, not by the stage that builds the store after
        the others ran. Read at check time, so a store registered at run time is known."""
        from arecall.vector.stores import STORES

        if self.store not in STORES:
            yield "store", f"must be one of {STORES.known()}", self.store
            return
        problem = unanswered_placement(self.store, STORES[self.store].answers, self.placements)
        if problem is not None:
            yield "placements", problem, self.placements


@dataclass
class IndexConfig(ExactIndexConfig):
    """The ``index`` group as the vector code takes it, and ``index=hnsw``'s schema: faiss
    IndexHNSWFlat (inner product); defaults are verity 0.1.1's bench. An ``exact`` index
    ignores the HNSW settings.

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
        HNSW candidate-list size while searching (verity: 64); at least the k searched for
        (the largest K of ``evaluation.ks``, or ``vector_search.corpus.k``).

    Examples
    --------
    >>> IndexConfig().ef_construction, IndexConfig(name="exact").placements
    (40, ['post', 'pushdown', 'pre', 'auto'])
    """

    name: str = "hnsw"
    m: int = setting(16, POSITIVE)
    ef_construction: int = setting(40, POSITIVE)
    ef_search: int = setting(64, POSITIVE)


def as_index_config(index: ExactIndexConfig) -> IndexConfig:
    """A checked ``index`` section as the `IndexConfig` the vector code takes: ``hnsw``'s as it
    is, ``exact``'s with the HNSW settings at their defaults (an exact scan ignores them).

    Examples
    --------
    >>> as_index_config(ExactIndexConfig(store="lancedb"))
    IndexConfig(name='exact', placements=['post', 'pushdown', 'pre', 'auto'], \
target_recall=0.95, confidence=0.995, store='lancedb', m=16, ef_construction=40, ef_search=64)
    """
    return index if isinstance(index, IndexConfig) else IndexConfig(**asdict(index))


@dataclass
class VectorsCorpusConfig:
    """``corpus=vectors``: verity-retrieval 0.1.1's generator and workload, or the user's own.

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
    documents, queries : str or None
        The user's own vectors instead of the generator's (`arecall.io.vectors`: Parquet
        ``id``/``vector`` or ``.npy`` with ``.ids.txt``); then ``acl`` is required and the
        generator's settings are not used: each principal of the ACL is one filter.
    acl, groups : str or None
        ``doc_id<TAB>principal-or-group`` lines and ``principal<TAB>group`` lines, read as
        ``profiles=acl_file`` reads them.
    metric : {"cosine", "ip", "l2"}
        How the user's vectors are compared (the generator's are unit vectors: cosine).
    audit : list of str
        Stores (``arecall.vector.stores.STORES``) whose own filtered search is measured beside
        the index on the user's vectors, principal by principal.

    Examples
    --------
    >>> VectorsCorpusConfig().selectivities
    [0.01, 0.03, 0.1, 0.3, 1.0]
    """

    name: str = "vectors"
    n_docs: int = setting(2000, POSITIVE)
    dims: int = setting(128, POSITIVE)
    n_queries: int = setting(50, POSITIVE)
    seed: int = setting(42, Rule("a non-negative integer", lambda v: v >= 0))
    k: int = setting(10, POSITIVE)
    selectivities: list[float] = setting(  # noqa: RUF009 (a dataclass field)
        list(SELECTIVITIES), each=_FRACTION, nonempty=True
    )
    documents: str | None = None
    queries: str | None = None
    acl: str | None = None
    groups: str | None = None
    metric: str = setting("cosine", one_of("cosine", "ip", "l2"))
    audit: list[str] = setting(  # noqa: RUF009 (a dataclass field)
        [], each=Rule("a store (arecall.vector.stores.STORES)", _registered_store)
    )

    def problems(self) -> Iterator[tuple[str, str, Any]]:
        """``k`` results need at least ``k`` documents; the user's own workload needs its three
        files (and only it is audited store by store)."""
        own = [key for key in ("documents", "queries", "acl") if getattr(self, key)]
        if own and len(own) < 3:
            missing = next(key for key in ("documents", "queries", "acl") if key not in own)
            yield (
                missing,
                "required with corpus.documents, queries and acl (your own vectors, queries "
                "and ACL go together)",
                None,
            )
        if not own and self.audit:
            yield (
                "audit",
                "audits stores on your own vectors (corpus.documents, queries, acl); for the "
                "generator's, run benchmarks/bench_stores.py",
                self.audit,
            )
        if not own and self.k > self.n_docs:
            yield "k", f"must be at most corpus.n_docs ({self.n_docs})", self.k
