"""The pipeline's stages, one module each, with their bodies: generate → rank → filter → score →
prove → report (then track; vectors is the filtered-vector-search experiment).

Each module holds the stage function (``cfg, layout -> result``) that ``arecall run`` calls
in-process, and a ``__main__`` block that DVC runs (``python -m arecall.pipeline.stages.<name>``):
read ``params.yaml`` once, run the function on the repository layout, turn a user error into one
line. A stage's DVC deps are its module and what it imports, so a code change reruns exactly the
stages it can affect.

Both ways of running a stage go through `announced`, which says on stdout when the stage starts
(its name and the size of its work) and when it ends (seconds taken), as
``arecall: rank: 24 queries × 40 documents, retriever tfidf …`` then
``arecall: rank: done in 0.12 s``. stdout, like DVC's own "Running stage" lines: stderr stays the
channel of errors, where a user error is one ``arecall: error:`` line whatever ran before it.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from arecall.core.errors import ArecallError, print_error
from arecall.pipeline.layout import Layout

if TYPE_CHECKING:
    from arecall.pipeline.schema import ExperimentConfig

__all__ = [
    "PROGRESS_ENV",
    "announce_stages",
    "announced",
    "progress_shown",
    "run_stage",
    "stage_name",
    "work_of",
]

Stage = Callable[["ExperimentConfig", Layout], Any]

#: ``0`` silences the stage lines, ``1`` prints them from library calls too; unset: entry points.
PROGRESS_ENV = "ARECALL_PROGRESS"

_ENTRY_POINT: list[bool] = [False]


@contextmanager
def announce_stages() -> Iterator[None]:
    """Stage lines on inside the block: ``arecall run`` and each DVC stage's ``__main__`` run in it.

    A library call (`arecall.pipeline.run.run_in_memory`, a notebook) stays quiet unless
    ``ARECALL_PROGRESS=1``; a command always talks unless ``ARECALL_PROGRESS=0``.
    """
    before, _ENTRY_POINT[0] = _ENTRY_POINT[0], True
    try:
        yield
    finally:
        _ENTRY_POINT[0] = before


def progress_shown() -> bool:
    """Whether the stage lines are printed (on stdout): in a command, unless ``ARECALL_PROGRESS=0``.

    Examples
    --------
    >>> import os
    >>> os.environ["ARECALL_PROGRESS"] = "1"
    >>> progress_shown()
    True
    >>> del os.environ["ARECALL_PROGRESS"]
    """
    forced = os.environ.get(PROGRESS_ENV, "").strip()
    if forced in ("0", "1"):
        return forced == "1"
    return _ENTRY_POINT[0]


def stage_name(stage: Stage) -> str:
    """A stage function's name: its module's last part (``python -m`` runs it as __main__).

    Examples
    --------
    >>> from arecall.pipeline.stages.filter import filter_lists
    >>> stage_name(filter_lists)
    'filter'
    """
    module = stage.__module__
    if module == "__main__":
        spec = getattr(sys.modules["__main__"], "__spec__", None)
        module = spec.name if spec is not None else module
    return module.rsplit(".", 1)[-1]


def _collection_sizes(layout: Layout) -> dict[str, int]:
    """Documents, queries and principals of the run's collection, from the Parquet footers."""
    import pyarrow.parquet as pq

    sizes = {}
    for table in ("documents", "queries", "principals"):
        path = layout.corpus / f"{table}.parquet"
        sizes[table] = pq.read_metadata(path).num_rows if path.is_file() else 0
    return sizes


def work_of(name: str, cfg: ExperimentConfig, layout: Layout) -> str:
    """What stage ``name`` is about to do, in numbers a user can check against the corpus.

    Examples
    --------
    >>> from arecall.pipeline.config import default_config
    >>> work_of("generate", default_config(), Layout.run("/nonexistent"))
    'corpus discovery'
    """
    from arecall.pipeline.config import ks_of

    corpus = cfg.corpus
    if name == "generate":
        where = getattr(corpus, "path", None)
        size = getattr(corpus, "n_docs", None)
        return (
            f"corpus {corpus.name}"
            + (f" ({where})" if where else "")
            + (f", {size:,} documents" if isinstance(size, int) else "")
        )
    if name == "vectors":
        v = cfg.vector_search
        return (
            f"{v.corpus.n_docs:,} × {v.corpus.dims} vectors, "
            f"{v.corpus.n_queries:,} queries, index {v.index.name}"
        )
    if name == "index_search":
        return f"corpus {corpus.name}, index {cfg.index.name}"
    if name == "track":
        return "logging the run to MLflow"
    ks = ks_of(cfg)
    n = _collection_sizes(layout)
    pairs = n["principals"] * n["queries"]
    if name == "rank":
        return (
            f"{n['queries']:,} queries × {n['documents']:,} documents, "
            f"retriever {cfg.retriever.name}"
        )
    if name == "filter":
        return f"{n['principals']:,} principals × {n['queries']:,} queries, K ≤ {max(ks)}"
    if name == "score":
        return f"{pairs:,} query-principal pairs × {len(ks)} K"
    if name == "prove":
        cases = cfg.evaluation.proof.max_examples
        return f"property claims × {cases} cases, {pairs:,} pairs × {len(ks)} K of this run"
    if name == "report":
        return f"{len(ks)} K"
    return ""


@contextmanager
def announced(name: str, work: str) -> Iterator[None]:
    """Print the stage's start line (name, work) and, if it succeeds, its end line (seconds).

    Examples
    --------
    >>> import contextlib, io, os
    >>> os.environ["ARECALL_PROGRESS"] = "1"
    >>> with contextlib.redirect_stdout(io.StringIO()) as out:
    ...     with announced("report", "4 K"):
    ...         pass
    >>> del os.environ["ARECALL_PROGRESS"]
    >>> [line.rsplit(" ", 2)[0] for line in out.getvalue().splitlines()]
    ['arecall: report: 4', 'arecall: report: done in']
    """
    shown = progress_shown()
    if shown:
        print(f"arecall: {name}: {work} …" if work else f"arecall: {name} …", flush=True)
    start = time.perf_counter()
    yield
    if shown:
        seconds = time.perf_counter() - start
        print(f"arecall: {name}: done in {seconds:.2f} s", flush=True)


def run_announced(name: str, stage: Stage, cfg: ExperimentConfig, layout: Layout) -> Any:
    """Run one stage between its start and end lines (the work is measured only if shown)."""
    work = work_of(name, cfg, layout) if progress_shown() else ""
    with announced(name, work):
        return stage(cfg, layout)


def run_stage(stage: Stage, show: Callable[[Any, Layout], None] | None = None) -> int:
    """Run ``stage`` as DVC does, on params.yaml and the repository layout; return the exit status.

    ``show`` prints the stage's result for the console (e.g. the tables); user errors are one
    line and exit status 2. When it ran, for this DVC invocation, is kept for the track stage
    (`arecall.pipeline.invocation.record_stage`): the MLflow run's times are the pipeline's.
    """
    from arecall.pipeline.config import load_params
    from arecall.pipeline.invocation import record_stage

    try:
        with announce_stages():
            started = int(time.time() * 1000)
            layout = Layout.dvc()
            name = stage_name(stage)
            result = run_announced(name, stage, load_params("params.yaml"), layout)
            record_stage(name, started, int(time.time() * 1000))
            if show is not None:
                show(result, layout)
    except ArecallError as exc:
        return print_error(exc)
    return 0
