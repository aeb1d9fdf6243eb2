"""The vector experiment's cache: content-addressed, shared by runs, published atomically.

The experiment's outputs depend only on the ``vector_search`` section, the code and the
libraries, yet every ``arecall run`` would spend seconds (faiss, a graph build, a plot) to write
the same bytes again. So its outputs are kept in a cache shared by runs, content-addressed by
the section, a digest of the ``arecall`` package's sources and the versions of the libraries
that compute or draw them — those of every experiment, and the chosen store's, as its entry in
`arecall.vector.stores.STORES` lists them (`cache_key`): an unchanged experiment is copied, not
recomputed, and
the reports are byte-identical either way. The wall-clock ``qps`` column (MLflow and the
console only, never a report) is then the one measured when the entry was made; the table says
so (``attrs["cache"]``) and the MLflow run carries the tag ``arecall.vectors_cache``.

The cache directory is ``$ARECALL_CACHE_DIR``, else ``$XDG_CACHE_HOME/arecall``, else
``~/.cache/arecall``; ``ARECALL_CACHE_DIR=off`` turns it off. Entries are published by renaming
a complete directory into place (atomic; concurrent runs each compute and one wins) and checked
against their recorded SHA-256 digests when read, so a damaged entry is recomputed, never used.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from contextlib import suppress
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from arecall.io.digest import files_digest, json_digest
from arecall.pipeline.layout import Layout
from arecall.vector.stores import STORES

if TYPE_CHECKING:
    from arecall.pipeline.schema import VectorSearchSection
    from arecall.vector.schema import VectorsCorpusConfig

__all__ = [
    "CACHE_ENV",
    "FILES",
    "cache_dir",
    "cache_key",
    "copier",
    "discard",
    "inputs_of",
    "lookup",
    "publish",
]

#: Where the cache lives (``off`` or ``0``: no cache).
CACHE_ENV = "ARECALL_CACHE_DIR"
#: The libraries whose versions can change any experiment's numbers or the plot's bytes (faiss:
#: the exact scan every placement is scored against); the store's own are its registry entry's.
_LIBRARIES = ("faiss-cpu", "numpy", "pandas", "matplotlib", "pyarrow")
#: The report files of the experiment, by `Layout` attribute (all published on a hit).
FILES = ("vector_table", "vector_csv", "vector_curve", "vector_plot")
_TABLE = "table.parquet"  # the full table, with its qps column
_MANIFEST = "manifest.json"


def cache_dir() -> Path | None:
    """The vector-experiment cache directory, or None when ``ARECALL_CACHE_DIR=off``.

    Examples
    --------
    >>> import os
    >>> os.environ["ARECALL_CACHE_DIR"] = "off"
    >>> cache_dir() is None
    True
    >>> del os.environ["ARECALL_CACHE_DIR"]
    """
    where = os.environ.get(CACHE_ENV, "").strip()
    if where.lower() in ("off", "0", "false", "no"):
        return None
    if where:
        return Path(where) / "vectors"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "arecall" / "vectors"


def _sources_digest() -> str:
    """SHA-256 of every source file of the ``arecall`` package (any code change: a new key)."""
    root = Path(__file__).resolve().parents[1]
    paths = sorted(root.rglob("*.py"))
    return files_digest((path.relative_to(root).as_posix(), path) for path in paths)


def _versions(section: VectorSearchSection) -> dict[str, str]:
    """The versions of every library the experiment ``section`` runs on ("" if not installed)."""
    import importlib.metadata

    stores = (section.index.store, *section.corpus.audit)
    out = {}
    for name in dict.fromkeys((*_LIBRARIES, *STORES.libraries(*stores))):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = ""
    return out


def inputs_of(corpus: VectorsCorpusConfig) -> list[tuple[str, Path]]:
    """The files a ``vector_search.corpus`` section reads (the user's vectors, ids, ACL,
    groups), named by their setting: their bytes are part of the cache key.

    Examples
    --------
    >>> from arecall.vector.schema import VectorsCorpusConfig
    >>> inputs_of(VectorsCorpusConfig())
    []
    """
    from arecall.io.vectors import ids_file

    files = []
    for key in ("documents", "queries", "acl", "groups"):
        value = getattr(corpus, key)
        if not value:
            continue
        path = Path(value)
        files.append((key, path))
        if key in ("documents", "queries") and path.suffix.lower() == ".npy":
            files.append((f"{key}.ids", ids_file(path)))
    return [(name, path) for name, path in files if path.is_file()]


def cache_key(section: VectorSearchSection, inputs: list[tuple[str, Path]] | None = None) -> str:
    """The content address of an experiment: its section, the bytes of the files it reads
    (``inputs``, `inputs_of`), the package's code, the libraries.

    Examples
    --------
    >>> from arecall.pipeline.config import default_config
    >>> section = default_config().vector_search
    >>> a = cache_key(section)
    >>> a == cache_key(default_config().vector_search), len(a)
    (True, 64)
    >>> section.corpus.n_docs += 1
    >>> a == cache_key(section)
    False
    """
    key: dict[str, Any] = {
        "vector_search": asdict(section),  # the plain values: the key of any run of it
        "code": _sources_digest(),
        "libraries": _versions(section),
    }
    if inputs:
        key["inputs"] = files_digest(inputs)
    return json_digest(key)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def lookup(entry: Path) -> tuple[dict[str, Any], pd.DataFrame] | None:
    """A complete, intact entry's manifest and table; None if absent or damaged."""
    try:
        manifest = json.loads((entry / _MANIFEST).read_text(encoding="utf-8"))
        for name, digest in manifest["files"].items():
            if _sha(entry / name) != digest:
                return None
        table = pd.read_parquet(entry / _TABLE)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    table.attrs.update(manifest["attrs"])
    return manifest, table


def publish(root: Path, key: str, layout: Layout, table: pd.DataFrame) -> None:
    """Publish an entry: build it in a private directory, rename it into place (best effort)."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{key[:12]}.", dir=root))
    except OSError:
        return  # an unwritable cache only costs time
    try:
        files = {}
        for name in FILES:
            source = getattr(layout, name)
            shutil.copyfile(source, work / source.name)
            files[source.name] = _sha(work / source.name)
        table.to_parquet(work / _TABLE, index=False)
        files[_TABLE] = _sha(work / _TABLE)
        manifest = {"files": files, "attrs": {"k": int(table.attrs["k"])}}
        (work / _MANIFEST).write_text(json.dumps(manifest, sort_keys=True), encoding="utf-8")
        os.rename(work, root / key)  # atomic; fails if another run published it first
    except OSError:
        pass
    finally:
        shutil.rmtree(work, ignore_errors=True)


def copier(source: Path) -> Callable[[Path], None]:
    """A `write_with` writer copying ``source``'s bytes (published atomically by it)."""

    def copy(tmp: Path) -> None:
        shutil.copyfile(source, tmp)

    return copy


def discard(entry: Path) -> None:
    """Move a damaged entry out of the way (atomically), then delete it."""
    aside = entry.with_name(f".{entry.name}.damaged.{os.getpid()}")
    with suppress(OSError):
        os.rename(entry, aside)
        shutil.rmtree(aside, ignore_errors=True)
