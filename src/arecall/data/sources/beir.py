"""BEIR-layout directories (and TREC qrels), with a document ACL beside them.

BEIR is the common interchange format of public retrieval benchmarks, so this source lets any of
them be measured for authorized recall once an ACL says who may use what:

* ``corpus.jsonl`` — one JSON object per line: ``_id``, ``text``, optional ``title`` (indexed as
  ``title + " " + text``); optional string fields ``domain`` and ``sensitivity`` are kept as
  columns, so ``profiles=domains|clearance`` work when a corpus carries them.
* ``queries.jsonl`` — ``_id`` and a non-empty ``text``.
* ``qrels/<split>.tsv`` — ``query-id<TAB>corpus-id<TAB>score`` with a header; or TREC qrels
  (``qid 0 docid rel``, whitespace-separated, no header). The format is detected from the first
  line. Rows with score ≤ 0 are judgments of non-relevance and are dropped; queries left with no
  relevant document are not evaluated (there is nothing to recall), the rest keep the order of
  ``queries.jsonl``.
* ``corpus.acl`` — ``doc_id<TAB>principal-or-group`` (and ``corpus.groups``,
  ``principal<TAB>group``), read by `arecall.data.authorization.read_acl`. Deny by default: a document no
  line names is authorized to nobody. Without an ACL the corpus declares one principal,
  ``anonymous``, with no grants; choose ``profiles=open``, ``random`` or ``acl_file`` to
  authorize.

Relative ``qrels``, ``acl`` and ``groups`` paths are looked up under ``corpus.path`` first, then
the working directory. Every malformed line is an `ArecallError` naming the file and line
number, because a silently skipped judgment or grant would change the metric without a trace.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from arecall.data.collection import Collection
from arecall.core.errors import ArecallError
from arecall.data.authorization import read_acl

__all__ = ["beir_collection", "read_beir", "read_qrels"]


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line; anything else names the line."""
    if not path.is_file():
        raise ArecallError(f"{path}: file not found")
    try:
        with path.open(encoding="utf-8") as fh:
            for number, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ArecallError(f"{path}: line {number}: invalid JSON: {exc.msg}") from None
                if not isinstance(obj, dict):
                    raise ArecallError(f"{path}: line {number}: must be a JSON object")
                yield number, obj
    except UnicodeDecodeError:
        raise ArecallError(f"{path}: not UTF-8 text") from None


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


_BEIR_FIELDS = "query-id<TAB>corpus-id<TAB>score"
_TREC_FIELDS = "qid 0 docid rel"


def read_qrels(path: str | Path) -> pd.DataFrame:
    """Read BEIR TSV or TREC qrels (detected from the first line) with each row's line number.

    BEIR: ``query-id<TAB>corpus-id<TAB>score``, the first line a header when its score is not a
    number. TREC: ``qid 0 docid rel``, any whitespace, no header. Blank lines are skipped. Every
    row is kept (non-relevant ones too); scores must be finite numbers and a (query, document)
    pair may be judged once.

    Returns
    -------
    DataFrame
        ``query_id``, ``doc_id``, ``relevance`` (float64) and ``line``.

    Raises
    ------
    ArecallError
        Naming the file and line: a format that is neither, a wrong field count, a score that
        is not a number, a repeated pair.

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
    p = Path(path)
    if not p.is_file():
        raise ArecallError(f"{p}: file not found")
    qids: list[str] = []
    docs: list[str] = []
    scores: list[float] = []
    lines: list[int] = []
    fmt: str | None = None
    try:
        with p.open(encoding="utf-8", newline="") as fh:
            for number, raw in enumerate(fh, start=1):
                line = raw.rstrip("\r\n")
                if not line.strip():
                    continue
                if fmt is None:
                    tabbed = line.split("\t")
                    if len(tabbed) == 3:
                        fmt = "beir"
                        if not _is_number(tabbed[2]):
                            continue  # the header
                    elif len(line.split()) == 4:
                        fmt = "trec"
                    else:
                        raise ArecallError(
                            f"{p}: line {number}: neither BEIR qrels ({_BEIR_FIELDS}) nor TREC "
                            f"qrels ({_TREC_FIELDS})"
                        )
                if fmt == "beir":
                    parts = line.split("\t")
                    if len(parts) != 3:
                        raise ArecallError(
                            f"{p}: line {number}: expected 3 tab-separated fields "
                            f"({_BEIR_FIELDS}), got {len(parts)}"
                        )
                    qid, doc, score = parts
                else:
                    parts = line.split()
                    if len(parts) != 4:
                        raise ArecallError(
                            f"{p}: line {number}: expected 4 fields ({_TREC_FIELDS}), "
                            f"got {len(parts)}"
                        )
                    qid, _, doc, score = parts
                if not qid.strip() or not doc.strip():
                    raise ArecallError(f"{p}: line {number}: empty query or document id")
                if not _is_number(score):
                    raise ArecallError(f"{p}: line {number}: score {score!r} is not a number")
                qids.append(qid)
                docs.append(doc)
                scores.append(float(score))
                lines.append(number)
    except UnicodeDecodeError:
        raise ArecallError(f"{p}: not UTF-8 text") from None
    frame = pd.DataFrame(
        {
            "query_id": pd.Series(qids, dtype=object),
            "doc_id": pd.Series(docs, dtype=object),
            "relevance": np.asarray(scores, dtype=np.float64),
            "line": np.asarray(lines, dtype=np.int64),
        }
    )
    dup = frame.duplicated(["query_id", "doc_id"])
    if dup.any():
        row = frame[dup].iloc[0]
        first = frame[(frame["query_id"] == row["query_id"]) & (frame["doc_id"] == row["doc_id"])]
        raise ArecallError(
            f"{p}: line {row['line']}: query {row['query_id']!r} and document "
            f"{row['doc_id']!r} are judged twice (first at line {first['line'].iloc[0]})"
        )
    return frame


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


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
        if principals.empty:
            raise ArecallError(f"{_beside(root, acl)}: names no principal")
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


def beir_collection(cfg: Mapping[str, Any]) -> Collection:
    """The collection the ``corpus`` section of ``corpus=beir`` describes.

    Examples
    --------
    >>> beir_collection({"name": "beir"})
    Traceback (most recent call last):
    ...
    arecall.core.errors.ArecallError: corpus.path: required for corpus=beir (a BEIR directory)
    """
    path = cfg.get("path")
    if not path:
        raise ArecallError("corpus.path: required for corpus=beir (a BEIR directory)")
    split = cfg.get("split") or "test"
    if not isinstance(split, str):
        raise ArecallError(f"corpus.split: must be a split name such as 'test', got {split!r}")
    return read_beir(
        path, split=split, qrels=cfg.get("qrels"), acl=cfg.get("acl"), groups=cfg.get("groups")
    )
