"""Embedding files: the one reader of the vectors a user brings, keyed by the corpus's ids.

Two formats, chosen by the file's suffix:

* **Parquet** (``.parquet``, ``.pq``): columns ``id`` (string) and ``vector`` (a list or a
  fixed-size list of floats, every row the same length). Read with pyarrow, memory-mapped; a
  ``float32`` fixed-size list without nulls becomes the matrix without a copy.
* **NumPy** (``.npy``): a 2-D float array, memory-mapped (``np.load(mmap_mode="r")``, never
  unpickled), with its ids in a text file beside it: ``docs.npy`` → ``docs.ids.txt``, one id
  per line in row order (read by `arecall.io.text`: gzip, a BOM and CRLF are fine).

Vectors are kept as float32 (the precision of every vector store); float64 and float16 input
is converted (one copy). Every problem is one `ArecallError` line naming the file: a missing or
mistyped column, a null, ragged or empty vector, NaN or an infinite value, a repeated id, an id
count that does not match the rows. `align` then puts the vectors in a corpus's order and names
the file for an id of the corpus with no vector and for a vector whose id the corpus lacks.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from arecall.core.errors import ArecallError
from arecall.io.ids import as_strings, encode, index_in
from arecall.io.text import check_file, lines

__all__ = [
    "FORMATS",
    "VectorFile",
    "align",
    "ids_file",
    "read_pair",
    "read_vectors",
    "row_norms",
    "write_vectors",
]

#: Suffix → format.
FORMATS = {".parquet": "parquet", ".pq": "parquet", ".npy": "npy"}
#: Rows checked for NaN/inf at a time (bounds the temporary mask on a memory-mapped file).
_CHECK_ROWS = 1 << 16


@dataclass(frozen=True, eq=False)
class VectorFile:
    """The vectors of one file and their ids, in file order.

    Attributes
    ----------
    path : Path
    ids : pyarrow.StringArray
        Distinct ids, one per row.
    vectors : ndarray of float32, shape (n, dims)
        Read-only; memory-mapped where the format allows.
    """

    path: Path
    ids: pa.Array
    vectors: npt.NDArray[np.float32]

    @property
    def dims(self) -> int:
        """Dimensions of every vector."""
        return int(self.vectors.shape[1])

    def id_at(self, row: int) -> str:
        """The id of row ``row`` (for messages)."""
        return str(self.ids[int(row)].as_py())


def ids_file(path: str | os.PathLike[str]) -> Path:
    """The ids file beside a ``.npy`` file: ``docs.npy`` → ``docs.ids.txt``.

    Examples
    --------
    >>> ids_file("emb/docs.npy").as_posix()
    'emb/docs.ids.txt'
    """
    return Path(path).with_suffix(".ids.txt")


def read_vectors(path: str | os.PathLike[str]) -> VectorFile:
    """Read an embedding file (Parquet, or ``.npy`` with its ids file), checked.

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> write_vectors(d / "q.parquet", ["q1", "q2"], np.eye(2, 3, dtype=np.float32))
    >>> f = read_vectors(d / "q.parquet")
    >>> f.ids.to_pylist(), f.vectors.shape, f.vectors.dtype.name
    (['q1', 'q2'], (2, 3), 'float32')
    >>> np.save(d / "d.npy", np.array([[1.0, np.nan]]))
    >>> _ = (d / "d.ids.txt").write_text("a\\n")
    >>> read_vectors(d / "d.npy")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    arecall.core.errors.ArecallError: /.../d.npy: id 'a': NaN or infinite value
    """
    p = check_file(path)
    kind = FORMATS.get(p.suffix.lower())
    if kind is None:
        raise ArecallError(
            f"{p}: unknown vector file format {p.suffix or '(no suffix)'!r} (expected .parquet "
            "with columns id and vector, or .npy with an ids file beside it)"
        )
    ids, vectors = _parquet(p) if kind == "parquet" else _npy(p)
    found = VectorFile(p, ids, vectors)
    _check_ids(found)
    _check_finite(found)
    return found


def _float32(values: npt.NDArray[Any]) -> npt.NDArray[np.float32]:
    if values.dtype == np.float32:
        return values
    return values.astype(np.float32)


def _parquet(p: Path) -> tuple[pa.Array, npt.NDArray[np.float32]]:
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(p, memory_map=True)
    except (pa.ArrowException, OSError) as exc:
        raise ArecallError(f"{p}: not a readable Parquet file ({exc})") from None
    for column in ("id", "vector"):
        if column not in schema.names:
            raise ArecallError(
                f"{p}: no column {column!r} (columns: {', '.join(schema.names) or 'none'}); "
                "expected id (string) and vector (a list of floats)"
            )
    id_type, vector_type = schema.field("id").type, schema.field("vector").type
    if not (pa.types.is_string(id_type) or pa.types.is_large_string(id_type)):
        raise ArecallError(f"{p}: column 'id': type {id_type}, expected string")
    listed = (
        pa.types.is_list(vector_type)
        or pa.types.is_large_list(vector_type)
        or pa.types.is_fixed_size_list(vector_type)
    )
    if not listed or not pa.types.is_floating(vector_type.value_type):
        raise ArecallError(f"{p}: column 'vector': type {vector_type}, expected a list of floats")
    try:
        table = pq.read_table(p, columns=["id", "vector"], memory_map=True)
    except (pa.ArrowException, OSError) as exc:
        raise ArecallError(f"{p}: cannot read: {exc}") from None
    ids = table["id"].combine_chunks()
    if ids.null_count:
        row = int(np.flatnonzero(ids.is_null().to_numpy(zero_copy_only=False))[0])
        raise ArecallError(f"{p}: row {row + 1}: id is null")
    ids = ids.cast(pa.string())
    column = table["vector"].combine_chunks()
    if len(column) == 0:
        raise ArecallError(f"{p}: no vectors (the file has no rows)")
    if column.null_count:
        row = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
        raise ArecallError(f"{p}: id {ids[row].as_py()!r}: no vector (null)")
    lengths = np.asarray(pc.list_value_length(column).to_numpy(zero_copy_only=False))
    dims = int(lengths[0])
    if dims == 0:
        raise ArecallError(f"{p}: id {ids[0].as_py()!r}: empty vector")
    ragged = np.flatnonzero(lengths != dims)
    if len(ragged):
        row = int(ragged[0])
        raise ArecallError(
            f"{p}: id {ids[row].as_py()!r}: {lengths[row]} values, but the first vector "
            f"({ids[0].as_py()!r}) has {dims}: every vector needs the same dimensions"
        )
    values = column.flatten()  # the offsets of this (possibly sliced) array, not its buffer's
    if values.null_count:
        at = int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0])
        raise ArecallError(f"{p}: id {ids[at // dims].as_py()!r}: a null value in its vector")
    flat = np.asarray(values.to_numpy(zero_copy_only=False))
    return ids, _float32(flat.reshape(len(column), dims))


def _npy(p: Path) -> tuple[pa.Array, npt.NDArray[np.float32]]:
    try:
        array = np.load(p, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise ArecallError(f"{p}: not a readable .npy array ({exc})") from None
    if not isinstance(array, np.ndarray):
        raise ArecallError(f"{p}: not a .npy array")
    if array.dtype.kind != "f":
        raise ArecallError(f"{p}: dtype {array.dtype}, expected floats")
    if array.ndim != 2:
        raise ArecallError(f"{p}: shape {array.shape}, expected 2 dimensions (one row per id)")
    if array.shape[0] == 0:
        raise ArecallError(f"{p}: no vectors (the array has no rows)")
    if array.shape[1] == 0:
        raise ArecallError(f"{p}: empty vectors (the array has 0 columns)")
    beside = ids_file(p)
    if not beside.is_file():
        raise ArecallError(
            f"{p}: no ids file: expected {beside.name} beside it, one id per line in row order"
        )
    names = [text.strip() for _, text in lines(beside)]
    if len(names) != array.shape[0]:
        raise ArecallError(
            f"{beside}: {len(names)} ids for the {array.shape[0]} vectors of {p.name} "
            "(one id per line, in row order)"
        )
    return as_strings(names), _float32(array)


def _check_ids(found: VectorFile) -> None:
    codes, distinct = encode(found.ids)
    if len(distinct) == len(codes):
        return
    counts = np.bincount(codes)
    twice = int(np.flatnonzero(counts > 1)[0])
    rows = np.flatnonzero(codes == twice)[:2] + 1
    raise ArecallError(
        f"{found.path}: id {distinct[twice].as_py()!r} has two vectors (rows {rows[0]} and "
        f"{rows[1]})"
    )


def _check_finite(found: VectorFile) -> None:
    vectors = found.vectors
    for start in range(0, vectors.shape[0], _CHECK_ROWS):
        block = np.asarray(vectors[start : start + _CHECK_ROWS])
        bad = ~np.isfinite(block).all(axis=1)
        if bad.any():
            row = start + int(np.flatnonzero(bad)[0])
            raise ArecallError(f"{found.path}: id {found.id_at(row)!r}: NaN or infinite value")


def row_norms(found: VectorFile, metric: str) -> npt.NDArray[np.float64]:
    """Each row's L2 norm (float64), refusing a zero vector under ``cosine`` by file and id.

    Examples
    --------
    >>> f = VectorFile(Path("d.npy"), pa.array(["a", "b"]), np.array([[3, 4], [0, 0]], np.float32))
    >>> row_norms(f, "ip").tolist()
    [5.0, 0.0]
    >>> row_norms(f, "cosine")
    Traceback (most recent call last):
    ...
    arecall.core.errors.ArecallError: d.npy: id 'b': zero vector (metric cosine needs a \
direction; use ip or l2, or drop it)
    """
    vectors = found.vectors
    norms = np.empty(vectors.shape[0], dtype=np.float64)
    step = max(1, _CHECK_ROWS * 16 // max(vectors.shape[1], 1))
    for start in range(0, vectors.shape[0], step):
        block = np.asarray(vectors[start : start + step], dtype=np.float64)
        norms[start : start + step] = np.sqrt(np.einsum("ij,ij->i", block, block))
    if metric == "cosine":
        zero = np.flatnonzero(norms == 0.0)
        if len(zero):
            raise ArecallError(
                f"{found.path}: id {found.id_at(int(zero[0]))!r}: zero vector (metric cosine "
                "needs a direction; use ip or l2, or drop it)"
            )
    return norms


def read_pair(
    documents: str | os.PathLike[str], queries: str | os.PathLike[str], metric: str
) -> tuple[VectorFile, VectorFile, npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Documents' and queries' vector files, checked together: the same dimensions, and under
    ``cosine`` no zero vector; with each row's norm (`row_norms`).

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> write_vectors(d / "docs.parquet", ["a"], [[3.0, 4.0]])
    >>> write_vectors(d / "queries.parquet", ["q"], [[1.0, 0.0, 0.0]])
    >>> read_pair(d / "docs.parquet", d / "queries.parquet", "cosine")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    arecall.core.errors.ArecallError: ...queries.parquet: vectors of 3 dimensions, but the \
documents' (...docs.parquet) have 2
    """
    doc_file = read_vectors(documents)
    query_file = read_vectors(queries)
    if query_file.dims != doc_file.dims:
        raise ArecallError(
            f"{query_file.path}: vectors of {query_file.dims} dimensions, but the documents' "
            f"({doc_file.path}) have {doc_file.dims}"
        )
    return doc_file, query_file, row_norms(doc_file, metric), row_norms(query_file, metric)


