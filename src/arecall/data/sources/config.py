"""The ``corpus`` group's schemas: one dataclass per text corpus source, defaults declared here.

``conf/corpus/<name>.yaml`` composes the matching schema (``defaults: [base_<name>]``); the
sources read the typed section (``cfg["seed"]``), so no default is repeated in code. Ranges are
checked by `arecall.core.schema.validate` before any stage runs. ``corpus=vectors`` is not a
text corpus: its schema is `arecall.pipeline.schema.VectorsCorpusSchema`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from arecall.core.schema import POSITIVE, Rule, interval, one_of, setting

__all__ = [
    "RELEVANCE",
    "BeirConfig",
    "DiscoveryConfig",
    "SeedJsonConfig",
    "SyntheticConfig",
    "vocabulary_split",
]

#: How ``corpus=synthetic`` judges relevance (see `arecall.data.sources.synthetic`).
RELEVANCE = ("domain", "graded", "subtopic")
_FRACTION = interval(0.0, 1.0)
_NON_NEGATIVE_INT = Rule("an integer ≥ 0", lambda v: v >= 0)


def vocabulary_split(vocab_size: int, shared_vocab: float, n_domains: int) -> tuple[int, int]:
    """Words every domain shares, and private words per domain (the remainder is never drawn).

    Examples
    --------
    >>> vocabulary_split(400, 0.2, 8)
    (80, 40)
    """
    shared = round(shared_vocab * vocab_size)
    return shared, (vocab_size - shared) // n_domains


@dataclass
class DiscoveryConfig:
    """``corpus=discovery``: the seed's 40-dataset corpus, regenerated record for record."""

    name: str = "discovery"


@dataclass
class SeedJsonConfig:
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
class BeirConfig:
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
class SyntheticConfig:
    """``corpus=synthetic``: the knobs of the seeded generator (`arecall.data.sources.synthetic`).

    Attributes
    ----------
    seed : int
        Seeds every draw.
    n_domains : int
        Domains (topics, and the unit of a principal's grant).
    docs_per_domain : int
        Documents per domain (ignored when ``n_docs`` is set).
    n_docs : int or None
        Total documents, spread over the domains round-robin (at least ``n_domains``).
    queries_per_domain : int
        Queries per domain.
    subtopics : int
        Sub-topics per domain (graded relevance; documents lean to theirs).
    vocab_size : int
        Words ``w0000``…; too few for the domains × sub-topics is an error.
    shared_vocab : float
        Fraction of the vocabulary every domain uses (↑ = harder retrieval), in [0, 1].
    topic_focus : float
        Share of a document's private words drawn from its sub-topic's slice, in [0, 1].
    doc_length : int
        Mean tokens per document (1 + Poisson).
    query_length : int
        Tokens per query.
    query_noise : float
        Share of query tokens drawn from other domains' words, in [0, 1].
    relevance : {"domain", "graded", "subtopic"}
        ``domain``: every document of the query's domain (1, the seed's rule); ``graded``: 2 on
        the query's sub-topic, 1 elsewhere in its domain; ``subtopic``: only the query's domain
        and sub-topic (1).
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
    subtopics: int = setting(5, POSITIVE)
    vocab_size: int = setting(400, POSITIVE)
    shared_vocab: float = setting(0.2, _FRACTION)
    topic_focus: float = setting(0.5, _FRACTION)
    doc_length: int = setting(30, POSITIVE)
    query_length: int = setting(6, POSITIVE)
    query_noise: float = setting(0.1, _FRACTION)
    relevance: str = setting("domain", one_of(*RELEVANCE))
    n_principals: int = setting(4, POSITIVE)
    domains_per_principal: int = setting(2, POSITIVE)
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
        shared, private = vocabulary_split(self.vocab_size, self.shared_vocab, self.n_domains)
        if shared < self.vocab_size and private < self.subtopics:
            need = shared + self.n_domains * self.subtopics
            yield (
                "vocab_size",
                f"too small: shared_vocab={self.shared_vocab} leaves {private} "
                f"private words per domain, fewer than corpus.subtopics={self.subtopics} "
                f"(need at least {need})",
                self.vocab_size,
            )
