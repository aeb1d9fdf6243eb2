"""verity's filtered-search table, on faiss, with ``auto`` rows and Authorized-Recall columns.

``experiment`` regenerates verity's corpus, builds the index, and for each selectivity with at
least k matching documents scores every placement against the exhaustive oracle. Its arguments
are plain values (sizes, seed, selectivities, k, index parameters) so a Hydra config maps onto
it one key per argument. ``audit`` does the same for a real vector store's post- and pre-filter.

Reproducibility: every column except ``qps`` is a deterministic function of the arguments (the
HNSW graph is built single-threaded, the ``auto`` planner decides from distance counts, not
timings). ``qps`` is wall-clock and varies run to run, so it is listed in ``TIMING_COLUMNS``,
left out of ``render_markdown`` unless asked for, and should be written to its own file;
``deterministic_columns(df)`` drops it. The ``audit`` table is the exception: LanceDB builds
its graph from an unseeded generator, so its rows vary slightly between runs
(``arecall.vector.stores.lancedb``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from arecall.core.errors import ArecallError
from arecall.io.atomic import atomic_path
from arecall.vector._checks import check_k, check_mask, check_positive_int, check_selectivities
from arecall.vector._timing import clock
from arecall.vector.generator import BenchData, generate
from arecall.vector.index import Hits, VectorIndex, build_index
from arecall.vector.oracle import score_hits
from arecall.vector.placement import (
    DEFAULT_CALIBRATION_QUERIES,
    DEFAULT_GRAPH_COST,
    AutoPlanner,
    answer,
    check_placements,
)
from arecall.vector.schema import (
    SEARCH_PLACEMENTS,
    SELECTIVITIES,
    IndexConfig,
    VectorsCorpusConfig,
    unanswered_placement,
)
from arecall.vector.stores import Below, VectorStore, make_store, store_from_config

__all__ = [
    "TABLE_COLUMNS",
    "TIMING_COLUMNS",
    "audit",
    "deterministic_columns",
    "experiment",
    "measure_placements",
    "measure_store",
    "plot_experiment",
    "render_markdown",
]

#: Columns of every table, in order; ``qps`` last.
TABLE_COLUMNS: tuple[str, ...] = (
    "selectivity",
    "matching",
    "mode",
    "returned",
    "recall",
    "short",
    "arecall",
    "u_at_k",
    "plan",
    "qps",
)
#: Wall-clock columns: never part of a byte-identical artifact.
TIMING_COLUMNS: tuple[str, ...] = ("qps",)


def _row(
    mode: str,
    hits: Hits,
    plan: str,
    seconds: float,
    oracle: Hits,
    mask: npt.NDArray[np.bool_],
    k: int,
    unfiltered: Hits,
) -> dict[str, Any]:
    """One table row (no ``selectivity``): ``hits`` scored against the oracle, and its speed."""
    score = score_hits(hits, oracle, mask, k, unfiltered)
    return {
        "matching": int(mask.sum()),
        "mode": mode,
        "returned": score.returned,
        "recall": score.recall,
        "short": score.short,
        "arecall": score.arecall,
        "u_at_k": score.u_at_k,
        "plan": plan,
        "qps": oracle.ids.shape[0] / max(seconds, 1e-9),
    }


def _placement_rows(
    answer_with: Callable[[str], tuple[Hits, str]],
    oracle_scan: Callable[[], Hits],
    mask: npt.NDArray[np.bool_],
    *,
    k: int,
    modes: Sequence[str],
    unfiltered: Hits,
) -> list[dict[str, Any]]:
    """Score each placement for one filter: ``pre`` is the timed oracle scan, the rest
    ``answer_with(mode)`` (hits and plan), each timed."""
    oracle, oracle_seconds = clock(oracle_scan)
    rows = []
    for mode in modes:
        if mode == "pre":
            hits, plan, seconds = oracle, "scan", oracle_seconds
        else:
            (hits, plan), seconds = clock(answer_with, mode)
        rows.append(_row(mode, hits, plan, seconds, oracle, mask, k, unfiltered))
    return rows


def measure_placements(
    index: VectorIndex,
    queries: Any,
    allowed: Any,
    *,
    k: int = VectorsCorpusConfig.k,
    placements: Sequence[str] = SEARCH_PLACEMENTS,
    planner: AutoPlanner | None = None,
    ef_search: int | None = None,
    unfiltered: Hits | None = None,
) -> list[dict[str, Any]]:
    """Score each placement for one principal (one authorization mask) over a query batch.

    The oracle is the exact scan of the authorized subset; it is also the ``pre`` row, timed.

    Parameters
    ----------
    index : VectorIndex
        Any index from :func:`~arecall.vector.index.build_index` (e.g. over LSA vectors).
    queries : array_like, shape (n_queries, dims)
    allowed : ndarray of bool, shape (n_docs,)
        The principal's authorization mask.
    k : int
    placements : sequence of str
        Any of ``post``, ``pushdown``, ``pre``, ``auto``.
    planner : AutoPlanner, optional
        Required for ``auto`` (:func:`~arecall.vector.placement.calibrate_auto`).
    ef_search : int, optional
        efSearch for ``post``/``pushdown`` (default: the index's).
    unfiltered : Hits, optional
        The exact unfiltered top-k of ``queries`` (for U@K); computed when omitted.

    Returns
    -------
    list of dict
        One row per placement with ``matching``, ``mode`` and the metric columns of
        ``TABLE_COLUMNS`` (no ``selectivity``).

    Examples
    --------
    >>> data = generate(200, 8, 5)
    >>> idx = build_index(data.vectors)
    >>> rows = measure_placements(idx, data.queries, data.mask(0.3), k=5, placements=["pre"])
    >>> rows[0]["mode"], rows[0]["returned"], rows[0]["recall"]
    ('pre', 5.0, 1.0)
    """
    k = check_k(k)
    q = index.check_queries(queries)
    mask = check_mask(allowed, index.n_docs)
    modes = check_placements(placements)
    if "auto" in modes and planner is None:
        raise ArecallError("placement=auto: needs a planner from calibrate_auto()")
    if unfiltered is None:
        unfiltered = index.exact(q, k)
    return _placement_rows(
        lambda mode: answer(mode, index, q, k, mask, ef_search=ef_search, planner=planner),
        lambda: index.exact(q, k, mask),
        mask,
        k=k,
        modes=modes,
        unfiltered=unfiltered,
    )


def measure_store(
    store: VectorStore,
    oracle_index: VectorIndex,
    queries: Any,
    where: Below,
    attributes: Mapping[str, npt.NDArray[Any]],
    *,
    k: int = VectorsCorpusConfig.k,
    placements: Sequence[str] = SEARCH_PLACEMENTS,
    unfiltered: Hits | None = None,
) -> list[dict[str, Any]]:
    """Score each placement a built ``store`` answers for one filter, against the oracle.

    ``pre`` is the exact scan of the documents ``where`` admits, by ``oracle_index`` (an index
    over the same vectors), timed; every other placement is ``store.place``. ``auto`` needs
    ``store.calibrate`` first.

    Examples
    --------
    >>> from arecall.vector.stores import FaissStore
    >>> data = generate(200, 8, 5)
    >>> store = FaissStore()
    >>> store.build(data.vectors, {"draw": data.draws})
    >>> rows = measure_store(store, build_index(data.vectors, kind="exact"), data.queries,
    ...     Below("draw", 0.3), {"draw": data.draws}, k=5, placements=["post", "pre"])
    >>> [(row["mode"], row["plan"]) for row in rows]
    [('post', 'ef=64'), ('pre', 'scan')]
    """
    k = check_k(k)
    q = oracle_index.check_queries(queries)
    mask = where.mask(attributes)
    modes = _store_placements(store, placements)
    if unfiltered is None:
        unfiltered = oracle_index.exact(q, k)
    return _placement_rows(
        lambda mode: store.place(mode, q, k, where),
        lambda: oracle_index.exact(q, k, mask),
        mask,
        k=k,
        modes=modes,
        unfiltered=unfiltered,
    )


def _store_placements(store: VectorStore, placements: Sequence[str]) -> tuple[str, ...]:
    modes = check_placements(placements)
    problem = unanswered_placement(store.name, store.placements, modes)
    if problem is not None:
        raise ArecallError(f"vector_search.index.placements: {problem}")
    return modes


def _frame(rows: Iterable[dict[str, Any]], k: int) -> pd.DataFrame:
    df = pd.DataFrame(list(rows), columns=list(TABLE_COLUMNS))
    df.attrs["k"] = k
    return df


def experiment(
    *,
    n_docs: int = VectorsCorpusConfig.n_docs,
    dims: int = VectorsCorpusConfig.dims,
    n_queries: int = VectorsCorpusConfig.n_queries,
    seed: int = VectorsCorpusConfig.seed,
    selectivities: Sequence[float] = SELECTIVITIES,
    k: int = VectorsCorpusConfig.k,
    index: str = IndexConfig.name,
    m: int = IndexConfig.m,
    ef_construction: int = IndexConfig.ef_construction,
    ef_search: int = IndexConfig.ef_search,
    placements: Sequence[str] = SEARCH_PLACEMENTS,
    target_recall: float = IndexConfig.target_recall,
    confidence: float = IndexConfig.confidence,
    store: str = IndexConfig.store,
    graph_cost: float = DEFAULT_GRAPH_COST,
    n_calibration: int = DEFAULT_CALIBRATION_QUERIES,
    threads: int | None = None,
    data: BenchData | None = None,
) -> pd.DataFrame:
    """verity's table: every placement at every selectivity, against the oracle, on a store.

    Defaults are verity 0.1.1's (2,000 × 128, 50 queries, k=10, M=16, efSearch=64, seed 42,
    selectivities 1–100%) on faiss. A selectivity with fewer than ``k`` matching documents is
    skipped, as verity does. ``auto`` is calibrated once, on ``n_calibration`` held-out queries.

    Parameters
    ----------
    n_docs, dims, n_queries, seed : int
        The generator's arguments.
    selectivities : sequence of float
        Each in (0, 1].
    k : int
    index : {"hnsw", "exact"}
    m, ef_construction, ef_search : int
        HNSW parameters; ``ef_search`` must be ≥ k.
    placements : sequence of str
        Each answered by the store (``pre``, the oracle scan, always is).
    target_recall, confidence, graph_cost : float
        ``auto`` planner parameters (see :mod:`arecall.vector.placement`): the recall it
        promises, per batch, with that confidence.
    store : str
        A name in ``arecall.vector.stores.STORES`` holding the index (``faiss`` by default).
    n_calibration : int
        Held-out queries for the ``auto`` calibration.
    threads : int, optional
        faiss OpenMP threads.
    data : BenchData, optional
        Use this corpus instead of generating one (the size arguments are then ignored).

    Returns
    -------
    pandas.DataFrame
        Columns ``TABLE_COLUMNS``; ``df.attrs["k"] == k``.

    Examples
    --------
    >>> df = experiment(n_docs=300, dims=16, n_queries=5, selectivities=[0.1, 1.0])
    >>> df[df["mode"] == "pre"]["recall"].tolist()
    [1.0, 1.0]
    """
    from arecall.vector.index import set_threads

    k = check_k(k)
    sels = check_selectivities(selectivities)
    modes = check_placements(placements)
    if data is None and k > check_positive_int("n_docs", n_docs):
        raise ArecallError(f"k={k}: exceeds n_docs={n_docs}")
    if index == "hnsw" and check_positive_int("ef_search", ef_search) < k:
        raise ArecallError(f"ef_search={ef_search}: must be at least k={k}")
    set_threads(threads)
    if data is None:
        data = generate(n_docs, dims, n_queries, seed)
    if k > data.n_docs:
        raise ArecallError(f"k={k}: exceeds n_docs={data.n_docs}")
    config = IndexConfig(
        name=index,
        m=m,
        ef_construction=ef_construction,
        ef_search=ef_search,
        placements=list(modes),
        target_recall=target_recall,
        confidence=confidence,
        store=store,
    )
    oracle_index = build_index(data.vectors, kind="exact")
    attributes = {"draw": data.draws}
    rows = []
    with store_from_config(config) as adapter:
        _store_placements(adapter, modes)
        adapter.build(data.vectors, attributes)
        if "auto" in modes:
            adapter.calibrate(
                k,
                data.calibration_queries(n_calibration),
                target_recall=target_recall,
                graph_cost=graph_cost,
                confidence=confidence,
            )
        unfiltered = oracle_index.exact(data.queries, k)
        for s in sels:
            where = Below("draw", s)
            if int(where.mask(attributes).sum()) < k:
                continue
            for row in measure_store(
                adapter,
                oracle_index,
                data.queries,
                where,
                attributes,
                k=k,
                placements=modes,
                unfiltered=unfiltered,
            ):
                rows.append({"selectivity": s, **row})
    return _frame(rows, k)


def audit(
    *,
    store: str = "lancedb",
    n_docs: int = VectorsCorpusConfig.n_docs,
    dims: int = VectorsCorpusConfig.dims,
    n_queries: int = VectorsCorpusConfig.n_queries,
    seed: int = VectorsCorpusConfig.seed,
    selectivities: Sequence[float] = SELECTIVITIES,
    k: int = VectorsCorpusConfig.k,
    store_params: dict[str, Any] | None = None,
    data: BenchData | None = None,
) -> pd.DataFrame:
    """The same table for a real store: its post-filter and pre-filter against the same oracle.

    Rows have mode ``"<store>/post"`` (``prefilter=False``) and ``"<store>/pre"``
    (``prefilter=True``); ``u_at_k`` and the oracle are computed exactly as in ``experiment``.

    Parameters
    ----------
    store : str
        A name in ``arecall.vector.stores.STORES``.
    store_params : dict, optional
        Keyword arguments of the adapter (e.g. ``{"index_type": "IVF_PQ"}``).
    n_docs, dims, n_queries, seed, selectivities, k, data
        As for :func:`experiment`.

    Returns
    -------
    pandas.DataFrame

    Examples
    --------
    >>> df = audit(n_docs=300, dims=16, n_queries=4, selectivities=[1.0])
    >>> df["mode"].tolist()
    ['lancedb/post', 'lancedb/pre']
    """
    k = check_k(k)
    sels = check_selectivities(selectivities)
    if data is None:
        data = generate(n_docs, dims, n_queries, seed)
    if k > data.n_docs:
        raise ArecallError(f"k={k}: exceeds n_docs={data.n_docs}")
    oracle_index = build_index(data.vectors, kind="exact")
    unfiltered = oracle_index.exact(data.queries, k)
    attributes = {"draw": data.draws}
    rows = []
    with make_store(store, **(store_params or {})) as adapter:
        adapter.build(data.vectors, attributes)
        for s in sels:
            where = Below("draw", s)
            mask = where.mask(attributes)
            if int(mask.sum()) < k:
                continue
            oracle = oracle_index.exact(data.queries, k, mask)
            for label, prefilter in (("post", False), ("pre", True)):
                hits, seconds = clock(adapter.search, data.queries, k, where, prefilter=prefilter)
                row = _row(
                    f"{adapter.name}/{label}",
                    hits,
                    f"prefilter={prefilter}",
                    seconds,
                    oracle,
                    mask,
                    k,
                    unfiltered,
                )
                rows.append({"selectivity": s, **row})
    return _frame(rows, k)


def deterministic_columns(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` without the wall-clock columns (``TIMING_COLUMNS``): safe to write byte-identically.

    Examples
    --------
    >>> list(deterministic_columns(pd.DataFrame({"recall": [1.0], "qps": [9.0]})).columns)
    ['recall']
    """
    return df.drop(columns=[c for c in TIMING_COLUMNS if c in df.columns])


