"""The seed's JSON files (corpus.json, queries.json, profiles.json): the one reader of each.

authorized-recall 0.1.0's interchange format. Reading is separate from building a collection
(`arecall.data.sources.seed_json`) so the files get the same text handling as every other
format (`arecall.io.text`: a directory or missing file named, gzip, BOM, UTF-8 errors by line)
and a malformed file is one `ArecallError` naming it and the line. `read_seed_files` also refuses
what the BEIR reader refuses and the seed would mis-handle, naming the JSON path: a query of only
whitespace, a relevant id that is not a non-empty string (a list or a number cannot name a
dataset), an empty or blank principal name. The rest of the records' shape is checked where they
become a collection (`arecall.data.sources.seed_json`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arecall.core.errors import ArecallError
from arecall.io.text import read_text

__all__ = ["SeedFiles", "check_seed_values", "read_seed_files", "read_seed_member"]

FILES = (("corpus.json", "datasets"), ("queries.json", "queries"), ("profiles.json", "profiles"))


@dataclass(frozen=True)
class SeedFiles:
    """The top-level values of the three files, unvalidated, and the files' paths."""

    datasets: Any
    queries: Any
    profiles: Any
    files: tuple[str, str, str]


def read_seed_member(path: str | os.PathLike[str], key: str) -> Any:
    """The value of top-level field ``key`` of the JSON object in ``path``.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "queries.json"
    >>> _ = p.write_text('{"queries": []}')
    >>> read_seed_member(p, "queries")
    []
    >>> read_seed_member(p, "profiles")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    arecall.core.errors.ArecallError: /...queries.json: missing top-level field 'profiles'
    """
    p = Path(path)
    try:
        data = json.loads(read_text(p), object_pairs_hook=_Object.of)
    except json.JSONDecodeError as exc:
        raise ArecallError(f"{p}: line {exc.lineno}: invalid JSON: {exc.msg}") from None
    repeated = _first_repeated(data, "")
    if repeated is not None:
        raise ArecallError(f"{p}: {repeated}")
    if not isinstance(data, dict) or key not in data:
        raise ArecallError(f"{p}: missing top-level field {key!r}")
    return data[key]


class _Object(dict[str, Any]):
    """A JSON object that remembers the keys it was given more than once.

    JSON lets a key repeat and Python's reader keeps the last value: a principal listed twice
    in profiles.json lost its first grants without a word. The reader keeps them all long
    enough to refuse the file (`_first_repeated`).
    """

    repeated: list[str]

    @classmethod
    def of(cls, pairs: list[tuple[str, Any]]) -> _Object:
        obj = cls(pairs)
        seen: set[str] = set()
        obj.repeated = []
        for k, _ in pairs:
            if k in seen:
                obj.repeated.append(k)
            seen.add(k)
        return obj


#: Objects whose keys are names the data gives (principals, dataset ids), not field names.
_NAMED = {"profiles": "principal", "grants": "dataset id"}


def _first_repeated(value: Any, path: str, field: str = "") -> str | None:
    """Where the first key given twice is, and which, as the error says it; None: nowhere.

    Examples
    --------
    >>> data = json.loads('{"profiles": {"a": {"grants": {}}, "a": {"grants": {}}}}',
    ...                   object_pairs_hook=_Object.of)
    >>> _first_repeated(data, "")
    "profiles: principal 'a' is listed twice (JSON keeps only the last)"
    """
    if isinstance(value, _Object):
        where = path or "top level"
        if value.repeated:
            name = value.repeated[0]
            if field in _NAMED:
                return (
                    f"{where}: {_NAMED[field]} {name!r} is listed twice (JSON keeps only the last)"
                )
            return f"{where}: field {name!r} is given twice (JSON keeps only the last)"
        for k, v in value.items():
            child = f"{path}[{k!r}]" if field in _NAMED else (f"{path}.{k}" if path else k)
            found = _first_repeated(v, child, k)
            if found is not None:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = _first_repeated(item, f"{path}[{i}]")
            if found is not None:
                return found
    return None


def read_seed_files(directory: str | os.PathLike[str]) -> SeedFiles:
    """Read corpus.json, queries.json and profiles.json from ``directory``.

    Examples
    --------
    >>> read_seed_files("/nonexistent")
    Traceback (most recent call last):
    ...
    arecall.core.errors.ArecallError: /nonexistent/corpus.json: file not found
    """
    root = Path(directory)
    paths = [root / name for name, _ in FILES]
    datasets, queries, profiles = (
        read_seed_member(p, key) for p, (_, key) in zip(paths, FILES, strict=True)
    )
    seed = SeedFiles(datasets, queries, profiles, (str(paths[0]), str(paths[1]), str(paths[2])))
    check_seed_values(seed)
    return seed


def check_seed_values(seed: SeedFiles) -> None:
    """Refuse blank queries, relevant ids that are not strings and blank principal names.

    Why here: the seed indexes a query of spaces as nothing and a principal ``""`` as a name,
    and a relevant id ``["ds-0"]`` crashed set membership; the BEIR reader refuses all three.
    Records of the wrong shape (not an object, a missing field) are left to the collection
    builder, which names them.

    Examples
    --------
    >>> check_seed_values(SeedFiles([], [{"query": " ", "relevant": []}], {}, ("c", "q", "p")))
    Traceback (most recent call last):
    ...
    arecall.core.errors.ArecallError: q: queries[0].query: must be a non-empty string, got ' '
    >>> check_seed_values(SeedFiles([], [{"query": "a", "relevant": [["d"]]}], {}, ("c", "q", "p")))
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    arecall.core.errors.ArecallError: q: queries[0].relevant[0]: must be a dataset id ..., got ['d']
    """
    _, queries_file, profiles_file = seed.files
    for i, query in enumerate(seed.queries if isinstance(seed.queries, list) else ()):
        if not isinstance(query, dict):
            continue
        where = f"{queries_file}: queries[{i}]"
        text = query.get("query")
        if isinstance(text, str) and not text.strip():
            raise ArecallError(f"{where}.query: must be a non-empty string, got {text!r}")
        relevant = query.get("relevant")
        for j, doc in enumerate(relevant if isinstance(relevant, list) else ()):
            if not isinstance(doc, str) or not doc:
                raise ArecallError(
                    f"{where}.relevant[{j}]: must be a dataset id (a non-empty string), got {doc!r}"
                )
    for name in seed.profiles if isinstance(seed.profiles, dict) else ():
        if not name.strip():
            raise ArecallError(
                f"{profiles_file}: profiles[{name!r}]: a principal name must be non-empty"
            )
