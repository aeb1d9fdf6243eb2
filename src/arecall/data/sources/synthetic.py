"""A seeded synthetic corpus with the statistics of real text and a tunable authorization gap.

The discovery corpus has 40 documents and a perfect MRR: it shows the placement effect but cannot
say how the effect grows with corpus size. This generator produces collections of the same shape
(documents with a ``domain`` and a ``sensitivity``, principals granted whole domains with a
``clearance``) from 40 to millions of documents, so ``profiles=corpus|domains|clearance`` all
work on it and a sweep can move one knob at a time. Its defaults are set so that retrieval is as
hard as on real ad-hoc collections *at every size* (TF-IDF and BM25 MRR about 0.3–0.7,
Recall@100 about 0.3–0.9, measured by benchmarks/bench_corpus_quality.py and held by
tests/data/test_corpus_synthetic.py): relevance is a fine-grained topic whose size does not grow
with the corpus, so Recall@K does not fall to 0 by construction at a million documents.

The generative model (every draw from one ``numpy.random.Generator`` seeded by ``corpus.seed``):

* **Vocabulary.** ``vocab_size`` words ``w0…`` (default: Heaps' law on the expected number of
  tokens, `arecall.data.sources.schema.heaps_vocabulary`). Word ``wR`` is the R-th most frequent
  word of the **background**, a Zipf distribution (exponent ``zipf``) over the whole vocabulary
  that every topic shares — function words at the head, a long tail.
* **Topics.** ``n_topics = ⌈n_docs / docs_per_topic⌉`` rounded up to a multiple of
  ``n_domains`` (at least ``n_domains``): topic ``t`` belongs to domain ``t mod n_domains``
  (and has documents iff ``t < n_docs``).
  Each topic has its own vocabulary of ``topic_words`` words and so has each of its
  ``subtopics`` sub-topics, drawn uniformly from the words outside the background's most
  frequent 1% (so topics share words by chance, as polysemous terms do, more often the more
  topics there are); within a topic or sub-topic, word frequencies are Zipfian too.
* **Documents.** Document ``i`` has topic ``i mod n_topics`` (so its domain is ``i mod
  n_domains``: domains differ in size by at most one) and sub-topic ``(i div n_topics) mod
  subtopics``. Its length is log-normal with mean ``doc_length`` and σ ``length_spread`` (at
  least 1). Each token is a background word with probability ``shared_vocab``; otherwise a word
  of the document's sub-topic with probability ``topic_focus``, else of its topic.
* **Queries.** ``queries_per_domain`` per domain, each on a topic of its domain and a sub-topic
  of that topic, both drawn at random among those that have documents; ``1 + Poisson(
  query_length − 1)`` tokens, each drawn like a document's topical token, or with probability
  ``query_noise`` as a word of another random topic (vocabulary mismatch). Queries carry no
  background words — as if stop words were removed; this also bounds how many documents a
  query touches, so ranking stays cheap at scale.
* **Relevance.** ``graded`` (default): 2 for the documents of the query's topic *and*
  sub-topic, 1 for the rest of its topic; ``topic``: the query's topic (1); ``subtopic``: its
  topic and sub-topic (1); ``domain``: every document of the query's domain (1, the seed's rule,
  ``n_docs / n_domains`` relevant documents per query).
* **Authorization.** Each document's ``sensitivity`` is drawn from internal / confidential /
  restricted with probabilities ``sensitivity_mix``. Principal ``j`` is granted
  ``domains_per_principal`` distinct domains drawn at random (the ``domains`` column) and has
  clearance internal, confidential, restricted, internal, … by ``j mod 3``. The corpus's own ACL
  grants each principal every document of its domains, whatever the sensitivity (as the seed's
  profiles do); ``profiles=clearance`` adds the sensitivity check. Queries are spread evenly
  over the domains, so the share of query–principal pairs whose principal holds the query's
  domain — whose relevant documents are authorized — is exactly ``domains_per_principal /
  n_domains`` (3/8 by default), and the documents the filter removes are what makes the pre and
  post placements differ.

Scale: documents are generated in fixed batches of `BATCH` (so the output does not depend on
memory, only on the knobs) with token ids drawn as arrays (Zipf ranks by binary search in the
cumulative distribution) and texts assembled as bytes straight into Arrow string buffers; no
Python object per token is ever created. Ids are zero-padded so that sorted order is generation
order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from tqdm import tqdm

from arecall.core.ragged import expand, offsets
from arecall.core.schema import validate
from arecall.data.authorization.schema import LEVELS
from arecall.data.sources.schema import SyntheticConfig, heaps_vocabulary

if TYPE_CHECKING:  # scipy loads when a collection is built, not when a config is sized
    from arecall.data.collection import Collection

__all__ = ["BATCH", "LEVELS", "SyntheticSpec", "synthetic_collection"]

BATCH = 65_536  # documents per generation batch (fixed: part of what a seed means)


@dataclass(frozen=True)
class SyntheticSpec:
    """The knobs of ``corpus=synthetic`` resolved for generation (see the module docstring).

    Built from a ``corpus`` section checked against `SyntheticConfig` (which declares every
    default and range): ``n_docs`` is the total, ``vocab_size`` is resolved (Heaps' law when
    null) and ``sensitivity_mix`` sums to 1.

    Examples
    --------
    >>> spec = SyntheticSpec.from_config({"n_domains": 4, "docs_per_domain": 10})
    >>> spec.n_docs, spec.n_queries, spec.n_topics, spec.vocab_size
    (40, 12, 4, 1600)
    """

    seed: int
    n_domains: int
    n_docs: int
    queries_per_domain: int
    docs_per_topic: int
    subtopics: int
    vocab_size: int
    topic_words: int
    shared_vocab: float
    zipf: float
    topic_focus: float
    doc_length: int
    length_spread: float
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
    def n_topics(self) -> int:
        """Topics: about ``n_docs / docs_per_topic``, a multiple of ``n_domains``."""
        per_domain = -(-self.n_docs // (self.docs_per_topic * self.n_domains))
        return self.n_domains * max(1, per_domain)

    @property
    def head_words(self) -> int:
        """The background's most frequent words, never drawn as topical words."""
        return self.vocab_size // 100

    @property
    def relevant_per_query(self) -> int:
        """The most documents one query can judge relevant (sizes the qrels before generation).

        Examples
        --------
        >>> SyntheticSpec.from_config({"n_docs": 1_000_000}).relevant_per_query
        40
        """
        if self.relevance == "domain":
            return -(-self.n_docs // self.n_domains)
        per_topic = -(-self.n_docs // self.n_topics)
        return -(-per_topic // self.subtopics) if self.relevance == "subtopic" else per_topic

    def allocated(self) -> tuple[int, int, int]:
        """Bytes generation certainly allocates (a lower bound): documents, judgments, grants.

        Per document three int64 columns, its id's digits (int64 each) and its text
        (``doc_length`` words ``w…`` and a space); per judgment (queries × documents of the
        query's topic; of its domain with ``relevance=domain``) two int64 rows and a float64
        grade; per grant an int64 code.

        Examples
        --------
        >>> SyntheticSpec.from_config({"n_domains": 4, "docs_per_domain": 10}).allocated()
        (11200, 2880, 960)
        """
        n = self.n_docs
        id_width = len(str(max(n - 1, 0)))
        word_width = len(str(max(self.vocab_size - 1, 0)))
        per_doc = 3 * 8 + 8 * id_width + self.doc_length * (word_width + 2)
        groups = self.n_domains if self.relevance == "domain" else self.n_topics
        per_query = self.n_docs // max(groups, 1)
        if self.relevance == "subtopic":
            per_query //= self.subtopics
        judgments = self.n_queries * per_query * 24
        grants = self.n_principals * self.domains_per_principal * (n // self.n_domains) * 8
        return n * per_doc, judgments, grants

    @classmethod
    def from_config(cls, cfg: SyntheticConfig | Mapping[str, Any]) -> SyntheticSpec:
        """The spec of a ``corpus`` section: the checked `SyntheticConfig`, or a plain one,
        checked here (a bad field raises, named).

        Examples
        --------
        >>> SyntheticSpec.from_config({"n_docs": 0})
        Traceback (most recent call last):
        ...
        arecall.core.schema.ConfigProblem: corpus.n_docs: must be a positive integer, got 0
        """
        c = validate(SyntheticConfig, cfg, "corpus")
        n_docs = c.n_domains * c.docs_per_domain if c.n_docs is None else c.n_docs
        vocab = c.vocab_size
        if vocab is None:
            vocab = heaps_vocabulary(n_docs * c.doc_length)
        total = float(sum(c.sensitivity_mix))
        mix = c.sensitivity_mix
        knobs = {
            k: v
            for k, v in asdict(c).items()
            if k not in ("name", "docs_per_domain", "n_docs", "sensitivity_mix", "vocab_size")
        }
        return cls(
            **knobs,
            n_docs=n_docs,
            vocab_size=vocab,
            sensitivity_mix=(mix[0] / total, mix[1] / total, mix[2] / total),
        )


# -- token sampling ------------------------------------------------------------------------------


def _zipf_ranks(rng: np.random.Generator, n: int, exponent: float, size: int) -> np.ndarray:
    """``size`` ranks in 0..n-1 with P(rank r) ∝ ∫ x^-exponent over [r + 1, r + 2).

    The inverse transform of the continuous power law on [1, n + 1), floored: a Zipf law (with
    Mandelbrot's offset of about ½) drawn with one uniform, a log and an exp per token — an
    order of magnitude faster than a binary search in a cumulative table at a million words.
    """
    u = rng.random(size)
    if exponent == 1.0:
        x = np.exp(u * np.log(n + 1.0))
    else:
        a = 1.0 - exponent
        x = (u * ((n + 1.0) ** a - 1.0) + 1.0) ** (1.0 / a)
    return np.clip(x.astype(np.int64) - 1, 0, n - 1)


@dataclass(frozen=True)
class _Vocabularies:
    """Word lists (columns are Zipf ranks): rows 0..n_topics-1 are the topics', then the
    sub-topics' (topic ``t``'s sub-topic ``s`` is row ``n_topics + t × subtopics + s``)."""

    words: np.ndarray  # (n_topics × (1 + subtopics), topic_words) word ids

    @classmethod
    def draw(cls, rng: np.random.Generator, spec: SyntheticSpec) -> _Vocabularies:
        low, high = spec.head_words, spec.vocab_size
        n_t, w = spec.n_topics, spec.topic_words
        return cls(rng.integers(low, high, size=(n_t * (1 + spec.subtopics), w), dtype=np.int32))


def _topical_tokens(
    rng: np.random.Generator,
    spec: SyntheticSpec,
    vocab: _Vocabularies,
    topic: np.ndarray,
    subtopic: np.ndarray,
) -> np.ndarray:
    """One topical word per entry: of the entry's sub-topic (``topic_focus``), else its topic."""
    rank = _zipf_ranks(rng, spec.topic_words, spec.zipf, len(topic))
    focused = rng.random(len(topic)) < spec.topic_focus
    row = np.where(focused, spec.n_topics + topic * spec.subtopics + subtopic, topic)
    return vocab.words[row, rank].astype(np.int64)


def _document_tokens(
    rng: np.random.Generator,
    spec: SyntheticSpec,
    vocab: _Vocabularies,
    topic: np.ndarray,
    subtopic: np.ndarray,
) -> np.ndarray:
    background = rng.random(len(topic)) < spec.shared_vocab
    tokens = np.empty(len(topic), dtype=np.int64)
    tokens[background] = _zipf_ranks(rng, spec.vocab_size, spec.zipf, int(background.sum()))
    on = ~background
    tokens[on] = _topical_tokens(rng, spec, vocab, topic[on], subtopic[on])
    return tokens


def _query_tokens(
    rng: np.random.Generator,
    spec: SyntheticSpec,
    vocab: _Vocabularies,
    topic: np.ndarray,
    subtopic: np.ndarray,
) -> np.ndarray:
    tokens = _topical_tokens(rng, spec, vocab, topic, subtopic)
    off = rng.random(len(topic)) < spec.query_noise
    n_t = spec.n_topics
    other = (topic[off] + 1 + rng.integers(0, max(n_t - 1, 1), size=int(off.sum()))) % n_t
    tokens[off] = vocab.words[other, _zipf_ranks(rng, spec.topic_words, spec.zipf, len(other))]
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
    rows = np.ascontiguousarray(table).view(f"V{table.shape[1]}").ravel()
    data = np.take(rows, tokens).view(np.uint8)  # each row "wNNNN " (a gather of whole rows)
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


# -- the collection, step by step (draws in this order: vocabularies, documents, queries, grants) -


def _document_lengths(rng: np.random.Generator, spec: SyntheticSpec, m: int) -> np.ndarray:
    """Log-normal lengths with mean ``doc_length`` (σ ``length_spread``), at least 1."""
    sigma = spec.length_spread
    mu = np.log(spec.doc_length) - sigma * sigma / 2
    return np.maximum(1, np.rint(rng.lognormal(mu, sigma, m))).astype(np.int64)


def _documents(
    rng: np.random.Generator,
    spec: SyntheticSpec,
    vocab: _Vocabularies,
    table: np.ndarray,
    domain_names: pd.Series,
) -> pd.DataFrame:
    """Documents, batch by batch: topic round-robin, sub-topic, sensitivity, length, text."""
    n, n_t = spec.n_docs, spec.n_topics
    doc_topic = np.arange(n, dtype=np.int64) % n_t
    doc_subtopic = (np.arange(n, dtype=np.int64) // n_t) % spec.subtopics
    doc_level = np.empty(n, dtype=np.int64)
    chunks = []
    batches = range(0, n, BATCH)
    bar = len(batches) > 1  # a terminal shows a bar past one batch (tqdm: none on a pipe)
    for start in tqdm(batches, desc="generate", unit="batch", disable=None if bar else True):
        stop = min(n, start + BATCH)
        m = stop - start
        doc_level[start:stop] = rng.choice(len(LEVELS), size=m, p=spec.sensitivity_mix)
        lengths = _document_lengths(rng, spec, m)
        owner = np.repeat(np.arange(start, stop), lengths)
        tokens = _document_tokens(rng, spec, vocab, doc_topic[owner], doc_subtopic[owner])
        chunks.append(_texts(table, tokens, lengths))
    return pd.DataFrame(
        {
            "doc_id": _strings(_ids("d", n)),
            "text": _strings(pa.chunked_array(chunks, type=pa.string())),
            "domain": _categorical(doc_topic % spec.n_domains, domain_names),
            "topic": doc_topic.astype(np.int32),
            "subtopic": doc_subtopic.astype(np.int32),
            "sensitivity": pd.Categorical.from_codes(
                doc_level, dtype=pd.CategoricalDtype(list(LEVELS))
            ),
        }
    )


def _queries(
    rng: np.random.Generator,
    spec: SyntheticSpec,
    vocab: _Vocabularies,
    table: np.ndarray,
    domain_names: pd.Series,
) -> pd.DataFrame:
    """``queries_per_domain`` queries per domain, each on a random topic and sub-topic of it."""
    n_dom, n_t, n_q = spec.n_domains, spec.n_topics, spec.n_queries
    q_domain = np.repeat(np.arange(n_dom, dtype=np.int64), spec.queries_per_domain)
    # topic t has documents iff t < n_docs: draw among the domain's topics that have some
    with_docs = np.minimum(n_t // n_dom, (spec.n_docs - q_domain + n_dom - 1) // n_dom)
    q_topic = q_domain + n_dom * (rng.random(n_q) * with_docs).astype(np.int64)
    docs_in_topic = (spec.n_docs - q_topic + n_t - 1) // n_t
    q_subtopic = (rng.random(n_q) * np.minimum(docs_in_topic, spec.subtopics)).astype(np.int64)
    lengths = 1 + rng.poisson(spec.query_length - 1, n_q)
    owner = np.repeat(np.arange(n_q), lengths)
    tokens = _query_tokens(rng, spec, vocab, q_topic[owner], q_subtopic[owner])
    return pd.DataFrame(
        {
            "query_id": _strings(_ids("q", n_q)),
            "text": _strings(_texts(table, tokens, lengths)),
            "domain": _categorical(q_domain, domain_names),
            "topic": q_topic.astype(np.int32),
            "subtopic": q_subtopic.astype(np.int32),
        }
    )


def _qrels(spec: SyntheticSpec, documents: pd.DataFrame, queries: pd.DataFrame) -> pd.DataFrame:
    """The documents of the query's topic (graded: 2 on its sub-topic), or of its domain."""
    unit = "domain" if spec.relevance == "domain" else "topic"
    n_units = spec.n_domains if unit == "domain" else spec.n_topics
    doc_unit = np.asarray(
        documents["domain"].cat.codes if unit == "domain" else documents["topic"], dtype=np.int64
    )
    q_unit = np.asarray(
        queries["domain"].cat.codes if unit == "domain" else queries["topic"], dtype=np.int64
    )
    by_unit = np.argsort(doc_unit, kind="stable")
    sizes = np.bincount(doc_unit, minlength=n_units)
    per_query = sizes[q_unit]
    q_rows = np.repeat(np.arange(spec.n_queries), per_query)
    d_rows = by_unit[expand(offsets(sizes)[q_unit], per_query)]
    relevance = np.ones(len(q_rows), dtype=np.float64)
    if spec.relevance in ("graded", "subtopic"):
        on_topic = (
            documents["subtopic"].to_numpy()[d_rows] == queries["subtopic"].to_numpy()[q_rows]
        )
        if spec.relevance == "graded":
            relevance[on_topic] = 2.0
        else:
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


def synthetic_collection(cfg: SyntheticConfig | Mapping[str, Any]) -> Collection:
    """Generate the collection the ``corpus`` section describes (deterministic in its knobs).

    Parameters
    ----------
    cfg : SyntheticConfig or mapping
        The checked ``corpus`` section, or a plain one (checked here).

    Returns
    -------
    Collection
        Documents (``doc_id``, ``text``, ``domain``, ``topic``, ``subtopic``,
        ``sensitivity``), queries (``query_id``, ``text``, ``domain``, ``topic``,
        ``subtopic``), qrels, principals (``principal``, ``clearance``, ``domains`` as a
        comma-separated list) and the whole-domain ACL.

    Examples
    --------
    >>> c = synthetic_collection({"seed": 1, "n_domains": 8, "docs_per_domain": 5})
    >>> len(c.documents), len(c.queries), len(c.principals), len(c.qrels)
    (40, 24, 4, 120)
    >>> c.documents["doc_id"].iloc[:2].tolist(), c.documents["domain"].iloc[:2].tolist()
    (['d00', 'd01'], ['dom0', 'dom1'])
    """
    from arecall.data.authorization import acl_from_masks
    from arecall.data.collection import Collection

    spec = SyntheticSpec.from_config(cfg)
    rng = np.random.default_rng(spec.seed)
    vocab = _Vocabularies.draw(rng, spec)
    table = _word_table(spec.vocab_size)
    domain_names = _strings(_ids("dom", spec.n_domains))
    documents = _documents(rng, spec, vocab, table, domain_names)
    queries = _queries(rng, spec, vocab, table, domain_names)
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
