"""``retriever=model2vec``: encode the corpus with a model2vec static model, then rank as
``retriever=embeddings`` does.

model2vec's models are a token-embedding table and a tokenizer: encoding is numpy (a mean of
token vectors), no torch, so the install stays light. The retriever

1. loads ``retriever.model`` — a directory in model2vec's format (``StaticModel.save_pretrained``)
   or a model's name on the Hugging Face hub (model2vec downloads it; nothing is downloaded for a
   directory) — and names the model in one line if it cannot be loaded;
2. encodes the documents and the queries in batches of ``retriever.batch_size`` (a progress bar
   on a terminal only), each side cached under ``retriever.cache`` (``data/embeddings``) as the
   Parquet `arecall.io.vectors` reads, keyed by the model's identity — a digest of its weights,
   tokenizer and settings, so a renamed directory is the same model and a retrained one is not —
   and the side's ids and texts: a second run reads the cache, a changed model or corpus encodes
   again. Entries are written atomically, so concurrent runs never read a half-written one;
3. hands both files to `arecall.retrievers.embeddings.Embeddings`: the same checks, scores,
   ties and vector index as for vectors the user brings.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import pandas as pd
import scipy.sparse as sp

from arecall.core.errors import ArecallError
from arecall.core.schema import validate
from arecall.io.digest import json_digest
from arecall.retrievers.embeddings import Embeddings
from arecall.retrievers.schema import Model2VecConfig

__all__ = ["Model2Vec", "load_model", "model_identity"]

# tokenizers warns when a process forks after it used its thread pool (a launcher's workers)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def load_model(name: str) -> Any:
    """The model2vec ``StaticModel`` named ``name`` (a directory or a hub name), or one line.

    Examples
    --------
    >>> import tempfile
    >>> load_model(tempfile.mkdtemp())  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    arecall.core.errors.ArecallError: retriever.model=/...: cannot load a model2vec model: ...
    """
    from model2vec import StaticModel

    try:
        return StaticModel.from_pretrained(name, force_download=False)
    except Exception as exc:  # the library's many ways to fail on a path or a name: one line
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise ArecallError(
            f"retriever.model={name}: cannot load a model2vec model: {reason}"
        ) from None


def model_identity(model: Any) -> str:
    """SHA-256 of what decides a model's vectors: its embedding table, token weights and
    mapping, tokenizer and settings (not where it was loaded from).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> from unittest.mock import Mock
    >>> a = SimpleNamespace(embedding=np.eye(2, dtype=np.float32), weights=None,
    ...     token_mapping=None, tokenizer=Mock(to_str=lambda: "{}"), config={"normalize": True})
    >>> b = SimpleNamespace(**{**vars(a), "embedding": 2 * np.eye(2, dtype=np.float32)})
    >>> model_identity(a) == model_identity(a), model_identity(a) == model_identity(b)
    (True, False)
    """
    digest = hashlib.sha256()
    for array in (model.embedding, model.weights, model.token_mapping):
        if array is None:
            digest.update(b"none\0")
            continue
        values = np.ascontiguousarray(array)
        digest.update(f"{values.dtype.str}{values.shape}\0".encode())
        digest.update(values.data.cast("B"))
    digest.update(model.tokenizer.to_str().encode())
    digest.update(json.dumps(model.config, sort_keys=True, default=str).encode())
    return digest.hexdigest()


def _side_digest(model: str, side: str, ids: Sequence[str], texts: Sequence[str]) -> str:
    """The cache key of one side of the corpus for one model."""
    corpus = hashlib.sha256()
    for doc_id, text in zip(ids, texts, strict=True):
        corpus.update(doc_id.encode() + b"\0" + text.encode() + b"\0")
    return json_digest({"model": model, "side": side, "corpus": corpus.hexdigest()})


class Model2Vec:
    """A model2vec model's embeddings of the corpus, ranked as `Embeddings` ranks.

    Parameters
    ----------
    model : str
        A model directory or a hub name.
    metric : {"cosine", "ip", "l2"}
    batch_size : int
        Texts per ``encode`` call.
    cache : str
        The cache directory (relative paths: to the working directory).
    """

    keyed: ClassVar[bool] = True
    ranks_every_document: ClassVar[bool] = True

    def __init__(
        self,
        *,
        model: str,
        metric: str = Model2VecConfig.metric,
        batch_size: int = Model2VecConfig.batch_size,
        cache: str = Model2VecConfig.cache,
    ) -> None:
        self.model, self.metric, self.batch_size, self.cache = model, metric, batch_size, cache
        #: per side, ``"encoded"`` or ``"cached"`` and the file (what the last fit did)
        self.sources: dict[str, tuple[str, Path]] = {}
        self._inner: Embeddings | None = None

    @classmethod
    def from_config(cls, cfg: Any) -> Model2Vec:
        """Build from the ``retriever`` section, checked against `Model2VecConfig`.

        Examples
        --------
        >>> Model2Vec.from_config({"batch_size": 0})
        Traceback (most recent call last):
        ...
        arecall.core.schema.ConfigProblem: retriever.batch_size: must be a positive integer, got 0
        """
        section = validate(Model2VecConfig, {"name": "model2vec", **cfg}, "retriever")
        return cls(
            model=section["model"],
            metric=section["metric"],
            batch_size=section["batch_size"],
            cache=section["cache"],
        )

    @property
    def index_metric(self) -> str:
        """What a vector index over the embeddings measures (as `Embeddings.index_metric`)."""
        return "l2" if self.metric == "l2" else "ip"

    def fit(self, documents: Sequence[str]) -> Model2Vec:
        """Not used: the cache is keyed by the corpus's ids, so the stages call `fit_corpus`."""
        raise ArecallError("retriever=model2vec: needs the corpus's ids (fit_corpus)")

    def fit_corpus(self, documents: pd.DataFrame, queries: pd.DataFrame) -> Model2Vec:
        """Encode (or read from the cache) both sides, then fit `Embeddings` on them."""
        loaded = load_model(self.model)
        identity = model_identity(loaded)
        files = {}
        for side, frame, key in (
            ("documents", documents, "doc_id"),
            ("queries", queries, "query_id"),
        ):
            ids = frame[key].astype(str).tolist()
            files[side] = self._vectors(loaded, identity, side, ids, frame["text"].tolist())
        self._inner = Embeddings(
            documents=files["documents"], queries=files["queries"], metric=self.metric
        ).fit_corpus(documents, queries)
        return self

    def _vectors(
        self, model: Any, identity: str, side: str, ids: list[str], texts: list[str]
    ) -> Path:
        """The cache file of one side: read if present and intact, else encoded and written."""
        from arecall.io.vectors import read_vectors, write_vectors

        path = Path(self.cache) / f"{_side_digest(identity, side, ids, texts)}.parquet"
        if path.is_file():
            try:
                read_vectors(path)  # the same checks as any vector file: a damaged entry fails
            except ArecallError:
                pass  # encoded again below, and replaced atomically
            else:
                self.sources[side] = ("cached", path)
                return path
        vectors = self.encode(model, texts, desc=f"model2vec: {side}")
        if self.metric == "cosine":
            zero = np.flatnonzero(~vectors.any(axis=1))
            if len(zero):
                what = "document" if side == "documents" else "query"
                raise ArecallError(
                    f"retriever=model2vec: {what} {ids[int(zero[0])]!r} encodes to the zero "
                    f"vector (no token of it is in the model's vocabulary): metric cosine needs a "
                    "direction (use retriever.metric=ip)"
                )
        try:
            write_vectors(path, ids, vectors)
        except ArecallError as exc:
            raise ArecallError(f"retriever.cache: {exc}") from None
        self.sources[side] = ("encoded", path)
        return path

    def encode(
        self, model: Any, texts: list[str], *, desc: str = "model2vec"
    ) -> npt.NDArray[np.float32]:
        """``model``'s vectors of ``texts``, ``batch_size`` at a time, float32 (n, dims).

        The bar shows only on a terminal (tqdm's ``disable=None``).
        """
        from tqdm.auto import tqdm

        out = np.empty((len(texts), int(model.dim)), dtype=np.float32)
        starts = range(0, len(texts), self.batch_size)
        for start in tqdm(starts, desc=desc, unit="batch", disable=None):
            batch = texts[start : start + self.batch_size]
            out[start : start + len(batch)] = model.encode(
                batch, show_progress_bar=False, use_multiprocessing=False
            )
        return out

    def _fitted(self) -> Embeddings:
        if self._inner is None:
            raise ArecallError("retriever=model2vec: score() before fit_corpus()")
        return self._inner

    def score(self, queries: Sequence[str]) -> sp.csr_matrix:
        """As `Embeddings.score` (queries by id)."""
        return self._fitted().score(queries)

    def document_shard(self, start: int, stop: int) -> Model2Vec:
        """This fitted retriever restricted to documents ``start:stop`` (their columns of
        `score`, the same numbers; global statistics such as the idf stay the whole corpus's):
        one document shard of the rank stage (`arecall.core.rank_blocks`)."""
        shard = copy.copy(self)
        shard._inner = self._fitted().document_shard(start, stop)
        return shard

    def embed_documents(self) -> npt.NDArray[np.float32]:
        """As `Embeddings.embed_documents`."""
        return self._fitted().embed_documents()

    def embed_queries(self, queries: Sequence[str]) -> npt.NDArray[np.float32]:
        """As `Embeddings.embed_queries` (queries by id)."""
        return self._fitted().embed_queries(queries)
