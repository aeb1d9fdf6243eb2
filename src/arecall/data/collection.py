"""The one in-memory and on-disk shape every corpus source is turned into.

A `Collection` is five tables: documents, queries, qrels, principals and the ACL (which
principal may use which document). Sources (`arecall.data.sources`) produce it; authorization
models (`arecall.data.authorization`) rewrite its ACL; retrievers and scoring read it as sparse
matrices. Document rows are kept sorted by id so that a row index breaks score ties exactly as
the seed does (by ascending id). On disk it is a directory of Parquet files: columnar, typed,
never pickled.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import scipy.sparse as sp

from arecall.core.errors import ArecallError
from arecall.io.atomic import write_parquet

__all__ = ["TABLES", "Collection"]

TABLES = ("documents", "queries", "qrels", "principals", "acl")
#: what `Collection.load(text=False)` reads of the tables that hold text
_ID_ONLY = {"documents": ["doc_id"], "queries": ["query_id"]}
#: the ACL's columns `Collection.load` reads as Arrow dictionaries (pandas categoricals): a grant
#: is then two small integer codes, not two Python strings. At 37.5 million grants (1,000
#: principals over 100,000 documents) loading the ACL and building `acl_matrix` went from
#: 17.4 s and 4.45 GiB to 2.8-6.0 s and 1.52 GiB (``docs/benchmarks/sharded-evaluation.md``).
_DICTIONARY = {"acl": ["principal", "doc_id"]}


@dataclass(frozen=True)
class Collection:
    """Documents, queries, graded relevance and per-principal authorization.

    Parameters
    ----------
    documents : DataFrame
        ``doc_id`` (unique, sorted ascending), ``text`` and any attribute columns.
    queries : DataFrame
        ``query_id`` (unique), ``text`` and any attribute columns, in evaluation order.
    qrels : DataFrame
        ``query_id``, ``doc_id``, ``relevance`` (> 0; graded where the source grades).
    principals : DataFrame
        ``principal`` (unique) and attribute columns. A principal with no grants still counts.
    acl : DataFrame
        ``principal``, ``doc_id``: one row per grant. Absent means denied.

    Examples
    --------
    >>> c = Collection.build(
    ...     documents=pd.DataFrame({"doc_id": ["b", "a"], "text": ["bee", "ant"]}),
    ...     queries=pd.DataFrame({"query_id": ["q1"], "text": ["ant"]}),
    ...     qrels=pd.DataFrame({"query_id": ["q1"], "doc_id": ["a"], "relevance": [1.0]}),
    ...     principals=pd.DataFrame({"principal": ["p"]}),
    ...     acl=pd.DataFrame({"principal": ["p"], "doc_id": ["b"]}),
    ... )
    >>> list(c.doc_ids), c.relevance_matrix().toarray().tolist(), c.acl_matrix().toarray().tolist()
    (['a', 'b'], [[1.0, 0.0]], [[False, True]])
    """

    documents: pd.DataFrame
    queries: pd.DataFrame
    qrels: pd.DataFrame
    principals: pd.DataFrame
    acl: pd.DataFrame

    @classmethod
    def build(
        cls,
        *,
        documents: pd.DataFrame,
        queries: pd.DataFrame,
        qrels: pd.DataFrame,
        principals: pd.DataFrame,
        acl: pd.DataFrame,
        origin: str = "collection",
    ) -> Collection:
        """Validate and normalise the five tables (sorting documents by id).

        ``origin`` names the source in error messages.
        """
        for name, frame, cols in (
            ("documents", documents, ("doc_id", "text")),
            ("queries", queries, ("query_id", "text")),
            ("qrels", qrels, ("query_id", "doc_id", "relevance")),
            ("principals", principals, ("principal",)),
            ("acl", acl, ("principal", "doc_id")),
        ):
            missing = [c for c in cols if c not in frame.columns]
            if missing:
                raise ArecallError(f"{origin}: {name}: missing column(s) {', '.join(missing)}")
        documents = documents.sort_values("doc_id", kind="stable").reset_index(drop=True)
        for name, frame, key in (
            ("documents", documents, "doc_id"),
            ("queries", queries, "query_id"),
            ("principals", principals, "principal"),
        ):
            dup = frame[key][frame[key].duplicated()]
            if len(dup):
                raise ArecallError(f"{origin}: {name}: duplicate {key} {dup.iloc[0]!r}")
        if documents.empty:
            raise ArecallError(f"{origin}: documents: the corpus has no documents")
        if queries.empty:
            raise ArecallError(f"{origin}: queries: there are no queries")
        if principals.empty:
            raise ArecallError(f"{origin}: principals: there are no principals")
        doc_set = pd.Index(documents["doc_id"])
        for name, frame, key, universe in (
            ("qrels", qrels, "doc_id", doc_set),
            ("qrels", qrels, "query_id", pd.Index(queries["query_id"])),
            ("acl", acl, "doc_id", doc_set),
            ("acl", acl, "principal", pd.Index(principals["principal"])),
        ):
            unknown = frame[key][~frame[key].isin(universe)]
            if len(unknown):
                raise ArecallError(f"{origin}: {name}: unknown {key} {unknown.iloc[0]!r}")
        if len(qrels) and not (qrels["relevance"] > 0).all():
            raise ArecallError(f"{origin}: qrels: relevance must be > 0 (omit non-relevant rows)")
        return cls(
            documents=documents,
            queries=queries.reset_index(drop=True),
            qrels=qrels.drop_duplicates(["query_id", "doc_id"]).reset_index(drop=True),
            principals=principals.reset_index(drop=True),
            acl=acl.drop_duplicates().reset_index(drop=True),
        )

    # -- views --------------------------------------------------------------------------------
    @property
    def doc_ids(self) -> np.ndarray:
        """Document ids in row order (ascending)."""
        return self.documents["doc_id"].to_numpy()

    @property
    def query_ids(self) -> np.ndarray:
        return self.queries["query_id"].to_numpy()

    @property
    def principal_names(self) -> np.ndarray:
        return self.principals["principal"].to_numpy()

    def _codes(
        self, values: pd.Series, universe: np.ndarray, dtype: type[np.integer] = np.int64
    ) -> np.ndarray:
        return pd.Categorical(values, categories=universe).codes.astype(dtype)

    def relevance_matrix(self) -> sp.csr_matrix:
        """Queries × documents graded relevance (CSR, float64)."""
        rows = self._codes(self.qrels["query_id"], self.query_ids)
        cols = self._codes(self.qrels["doc_id"], self.doc_ids)
        shape = (len(self.queries), len(self.documents))
        vals = self.qrels["relevance"].to_numpy(dtype=np.float64)
        return sp.csr_matrix((vals, (rows, cols)), shape=shape)

    def acl_matrix(self) -> sp.csr_matrix:
        """Principals × documents authorization (CSR, bool): deny unless granted."""
        shape = (len(self.principals), len(self.documents))
        # The index type scipy gives the matrix anyway, from the start: at 37.5 million grants
        # int64 codes were 0.5 GiB of the build's peak, and the matrix is the same.
        index = np.int32 if max(shape) < np.iinfo(np.int32).max else np.int64
        rows = self._codes(self.acl["principal"], self.principal_names, index)
        cols = self._codes(self.acl["doc_id"], self.doc_ids, index)
        grants = sp.coo_matrix((np.ones(len(rows), dtype=bool), (rows, cols)), shape=shape)
        return grants.tocsr()

    # -- persistence --------------------------------------------------------------------------
    def save(self, directory: str | Path) -> None:
        """Write one Parquet file per table (each atomically)."""
        out = Path(directory)
        for name in TABLES:
            write_parquet(out / f"{name}.parquet", getattr(self, name))

    @classmethod
    def load(cls, directory: str | Path, *, text: bool = True) -> Collection:
        """Read a collection written by `save` (no re-validation: `save` only takes valid ones).

        ``text=False`` reads the documents and queries as their ids only: the stages after
        rank never use the text, and at a million documents it is most of the reading time.

        Examples
        --------
        >>> import tempfile
        >>> from arecall.data.sources import load_corpus
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     load_corpus({"name": "discovery"}).save(tmp)
        ...     c = Collection.load(tmp, text=False)
        >>> list(c.documents.columns), c.acl_matrix().shape[1] == len(c.documents)
        (['doc_id'], True)
        """
        src = Path(directory)
        frames = {}
        for name in TABLES:
            path = src / f"{name}.parquet"
            if not path.is_file():
                raise ArecallError(f"{path}: missing; run the generate stage first")
            columns = None if text else _ID_ONLY.get(name)
            if name in _DICTIONARY:
                table = pq.read_table(path, columns=columns, read_dictionary=_DICTIONARY[name])
                frames[name] = table.to_pandas()
            else:
                frames[name] = pd.read_parquet(path, columns=columns)
        return cls(**frames)
