"""A seeded synthetic corpus whose difficulty and authorization structure are knobs.

The discovery corpus has 40 documents and a perfect MRR: it shows the placement effect but cannot
say how the effect grows with corpus size, vocabulary overlap or query noise. This generator
produces collections of the same shape (documents with a ``domain`` and a ``sensitivity``,
principals granted whole domains with a ``clearance``) from 40 to millions of documents, so
``profiles=corpus|domains|clearance`` all work on it and a sweep can move one knob at a time.

The generative model (every draw from one ``numpy.random.Generator`` seeded by ``corpus.seed``):

* **Vocabulary.** ``vocab_size`` words ``w0000``, …. The first ``round(shared_vocab ×
  vocab_size)`` are *shared* by every domain; the rest are split into ``n_domains`` equal
  *private* blocks, each split again into ``subtopics`` equal slices.
* **Documents.** Document ``i`` belongs to domain ``i mod n_domains`` (so domains differ in size
  by at most one) and to sub-topic ``(i div n_domains) mod subtopics`` (so every sub-topic of a
  domain has documents once the domain has ``subtopics`` of them); its length is
  ``1 + Poisson(doc_length − 1)``. Each token is drawn uniformly from the domain's vocabulary
  (shared words ∪ the domain's private block); a private token comes from the document's
  sub-topic slice with probability ``topic_focus`` and from the whole private block otherwise.
  ``shared_vocab`` ↑ therefore means fewer words that tell domains apart: retrieval gets harder.
* **Queries.** ``queries_per_domain`` per domain; the j-th query of a domain has sub-topic
  ``j mod subtopics`` and exactly ``query_length`` tokens. Each token is *off-domain* with
  probability ``query_noise`` (uniform over the other domains' private words; over the whole
  vocabulary when there is no other domain or no private word) and otherwise drawn as a token of
  a document of the query's domain and sub-topic.
* **Relevance.** ``domain``: every document of the query's domain, relevance 1 (the seed's rule).
  ``graded``: 2 for documents of the query's domain *and* sub-topic, 1 for the rest of its domain.
  ``subtopic``: only the documents of the query's domain and sub-topic, relevance 1 — at scale,
  ``n_docs / (n_domains × subtopics)`` relevant documents per query instead of ``n_docs /
  n_domains``, so Recall@K is not ≈ 0 by construction.
* **Authorization.** Each document's ``sensitivity`` is drawn from internal / confidential /
  restricted with probabilities ``sensitivity_mix``. Principal ``j`` is granted
  ``domains_per_principal`` distinct domains drawn at random (the ``domains`` column) and has
  clearance internal, confidential, restricted, internal, … by ``j mod 3``. The corpus's own ACL
  grants each principal every document of its domains, whatever the sensitivity (as the seed's
  profiles do); ``profiles=clearance`` adds the sensitivity check.

Scale: documents are generated in fixed batches of `BATCH` (so the output does not depend on
memory, only on the knobs) with token ids drawn as arrays and texts assembled as bytes straight
into Arrow string buffers; no Python object per token is ever created. Ids are zero-padded so that
sorted order is generation order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from arecall.data.collection import Collection
from arecall.core.errors import ArecallError
from arecall.data.authorization import LEVELS, acl_from_masks

__all__ = ["BATCH", "LEVELS", "SyntheticSpec", "synthetic_collection"]

BATCH = 65_536  # documents per generation batch (fixed: part of what a seed means)
RELEVANCE = ("domain", "graded", "subtopic")


@dataclass(frozen=True)
class SyntheticSpec:
    """The knobs of ``corpus=synthetic``, checked (see the module docstring for the model).

    Examples
    --------
    >>> spec = SyntheticSpec.from_config({"n_domains": 4, "docs_per_domain": 10})
    >>> spec.n_docs, spec.n_queries, spec.shared_words
    (40, 12, 80)
    """

    seed: int = 0
    n_domains: int = 8
    n_docs: int = 40
    queries_per_domain: int = 3
    subtopics: int = 5
    vocab_size: int = 400
    shared_vocab: float = 0.2
    topic_focus: float = 0.5
    doc_length: int = 30
    query_length: int = 6
    query_noise: float = 0.1
    relevance: str = "domain"
    n_principals: int = 4
    domains_per_principal: int = 2
    sensitivity_mix: tuple[float, float, float] = (0.6, 0.3, 0.1)

    @property
    def n_queries(self) -> int:
        return self.n_domains * self.queries_per_domain

    @property
    def shared_words(self) -> int:
        return round(self.shared_vocab * self.vocab_size)

    @property
    def private_words(self) -> int:
        """Private words per domain (the remainder of the division is never drawn)."""
        return (self.vocab_size - self.shared_words) // self.n_domains

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> SyntheticSpec:
        """Check the ``corpus`` config section; raise `ArecallError` naming the first bad field.

        Examples
        --------
        >>> SyntheticSpec.from_config({"n_docs": 0})
        Traceback (most recent call last):
        ...
        arecall.core.errors.ArecallError: corpus.n_docs: must be a positive integer, got 0
        """
        d = cls()

        def integer(field: str, default: int, minimum: int = 1) -> int:
            value = cfg.get(field, default)
            if value is None:
                value = default
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                what = "a positive integer" if minimum == 1 else f"an integer ≥ {minimum}"
                raise ArecallError(f"corpus.{field}: must be {what}, got {value!r}")
            return value

        def fraction(field: str, default: float) -> float:
            value = cfg.get(field, default)
            if value is None:
                value = default
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not 0.0 <= value <= 1.0
            ):
                raise ArecallError(f"corpus.{field}: must be a number in [0, 1], got {value!r}")
            return float(value)

        n_domains = integer("n_domains", d.n_domains)
        if cfg.get("n_docs") is not None:
            n_docs = integer("n_docs", d.n_docs)
            if n_docs < n_domains:
                raise ArecallError(
                    f"corpus.n_docs: must be at least corpus.n_domains ({n_domains}) so that "
                    f"every domain has a document, got {n_docs}"
                )
        else:
            n_docs = n_domains * integer("docs_per_domain", d.n_docs // d.n_domains)
        relevance = cfg.get("relevance", d.relevance)
        if relevance not in RELEVANCE:
            raise ArecallError(
                f"corpus.relevance: must be one of {', '.join(RELEVANCE)}, got {relevance!r}"
            )
        mix = cfg.get("sensitivity_mix", d.sensitivity_mix)
        if (
            not isinstance(mix, list | tuple)
            or len(mix) != len(LEVELS)
            or any(isinstance(x, bool) or not isinstance(x, int | float) or x < 0 for x in mix)
            or sum(mix) <= 0
        ):
            raise ArecallError(
                "corpus.sensitivity_mix: must be 3 non-negative weights (internal, confidential, "
                f"restricted) with a positive sum, got {mix!r}"
            )
        total = float(sum(mix))
        spec = cls(
            seed=integer("seed", d.seed, minimum=0),
            n_domains=n_domains,
            n_docs=n_docs,
            queries_per_domain=integer("queries_per_domain", d.queries_per_domain),
            subtopics=integer("subtopics", d.subtopics),
            vocab_size=integer("vocab_size", d.vocab_size),
            shared_vocab=fraction("shared_vocab", d.shared_vocab),
            topic_focus=fraction("topic_focus", d.topic_focus),
            doc_length=integer("doc_length", d.doc_length),
            query_length=integer("query_length", d.query_length),
            query_noise=fraction("query_noise", d.query_noise),
            relevance=str(relevance),
            n_principals=integer("n_principals", d.n_principals),
            domains_per_principal=integer("domains_per_principal", d.domains_per_principal),
            sensitivity_mix=(mix[0] / total, mix[1] / total, mix[2] / total),
        )
        if spec.domains_per_principal > n_domains:
            raise ArecallError(
                f"corpus.domains_per_principal: must be at most corpus.n_domains ({n_domains}), "
                f"got {spec.domains_per_principal}"
            )
        if spec.shared_words < spec.vocab_size and spec.private_words < spec.subtopics:
            need = spec.shared_words + n_domains * spec.subtopics
            raise ArecallError(
                f"corpus.vocab_size: too small: {spec.vocab_size} words with shared_vocab="
                f"{spec.shared_vocab} leave {spec.private_words} private words per domain, fewer "
                f"than corpus.subtopics={spec.subtopics} (need at least {need})"
            )
        return spec


# -- token sampling ------------------------------------------------------------------------------


def _domain_tokens(
    rng: np.random.Generator, spec: SyntheticSpec, domain: np.ndarray, subtopic: np.ndarray
) -> np.ndarray:
    """One token id per entry: a word of ``domain``'s vocabulary, leaning to ``subtopic``.

    One uniform per token decides everything: below ``p`` (the shared words' share of the
    domain's vocabulary) it picks a shared word, rescaled to [0, 1); above, rescaled again, it
    decides sub-topic slice or whole private block and then the word within it.
    """
    shared, private = spec.shared_words, spec.private_words
    u = rng.random(len(domain))
    if private == 0:
        return np.minimum((u * shared).astype(np.int64), shared - 1)
    p = shared / (shared + private)
    f = spec.topic_focus
    v = np.maximum(u - p, 0.0) / (1.0 - p)  # uniform on [0, 1) where the word is private
    in_slice = v < f
    # rescale v within its branch; at f = 0 or 1 there is only one branch and v is already it
    w = np.where(in_slice, v / f, (v - f) / (1.0 - f)) if 0.0 < f < 1.0 else v
    lo = np.where(in_slice, subtopic * private // spec.subtopics, 0)
    size = np.where(in_slice, (subtopic + 1) * private // spec.subtopics - lo, private)
    offset = np.minimum((w * size).astype(np.int64), size - 1)
    tokens = shared + domain * private + lo + offset
    if shared:
        is_shared = u < p
        tokens[is_shared] = np.minimum((u[is_shared] / p * shared).astype(np.int64), shared - 1)
    return tokens


def _query_tokens(
    rng: np.random.Generator, spec: SyntheticSpec, domain: np.ndarray, subtopic: np.ndarray
) -> np.ndarray:
    tokens = _domain_tokens(rng, spec, domain, subtopic)
    off = rng.random(len(domain)) < spec.query_noise
    where = rng.random(len(domain))
    others = (spec.n_domains - 1) * spec.private_words
    if others > 0:
        r = (where[off] * others).astype(np.int64)
        block = r // spec.private_words
        block += block >= domain[off]  # skip the query's own block
        tokens[off] = spec.shared_words + block * spec.private_words + r % spec.private_words
    else:
        tokens[off] = (where[off] * spec.vocab_size).astype(np.int64)
    return tokens


# -- text assembly ---------------------------------------------------------------------------------


def _word_table(vocab_size: int) -> np.ndarray:
    """Byte rows ``b"w0042 "`` (trailing space), all the same width."""
    width = len(str(vocab_size - 1))
    words = np.char.add(
        np.char.add("w", np.char.zfill(np.arange(vocab_size).astype(str), width)), " "
    )
    return np.frombuffer(words.astype(f"S{width + 2}").tobytes(), np.uint8).reshape(vocab_size, -1)


def _texts(table: np.ndarray, tokens: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """Join each run of ``lengths`` tokens with single spaces, as one Arrow string array."""
    data = table[tokens].ravel()  # each row "wNNNN "
    offsets = np.concatenate(([0], np.cumsum(lengths * table.shape[1]))).astype(np.int64)
    texts = pa.LargeStringArray.from_buffers(
        len(lengths), pa.py_buffer(offsets), pa.py_buffer(data)
    )
    return pc.utf8_rtrim_whitespace(texts).cast(pa.string())


def _ids(prefix: str, n: int) -> pa.Array:
    """``prefix`` + zero-padded 0..n-1, so that string order equals numeric order."""
    width = max(1, len(str(n - 1)))
    digits = np.arange(n, dtype=np.int64)[:, None] // 10 ** np.arange(width - 1, -1, -1) % 10
    body = (digits + ord("0")).astype(np.uint8)
    head = np.frombuffer(prefix.encode(), np.uint8)
    data = np.hstack([np.broadcast_to(head, (n, len(head))), body]).ravel()
    offsets = (np.arange(n + 1) * (width + len(head))).astype(np.int64)
    return pa.LargeStringArray.from_buffers(
        n, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(data))
    ).cast(pa.string())


def _strings(values: pa.Array | pa.ChunkedArray) -> pd.Series:
    return pd.Series(values, dtype=pd.StringDtype("pyarrow", na_value=np.nan))


def _categorical(codes: np.ndarray, categories: pd.Series) -> pd.Categorical:
    return pd.Categorical.from_codes(codes, categories=pd.Index(categories))


# -- the collection --------------------------------------------------------------------------------


def synthetic_collection(cfg: Mapping[str, Any]) -> Collection:
    """Generate the collection the ``corpus`` section describes (deterministic in its knobs).

    Parameters
    ----------
    cfg : mapping
        The ``corpus`` config section; see ``conf/corpus/synthetic.yaml`` and `SyntheticSpec`.

    Returns
    -------
    Collection
        Documents (``doc_id``, ``text``, ``domain``, ``subtopic``, ``sensitivity``), queries
        (``query_id``, ``text``, ``domain``, ``subtopic``), qrels, principals (``principal``,
        ``clearance``, ``domains`` as a comma-separated list) and the whole-domain ACL.

    Examples
    --------
    >>> c = synthetic_collection({"seed": 1, "n_domains": 8, "docs_per_domain": 5})
    >>> len(c.documents), len(c.queries), len(c.principals), len(c.qrels)
    (40, 24, 4, 120)
    >>> c.documents["doc_id"].iloc[:2].tolist(), c.documents["domain"].iloc[:2].tolist()
    (['d00', 'd01'], ['dom0', 'dom1'])
    """
    spec = SyntheticSpec.from_config(cfg)
    rng = np.random.default_rng(spec.seed)
    table = _word_table(spec.vocab_size)
    n, n_dom = spec.n_docs, spec.n_domains
    domain_names = _strings(_ids("dom", n_dom))

    # documents, batch by batch
    doc_domain = np.arange(n, dtype=np.int64) % n_dom
    doc_subtopic = (np.arange(n, dtype=np.int64) // n_dom) % spec.subtopics
    doc_level = np.empty(n, dtype=np.int64)
    chunks = []
    for start in range(0, n, BATCH):
        stop = min(n, start + BATCH)
        m = stop - start
        doc_level[start:stop] = rng.choice(len(LEVELS), size=m, p=spec.sensitivity_mix)
        lengths = 1 + rng.poisson(spec.doc_length - 1, m)
        owner = np.repeat(np.arange(start, stop), lengths)
        tokens = _domain_tokens(rng, spec, doc_domain[owner], doc_subtopic[owner])
        chunks.append(_texts(table, tokens, lengths))
    doc_ids = _strings(_ids("d", n))
    documents = pd.DataFrame(
        {
            "doc_id": doc_ids,
            "text": _strings(pa.chunked_array(chunks, type=pa.string())),
            "domain": _categorical(doc_domain, domain_names),
            "subtopic": doc_subtopic.astype(np.int32),
            "sensitivity": pd.Categorical.from_codes(
                doc_level, dtype=pd.CategoricalDtype(list(LEVELS))
            ),
        }
    )

    # queries
    q_domain = np.repeat(np.arange(n_dom, dtype=np.int64), spec.queries_per_domain)
    q_subtopic = np.tile(np.arange(spec.queries_per_domain), n_dom) % spec.subtopics
    owner = np.repeat(np.arange(spec.n_queries), spec.query_length)
    tokens = _query_tokens(rng, spec, q_domain[owner], q_subtopic[owner])
    lengths = np.full(spec.n_queries, spec.query_length, dtype=np.int64)
    query_ids = _strings(_ids("q", spec.n_queries))
    queries = pd.DataFrame(
        {
            "query_id": query_ids,
            "text": _strings(_texts(table, tokens, lengths)),
            "domain": _categorical(q_domain, domain_names),
            "subtopic": q_subtopic.astype(np.int32),
        }
    )

    # qrels: every document of the query's domain (graded: 2 on its sub-topic; subtopic: only those)
    by_domain = np.argsort(doc_domain, kind="stable")
    sizes = np.bincount(doc_domain, minlength=n_dom)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    per_query = sizes[q_domain]
    q_rows = np.repeat(np.arange(spec.n_queries), per_query)
    first = np.repeat(np.cumsum(per_query) - per_query, per_query)
    d_rows = by_domain[np.repeat(starts[q_domain], per_query) + np.arange(len(q_rows)) - first]
    relevance = np.ones(len(q_rows), dtype=np.float64)
    on_topic = doc_subtopic[d_rows] == q_subtopic[q_rows]
    if spec.relevance == "graded":
        relevance[on_topic] = 2.0
    elif spec.relevance == "subtopic":
        q_rows, d_rows, relevance = q_rows[on_topic], d_rows[on_topic], relevance[on_topic]
    qrels = pd.DataFrame(
        {
            "query_id": _categorical(q_rows, query_ids),
            "doc_id": _categorical(d_rows, doc_ids),
            "relevance": relevance,
        }
    )

    # principals, granted whole domains
    n_p = spec.n_principals
    granted = np.stack(
        [np.sort(rng.choice(n_dom, spec.domains_per_principal, replace=False)) for _ in range(n_p)]
    )
    names = domain_names.to_numpy()
    principal_ids = _strings(_ids("p", n_p))
    principals = pd.DataFrame(
        {
            "principal": principal_ids,
            "clearance": [LEVELS[j % len(LEVELS)] for j in range(n_p)],
            "domains": [",".join(names[g]) for g in granted],
        }
    )
    member = np.zeros((n_p, n_dom), dtype=bool)
    member[np.repeat(np.arange(n_p), granted.shape[1]), granted.ravel()] = True
    acl = acl_from_masks((m[doc_domain] for m in member), principal_ids, doc_ids)
    collection = Collection.build(
        documents=documents,
        queries=queries,
        qrels=qrels,
        principals=principals,
        acl=acl.iloc[:0],
        origin="corpus=synthetic",
    )
    # the ACL is valid by construction (codes into the principal and document vocabularies, one
    # row per grant); validating tens of millions of rows again would dominate generation time
    return replace(collection, acl=acl)
