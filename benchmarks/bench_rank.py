"""Rank by block (issue 36): the rank stage in one process vs in query blocks vs on a Dask cluster.

    .venv/bin/python benchmarks/bench_rank.py all [--docs 50000 --queries-per-domain 100]

Generates a synthetic corpus (arecall's own generate stage: ``--docs`` documents, ``--domains``
× ``--queries-per-domain`` queries, ``--principals`` principals), then ranks it in a fresh
process per measurement, ``--repeats`` times each, interleaved (one of each variant per round,
so the machine's load falls on all alike):

* **one process**: the ranking as the rank stage made it before blocks — `rank_queries` over
  every query's score chunks, joined in memory, saved once;
* **blocked**: the rank stage, local engine, ``evaluation.engine.block_queries=--block``
  (each block written to a file, joined one array at a time);
* **blocked + shards**: the same with ``evaluation.engine.doc_shards=--shards``;
* **dask**: the rank stage on a cluster started here (``--workers`` worker processes of one
  thread, everything on 127.0.0.1, stopped at the end), ``block_queries=--block``.

Each row: the median wall time of the process (start to exit, the retriever's fit included),
its peak RSS (``wait4``), and for dask the workers' peak RSS. Every variant's ranking file must be
byte-identical to the one-process file (asserted). ``one``: one measurement (one JSON line).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

GIB = 1024**3
VARIANTS = ("one process", "blocked", "blocked + shards", "dask")


def _corpus_overrides(args: argparse.Namespace) -> list[str]:
    return [
        "corpus=synthetic",
        f"corpus.n_docs={args.docs}",
        f"corpus.n_domains={args.domains}",
        f"corpus.queries_per_domain={args.queries_per_domain}",
        f"corpus.n_principals={args.principals}",
        f"retriever={args.retriever}",
        f"retriever.depth={args.depth}",
    ]


def one(args: argparse.Namespace) -> None:
    """One ranking of the generated corpus in this process; prints a JSON line."""
    from arecall.core.engine import DaskEngine
    from arecall.core.ranking import rank_queries
    from arecall.data.collection import Collection
    from arecall.pipeline.config import default_config, ks_of
    from arecall.pipeline.layout import Layout
    from arecall.pipeline.stages.rank import rank
    from arecall.retrievers import fit_on, make_retriever, query_inputs, ranks_every_document

    started = time.perf_counter()
    layout = Layout.run(args.dir)
    overrides = [*json.loads(args.overrides), *args.set]
    cfg = default_config(overrides)
    workers_rss: dict[str, int] = {}
    if args.variant == "one process":
        collection = Collection.load(layout.corpus)
        retriever = fit_on(make_retriever(cfg.retriever), collection.documents, collection.queries)
        inputs = query_inputs(retriever, collection.queries)
        chunk = max(1, min(cfg.retriever.chunk_queries, (1 << 26) // len(collection.documents)))
        ranking = rank_queries(
            (retriever.score(inputs[a : a + chunk]) for a in range(0, len(inputs), chunk)),
            n_queries=len(inputs),
            depth=cfg.retriever.depth,
            acl=collection.acl_matrix(),
            k_max=max(ks_of(cfg)),
            relevance=collection.relevance_matrix(),
            every_entry=ranks_every_document(retriever),
        )
        ranking.save(layout.ranking)
    else:
        rank(cfg, layout)
        if args.variant == "dask":
            with DaskEngine(cfg.evaluation.engine.scheduler) as engine:
                workers_rss = engine.client.run(
                    lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
                )
    print(
        json.dumps(
            {
                "variant": args.variant,
                "in_process_seconds": time.perf_counter() - started,
                "workers_rss": sorted(workers_rss.values()),
            }
        )
    )


def _measure(
    args: argparse.Namespace, corpus: Path, variant: str, scheduler: str
) -> dict[str, Any]:
    """One measurement in a fresh process: wall time and peak RSS from ``wait4``."""
    where = Path(tempfile.mkdtemp(dir=corpus.parent))
    layout_corpus = where / "data" / "corpus"
    layout_corpus.parent.mkdir(parents=True)
    layout_corpus.symlink_to(corpus, target_is_directory=True)
    extra = {
        "one process": [],
        "blocked": [f"evaluation.engine.block_queries={args.block}"],
        "blocked + shards": [
            f"evaluation.engine.block_queries={args.block}",
            f"evaluation.engine.doc_shards={args.shards}",
        ],
        "dask": [
            "evaluation.engine.name=dask",
            f"evaluation.engine.scheduler={scheduler}",
            f"evaluation.engine.block_queries={args.block}",
        ],
    }[variant]
    cmd = [
        sys.executable, __file__, "one", "--dir", str(where), "--variant", variant,
        "--overrides", json.dumps(_corpus_overrides(args)),
        *[x for s in extra for x in ("--set", s)],
    ]  # fmt: skip
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    out, err = proc.stdout.read(), proc.stderr.read()  # type: ignore[union-attr]
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{variant}: exit {proc.returncode}\n{err}")
    row = json.loads(out.strip().splitlines()[-1])
    row.update(
        seconds=wall,
        rss=usage.ru_maxrss * 1024,
        ranking=(where / "data" / "rank" / "ranking.npz").read_bytes(),
    )
    return row


def run_all(args: argparse.Namespace) -> None:
    import distributed

    from arecall.pipeline.config import default_config
    from arecall.pipeline.layout import Layout
    from arecall.pipeline.stages.generate import generate

    with tempfile.TemporaryDirectory() as tmp:
        base = Layout.run(Path(tmp) / "corpus")
        generate(default_config(_corpus_overrides(args)), base)
        from arecall.data.collection import Collection

        c = Collection.load(base.corpus, text=False)
        n_docs, n_queries = len(c.doc_ids), len(c.query_ids)
        rows: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
        started = time.perf_counter()
        with distributed.LocalCluster(
            n_workers=args.workers,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            scheduler_port=0,
            dashboard_address=None,
            # the scheduler's HTTP server (/health) on a free loopback port, not 8787
            scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
            worker_dashboard_address=None,
            silence_logs=40,
        ) as cluster:
            with distributed.Client(cluster.scheduler_address) as client:
                client.wait_for_workers(args.workers)
                client.run(lambda: __import__("arecall.core.rank_blocks"))
            cluster_start = time.perf_counter() - started
            for _ in range(args.repeats):
                for v in VARIANTS:
                    rows[v].append(_measure(args, base.corpus, v, cluster.scheduler_address))
    want = rows["one process"][0]["ranking"]
    for v in VARIANTS:
        assert all(r["ranking"] == want for r in rows[v]), f"{v}: ranking differs"
    print(
        f"synthetic: {n_queries:,} queries over {n_docs:,} documents, {args.principals} "
        f"principals; retriever={args.retriever}, depth={args.depth}; blocks of {args.block} "
        f"queries, {args.shards} document shards, {args.workers} dask workers × 1 thread; "
        f"median of {args.repeats} interleaved runs, each a fresh process (fit included)\n"
    )
    print("| variant | wall time | peak RSS (process) | workers' peak RSS | time / one process |")
    print("|---|--:|--:|--:|--:|")
    base_t = statistics.median(r["seconds"] for r in rows["one process"])
    for v in VARIANTS:
        t = statistics.median(r["seconds"] for r in rows[v])
        rss = statistics.median(r["rss"] for r in rows[v])
        w = rows[v][-1]["workers_rss"]
        ws = ", ".join(f"{x / GIB:.2f}" for x in w) + " GiB" if w else "–"
        print(f"| {v} | {t:.1f} s | {rss / GIB:.2f} GiB | {ws} | {t / base_t:.2f}× |")
    print(
        f"\nrankings byte-identical across all {len(VARIANTS) * args.repeats} runs; cluster "
        f"start {cluster_start:.1f} s (not included)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="which", required=True)
    a = sub.add_parser("all", help="every variant, interleaved, and the table")
    a.add_argument("--docs", type=int, default=50_000)
    a.add_argument("--domains", type=int, default=20)
    a.add_argument("--queries-per-domain", type=int, default=100)
    a.add_argument("--principals", type=int, default=50)
    a.add_argument("--retriever", default="tfidf")
    a.add_argument("--depth", default="100")
    a.add_argument("--block", type=int, default=256)
    a.add_argument("--shards", type=int, default=4)
    a.add_argument("--workers", type=int, default=2)
    a.add_argument("--repeats", type=int, default=3)
    o = sub.add_parser("one", help="one measurement (JSON line)")
    o.add_argument("--dir", required=True)
    o.add_argument("--variant", choices=VARIANTS, required=True)
    o.add_argument("--overrides", required=True)
    o.add_argument("--set", action="append", default=[])
    args = parser.parse_args()
    if args.which == "all":
        run_all(args)
    else:
        one(args)


if __name__ == "__main__":
    main()
