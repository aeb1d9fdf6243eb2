"""The ``corpus`` group's schemas: one dataclass per text corpus source, defaults declared here.

``conf/corpus/<name>.yaml`` composes the matching schema (``defaults: [base_<name>]``); the
sources read the typed section (``cfg.seed``), so no default is repeated in code. Ranges are
checked by `arecall.core.schema.validate` before any stage runs. ``corpus=vectors`` is not a
text corpus: its schema is `arecall.vector.schema.VectorsCorpusConfig`.

Each schema also says what its settings fix of the collection before it is built
(`SourceSchema.sizes`) and the memory building it takes (`SourceSchema.memory`): the memory
budget (`arecall.pipeline.budget`) asks the source, whichever it is, instead of knowing each.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from arecall.core.schema import POSITIVE, Rule, interval, one_of, setting

__all__ = [
    "RELEVANCE",
    "BeirConfig",
    "DiscoveryConfig",
    "Need",
    "SeedJsonConfig",
    "Sizes",
    "SourceSchema",
    "SyntheticConfig",
    "heaps_vocabulary",
    "min_vocabulary",
]

#: How ``corpus=synthetic`` judges relevance (see `arecall.data.sources.synthetic`).
RELEVANCE = ("graded", "topic", "subtopic", "domain")
_FRACTION = interval(0.0, 1.0)
_NON_NEGATIVE_INT = Rule("an integer ≥ 0", lambda v: v >= 0)
#: Heaps' law for the default vocabulary: ``HEAPS_K × tokens ** HEAPS_BETA`` distinct words
#: (K and β within the ranges measured on English collections, K ≈ 10–100, β ≈ 0.4–0.6).
HEAPS_K, HEAPS_BETA = 40.0, 0.5


def heaps_vocabulary(n_tokens: float, minimum: int = 1000) -> int:
    """Distinct words a collection of ``n_tokens`` tokens has by Heaps' law (at least ``minimum``).

    Examples
    --------
    >>> heaps_vocabulary(40_000), heaps_vocabulary(40_000_000)
    (8000, 252982)
    """
    return max(minimum, round(HEAPS_K * float(n_tokens) ** HEAPS_BETA))


@dataclass(frozen=True)
class Sizes:
    """What a configuration fixes of its collection's size; None where only the data can tell."""

    docs: int | None
    queries: int | None
    principals: int | None


@dataclass(frozen=True)
class Need:
    """Memory building a collection allocates, as the budget refuses it when it does not fit.

    ``key`` is the setting (under the section) that sizes it, ``value`` that setting's value;
    the message reads ``<key>: <subject> need about <size> <purpose>; <size> available``.
    """

    bytes: int
    key: str
    subject: str
    purpose: str
    value: Any


@dataclass
class SourceSchema:
    """What every corpus source's schema has: its name, and what it fixes before it is built.

    Examples
    --------
    >>> SourceSchema("files").sizes(), SourceSchema("files").memory()
    (Sizes(docs=None, queries=None, principals=None), None)
    """

    name: str = ""

    def sizes(self) -> Sizes:
        """Documents, queries and principals the settings fix (default: none, the data's)."""
        return Sizes(None, None, None)

    def memory(self) -> Need | None:
        """The memory building the collection takes, when the settings fix it (default: no
        estimate; a corpus read from files is as large as its files)."""
        return None


@dataclass
class DiscoveryConfig(SourceSchema):
    """``corpus=discovery``: the seed's 40-dataset corpus, regenerated record for record."""

    name: str = "discovery"

    def sizes(self) -> Sizes:
        """The seed corpus's own sizes, counted from its records.

        Examples
        --------
        >>> DiscoveryConfig().sizes()
        Sizes(docs=40, queries=24, principals=4)
        """
        from arecall.data.sources.discovery import discovery_records

        datasets, queries, profiles = discovery_records()
        return Sizes(len(datasets), len(queries), len(profiles))


