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
from tqdm import tqdm

from arecall.core.ragged import expand, offsets
from arecall.core.schema import validate
from arecall.data.authorization import LEVELS, acl_from_masks
from arecall.data.collection import Collection
from arecall.data.sources.config import SyntheticConfig, vocabulary_split

__all__ = ["BATCH", "LEVELS", "SyntheticSpec", "synthetic_collection"]

BATCH = 65_536  # documents per generation batch (fixed: part of what a seed means)


@dataclass(frozen=True)
class SyntheticSpec:
    """The knobs of ``corpus=synthetic`` resolved for generation (see the module docstring).

    Built from a ``corpus`` section checked against `SyntheticConfig` (which declares every
    default and range): ``n_docs`` is the total and ``sensitivity_mix`` sums to 1.

    Examples
    --------
    >>> spec = SyntheticSpec.from_config({"n_domains": 4, "docs_per_domain": 10})
    >>> spec.n_docs, spec.n_queries, spec.shared_words
    (40, 12, 80)
    """

    seed: int
    n_domains: int
    n_docs: int
    queries_per_domain: int
    subtopics: int
    vocab_size: int
    shared_vocab: float
    topic_focus: float
    doc_length: int
    query_length: int
    query_noise: float
    relevance: str
    n_principals: int
    domains_per_principal: int
    sensitivity_mix: tuple[float, float, float]

    @property
    def n_queries(self) -> int:
        return self.n_domains * self.queries_per_domain

    @property
    def shared_words(self) -> int:
        return vocabulary_split(self.vocab_size, self.shared_vocab, self.n_domains)[0]

    @property
    def private_words(self) -> int:
        """Private words per domain (the remainder of the division is never drawn)."""
        return vocabulary_split(self.vocab_size, self.shared_vocab, self.n_domains)[1]

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> SyntheticSpec:
        """Check the ``corpus`` section against `SyntheticConfig`; raise naming the bad field.

        Examples
        --------
        >>> SyntheticSpec.from_config({"n_docs": 0})
        Traceback (most recent call last):
        ...
        arecall.core.schema.ConfigProblem: corpus.n_docs: must be a positive integer, got 0
        """
        c = validate(SyntheticConfig, {**cfg, "name": "synthetic"}, "corpus")
        n_docs = c["n_domains"] * c["docs_per_domain"] if c["n_docs"] is None else c["n_docs"]
        total = float(sum(c["sensitivity_mix"]))
        mix = c["sensitivity_mix"]
        knobs = {
            k: v
            for k, v in c.items()
            if k not in ("name", "docs_per_domain", "n_docs", "sensitivity_mix")
        }
        return cls(
            **knobs,
            n_docs=n_docs,
            sensitivity_mix=(mix[0] / total, mix[1] / total, mix[2] / total),
        )


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
    bounds = offsets(lengths * table.shape[1])
    texts = pa.LargeStringArray.from_buffers(len(lengths), pa.py_buffer(bounds), pa.py_buffer(data))
    return pc.utf8_rtrim_whitespace(texts).cast(pa.string())


def _ids(prefix: str, n: int) -> pa.Array:
    """``prefix`` + zero-padded 0..n-1, so that string order equals numeric order."""
    width = max(1, len(str(n - 1)))
    digits = np.arange(n, dtype=np.int64)[:, None] // 10 ** np.arange(width - 1, -1, -1) % 10
    body = (digits + ord("0")).astype(np.uint8)
    head = np.frombuffer(prefix.encode(), np.uint8)
    data = np.hstack([np.broadcast_to(head, (n, len(head))), body]).ravel()
    bounds = (np.arange(n + 1) * (width + len(head))).astype(np.int64)
    return pa.LargeStringArray.from_buffers(
        n, pa.py_buffer(bounds), pa.py_buffer(np.ascontiguousarray(data))
    ).cast(pa.string())


def _strings(values: pa.Array | pa.ChunkedArray) -> pd.Series:
    return pd.Series(values, dtype=pd.StringDtype("pyarrow", na_value=np.nan))


def _categorical(codes: np.ndarray, categories: pd.Series) -> pd.Categorical:
    return pd.Categorical.from_codes(codes, categories=pd.Index(categories))


# -- the collection, step by step (the draws happen in this order: documents, queries, grants) -----


