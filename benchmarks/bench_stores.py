"""The same vector experiment on every store under a correlated ACL: faiss, Chroma, LanceDB,
Milvus Lite.

    python benchmarks/bench_stores.py                    # 20,000 vectors, 200 queries (~3 min)
    python benchmarks/bench_stores.py --n 5000 --queries 50

The corpora are `arecall.vector.adversarial`'s clustered ones (200 Gaussian clusters; the filter
at selectivity s authorizes whole clusters): ``clustered-anti`` asks from clusters that are never
authorized below 100%, ``clustered-corr`` from all clusters. Each store builds its own HNSW graph
with the same parameters (M, efConstruction, efSearch) and answers ``post`` (its unfiltered
top-k minus the unauthorized) and ``pushdown`` (its own filtered search); ``pre`` is the exact
scan of the authorized subset, the oracle every answer is scored against. Per cell: returned/k,
recall@k and the cost of a pushdown query relative to the exact scan (wall time, so noisy:
compare within one run).
"""

from __future__ import annotations

import argparse

import pandas as pd

from arecall.vector.adversarial import adversarial_corpus
from arecall.vector.measurement import experiment

STORES = {
    "faiss": ["post", "pushdown", "pre", "auto"],
    "chroma": ["post", "pushdown", "pre"],
    "lancedb": ["post", "pushdown", "pre"],
    "milvus": ["post", "pushdown", "pre"],
}
SELECTIVITIES = [0.01, 0.1, 0.3, 1.0]


def run(n_docs: int, n_queries: int) -> pd.DataFrame:
    """Every store's experiment on both clustered corpora, one frame."""
    frames = []
    for corpus in ("clustered-anti", "clustered-corr"):
        data = adversarial_corpus(corpus, n_docs, 128, n_queries).data
        for store, modes in STORES.items():
            df = experiment(data=data, store=store, selectivities=SELECTIVITIES, placements=modes)
            frames.append(df.assign(corpus=corpus, store=store))
    return pd.concat(frames, ignore_index=True)


def table(out: pd.DataFrame) -> str:
    """Markdown: post (every store) and each store's pushdown as returned / recall / cost."""
    scan = out[out["mode"] == "pre"].set_index(["corpus", "store", "selectivity"])["qps"]
    lines = [
        "| corpus | s | "
        + " | ".join(f"{s} post" for s in STORES)
        + " | "
        + " | ".join(f"{s} pushdown" for s in STORES)
        + " |",
        "|---|---|" + "---|" * (2 * len(STORES)),
    ]
    for (corpus, s), cell in out.groupby(["corpus", "selectivity"], sort=False):
        rows = cell.set_index(["store", "mode"])
        post = [
            f"{rows.loc[(st, 'post'), 'returned']:.2f} / {rows.loc[(st, 'post'), 'recall']:.3f}"
            for st in STORES
        ]
        push = []
        for st in STORES:
            r = rows.loc[(st, "pushdown")]
            cost = scan[(corpus, st, s)] / r["qps"]
            push.append(f"{r['returned']:.2f} / {r['recall']:.3f} / {cost:.1f}×")
        lines.append(f"| {corpus} | {s:.0%} | " + " | ".join(post + push) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=20_000, help="vectors per corpus")
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    print(table(run(args.n, args.queries)))


if __name__ == "__main__":
    main()
