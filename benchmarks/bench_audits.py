"""The three stores' audits side by side: LanceDB, Chroma and Milvus Lite against one oracle.

    python benchmarks/bench_audits.py                      # 20,000 × 128, 200 queries (~4 min)
    python benchmarks/bench_audits.py --n 5000 --queries 50

Each store gets the same vectors and one attribute per corpus, builds its own index (HNSW,
M = 16, efConstruction = 40, searched at ef = 64) and answers each filter twice, as
`arecall.vector.measurement.audit` asks: its post-filter (the unfiltered top-k minus the
unauthorized: ``post``) and its own filtered search (``pre``, ``prefilter=True``). Every answer
is scored against the exact scan of the authorized subset. Corpora: verity's (a uniform filter,
the selectivities of the vector experiment) and the adversarial benchmark's correlated ones
(``clustered-anti``: queries from clusters never authorized below 100%; ``clustered-corr``:
from all clusters). A cell is returned/k / recall@k / short (the share of queries given fewer
than k while k were authorized).

``--probe`` adds what the tables cannot show by themselves — what each store does inside:

* unfiltered recall@10 at ef = 10, the smallest graph search (an HNSW walk at ef = k misses
  some neighbours; an exhaustive scan never does);
* a filtered query's time at 1% and at 100%, and the unfiltered one's, at ``n`` and at ``n/4``
  documents: a graph walk's time grows with log n, a scan's with n (wall clock, medians of
  ``--repeats``; compare within one run).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from arecall.vector import build_index
from arecall.vector.adversarial import adversarial_corpus
from arecall.vector.generator import generate
from arecall.vector.measurement import audit
from arecall.vector.stores import Below, make_store

STORES = ("lancedb", "chroma", "milvus")
SELECTIVITIES = [0.01, 0.03, 0.1, 0.3, 1.0]


def audits(n_docs: int, n_queries: int) -> pd.DataFrame:
    """Every store's audit on every corpus, one frame."""
    corpora = {
        "verity": generate(n_docs, 128, n_queries, 42),
        "clustered-anti": adversarial_corpus("clustered-anti", n_docs, 128, n_queries).data,
        "clustered-corr": adversarial_corpus("clustered-corr", n_docs, 128, n_queries).data,
    }
    frames = []
    for corpus, data in corpora.items():
        for store in STORES:
            df = audit(store=store, data=data, selectivities=SELECTIVITIES)
            frames.append(df.assign(corpus=corpus, store=store))
    return pd.concat(frames, ignore_index=True)


def table(out: pd.DataFrame) -> str:
    """Markdown: per corpus and selectivity, each store's post and pre cells side by side."""
    head = [f"{s} {m}" for s in STORES for m in ("post", "pre")]
    lines = [
        "| corpus | s | " + " | ".join(head) + " |",
        "|---|---|" + "---|" * len(head),
    ]
    for (corpus, s), cell in out.groupby(["corpus", "selectivity"], sort=False):
        rows = cell.set_index("mode")
        cells = []
        for store in STORES:
            for mode in ("post", "pre"):
                r = rows.loc[f"{store}/{mode}"]
                cells.append(f"{r['returned']:.2f} / {r['recall']:.3f} / {r['short']:.0%}")
        lines.append(f"| {corpus} | {s:.0%} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _median_time(fn: object, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def probe(n_docs: int, n_queries: int, repeats: int) -> str:
    """Unfiltered recall at ef = 10 and query times at n and n/4, per store (and faiss)."""
    lines = [
        "| store | recall@10 at ef=10 | ms/query 1% (n/4 → n) | ms/query 100% (n/4 → n) "
        "| ms/query unfiltered (n/4 → n) |",
        "|---|---|---|---|---|",
    ]
    for store in ("faiss", *STORES):
        cells: dict[str, list[float]] = {"1%": [], "100%": [], "none": []}
        recall = float("nan")
        for n in (n_docs // 4, n_docs):
            data = generate(n, 128, n_queries, 7)
            attributes = {"draw": data.draws}
            with make_store(store, ef_search=10) as small:
                small.build(data.vectors, attributes)
                if n == n_docs:
                    exact = build_index(data.vectors, kind="exact").exact(data.queries, 10)
                    got = small.search(data.queries, 10, Below("draw", 2.0), prefilter=False)
                    recall = float(
                        np.mean(
                            [
                                len(set(a) & set(b)) / 10
                                for a, b in zip(got.rows(), exact.rows(), strict=True)
                            ]
                        )
                    )
            with make_store(store) as s64:
                s64.build(data.vectors, attributes)
                for label, threshold, prefilter in (
                    ("1%", 0.01, True),
                    ("100%", 2.0, True),
                    ("none", 2.0, False),
                ):
                    seconds = _median_time(
                        lambda s=s64, q=data.queries, t=threshold, p=prefilter: s.search(
                            q, 10, Below("draw", t), prefilter=p
                        ),
                        repeats,
                    )
                    cells[label].append(1000 * seconds / n_queries)
        shown = [
            f"{cells[c][0]:.2f} → {cells[c][1]:.2f} ({cells[c][1] / cells[c][0]:.1f}×)"
            for c in ("1%", "100%", "none")
        ]
        lines.append(f"| {store} | {recall:.3f} | " + " | ".join(shown) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--n", type=int, default=20_000, help="vectors per corpus")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--probe", action="store_true", help="also what each store does inside")
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats per probe cell")
    args = parser.parse_args()
    print(table(audits(args.n, args.queries)))
    if args.probe:
        print()
        print(probe(args.n, min(args.queries, 100), args.repeats))


if __name__ == "__main__":
    main()
