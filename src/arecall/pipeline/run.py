"""The pipeline's stages as plain functions: generate → rank → filter → score → prove → report.

Each stage reads what earlier stages wrote under a `Layout` and writes its own artifacts
atomically. DVC runs them one process per stage (`arecall.pipeline.stages`) with ``Layout.dvc()``;
``arecall run`` runs them in one process with ``Layout.run(dir)``. Same functions, same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp
from tqdm.auto import tqdm

from arecall.io.atomic import write_json, write_parquet, write_text, write_with
from arecall.data.collection import Collection
from arecall.pipeline.config import checked, default_config, ks_of
from arecall.data.sources import load_corpus
from arecall.core.errors import ArecallError
from arecall.core.placement import PlacedLists, place_all
from arecall.data.authorization import apply_profiles
from arecall.pipeline.proof import check_properties, check_run, failures
from arecall.core.ranking import Ranking, rank_queries
from arecall.pipeline.report import curve_frame, render_tables
from arecall.retrievers import make_retriever
from arecall.core.scoring import PairScores, score_pairs, summarise
from arecall.core.significance import delta_significance
from arecall.pipeline.vector_search import curve_frame as vector_curve_frame
from arecall.pipeline.vector_search import run_text_index, run_vector_corpus

__all__ = ["STAGES", "Layout", "run_all", "run_in_memory"]


@dataclass(frozen=True)
class Layout:
    """Where each artifact lives: intermediate data under ``data``, reports under ``reports``."""

    data: Path
    reports: Path

    @classmethod
    def dvc(cls, root: str | Path = ".") -> Layout:
        """The repository layout DVC tracks: data/ (not in git) and reports/ (committed)."""
        return cls(data=Path(root) / "data", reports=Path(root) / "reports")

    @classmethod
    def run(cls, directory: str | Path) -> Layout:
        """One directory per ``arecall run``: reports at its top, data in ``data/``."""
        return cls(data=Path(directory) / "data", reports=Path(directory))

    corpus = property(lambda self: self.data / "corpus")
    ranking = property(lambda self: self.data / "rank" / "ranking.npz")
    lists = property(lambda self: self.data / "filter" / "lists.npz")
    pairs = property(lambda self: self.data / "score" / "pairs.parquet")
    metrics = property(lambda self: self.reports / "metrics.json")
    proof = property(lambda self: self.reports / "proof.json")
    tables = property(lambda self: self.reports / "tables.md")
    curve = property(lambda self: self.reports / "arecall_at_k.csv")
    plot = property(lambda self: self.reports / "arecall_at_k.png")
    vector_table = property(lambda self: self.reports / "vector_search.md")
    vector_csv = property(lambda self: self.reports / "vector_search.csv")
    vector_curve = property(lambda self: self.reports / "vector_curve.csv")
    vector_plot = property(lambda self: self.reports / "vector_search.png")

    def report_files(self) -> dict[str, Path]:
        """The report files that exist (and are logged to MLflow), by name."""
        names = (
            "metrics",
            "proof",
            "tables",
            "curve",
            "plot",
            "vector_table",
            "vector_csv",
            "vector_curve",
            "vector_plot",
        )
        return {n: getattr(self, n) for n in names if getattr(self, n).is_file()}


# -- the stages ---------------------------------------------------------------------------------


def generate(cfg: Mapping[str, Any], layout: Layout) -> Collection:
    """Build the corpus and apply the authorization model; write the collection."""
    collection = apply_profiles(load_corpus(cfg["corpus"]), cfg["profiles"])
    collection.save(layout.corpus)
    return collection


def _score_chunks(retriever: Any, texts: list[str], chunk: int) -> Iterator[sp.spmatrix]:
    for start in tqdm(
        range(0, len(texts), chunk), desc="rank", unit="chunk", disable=len(texts) <= chunk
    ):
        yield retriever.score(texts[start : start + chunk])


def rank(cfg: Mapping[str, Any], layout: Layout) -> Ranking:
    """Fit the retriever on the documents and rank every query, as deep as exactness needs."""
    collection = Collection.load(layout.corpus)
    rcfg = cfg["retriever"]
    retriever = make_retriever(rcfg).fit(collection.documents["text"].tolist())
    n_docs = len(collection.documents)
    # a dense retriever's chunk is queries × documents floats: cap it at ~64M cells
    chunk = max(1, min(int(rcfg.get("chunk_queries") or 1024), (1 << 26) // max(n_docs, 1)))
    ranking = rank_queries(
        _score_chunks(retriever, collection.queries["text"].tolist(), chunk),
        n_queries=len(collection.queries),
        depth=rcfg.get("depth"),
        acl=collection.acl_matrix(),
        k_max=max(ks_of(cfg)),
        relevance=collection.relevance_matrix(),
    )
    ranking.save(layout.ranking)
    return ranking


def filter_lists(cfg: Mapping[str, Any], layout: Layout) -> PlacedLists:
    """Apply both placements for every principal and query at the largest K."""
    collection = Collection.load(layout.corpus)
    lists = place_all(Ranking.load(layout.ranking), collection.acl_matrix(), max(ks_of(cfg)))
    lists.save(layout.lists)
    return lists


def _pair_scores(cfg: Mapping[str, Any], layout: Layout) -> tuple[Collection, PairScores]:
    collection = Collection.load(layout.corpus)
    ranking = Ranking.load(layout.ranking)
    lists = PlacedLists.load(layout.lists)
    scores = score_pairs(
        ranking, lists, collection.relevance_matrix(), collection.acl_matrix(), ks_of(cfg)
    )
    return collection, scores


def score(cfg: Mapping[str, Any], layout: Layout) -> dict[str, Any]:
    """Score every pair, K and placement; write the per-pair table and metrics.json."""
    collection, scores = _pair_scores(cfg, layout)
    frame = scores.to_frame(collection.query_ids, collection.principal_names)
    write_parquet(layout.pairs, frame)
    metrics = summarise(scores, n_documents=len(collection.documents))
    _add_significance(metrics, scores, cfg["evaluation"].get("significance") or {})
    write_json(layout.metrics, metrics)
    return metrics


def _add_significance(metrics: dict[str, Any], scores: PairScores, scfg: Mapping[str, Any]) -> None:
    """Δ@K = pre − post per pair: paired bootstrap CI and randomization p, both conventions."""
    nonempty = scores.n_authorized_relevant > 0
    confidence = float(scfg.get("confidence", 0.95))
    resamples, seed = int(scfg.get("resamples", 2000)), int(scfg.get("seed", 0))

    def test(pre: np.ndarray, post: np.ndarray) -> dict[str, Any]:
        return delta_significance(
            pre, post, confidence=confidence, n_resamples=resamples, seed=seed
        )

    for i, k in enumerate(scores.ks):
        pre = scores.metrics["arecall_pre"][:, :, i]
        post = scores.metrics["arecall_post"][:, :, i]
        sig = {"gap": test(pre.ravel(), post.ravel())}
        if nonempty.any():
            sig["gap_nonempty"] = test(pre[nonempty], post[nonempty])
        metrics["k"][str(k)]["significance"] = sig


def prove(cfg: Mapping[str, Any], layout: Layout) -> dict[str, Any]:
    """Check the seed's claims (Hypothesis) and this run's own lists; fail on a counterexample."""
    pcfg = cfg["evaluation"].get("proof") or {}
    collection, scores = _pair_scores(cfg, layout)
    lists = PlacedLists.load(layout.lists)
    results = check_properties(int(pcfg.get("max_examples", 200)))
    results += check_run(
        lists,
        scores,
        collection.acl_matrix(),
        query_ids=collection.query_ids,
        principals=collection.principal_names,
        doc_ids=collection.doc_ids,
    )
    failed = failures(results)
    if failed:
        first = failed[0]
        raise ArecallError(
            f"prove: claim {first.claim!r} ({first.statement}) fails: "
            f"counterexample {first.counterexample}"
        )
    proof = {"passed": True, "claims": [r.as_dict() for r in results]}
    write_json(layout.proof, proof)
    return proof


def report(cfg: Mapping[str, Any], layout: Layout) -> str:
    """Write the Markdown tables, the curve's CSV and its PNG."""
    metrics = json.loads(layout.metrics.read_text(encoding="utf-8"))
    tables = render_tables(metrics, cfg)
    write_text(layout.tables, tables)
    curve = curve_frame(metrics)
    write_with(layout.curve, lambda tmp: curve.to_csv(tmp, index=False, lineterminator="\n"))
    write_with(layout.plot, lambda tmp: _plot(curve, tmp))
    return tables