def align(found: VectorFile, corpus_ids: Any, *, what: str = "document") -> npt.NDArray[np.float32]:
    """``found``'s vectors in the order of ``corpus_ids``: row i is the vector of corpus id i.

    Every corpus id needs a vector, and every vector an id of the corpus (``what`` names
    which kind, ``document`` or ``query``, in the message). Rows already in the corpus's order
    are returned as they are (memory-mapped, no copy); others are gathered.

    Examples
    --------
    >>> f = VectorFile(Path("q.parquet"), pa.array(["b", "a"]), np.eye(2, dtype=np.float32))
    >>> align(f, ["a", "b"]).tolist()
    [[0.0, 1.0], [1.0, 0.0]]
    >>> align(f, ["a", "b", "c"], what="query")
    Traceback (most recent call last):
    ...
    arecall.core.errors.ArecallError: q.parquet: query 'c' of the corpus has no vector
    """
    universe = as_strings([str(i) for i in corpus_ids])
    at = index_in(universe, found.ids)
    missing = np.flatnonzero(at < 0)
    if len(missing):
        raise ArecallError(
            f"{found.path}: {what} {universe[int(missing[0])].as_py()!r} of the corpus has no "
            "vector"
        )
    if len(found.ids) != len(universe):
        extra = np.flatnonzero(index_in(found.ids, universe) < 0)
        row = int(extra[0])
        raise ArecallError(
            f"{found.path}: id {found.id_at(row)!r} (row {row + 1}) is not a {what} id of the "
            "corpus"
        )
    if np.array_equal(at, np.arange(len(at))):
        return found.vectors
    return np.take(found.vectors, at, axis=0)


def write_vectors(path: str | os.PathLike[str], ids: Any, vectors: npt.ArrayLike) -> None:
    """Write ids and vectors as the Parquet `read_vectors` reads (atomically).

    ``vector`` is a fixed-size list of float32, so reading it back is one buffer, no copy.

    Examples
    --------
    >>> import tempfile
    >>> out = Path(tempfile.mkdtemp()) / "v.parquet"
    >>> write_vectors(out, ["a"], [[0.5, 0.25]])
    >>> read_vectors(out).vectors.tolist()
    [[0.5, 0.25]]
    """
    import pyarrow.parquet as pq

    from arecall.io.atomic import atomic_path

    matrix = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32))
    if matrix.ndim != 2:
        raise ArecallError(f"{path}: vectors of shape {matrix.shape}, expected 2 dimensions")
    names = as_strings([str(i) for i in ids])
    column = pa.FixedSizeListArray.from_arrays(pa.array(matrix.ravel()), matrix.shape[1])
    table = pa.table({"id": names, "vector": column})
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)
