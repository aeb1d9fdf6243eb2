"""The one interface a vector store implements to be audited: ``build`` and ``search``.

An audit asks a real store the question the experiment asks faiss — the k nearest documents
a filter admits — once with the store's post-filter and once with its pre-filter, and scores
both against the same exhaustive oracle. The interface is deliberately tiny so that Qdrant
(local mode), Chroma or pgvector is one file: load vectors with scalar attributes, answer a
batch of queries under one attribute predicate, say whether the filter is applied before or
after the ANN search.

The experiment (``arecall run corpus=vectors index.store=NAME``) asks more of a store: each
placement it answers. By default a store answers ``post`` with ``search(prefilter=False)`` and
``pushdown`` with ``search(prefilter=True)``; ``pre`` is the exact scan of the authorized subset
(the oracle), the same for every store. A store that can do more (faiss answers ``auto``)
lists it in ``placements`` and overrides ``place`` and ``calibrate``. ``from_config`` maps the
``index`` config (``m``, ``ef_construction``, ``ef_search``) onto the store's parameters.

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
from arecall.vector.config import IndexConfig
from arecall.vector.index import Hits

__all__ = ["Below", "VectorStore", "check_attributes"]

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


def check_attributes(
    attributes: Mapping[str, npt.NDArray[Any]], n_docs: int
) -> dict[str, npt.NDArray[Any]]:
    """Check per-document attributes: plain identifiers as names, one value per document.

    Examples
    --------
    >>> check_attributes({"draw": [0.1, 0.2]}, 3)
    Traceback (most recent call last):
    ...
    arecall.core.errors.ArecallError: attribute 'draw': shape (2,), expected (3,)
    """
    out: dict[str, npt.NDArray[Any]] = {}
    for name, values in attributes.items():
        Below(name, 0.0)  # validates the column name
        array = np.asarray(values)
        if array.shape != (n_docs,):
            raise ArecallError(f"attribute {name!r}: shape {array.shape}, expected ({n_docs},)")
        out[name] = array
    return out


class VectorStore(ABC):
    """A vector store under audit. Subclasses set ``name`` and implement two methods.

    Documents are identified by their row number in the ``vectors`` passed to ``build``; the
    metric is the inner product (the audited vectors are unit-norm, so also the cosine).
    Use as a context manager, or call ``close`` to release temporary storage.

    Adding a store is one file with a subclass plus one line in
    ``arecall.vector.stores.STORES``; both ``audit`` and ``experiment`` then reach it by name.
    """

    name: ClassVar[str] = "store"
    #: Placements ``place`` answers (``pre``, the oracle scan, is answered for every store).
    placements: ClassVar[tuple[str, ...]] = ("post", "pushdown")

    @classmethod
    def from_config(cls, index: IndexConfig) -> VectorStore:
        """The store the experiment's ``index`` config describes (default: no parameters)."""
        return cls()

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

    def place(
        self, placement: str, queries: npt.NDArray[np.float32], k: int, where: Below
    ) -> tuple[Hits, str]:
        """Answer one placement of the experiment: its hits and the plan the table prints.

        The default answers ``post`` with ``search(prefilter=False)`` and ``pushdown`` with
        ``search(prefilter=True)``; the plan is ``prefilter=False`` / ``prefilter=True``.
        """
        if placement not in self.placements or placement not in ("post", "pushdown"):
            raise ArecallError(
                f"placement={placement!r}: store {self.name} answers "
                f"{', '.join(self.placements)} (and pre, the exact scan)"
            )
        prefilter = placement == "pushdown"
        return self.search(queries, k, where, prefilter=prefilter), f"prefilter={prefilter}"

    def calibrate(  # noqa: B027 - optional hook, a no-op by default
        self,
        k: int,
        queries: npt.NDArray[np.float32] | None,
        *,
        target_recall: float,
        graph_cost: float,
    ) -> None:
        """Prepare the ``auto`` placement on held-out ``queries`` (stores that answer it)."""

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
