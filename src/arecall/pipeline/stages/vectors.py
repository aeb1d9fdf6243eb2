"""Stage `vectors`: verity's filtered-vector-search experiment, the ``vector_search`` section.

verity-retrieval 0.1.1's generator (``vector_search.corpus``, conf/corpus/vectors.yaml) on a
faiss index (``vector_search.index``, conf/index/hnsw.yaml by default) with the auto planner's
rows. The section is part of every composed configuration, so DVC (params.yaml, declared as this
stage's params) and ``arecall run`` run the same experiment with the same settings.

The experiment's outputs depend only on the ``vector_search`` section, the code and the
libraries, yet every ``arecall run`` would spend seconds (faiss, a graph build, a plot) to write
the same bytes again. So its outputs are kept in a cache shared by runs, content-addressed by
the section, a digest of the ``arecall`` package's sources and the versions of the libraries
that compute or draw them (`cache_key`): an unchanged experiment is copied, not recomputed, and
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
from collections.abc import Callable, Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any

import pandas as pd

from arecall.io.atomic import write_text, write_with
from arecall.pipeline.layout import Layout
from arecall.pipeline.stages import run_stage
from arecall.pipeline.vector_search import curve_frame, run_vector_corpus

__all__ = ["CACHE_ENV", "cache_dir", "cache_key", "vector_search"]

#: Where the cache lives (``off`` or ``0``: no cache).
CACHE_ENV = "ARECALL_CACHE_DIR"
#: The libraries whose versions can change the experiment's numbers or the plot's bytes.
_LIBRARIES = ("faiss-cpu", "numpy", "pandas", "matplotlib", "lancedb", "pyarrow")
#: The report files of the experiment, by `Layout` attribute (all published on a hit).
_FILES = ("vector_table", "vector_csv", "vector_curve", "vector_plot")
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
    root = Path(__file__).resolve().parents[2]
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in _LIBRARIES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = ""
    return out


def cache_key(section: Mapping[str, Any]) -> str:
    """The content address of an experiment: its section, the package's code, the libraries.

    Examples
    --------
    >>> a = cache_key({"corpus": {"n_docs": 300}, "index": {"name": "exact"}})
    >>> a == cache_key({"index": {"name": "exact"}, "corpus": {"n_docs": 300}}), len(a)
    (True, 64)
    >>> a == cache_key({"corpus": {"n_docs": 301}, "index": {"name": "exact"}})
    False
    """
    text = json.dumps(
        {"vector_search": section, "code": _sources_digest(), "libraries": _versions()},
        sort_keys=True,
        default=str,
        separators=(",", ":"),
    )
    return hashlib.sha256(text.encode()).hexdigest()


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _load(entry: Path) -> tuple[dict[str, Any], pd.DataFrame] | None:
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


def _store(root: Path, key: str, layout: Layout, table: pd.DataFrame) -> None:
    """Publish an entry: build it in a private directory, rename it into place (best effort)."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{key[:12]}.", dir=root))
    except OSError:
        return  # an unwritable cache only costs time
    try:
        files = {}
        for name in _FILES:
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


def _copier(source: Path) -> Callable[[Path], None]:
    """A `write_with` writer copying ``source``'s bytes (published atomically by it)."""

    def copy(tmp: Path) -> None:
        shutil.copyfile(source, tmp)

    return copy


def _discard(entry: Path) -> None:
    """Move a damaged entry out of the way (atomically), then delete it."""
    aside = entry.with_name(f".{entry.name}.damaged.{os.getpid()}")
    with suppress(OSError):
        os.rename(entry, aside)
        shutil.rmtree(aside, ignore_errors=True)


def vector_search(cfg: Mapping[str, Any], layout: Layout) -> pd.DataFrame:
    """Run the ``vector_search`` section's experiment; write its table, CSV, curve and plot.

    Reads only ``cfg["vector_search"]`` (dvc.yaml declares exactly that section). An unchanged
    experiment's outputs come from the cache (see the module docstring): same bytes.
    """
    section = cfg["vector_search"]
    root = cache_dir()
    key = cache_key(section) if root is not None else ""
    if root is not None:
        entry = root / key
        hit = _load(entry) if entry.is_dir() else None
        if hit is not None:
            _, table = hit
            for name in _FILES:
                target = getattr(layout, name)
                write_with(target, _copier(entry / target.name))
            table.attrs.update(cache="hit", cache_key=key)
            return table
        if entry.is_dir():
            _discard(entry)
    table = _compute(section, layout)
    if root is not None:
        _store(root, key, layout, table)
        table.attrs.update(cache="miss", cache_key=key)
    return table


def _compute(section: Mapping[str, Any], layout: Layout) -> pd.DataFrame:
    """The experiment itself, written to the layout."""
    from arecall.vector import deterministic_columns, plot_experiment, render_markdown

    table = run_vector_corpus(section)
    corpus = section["corpus"]
    caption = (
        f"corpus `vectors` · index `{section['index']['name']}`: "
        f"{corpus['n_docs']:,} × {corpus['dims']} vectors, "
        f"{corpus['n_queries']} queries, k = {table.attrs['k']}"
    )
    steady = deterministic_columns(table)
    write_text(layout.vector_table, f"{caption}\n\n" + render_markdown(table))
    write_with(layout.vector_csv, lambda tmp: steady.to_csv(tmp, index=False, lineterminator="\n"))
    curve = curve_frame(table)
    write_with(layout.vector_curve, lambda tmp: curve.to_csv(tmp, index=False, lineterminator="\n"))
    plot_experiment(table, layout.vector_plot)
    return table


def _show(table: pd.DataFrame, layout: Layout) -> None:
    print(layout.vector_table.read_text(encoding="utf-8"))
    print(table[["selectivity", "mode", "qps"]].to_string(index=False))


if __name__ == "__main__":
    raise SystemExit(run_stage(vector_search, show=_show))