def _documents(
    rng: np.random.Generator, spec: SyntheticSpec, table: np.ndarray, domain_names: pd.Series
) -> pd.DataFrame:
    """Documents, batch by batch: domain round-robin, sub-topic, sensitivity, text."""
    n, n_dom = spec.n_docs, spec.n_domains
    doc_domain = np.arange(n, dtype=np.int64) % n_dom
    doc_subtopic = (np.arange(n, dtype=np.int64) // n_dom) % spec.subtopics
    doc_level = np.empty(n, dtype=np.int64)
    chunks = []
    batches = range(0, n, BATCH)
    bar = len(batches) > 1  # a terminal shows a bar past one batch (tqdm: none on a pipe)
    for start in tqdm(batches, desc="generate", unit="batch", disable=None if bar else True):
        stop = min(n, start + BATCH)
        m = stop - start
        doc_level[start:stop] = rng.choice(len(LEVELS), size=m, p=spec.sensitivity_mix)
        lengths = 1 + rng.poisson(spec.doc_length - 1, m)
        owner = np.repeat(np.arange(start, stop), lengths)
        tokens = _domain_tokens(rng, spec, doc_domain[owner], doc_subtopic[owner])
        chunks.append(_texts(table, tokens, lengths))
    return pd.DataFrame(
        {
            "doc_id": _strings(_ids("d", n)),
            "text": _strings(pa.chunked_array(chunks, type=pa.string())),
            "domain": _categorical(doc_domain, domain_names),
            "subtopic": doc_subtopic.astype(np.int32),
            "sensitivity": pd.Categorical.from_codes(
                doc_level, dtype=pd.CategoricalDtype(list(LEVELS))
            ),
        }
    )


def _queries(
    rng: np.random.Generator, spec: SyntheticSpec, table: np.ndarray, domain_names: pd.Series
) -> pd.DataFrame:
    """``queries_per_domain`` queries per domain, the j-th on sub-topic j mod ``subtopics``."""
    n_dom = spec.n_domains
    q_domain = np.repeat(np.arange(n_dom, dtype=np.int64), spec.queries_per_domain)
    q_subtopic = np.tile(np.arange(spec.queries_per_domain), n_dom) % spec.subtopics
    owner = np.repeat(np.arange(spec.n_queries), spec.query_length)
    tokens = _query_tokens(rng, spec, q_domain[owner], q_subtopic[owner])
    lengths = np.full(spec.n_queries, spec.query_length, dtype=np.int64)
    return pd.DataFrame(
        {
            "query_id": _strings(_ids("q", spec.n_queries)),
            "text": _strings(_texts(table, tokens, lengths)),
            "domain": _categorical(q_domain, domain_names),
            "subtopic": q_subtopic.astype(np.int32),
        }
    )


def _qrels(spec: SyntheticSpec, documents: pd.DataFrame, queries: pd.DataFrame) -> pd.DataFrame:
    """Every document of the query's domain (graded: 2 on its sub-topic; subtopic: only those)."""
    doc_domain = documents["domain"].cat.codes.to_numpy().astype(np.int64)
    doc_subtopic = documents["subtopic"].to_numpy()
    q_domain = queries["domain"].cat.codes.to_numpy().astype(np.int64)
    q_subtopic = queries["subtopic"].to_numpy()
    by_domain = np.argsort(doc_domain, kind="stable")
    sizes = np.bincount(doc_domain, minlength=spec.n_domains)
    per_query = sizes[q_domain]
    q_rows = np.repeat(np.arange(spec.n_queries), per_query)
    d_rows = by_domain[expand(offsets(sizes)[q_domain], per_query)]
    relevance = np.ones(len(q_rows), dtype=np.float64)
    on_topic = doc_subtopic[d_rows] == q_subtopic[q_rows]
    if spec.relevance == "graded":
        relevance[on_topic] = 2.0
    elif spec.relevance == "subtopic":
        q_rows, d_rows, relevance = q_rows[on_topic], d_rows[on_topic], relevance[on_topic]
    return pd.DataFrame(
        {
            "query_id": _categorical(q_rows, queries["query_id"]),
            "doc_id": _categorical(d_rows, documents["doc_id"]),
            "relevance": relevance,
        }
    )


def _principals(
    rng: np.random.Generator, spec: SyntheticSpec, domain_names: pd.Series
) -> tuple[pd.DataFrame, np.ndarray]:
    """Principals granted ``domains_per_principal`` whole domains; their domain membership."""
    n_p, n_dom = spec.n_principals, spec.n_domains
    granted = np.stack(
        [np.sort(rng.choice(n_dom, spec.domains_per_principal, replace=False)) for _ in range(n_p)]
    )
    names = domain_names.to_numpy()
    principals = pd.DataFrame(
        {
            "principal": _strings(_ids("p", n_p)),
            "clearance": [LEVELS[j % len(LEVELS)] for j in range(n_p)],
            "domains": [",".join(names[g]) for g in granted],
        }
    )
    member = np.zeros((n_p, n_dom), dtype=bool)
    member[np.repeat(np.arange(n_p), granted.shape[1]), granted.ravel()] = True
    return principals, member


def synthetic_collection(cfg: Mapping[str, Any]) -> Collection:
    """Generate the collection the ``corpus`` section describes (deterministic in its knobs).

    Parameters
    ----------
    cfg : mapping
        The ``corpus`` section; see `arecall.data.sources.config.SyntheticConfig`.

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
    domain_names = _strings(_ids("dom", spec.n_domains))
    documents = _documents(rng, spec, table, domain_names)
    queries = _queries(rng, spec, table, domain_names)
    qrels = _qrels(spec, documents, queries)
    principals, member = _principals(rng, spec, domain_names)
    doc_domain = documents["domain"].cat.codes.to_numpy()
    acl = acl_from_masks(
        (m[doc_domain] for m in member), principals["principal"], documents["doc_id"]
    )
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