def _percent(s: float) -> str:
    return f"{s * 100:.3g}%"


def render_markdown(df: pd.DataFrame, *, k: int | None = None, include_qps: bool = False) -> str:
    """Render a table from ``experiment``/``audit`` as Markdown, in verity's layout.

    A ⚠️ marks a row that is not correct in verity's sense (some query short, or recall
    ≤ 0.999). QPS is appended only with ``include_qps`` (it is not reproducible). A table of
    principals (`arecall.vector.workload.principal_table`) leads with its ``principal`` column
    and shows each one's global-local selectivity (``GLS``) beside its selectivity.

    Examples
    --------
    >>> df = experiment(n_docs=300, dims=16, n_queries=5, selectivities=[1.0], placements=["pre"])
    >>> print(render_markdown(df), end="")
    | selectivity | matching | mode | returned / 10 | recall | short | ARecall@10 | U@10 | plan |
    |---|---|---|---|---|---|---|---|---|
    | 100% | 300 | `pre` | 10.00 | 1.000 | 0% | 1.000 | 0.000 | scan |
    """
    k = int(df.attrs.get("k", 10)) if k is None else check_k(k)
    principals, gls = "principal" in df.columns, "gls" in df.columns
    header = [
        *(["principal"] if principals else []),
        "selectivity",
        *(["GLS"] if gls else []),
        "matching",
        "mode",
        f"returned / {k}",
        "recall",
        "short",
        f"ARecall@{k}",
        f"U@{k}",
        "plan",
    ]
    if include_qps:
        header.append("QPS")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    records: list[dict[Any, Any]] = df.to_dict("records")
    for row in records:
        correct = float(row["short"]) == 0.0 and float(row["recall"]) > 0.999
        cells = [
            *([str(row["principal"])] if principals else []),
            _percent(float(row["selectivity"])),
            *([f"{float(row['gls']):.2f}"] if gls else []),
            str(int(row["matching"])),
            f"`{row['mode']}`",
            f"{float(row['returned']):.2f}",
            f"{float(row['recall']):.3f}",
            f"{float(row['short']):.0%}" + ("" if correct else " ⚠️"),
            f"{float(row['arecall']):.3f}",
            f"{float(row['u_at_k']):.3f}",
            str(row["plan"]),
        ]
        if include_qps:
            cells.append(f"{float(row['qps']):,.0f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot_experiment(
    df: pd.DataFrame, path: str | os.PathLike[str], *, k: int | None = None
) -> None:
    """Plot returned/k and recall against selectivity, one line per mode, to a PNG.

    Uses matplotlib's Agg canvas directly (no pyplot, no global backend switch) and strips the
    PNG's software tag, so equal tables give byte-identical files. Written atomically.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> df = experiment(n_docs=300, dims=16, n_queries=5, selectivities=[0.3, 1.0])
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "vector.png"
    >>> plot_experiment(df, out)
    >>> out.read_bytes()[:4]
    b'\\x89PNG'
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    k = int(df.attrs.get("k", 10)) if k is None else check_k(k)
    if df.empty:
        raise ArecallError("plot: the table is empty (every selectivity had fewer than k matches)")
    fig = Figure(figsize=(9, 3.6), dpi=100)
    FigureCanvasAgg(fig)
    panels = fig.subplots(1, 2)
    sels: npt.NDArray[np.float64] = np.sort(df["selectivity"].unique())
    for ax, column, title in (
        (panels[0], "returned", f"results returned / k (k={k})"),
        (panels[1], "recall", f"recall@{k} vs exhaustive oracle"),
    ):
        for i, mode in enumerate(dict.fromkeys(df["mode"])):
            part = df[df["mode"] == mode].sort_values("selectivity")
            values = part[column] / k if column == "returned" else part[column]
            # Distinct markers and dashes, hollow markers: coinciding lines (pre and auto
            # both at 1.0) stay visible.
            ax.plot(
                part["selectivity"],
                values,
                marker="osD^v<>"[i % 7],
                linestyle=("-", "--", ":", "-.")[i % 4],
                markersize=9 - 1.5 * (i % 4),
                markerfacecolor="none",
                label=str(mode),
            )
        ax.set_xscale("log")
        ax.set_xticks(sels, [_percent(float(s)) for s in sels])
        ax.minorticks_off()
        ax.set_ylim(-0.03, 1.05)
        ax.set_xlabel("selectivity (fraction of corpus authorized)")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
    panels[1].legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", metadata={"Software": None})