def _plot(curve: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    ax.plot(curve["k"], curve["arecall_pre"], marker="o", label="ARecall@K, pre (filter first)")
    ax.plot(curve["k"], curve["arecall_post"], marker="s", label="ARecall@K, post (top-K first)")
    ax.plot(curve["k"], curve["recall"], linestyle="--", color="grey", label="Recall@K (blind)")
    ax.set_xlabel("K")
    ax.set_ylabel("mean over query-principal pairs")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, format="png", metadata={"Software": None})
    plt.close(fig)


def vector_search(cfg: Mapping[str, Any], layout: Layout) -> pd.DataFrame:
    """Filtered vector search on an index: corpus=vectors (verity's experiment), or a text
    corpus's dense embeddings with each principal's ACL as the filter."""
    from arecall.vector import deterministic_columns, plot_experiment, render_markdown

    if cfg["corpus"]["name"] == "vectors":
        table = run_vector_corpus(cfg)
        caption = (
            f"corpus `vectors` · index `{cfg['index']['name']}`: "
            f"{cfg['corpus']['n_docs']:,} × {cfg['corpus']['dims']} vectors, "
            f"{cfg['corpus']['n_queries']} queries, k = {table.attrs['k']}"
        )
    else:
        collection = Collection.load(layout.corpus)
        retriever = make_retriever(cfg["retriever"]).fit(collection.documents["text"].tolist())
        table = run_text_index(
            cfg,
            retriever,
            collection.queries["text"].tolist(),
            np.asarray(collection.acl_matrix().toarray(), dtype=bool),
            collection.principal_names,
            max(ks_of(cfg)),
        )
        caption = (
            f"corpus `{cfg['corpus']['name']}` · retriever `{cfg['retriever']['name']}` "
            f"· index `{cfg['index']['name']}`: one row per principal and placement"
        )
    steady = deterministic_columns(table)
    markdown = f"{caption}\n\n" + render_markdown(table)
    if "principal" in table:
        markdown += (
            "\nRows are in principal order: " + ", ".join(dict.fromkeys(table["principal"])) + ".\n"
        )
    write_text(layout.vector_table, markdown)
    write_with(layout.vector_csv, lambda tmp: steady.to_csv(tmp, index=False, lineterminator="\n"))
    curve = vector_curve_frame(table)
    write_with(layout.vector_curve, lambda tmp: curve.to_csv(tmp, index=False, lineterminator="\n"))
    plot_experiment(table, layout.vector_plot)
    return table