@dataclass
class SeedJsonConfig(SourceSchema):
    """``corpus=seed_json``: a directory in the seed's JSON layout.

    Attributes
    ----------
    path : str or None
        The directory holding corpus.json, queries.json and profiles.json (required).
    """

    name: str = "seed_json"
    path: str | None = None

    def problems(self) -> Iterator[tuple[str, str, Any]]:
        """The directory is required."""
        if not self.path:
            yield "path", "required for corpus=seed_json (a directory)", self.path


@dataclass
class BeirConfig(SourceSchema):
    """``corpus=beir``: a BEIR directory (corpus.jsonl, queries.jsonl, qrels/<split>.tsv).

    Relative ``qrels``/``acl``/``groups`` paths are looked up under ``path`` first.

    Attributes
    ----------
    path : str or None
        The BEIR directory (required).
    split : str
        The qrels split, ``qrels/<split>.tsv``.
    qrels : str or None
        A qrels file instead of ``qrels/<split>.tsv`` (BEIR TSV or TREC, detected).
    acl : str or None
        TSV ``doc_id<TAB>principal-or-group``; null: one principal, anonymous, granted nothing.
    groups : str or None
        TSV ``principal<TAB>group``: a grant to a group is a grant to its members.
    """

    name: str = "beir"
    path: str | None = None
    split: str = "test"
    qrels: str | None = None
    acl: str | None = None
    groups: str | None = None

    def problems(self) -> Iterator[tuple[str, str, Any]]:
        """The directory is required."""
        if not self.path:
            yield "path", "required for corpus=beir (a BEIR directory)", self.path


