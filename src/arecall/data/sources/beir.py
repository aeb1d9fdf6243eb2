"""BEIR-layout directories (and TREC qrels), with a document ACL beside them.

BEIR is the common interchange format of public retrieval benchmarks, so this source lets any of
them be measured for authorized recall once an ACL says who may use what:

* ``corpus.jsonl`` — one JSON object per line: ``_id``, ``text``, optional ``title`` (indexed as
  ``title + " " + text``); optional string fields ``domain`` and ``sensitivity`` are kept as
  columns, so ``profiles=domains|clearance`` work when a corpus carries them.
* ``queries.jsonl`` — ``_id`` and a non-empty ``text``.
* ``qrels/<split>.tsv`` — ``query-id<TAB>corpus-id<TAB>score`` with a header; or TREC qrels
  (``qid 0 docid rel``, whitespace-separated, no header), read by
  `arecall.io.trec.read_judgments` (the reader ``arecall evaluate`` uses): the format is
  detected from the first line and scores must be integers. Rows with score ≤ 0 are judgments
  of non-relevance and are dropped; queries left with no relevant document are not evaluated
  (there is nothing to recall), the rest keep the order of ``queries.jsonl``.
* ``corpus.acl`` — ``doc_id<TAB>principal-or-group`` (and ``corpus.groups``,
  ``principal<TAB>group``), read by `arecall.data.authorization.acl_file.read_acl` (the
  expansion ``arecall evaluate`` uses, with the corpus's documents as the universe). Deny by
  default: a document no line names is authorized to nobody. Without an ACL the corpus
  declares one principal, ``anonymous``, with no grants; choose ``profiles=open``, ``random``
  or ``acl_file`` to authorize.

Relative ``qrels``, ``acl`` and ``groups`` paths are looked up under ``corpus.path`` first, then
the working directory. Every malformed line is an `ArecallError` naming the file and line
number, because a silently skipped judgment or grant would change the metric without a trace.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from arecall.core.errors import ArecallError
from arecall.data.authorization.acl_file import read_acl
from arecall.data.collection import Collection
from arecall.io.text import lines
from arecall.io.trec import read_judgments

if TYPE_CHECKING:
    from arecall.data.sources.schema import BeirConfig

__all__ = ["beir_collection", "read_beir", "read_qrels"]


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line; anything else names the line."""
    for number, line in lines(path):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ArecallError(f"{path}: line {number}: invalid JSON: {exc.msg}") from None
        if not isinstance(obj, dict):
            raise ArecallError(f"{path}: line {number}: must be a JSON object")
        yield number, obj


def _id(obj: Mapping[str, Any], path: Path, number: int) -> str:
    if "_id" not in obj:
        raise ArecallError(f"{path}: line {number}: missing field '_id'")
    value = obj["_id"]
    if isinstance(value, bool) or not isinstance(value, str | int) or str(value) == "":
        raise ArecallError(f"{path}: line {number}: _id must be a non-empty string, got {value!r}")
    return str(value)


def _string(obj: Mapping[str, Any], field: str, path: Path, number: int, required: bool) -> str:
    value = obj.get(field)
    if value is None:
        if required:
            raise ArecallError(f"{path}: line {number}: missing field {field!r}")
        return ""
    if not isinstance(value, str):
        raise ArecallError(f"{path}: line {number}: {field} must be a string, got {value!r}")
    return value


def _no_duplicates(ids: list[str], lines: list[int], path: Path, what: str) -> None:
    series = pd.Series(ids, dtype=object)
    dup = series.duplicated()
    if dup.any():
        i = int(np.flatnonzero(dup.to_numpy())[0])
        first = lines[int(np.flatnonzero((series == ids[i]).to_numpy())[0])]
        raise ArecallError(
            f"{path}: line {lines[i]}: duplicate {what} _id {ids[i]!r} (first at line {first})"
        )


def _read_corpus(path: Path) -> pd.DataFrame:
    ids: list[str] = []
    texts: list[str] = []
    lines: list[int] = []
    extra: dict[str, dict[int, str]] = {"domain": {}, "sensitivity": {}}
    for number, obj in _jsonl(path):
        doc = _id(obj, path, number)
        title = _string(obj, "title", path, number, required=False)
        text = _string(obj, "text", path, number, required=True)
        for field, values in extra.items():
            if obj.get(field) is not None:
                values[len(ids)] = _string(obj, field, path, number, required=False)
        ids.append(doc)
        texts.append(f"{title} {text}" if title else text)
        lines.append(number)
    if not ids:
        raise ArecallError(f"{path}: no documents")
    _no_duplicates(ids, lines, path, "document")
    frame = pd.DataFrame({"doc_id": ids, "text": texts})
    for field, values in extra.items():
        if values:
            frame[field] = [values.get(i, "") for i in range(len(ids))]
    return frame


def _read_queries(path: Path) -> pd.DataFrame:
    ids: list[str] = []
    texts: list[str] = []
    lines: list[int] = []
    for number, obj in _jsonl(path):
        query = _id(obj, path, number)
        text = _string(obj, "text", path, number, required=True)
        if not text.strip():
            raise ArecallError(f"{path}: line {number}: empty query text (query {query!r})")
        ids.append(query)
        texts.append(text)
        lines.append(number)
    if not ids:
        raise ArecallError(f"{path}: no queries")
    _no_duplicates(ids, lines, path, "query")
    return pd.DataFrame({"query_id": ids, "text": texts})


