"""The seed's JSON layout: corpus.json, queries.json, profiles.json in one directory.

This is authorized-recall 0.1.0's interchange format, so any corpus prepared for the seed runs
here unchanged and gives the seed's numbers. Every field is checked with a message naming the
file and the JSON path of the bad value, because a silently skipped relevant id would change
the metric without a trace.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from arecall.core.errors import ArecallError
from arecall.data.collection import Collection
from arecall.io.seed_json import read_seed_files

if TYPE_CHECKING:
    from arecall.data.sources.schema import SeedJsonConfig

__all__ = ["collection_from_seed", "document_text", "read_seed_json", "seed_json_collection"]


def document_text(dataset: Mapping[str, Any]) -> str:
    """The text a seed dataset is indexed under.

    Its id with ``-`` read as a space, its description, its capabilities' names (``_`` as a
    space) and descriptions, and its schema names (``_`` as a space), joined by spaces.

    Examples
    --------
    >>> document_text({"dataset": "a-b", "description": "Rows.", "schemas": ["x_y"],
    ...                "capabilities": [{"name": "search", "description": "find"}]})
    'a b Rows. search find x y'
    """
    caps = dataset.get("capabilities") or ()
    parts = [str(dataset["dataset"]).replace("-", " "), dataset.get("description") or ""]
    parts += [str(c["name"]).replace("_", " ") for c in caps]
    parts += [c.get("description") or "" for c in caps]
    parts += [str(s).replace("_", " ") for s in dataset.get("schemas") or ()]
    return " ".join(p for p in parts if p)


def _require(value: Any, where: str, kind: type | tuple[type, ...], what: str) -> Any:
    if not isinstance(value, kind) or (isinstance(value, str) and not value):
        raise ArecallError(f"{where}: must be {what}")
    return value


def collection_from_seed(
    datasets: Sequence[Any],
    queries: Sequence[Any],
    profiles: Mapping[str, Any],
    *,
    files: tuple[str, str, str] = ("corpus.json", "queries.json", "profiles.json"),
) -> Collection:
    """Validate seed-layout records and turn them into a `Collection`.

    Queries get ids ``q001``, ``q002``, … in file order; each relevant id has relevance 1.
    A profile becomes a principal whose grants are the keys of its ``grants`` mapping.
    """
    corpus_file, queries_file, profiles_file = files
    _require(datasets, f"{corpus_file}: datasets", list, "a list")
    _require(queries, f"{queries_file}: queries", list, "a list")
    _require(profiles, f"{profiles_file}: profiles", dict, "an object")
    # Named by the file that is empty, not by the collection built from all three.
    for file, key, items in (
        (corpus_file, "datasets", datasets),
        (queries_file, "queries", queries),
        (profiles_file, "profiles", profiles),
    ):
        if not items:
            raise ArecallError(f"{file}: {key}: there are no {key}")
    docs = []
    for i, d in enumerate(datasets):
        where = f"{corpus_file}: datasets[{i}]"
        _require(d, where, dict, "an object")
        if "dataset" not in d:
            raise ArecallError(f"{where}: missing field 'dataset'")
        _require(d["dataset"], f"{where}.dataset", str, "a non-empty string")
        caps = d.get("capabilities") or []
        _require(caps, f"{where}.capabilities", list, "a list")
        for j, c in enumerate(caps):
            _require(c, f"{where}.capabilities[{j}]", dict, "an object")
            if "name" not in c:
                raise ArecallError(f"{where}.capabilities[{j}]: missing field 'name'")
        sensitivity = caps[0].get("sensitivity", "") if caps else ""
        docs.append(
            {
                "doc_id": d["dataset"],
                "text": document_text(d),
                "domain": str(d.get("domain", "")),
                "sensitivity": str(sensitivity),
            }
        )
    documents = pd.DataFrame(docs, columns=["doc_id", "text", "domain", "sensitivity"])
    dup = documents["doc_id"][documents["doc_id"].duplicated()]
    if len(dup):
        raise ArecallError(f"{corpus_file}: duplicate dataset id {dup.iloc[0]!r}")
    known = set(documents["doc_id"])

    width = max(3, len(str(len(queries))))
    qrows, qrels = [], []
    for i, q in enumerate(queries):
        where = f"{queries_file}: queries[{i}]"
        _require(q, where, dict, "an object")
        for field in ("query", "relevant"):
            if field not in q:
                raise ArecallError(f"{where}: missing field {field!r}")
        _require(q["query"], f"{where}.query", str, "a non-empty string")
        _require(q["relevant"], f"{where}.relevant", list, "a list of dataset ids")
        qid = f"q{i + 1:0{width}d}"
        qrows.append({"query_id": qid, "text": q["query"], "domain": str(q.get("domain", ""))})
        for j, doc in enumerate(q["relevant"]):
            if doc not in known:
                raise ArecallError(
                    f"{where}.relevant[{j}]: {doc!r} is not a dataset id in {corpus_file}"
                )
            qrels.append({"query_id": qid, "doc_id": doc, "relevance": 1.0})

    prows, acl = [], []
    for name, p in profiles.items():
        where = f"{profiles_file}: profiles[{name!r}]"
        _require(p, where, dict, "an object")
        if "grants" not in p:
            raise ArecallError(f"{where}: missing field 'grants'")
        _require(p["grants"], f"{where}.grants", dict, "an object keyed by dataset id")
        prows.append(
            {
                "principal": name,
                "principal_class": str(p.get("principal_class", name)),
                "clearance": str(p.get("clearance", "")),
            }
        )
        for doc in p["grants"]:
            if doc not in known:
                raise ArecallError(f"{where}.grants: {doc!r} is not a dataset id in {corpus_file}")
            acl.append({"principal": name, "doc_id": doc})

    return Collection.build(
        documents=documents,
        queries=pd.DataFrame(qrows, columns=["query_id", "text", "domain"]),
        qrels=pd.DataFrame(qrels, columns=["query_id", "doc_id", "relevance"]),
        principals=pd.DataFrame(prows, columns=["principal", "principal_class", "clearance"]),
        acl=pd.DataFrame(acl, columns=["principal", "doc_id"]),
        origin=corpus_file,
    )


def seed_json_collection(cfg: SeedJsonConfig) -> Collection:
    """The collection the checked ``corpus`` section of ``corpus=seed_json`` describes (its
    ``path``, required by `SeedJsonConfig`)."""
    assert cfg.path is not None
    return read_seed_json(cfg.path)


def read_seed_json(directory: str | Path) -> Collection:
    """Read corpus.json, queries.json and profiles.json from ``directory`` into a `Collection`.

    The files are read by `arecall.io.seed_json.read_seed_files`.

    Examples
    --------
    >>> read_seed_json("/nonexistent")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    arecall.core.errors.ArecallError: /nonexistent/corpus.json: file not found
    """
    seed = read_seed_files(directory)
    return collection_from_seed(seed.datasets, seed.queries, seed.profiles, files=seed.files)