STAGES = {
    "generate": generate,
    "rank": rank,
    "filter": filter_lists,
    "score": score,
    "prove": prove,
    "report": report,
}


def run_all(cfg: Mapping[str, Any], layout: Layout) -> dict[str, Any]:
    """Run every stage in order in this process; return metrics, proof and tables."""
    cfg = checked(cfg)
    if cfg["corpus"]["name"] == "vectors":
        table = vector_search(cfg, layout)
        return {"tables": layout.vector_table.read_text(encoding="utf-8"), "vector": table}
    for stage in STAGES.values():
        stage(cfg, layout)
    vector = None
    if (cfg.get("index") or {}).get("name", "none") != "none":
        vector = vector_search(cfg, layout)
    tables = layout.tables.read_text(encoding="utf-8")
    if vector is not None:
        tables += "\n" + layout.vector_table.read_text(encoding="utf-8")
    return {
        "vector": vector,
        "metrics": json.loads(layout.metrics.read_text(encoding="utf-8")),
        "proof": json.loads(layout.proof.read_text(encoding="utf-8")),
        "tables": tables,
    }


def run_in_memory(cfg: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Run a configuration (default: conf/'s defaults) in a temporary directory.

    Examples
    --------
    >>> out = run_in_memory()
    >>> round(out["metrics"]["k"]["5"]["arecall_pre_nonempty"], 3)
    0.96
    """
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        return run_all(cfg if cfg is not None else default_config(), Layout.run(tmp))