def read_qrels(path: str | Path) -> pd.DataFrame:
    """BEIR TSV or TREC qrels as a frame, each row with its line number.

    The file is read by `arecall.io.trec.read_judgments`, the one qrels reader (``arecall
    evaluate`` uses it too): the layout is chosen by the first data line, relevance must be an
    integer, a (query, document) pair may be judged once. Every row is kept (non-relevant ones
    too).

    Returns
    -------
    DataFrame
        ``query_id``, ``doc_id``, ``relevance`` (float64) and ``line``.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "test.tsv"
    >>> _ = p.write_text("query-id\\tcorpus-id\\tscore\\nq1\\td1\\t1\\nq1\\td2\\t0\\n")
    >>> read_qrels(p).values.tolist()
    [['q1', 'd1', 1.0, 2], ['q1', 'd2', 0.0, 3]]
    >>> _ = p.write_text("q1 0 d1 2\\n")
    >>> read_qrels(p).values.tolist()
    [['q1', 'd1', 2.0, 1]]
    """
    judged = read_judgments(path)
    return pd.DataFrame(
        {
            "query_id": pd.Series(judged.query_ids.to_pylist(), dtype=object),
            "doc_id": pd.Series(judged.doc_ids.to_pylist(), dtype=object),
            "relevance": judged.relevance.astype(np.float64),
            "line": judged.lines,
        }
    )


def _unknown(frame: pd.DataFrame, column: str, known: pd.Index, path: Path, what: str) -> None:
    missing = ~frame[column].isin(known)
    if missing.any():
        row = frame[missing].iloc[0]
        raise ArecallError(
            f"{path}: line {row['line']}: {row[column]!r} is not a {what} id of the collection"
        )


def _beside(root: Path, value: str | Path) -> Path:
    """``value`` under the BEIR directory if it is relative and exists there, else as given."""
    p = Path(value)
    return root / p if not p.is_absolute() and (root / p).exists() else p


def read_beir(
    path: str | Path,
    *,
    split: str = "test",
    qrels: str | Path | None = None,
    acl: str | Path | None = None,
    groups: str | Path | None = None,
) -> Collection:
    """Read a BEIR directory (and an ACL) into a `Collection`.

    Parameters
    ----------
    path : path
        Directory holding ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv``.
    split : str
        Which qrels file to read (``test``, ``dev``, ``train``).
    qrels : path, optional
        A qrels file (BEIR TSV or TREC) to read instead of ``qrels/<split>.tsv``.
    acl, groups : path, optional
        ``doc_id<TAB>principal-or-group`` grants and ``principal<TAB>group`` memberships.

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "corpus.jsonl").write_text(
    ...     json.dumps({"_id": "d1", "title": "Ants", "text": "small"}) + "\\n"
    ...     + json.dumps({"_id": "d2", "text": "bees"}) + "\\n")
    >>> _ = (d / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "ants"}) + "\\n")
    >>> (d / "qrels").mkdir()
    >>> _ = (d / "qrels" / "test.tsv").write_text("query-id\\tcorpus-id\\tscore\\nq1\\td1\\t1\\n")
    >>> _ = (d / "acl.tsv").write_text("d2\\talice\\n")
    >>> c = read_beir(d, acl="acl.tsv")
    >>> c.documents["text"].tolist(), c.acl_matrix().toarray().tolist()
    (['Ants small', 'bees'], [[False, True]])
    """
    root = Path(path)
    if not root.is_dir():
        raise ArecallError(f"{root}: not a directory (corpus.path must be a BEIR directory)")
    documents = _read_corpus(root / "corpus.jsonl")
    queries = _read_queries(root / "queries.jsonl")
    qrels_path = _beside(root, qrels) if qrels is not None else root / "qrels" / f"{split}.tsv"
    judged = read_qrels(qrels_path)
    _unknown(judged, "query_id", pd.Index(queries["query_id"]), qrels_path, "query")
    _unknown(judged, "doc_id", pd.Index(documents["doc_id"]), qrels_path, "document")
    relevant = judged[judged["relevance"] > 0]
    queries = queries[queries["query_id"].isin(relevant["query_id"])].reset_index(drop=True)
    if queries.empty:
        raise ArecallError(f"{qrels_path}: no query has a relevant document (score > 0)")
    documents = documents.sort_values("doc_id", kind="stable").reset_index(drop=True)
    if acl is not None:
        principals, grants = read_acl(
            _beside(root, acl),
            documents["doc_id"],
            groups=_beside(root, groups) if groups is not None else None,
        )
    else:
        if groups is not None:
            raise ArecallError("corpus.groups: needs corpus.acl (groups expand the ACL's grants)")
        principals = pd.DataFrame({"principal": ["anonymous"]})
        grants = pd.DataFrame({"principal": pd.Series([], dtype=object), "doc_id": []})
    return Collection.build(
        documents=documents,
        queries=queries,
        qrels=relevant.drop(columns="line").reset_index(drop=True),
        principals=principals,
        acl=grants,
        origin=str(root),
    )


def beir_collection(cfg: BeirConfig) -> Collection:
    """The collection the checked ``corpus`` section of ``corpus=beir`` describes (its
    ``path`` required by `BeirConfig`)."""
    assert cfg.path is not None
    return read_beir(cfg.path, split=cfg.split, qrels=cfg.qrels, acl=cfg.acl, groups=cfg.groups)