@dataclass
class SyntheticConfig(SourceSchema):
    """``corpus=synthetic``: the knobs of the seeded generator (`arecall.data.sources.synthetic`).

    Attributes
    ----------
    seed : int
        Seeds every draw.
    n_domains : int
        Domains: the unit of a principal's grant (a space, a team's share); topics nest in them.
    docs_per_domain : int
        Documents per domain (ignored when ``n_docs`` is set).
    n_docs : int or None
        Total documents, spread over the domains round-robin (at least ``n_domains``).
    queries_per_domain : int
        Queries per domain.
    docs_per_topic : int
        Documents per fine-grained topic (the relevance unit): topics grow with ``n_docs``, so a
        query has about this many relevant documents at any corpus size.
    subtopics : int
        Sub-topics per topic (graded relevance 2; documents lean to theirs by ``topic_focus``).
    vocab_size : int or None
        Words ``w0…``; null: Heaps' law on the expected number of tokens
        (`heaps_vocabulary`). Too few for the topic vocabularies is an error.
    topic_words : int
        Words in each topic's (and each sub-topic's) own vocabulary.
    shared_vocab : float
        Share of a document's tokens drawn from the background vocabulary every topic shares
        (Zipfian over all words; ↑ = less topical signal, harder retrieval), in [0, 1].
    zipf : float
        Zipf exponent of the background and of each topic's word frequencies (≥ 0; 0 = uniform).
    topic_focus : float
        Share of a document's topical tokens drawn from its sub-topic's words, in [0, 1].
    doc_length : int
        Mean tokens per document (log-normal).
    length_spread : float
        σ of the log-normal document length (0: every document ``doc_length`` long).
    query_length : int
        Mean tokens per query (1 + Poisson).
    query_noise : float
        Share of query tokens drawn from other topics' words, in [0, 1].
    relevance : {"graded", "topic", "subtopic", "domain"}
        ``graded``: 2 on the query's topic and sub-topic, 1 elsewhere in its topic; ``topic``:
        its topic (1); ``subtopic``: its topic and sub-topic (1); ``domain``: every document of
        its domain (1, the seed's rule — relevant sets grow with ``n_docs``).
    n_principals : int
        Principals, each granted whole domains.
    domains_per_principal : int
        Whole domains granted to each principal (drawn at random; at most ``n_domains``).
    sensitivity_mix : list of float
        Weights of internal, confidential, restricted documents (3 non-negative, positive sum).

    Examples
    --------
    >>> from arecall.core.schema import validate
    >>> validate(SyntheticConfig, {"n_docs": 3}, "corpus")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    arecall.core.schema.ConfigProblem: corpus.n_docs: must be at least ..., got 3
    """

    name: str = "synthetic"
    seed: int = setting(0, _NON_NEGATIVE_INT)
    n_domains: int = setting(8, POSITIVE)
    docs_per_domain: int = setting(5, POSITIVE)
    n_docs: int | None = setting(None, POSITIVE)
    queries_per_domain: int = setting(3, POSITIVE)
    docs_per_topic: int = setting(40, POSITIVE)
    subtopics: int = setting(4, POSITIVE)
    vocab_size: int | None = setting(None, POSITIVE)
    topic_words: int = setting(80, POSITIVE)
    shared_vocab: float = setting(0.5, _FRACTION)
    zipf: float = setting(1.3, interval(0.0, 4.0))
    topic_focus: float = setting(0.2, _FRACTION)
    doc_length: int = setting(40, POSITIVE)
    length_spread: float = setting(0.5, interval(0.0, 3.0))
    query_length: int = setting(3, POSITIVE)
    query_noise: float = setting(0.5, _FRACTION)
    relevance: str = setting("graded", one_of(*RELEVANCE))
    n_principals: int = setting(4, POSITIVE)
    domains_per_principal: int = setting(3, POSITIVE)
    sensitivity_mix: list[float] = setting([0.6, 0.3, 0.1])  # noqa: RUF009 (a dataclass field)

    def problems(self) -> Iterator[tuple[str, str, Any]]:
        """Cross-field checks: (field, what is wrong, value) for each failed one."""
        mix = self.sensitivity_mix
        if len(mix) != 3 or any(x < 0 for x in mix) or sum(mix) <= 0:
            yield (
                "sensitivity_mix",
                "must be 3 non-negative weights (internal, confidential, restricted) with a "
                "positive sum",
                mix,
            )
        if self.n_docs is not None and self.n_docs < self.n_domains:
            yield (
                "n_docs",
                f"must be at least corpus.n_domains ({self.n_domains}) so that every domain has "
                "a document",
                self.n_docs,
            )
        if self.domains_per_principal > self.n_domains:
            yield (
                "domains_per_principal",
                f"must be at most corpus.n_domains ({self.n_domains})",
                self.domains_per_principal,
            )
        need = min_vocabulary(self.topic_words)
        if self.vocab_size is not None and self.vocab_size < need:
            yield (
                "vocab_size",
                f"too small for corpus.topic_words={self.topic_words} (need at least {need}, "
                "or null for Heaps' law)",
                self.vocab_size,
            )

    def sizes(self) -> Sizes:
        """The generator's sizes (`arecall.data.sources.synthetic.SyntheticSpec`).

        Examples
        --------
        >>> SyntheticConfig(n_docs=100, n_principals=7).sizes()
        Sizes(docs=100, queries=24, principals=7)
        """
        from arecall.data.sources.synthetic import SyntheticSpec

        spec = SyntheticSpec.from_config(asdict(self))
        return Sizes(spec.n_docs, spec.n_queries, spec.n_principals)

    def memory(self) -> Need:
        """What generating it allocates (`arecall.data.sources.synthetic.SyntheticSpec.allocated`),
        named by the setting that sizes the larger part: the documents or the judgments.

        Examples
        --------
        >>> need = SyntheticConfig(n_docs=10**12).memory()
        >>> need.key, need.subject, f"{need.bytes:.2e}"
        ('n_docs', '1000000000000 documents', '5.72e+14')
        """
        from arecall.data.sources.synthetic import SyntheticSpec

        spec = SyntheticSpec.from_config(asdict(self))
        documents, judgments, grants = spec.allocated()
        key = "docs_per_domain" if self.n_docs is None else "n_docs"
        if judgments > documents:
            key = "queries_per_domain"
        return Need(
            documents + judgments + grants,
            key,
            f"{spec.n_docs} documents",
            f"to generate (texts, ids, {spec.n_queries} queries' judgments, grants)",
            self.n_docs or self.docs_per_domain,
        )


def min_vocabulary(topic_words: int) -> int:
    """The smallest ``vocab_size`` the generator accepts: topical words lie outside the
    background's most frequent 1%, and there must be room for a topic's and a sub-topic's words.

    Examples
    --------
    >>> min_vocabulary(40)
    81
    """
    return 2 * topic_words + 1
