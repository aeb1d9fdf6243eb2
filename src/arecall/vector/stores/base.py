"""The one interface a vector store implements to be audited: ``build`` and ``search``.

An audit asks a real store the question the experiment asks faiss — the k nearest documents
a filter admits — once with the store's post-filter and once with its pre-filter, and scores
both against the same exhaustive oracle. The interface is deliberately tiny so that Qdrant
(local mode), Chroma or pgvector is one file: load vectors with scalar attributes, answer a
batch of queries under one attribute predicate, say whether the filter is applied before or
after the ANN search.

The only predicate is ``Below(column, threshold)`` — "attribute < threshold" — because that is
how the verity corpus expresses selectivity (a document matches s iff its draw is < s) and every
store can express it (LanceDB SQL ``draw < 0.03``, Qdrant ``Range(lt=...)``, Chroma
``{"draw": {"$lt": 0.03}}``, pgvector ``WHERE draw < 0.03``). The oracle evaluates the same
predicate with numpy, so store and oracle filter identically.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from arecall.core.errors import ArecallError
from arecall.vector.index import Hits

__all__ = ["Below", "VectorStore"]

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Below:
    """The predicate ``column < threshold`` on a numeric document attribute.

    Examples
    --------
    >>> Below("draw", 0.5).mask({"draw": np.array([0.2, 0.7])}).tolist()
    [True, False]
    >>> Below("draw", 0.03).sql()
    'draw < 0.03'
    """

    column: str
    threshold: float

    def __post_init__(self) -> None:
        if not _IDENTIFIER.match(self.column):
            raise ArecallError(f"filter column={self.column!r}: must be a plain identifier")
        if not np.isfinite(self.threshold):
            raise ArecallError(f"filter threshold={self.threshold!r}: must be finite")

    def mask(self, attributes: Mapping[str, npt.NDArray[Any]]) -> npt.NDArray[np.bool_]:
        """Evaluate the predicate with numpy, as the oracle does."""
        if self.column not in attributes:
            raise ArecallError(f"filter column={self.column!r}: no such attribute")
        return np.asarray(attributes[self.column] < self.threshold, dtype=np.bool_)

    def sql(self) -> str:
        """The predicate as SQL (``repr`` of a float round-trips exactly)."""
        return f"{self.column} < {float(self.threshold)!r}"


class VectorStore(ABC):
    """A vector store under audit. Subclasses set ``name`` and implement two methods.

    Documents are identified by their row number in the ``vectors`` passed to ``build``; the
    metric is the inner product (the audited vectors are unit-norm, so also the cosine).
    Use as a context manager, or call ``close`` to release temporary storage.
    """

    name: ClassVar[str] = "store"

    @abstractmethod
    def build(
        self, vectors: npt.NDArray[np.float32], attributes: Mapping[str, npt.NDArray[Any]]
    ) -> None:
        """Load ``vectors`` (row i = document i) with per-document scalar ``attributes``."""

    @abstractmethod
    def search(
        self, queries: npt.NDArray[np.float32], k: int, where: Below, *, prefilter: bool
    ) -> Hits:
        """Top-``k`` documents satisfying ``where`` for each query, the store's way.

        ``prefilter=False`` asks the store to filter after its ANN search (post-filtering);
        ``prefilter=True`` to restrict the search to matching documents first.
        """

    def close(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Release resources (temporary directories, connections)."""

    def __enter__(self) -> VectorStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
