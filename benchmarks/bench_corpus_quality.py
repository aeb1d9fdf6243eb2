"""How hard is retrieval on ``corpus=synthetic``, and how large is the authorization gap? (issue 12)

    python benchmarks/bench_corpus_quality.py                        # 1k and 100k documents
    python benchmarks/bench_corpus_quality.py --sizes 1000000 --queries 1000

For each corpus size, the generator's defaults (only ``n_docs``, ``queries_per_domain`` and
``n_principals`` set), TF-IDF and BM25, through the library's own functions: `load_corpus`,
`make_retriever`, `rank_queries` (depth 100, with the principals' ACL), `place_all`,
`score_pairs` / `summarise` for the authorized figures and `arecall.evaluate.evaluate` for the
standard ones (ranx's conventions; graded nDCG). Figures:

* MRR (full ranking), P@1, Recall@100, nDCG@10 (graded gains) per retriever;
* the share of query–principal pairs with an authorized relevant document (R_A ≠ ∅);
* ARecall@K post and pre over those pairs and the gap Δ@K = pre − post, at K = 10 and 100.

The documented targets (`TARGETS`, held by tests/data/test_corpus_synthetic.py at small sizes) are
those of real ad-hoc collections with TF-IDF/BM25. Prints a Markdown table; ``--json`` writes the
figures too.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from arecall.core.placed_lists import place_all
from arecall.core.ragged import offsets
from arecall.core.ranking import Ranking, rank_queries
from arecall.core.scoring import score_pairs, summarise
from arecall.data.collection import Collection
from arecall.data.sources import load_corpus
from arecall.evaluate import evaluate
from arecall.io.trec import Qrels, Run
from arecall.retrievers import make_retriever

#: Documented ranges (inclusive) the generator's defaults must give, per retriever and overall.
TARGETS: dict[str, tuple[float, float]] = {
    "mrr": (0.3, 0.7),
    "recall@100": (0.3, 0.9),
    "authorized_share": (0.3, 1.0),
}
RETRIEVERS = ("tfidf", "bm25")
KS = (1, 10, 100)
CHUNK = 512  # queries scored at once (the rank stage's chunk_queries)


def corpus_config(n_docs: int, queries: int, principals: int, seed: int = 0) -> dict[str, Any]:
    """The generator's defaults at ``n_docs`` documents, about ``queries`` queries."""
    domains = 8  # the default n_domains: queries_per_domain follows from it
    return {
        "name": "synthetic",
        "seed": seed,
        "n_docs": n_docs,
        "queries_per_domain": max(1, queries // domains),
        "n_principals": principals,
    }


def _chunks(retriever: Any, texts: list[str]) -> Iterator[sp.spmatrix]:
    for start in range(0, len(texts), CHUNK):
        yield retriever.score(texts[start : start + CHUNK])


def _run(ranking: Ranking, collection: Collection) -> Run:
    """The ranking's head (what ``depth`` kept, best first) as a run for `evaluate`."""
    lengths = ranking.lengths
    ids = pa.array(collection.query_ids.astype(str).tolist(), type=pa.string())
    kept = np.flatnonzero(lengths > 0)
    doc_ids = pa.array(collection.documents["doc_id"].astype(str).tolist(), type=pa.string())
    return Run(
        query_ids=ids.take(pa.array(kept)),
        offsets=offsets(lengths[kept]),
        doc_codes=ranking.doc_index.astype(np.int64),
        doc_ids=doc_ids,
        scores=ranking.score.astype(np.float64),
        name="bench",
    )


def _qrels(collection: Collection) -> Qrels:
    q = collection.qrels
    judged: dict[str, dict[str, int]] = {}
    for qid, doc, rel in zip(
        q["query_id"].astype(str), q["doc_id"].astype(str), q["relevance"], strict=True
    ):
        judged.setdefault(qid, {})[doc] = int(rel)
    return Qrels.from_dict(judged)


def quality(
    collection: Collection, retriever: str, ks: Sequence[int] = KS
) -> dict[str, float | int]:
    """Standard and authorized figures of one retriever on one collection.

    Examples
    --------
    >>> c = load_corpus({"name": "synthetic", "n_docs": 400, "n_principals": 8})
    >>> f = quality(c, "bm25")
    >>> 0 < f["mrr"] <= 1 and f["pairs"] == 8 * 24
    True
    """
    k_max = max(ks)
    texts = collection.documents["text"].tolist()
    model = make_retriever({"name": retriever}).fit(texts)
    acl, rel = collection.acl_matrix(), collection.relevance_matrix()
    ranking = rank_queries(
        _chunks(model, collection.queries["text"].tolist()),
        n_queries=len(collection.queries),
        depth=k_max,
        acl=acl,
        k_max=k_max,
        relevance=rel,
    )
    lists = place_all(ranking, acl, k_max)
    pairs = summarise(
        score_pairs(ranking, lists, rel, acl, tuple(ks)), n_documents=len(collection.documents)
    )
    standard = evaluate(_run(ranking, collection), _qrels(collection), k=ks, significance=False)
    s = standard.summary()["k"]
    out: dict[str, float | int] = {
        "mrr": float(pairs["mrr"]),
        "p@1": s["1"]["precision"],
        f"recall@{k_max}": s[str(k_max)]["recall"],
        "ndcg@10": s["10"]["ndcg"],
        "pairs": pairs["pairs"],
        "authorized_share": pairs["k"][str(k_max)]["n_nonempty"] / pairs["pairs"],
    }
    for k in ks:
        if k in (10, k_max):
            row = pairs["k"][str(k)]
            out[f"post@{k}"] = row["arecall_post_nonempty"] or 0.0
            out[f"pre@{k}"] = row["arecall_pre_nonempty"] or 0.0
            out[f"gap@{k}"] = row["gap_nonempty"] or 0.0
    return out


def measure(
    n_docs: int, queries: int, principals: int, seed: int = 0
) -> tuple[dict[str, Any], dict[str, dict[str, float | int]]]:
    """Generate one corpus and measure both retrievers; returns (corpus facts, figures)."""
    start = time.perf_counter()
    collection = load_corpus(corpus_config(n_docs, queries, principals, seed))
    generate = time.perf_counter() - start
    rel = collection.relevance_matrix()
    facts = {
        "docs": len(collection.documents),
        "queries": len(collection.queries),
        "principals": len(collection.principals),
        "relevant_per_query": float(np.diff(rel.indptr).mean()),
        "generate_s": generate,
    }
    figures = {}
    for name in RETRIEVERS:
        start = time.perf_counter()
        figures[name] = quality(collection, name)
        figures[name]["seconds"] = time.perf_counter() - start
    return facts, figures


def table(results: Mapping[int, tuple[dict[str, Any], dict[str, dict[str, Any]]]]) -> str:
    """The figures as a Markdown table, one row per (size, retriever)."""
    head = (
        "| documents | queries | retriever | MRR | P@1 | Recall@100 | nDCG@10 | pairs with "
        "authorized relevant | ARecall@10 post → pre (Δ) | ARecall@100 post → pre (Δ) |"
    )
    lines = [head, "|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|"]
    for _, (facts, figures) in sorted(results.items()):
        for name, f in figures.items():
            lines.append(
                f"| {facts['docs']:,} | {facts['queries']:,} | {name} | {f['mrr']:.3f} | "
                f"{f['p@1']:.3f} | {f['recall@100']:.3f} | {f['ndcg@10']:.3f} | "
                f"{f['authorized_share']:.1%} | {f['post@10']:.3f} → {f['pre@10']:.3f} "
                f"({f['gap@10']:+.3f}) | {f['post@100']:.3f} → {f['pre@100']:.3f} "
                f"({f['gap@100']:+.3f}) |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 100_000])
    parser.add_argument("--queries", type=int, default=1_000, help="about this many queries")
    parser.add_argument("--principals", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    results = {}
    for n in args.sizes:
        results[n] = measure(n, args.queries, args.principals, args.seed)
        facts = results[n][0]
        print(
            f"  {n:,} documents: generated in {facts['generate_s']:.1f} s, "
            f"{facts['relevant_per_query']:.1f} relevant per query; "
            + ", ".join(f"{r} {f['seconds']:.1f} s" for r, f in results[n][1].items()),
            file=sys.stderr,
            flush=True,
        )
    print("targets: " + ", ".join(f"{k} in [{lo}, {hi}]" for k, (lo, hi) in TARGETS.items()))
    print(table(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({str(n): r for n, r in results.items()}, f, indent=2)


if __name__ == "__main__":
    main()
