"""Per-principal workloads: vectors, queries and one authorization mask per principal.

verity's experiment filters by a uniform random draw at fixed selectivities. A real deployment
filters by its ACL: each principal's filter is the set of documents it may use, and whether that
set follows the queries decides what post-filtering and a graph walk cost. A `Workload` holds
exactly that — the documents' and queries' vectors (in the index's metric), the principals and
their masks — from either

* the user's own files (`load_workload`: ``corpus=vectors`` with ``vector_search.corpus.documents``,
  ``queries``, ``acl`` and optional ``groups``; the vector files as `arecall.io.vectors` reads
  them, the ACL as ``profiles=acl_file`` reads it), or
* a text corpus's dense embeddings and its principals (the ``index_search`` stage).

`principal_table` then measures every placement for every principal against the exhaustive
oracle — on the configured store, with ``auto`` where that store answers it — and, for each
store named in ``audit``, that store's own post- and pre-filter (its filtered search), with the
principal's global-local selectivity (`arecall.vector.oracle.global_local_selectivity`) beside
its selectivity, so a row says why ``auto`` chose what it chose.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from arecall.core.errors import ArecallError
from arecall.vector.index import build_index
from arecall.vector.oracle import global_local_selectivity
from arecall.vector.schema import IndexConfig

__all__ = ["Workload", "load_workload", "principal_table"]


@dataclass(frozen=True)
class Workload:
    """Vectors, queries and per-principal masks, ready for an index.

    Attributes
    ----------
    vectors : ndarray of float32, shape (n_docs, dims)
        As the index holds them (unit rows under cosine).
    queries : ndarray of float32, shape (n_queries, dims)
    principals : tuple of str
    masks : ndarray of bool, shape (n_principals, n_docs)
        Row p: the documents principal p may use (deny by default).
    metric : {"ip", "l2"}
        What the index measures.
    described : str
        Where the workload came from, for a table's caption.
    """

    vectors: npt.NDArray[np.float32]
    queries: npt.NDArray[np.float32]
    principals: tuple[str, ...]
    masks: npt.NDArray[np.bool_]
    metric: str = "ip"
    described: str = ""
    doc_ids: pa.Array | None = field(default=None, repr=False)


#: Rows normalised per block under ``cosine`` (bounds the float64 working copy).
_UNIT_ROWS = 65536


def _unit(
    vectors: npt.NDArray[np.float32], norms: npt.NDArray[np.float64]
) -> npt.NDArray[np.float32]:
    """Unit rows (float32), a block at a time: a memory-mapped file is read once, never copied
    whole in float64."""
    out = np.empty(vectors.shape, dtype=np.float32)
    for start in range(0, vectors.shape[0], _UNIT_ROWS):
        block = np.asarray(vectors[start : start + _UNIT_ROWS], dtype=np.float64)
        out[start : start + _UNIT_ROWS] = block / norms[start : start + _UNIT_ROWS, None]
    return out


def load_workload(
    documents: str | os.PathLike[str],
    queries: str | os.PathLike[str],
    acl: str | os.PathLike[str],
    *,
    groups: str | os.PathLike[str] | None = None,
    metric: str = "cosine",
) -> Workload:
    """The user's vectors, queries and ACL as a `Workload` (every problem one line naming its
    file).

    Documents are put in id order (so ties fall to the lower id, as everywhere in arecall);
    queries keep their file's order. Under ``cosine`` rows are normalised (a zero vector is
    refused); ``ip`` and ``l2`` take them as given. The ACL is read as ``profiles=acl_file``
    reads one (`arecall.data.authorization.read_acl`): ``doc_id<TAB>principal-or-group``
    lines, groups expanded through ``groups``, a line naming a document without a vector
    refused.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from arecall.io.vectors import write_vectors
    >>> d = Path(tempfile.mkdtemp())
    >>> write_vectors(d / "docs.parquet", ["b", "a", "c"], np.eye(3, dtype=np.float32))
    >>> write_vectors(d / "queries.parquet", ["q"], [[1.0, 0.0, 0.0]])
    >>> _ = (d / "acl.tsv").write_text("a\\talice\\nb\\tbob\\nc\\tbob\\n")
    >>> w = load_workload(d / "docs.parquet", d / "queries.parquet", d / "acl.tsv")
    >>> w.principals, w.masks.astype(int).tolist()
    (('alice', 'bob'), [[1, 0, 0], [0, 1, 1]])
    """
    from arecall.data.authorization import read_acl
    from arecall.io.vectors import read_pair

    if metric not in ("cosine", "ip", "l2"):
        raise ArecallError(f"metric={metric!r}: must be one of cosine, ip, l2")
    doc_file, query_file, doc_norms, query_norms = read_pair(documents, queries, metric)
    order = np.asarray(pc.sort_indices(doc_file.ids), dtype=np.int64)
    ordered = bool(np.array_equal(order, np.arange(len(order))))
    vectors = doc_file.vectors if ordered else np.take(doc_file.vectors, order, axis=0)
    doc_ids = doc_file.ids.take(pa.array(order))
    query_vectors = query_file.vectors
    if metric == "cosine":
        vectors = _unit(vectors, doc_norms[order])
        query_vectors = _unit(query_vectors, query_norms)
    names = doc_ids.to_pylist()
    principals, grants = read_acl(acl, names, groups=groups)
    if principals.empty:
        raise ArecallError(f"{acl}: names no principal")
    who = principals["principal"].astype(str).tolist()
    rows = pd.Categorical(grants["principal"].astype(str), categories=who).codes
    cols = pd.Categorical(grants["doc_id"].astype(str), categories=names).codes
    masks = np.zeros((len(who), len(names)), dtype=bool)
    masks[np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)] = True
    described = (
        f"{len(names):,} × {doc_file.dims} vectors ({doc_file.path.name}), "
        f"{query_vectors.shape[0]} queries ({query_file.path.name}), {len(who)} principals "
        f"({os.path.basename(acl)}), metric {metric}"
    )
    return Workload(
        vectors=np.ascontiguousarray(vectors, dtype=np.float32),
        queries=np.ascontiguousarray(query_vectors, dtype=np.float32),
        principals=tuple(who),
        masks=masks,
        metric="l2" if metric == "l2" else "ip",
        described=described,
        doc_ids=doc_ids,
    )


def principal_table(
    workload: Workload,
    config: IndexConfig,
    *,
    k: int,
    audit: Sequence[str] = (),
) -> pd.DataFrame:
    """Every placement for every principal with at least one document, against the oracle.

    Rows are in principal order; each holds ``principal``, ``selectivity`` (its share of the
    corpus), ``gls`` (`~arecall.vector.oracle.global_local_selectivity`) and the columns of
    `~arecall.vector.measurement.measure_store` for ``config.store``'s placements, then, for
    each store named in ``audit``, its ``post`` and ``pushdown`` as ``<store>/post`` and
    ``<store>/pushdown``. ``auto`` is calibrated on synthetic queries drawn like the documents,
    never on the scored ones.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> w = Workload(vectors=rng.normal(size=(60, 4)).astype(np.float32),
    ...              queries=rng.normal(size=(3, 4)).astype(np.float32), principals=("p",),
    ...              masks=np.arange(60)[None, :] < 30)
    >>> table = principal_table(w, IndexConfig(name="exact", placements=["post", "pre"]), k=5)
    >>> table[["principal", "selectivity", "mode", "returned"]].values.tolist()
    [['p', 0.5, 'post', 2.0], ['p', 0.5, 'pre', 5.0]]
    >>> bool(table["gls"].iloc[0] * 0.5 == 1 - table["u_at_k"].iloc[0])  # local share = 1 − U@K
    True
    """
    from arecall.vector.measurement import measure_store
    from arecall.vector.placement import DEFAULT_GRAPH_COST
    from arecall.vector.stores import Below, store_from_config

    n_docs = workload.vectors.shape[0]
    if k > n_docs:
        raise ArecallError(f"k={k}: exceeds the {n_docs} documents")
    # each principal's mask as a document attribute the stores filter on: acl_i < 0.5 iff granted
    attributes = {f"acl_{i}": np.where(mask, 0.0, 1.0) for i, mask in enumerate(workload.masks)}
    oracle = build_index(workload.vectors, kind="exact", metric=workload.metric)
    unfiltered = oracle.exact(workload.queries, k)
    granted = [i for i, mask in enumerate(workload.masks) if mask.any()]
    rows: dict[int, list[dict[str, Any]]] = {i: [] for i in granted}

    def measured(store: Any, placements: Sequence[str], label: str = "") -> None:
        for i in granted:
            mask = workload.masks[i]
            for row in measure_store(
                store,
                oracle,
                workload.queries,
                Below(f"acl_{i}", 0.5),
                attributes,
                k=k,
                placements=placements,
                unfiltered=unfiltered,
            ):
                rows[i].append(
                    {
                        "principal": workload.principals[i],
                        "selectivity": float(mask.mean()),
                        "gls": global_local_selectivity(unfiltered, mask, k),
                        **row,
                        "mode": f"{label}{row['mode']}",
                    }
                )

    with store_from_config(config, workload.metric) as store:
        store.build(workload.vectors, attributes)
        if "auto" in config.placements:
            store.calibrate(
                k,
                None,
                target_recall=config.target_recall,
                graph_cost=DEFAULT_GRAPH_COST,
                confidence=config.confidence,
            )
        measured(store, tuple(config.placements))
    for name in dict.fromkeys(audit):
        if name == config.store:
            continue
        audited = IndexConfig(**{**vars(config), "store": name, "name": "hnsw"})
        with store_from_config(audited, workload.metric) as store:
            store.build(workload.vectors, attributes)
            measured(store, ("post", "pushdown"), f"{name}/")
    frame = pd.DataFrame([row for i in granted for row in rows[i]])
    frame.attrs["k"] = k
    return frame
