"""Sharded evaluation (issue 13): ``arecall evaluate`` with an ACL, local engine vs a Dask cluster.

    .venv/bin/python benchmarks/bench_sharded.py all [--queries 10000 --principals 250,500,1000]

Writes a synthetic TREC run (``--queries`` × ``--depth`` results over ``--docs`` documents),
qrels, an ACL naming groups and a groups file giving every principal ``--grants`` of
``--groups`` groups, then runs ``arecall evaluate --acl … --groups …`` through its CLI entry
(arecall's readers, the evaluate path) in a fresh process per measurement:

* **local** at each principal count: wall time and peak RSS (``wait4``), so the memory and time
  per query-principal pair are the slope of a straight-line fit over the counts, and the largest
  evaluation that fits in 8 GB is (8 GB − intercept) / slope;
* **dask** at the largest count, on a cluster started here on the same cores (a scheduler in this
  process and ``--workers`` worker processes of one thread, everything on 127.0.0.1): wall time
  (cluster start excluded, reported on its own), the client's peak RSS, each worker's peak RSS,
  and the bytes shipped (scattered once per worker, sent with the tasks, gathered back). The
  JSON reports of both engines must be byte-identical (asserted).

``one``: one measurement (used by ``all``; prints one JSON line).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

GIB = 1024**3


def _ids(prefix: str, numbers: np.ndarray) -> pa.Array:
    return pc.binary_join_element_wise(prefix, pa.array(numbers).cast(pa.string()), "")


def _write(table: dict[str, Any], path: Path, delimiter: str) -> None:
    options = pacsv.WriteOptions(include_header=False, delimiter=delimiter, quoting_style="none")
    pacsv.write_csv(pa.table(table), path, write_options=options)


def generate(directory: Path, args: argparse.Namespace) -> None:
    """run.trec, qrels.txt, acl.tsv (document → group), groups.tsv (principal → group)."""
    rng = np.random.default_rng(args.seed)
    nq, depth, n_docs = args.queries, args.depth, args.docs
    query = np.repeat(np.arange(nq), depth)
    position = np.tile(np.arange(depth), nq)
    start, step = rng.integers(0, n_docs, nq), rng.integers(1, n_docs, nq)
    doc = (start[query] + position * step[query]) % n_docs  # n_docs prime: distinct per query
    _write(
        {
            "qid": _ids("q", query),
            "q0": pa.array(["Q0"] * len(query)),
            "doc": _ids("d", doc),
            "rank": pa.array(position + 1),
            "score": pa.array(depth - position),
            "tag": pa.array(["bench"] * len(query)),
        },
        directory / "run.trec",
        " ",
    )
    judged = 20  # per query, 70% among the retrieved (mostly near the top)
    q_of = np.repeat(np.arange(nq), judged)
    pos = np.minimum((rng.exponential(0.2, len(q_of)) * depth).astype(np.int64), depth - 1)
    retrieved = rng.random(len(q_of)) < 0.7
    judged_doc = np.where(
        retrieved, (start[q_of] + pos * step[q_of]) % n_docs, rng.integers(0, n_docs, len(q_of))
    )
    key = q_of.astype(np.int64) * n_docs + judged_doc
    _, first = np.unique(key, return_index=True)
    first.sort()
    _write(
        {
            "qid": _ids("q", q_of[first]),
            "iter": pa.array(np.zeros(len(first), dtype=np.int64)),
            "doc": _ids("d", judged_doc[first]),
            "rel": pa.array(rng.integers(1, 4, len(first))),
        },
        directory / "qrels.txt",
        " ",
    )
    docs = np.arange(n_docs)
    _write(
        {"doc": _ids("d", docs), "group": _ids("g", docs % args.groups)},
        directory / "acl.tsv",
        "\t",
    )
    n_p = max(args.principal_counts)
    # principal p holds groups p, p + s, p + 2s, … (mod groups): the first `groups` principals
    # cover every group, so any count from there on reads the ACL without unknown names
    stride = max(1, args.groups // args.grants)
    member = (np.arange(n_p)[:, None] + stride * np.arange(args.grants)[None, :]) % args.groups
    _write(
        {
            "principal": _ids("p", np.repeat(np.arange(n_p), args.grants)),
            "group": _ids("g", member.ravel()),
        },
        directory / "groups.tsv",
        "\t",
    )


def one(args: argparse.Namespace) -> None:
    """One evaluation in this process; prints wall time, peak RSS and (dask) what was shipped."""
    from arecall.core.engine import make_engine
    from arecall.evaluate.evaluation import evaluate

    d = Path(args.dir)
    principals = [f"p{i}" for i in range(args.n_principals)]
    started = time.perf_counter()
    with make_engine(args.engine, args.scheduler, args.block or None) as engine:
        ev = evaluate(
            d / "run.trec",
            d / "qrels.txt",
            acl=d / "acl.tsv",
            groups=d / "groups.tsv",
            principals=principals,
            k=args.k,
            n_resamples=args.resamples,
            engine=engine,
        )
        summary = ev.summary()
        shipped = getattr(engine, "shipped", [])
        workers_rss = {}
        if args.engine == "dask":
            workers_rss = engine.client.run(  # type: ignore[attr-defined]
                lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
            )
    wall = time.perf_counter() - started
    Path(args.out).write_text(json.dumps(summary, indent=2, sort_keys=True))
    print(
        json.dumps(
            {
                "engine": args.engine,
                "pairs": summary["pairs"],
                "seconds": wall,
                "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                "workers_rss": sorted(workers_rss.values()),
                "shipped": shipped,
            }
        )
    )


def _measure(
    args: argparse.Namespace, d: Path, n_p: int, engine: str, scheduler: str = ""
) -> dict[str, Any]:
    out = d / f"summary-{engine}-{n_p}.json"
    cmd = [
        sys.executable, __file__, "one", "--dir", str(d), "--n-principals", str(n_p),
        "--engine", engine, "--out", str(out), "--k", args.k, "--resamples", str(args.resamples),
        "--block", str(args.block),
    ]  # fmt: skip
    if scheduler:
        cmd += ["--scheduler", scheduler]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr)
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    row["summary"] = out.read_bytes()
    return row


def run_all(args: argparse.Namespace) -> None:
    import distributed

    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        generate(d, args)
        local = [_measure(args, d, n_p, "local") for n_p in args.principal_counts]
        started = time.perf_counter()
        with distributed.LocalCluster(
            n_workers=args.workers,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            worker_dashboard_address=None,
            silence_logs=40,
        ) as cluster:
            with distributed.Client(cluster.scheduler_address) as client:
                client.wait_for_workers(args.workers)
                # a long-lived cluster has imported arecall once: not part of an evaluation
                client.run(lambda: __import__("arecall.evaluate.evaluation"))
            cluster_start = time.perf_counter() - started
            dask = _measure(args, d, args.principal_counts[-1], "dask", cluster.scheduler_address)
    assert dask["summary"] == local[-1]["summary"], "dask and local summaries differ"
    pairs = np.array([r["pairs"] for r in local], dtype=np.float64)
    rss = np.array([r["rss"] for r in local], dtype=np.float64)
    secs = np.array([r["seconds"] for r in local], dtype=np.float64)
    slope, intercept = np.polyfit(pairs, rss, 1) if len(pairs) > 1 else (rss[0] / pairs[0], 0.0)
    t_slope, t_icpt = np.polyfit(pairs, secs, 1) if len(pairs) > 1 else (secs[0] / pairs[0], 0.0)
    fits = (8e9 - intercept) / slope
    print(
        f"synthetic: {args.queries:,} queries × {args.depth} results over {args.docs:,} documents; "
        f"ACL of {args.groups} groups, {args.grants} per principal; K = {args.k}; "
        f"{args.resamples} resamples\n"
    )
    print("| engine | principals | pairs | wall time | peak RSS (client) | workers' peak RSS |")
    print("|---|--:|--:|--:|--:|--:|")
    for r in local:
        print(
            f"| local | {r['pairs'] // args.queries:,} | {r['pairs']:,} | {r['seconds']:.1f} s "
            f"| {r['rss'] / GIB:.2f} GiB | – |"
        )
    w = ", ".join(f"{x / GIB:.2f}" for x in dask["workers_rss"])
    print(
        f"| dask ({args.workers} workers × 1 thread) | {dask['pairs'] // args.queries:,} "
        f"| {dask['pairs']:,} | {dask['seconds']:.1f} s | {dask['rss'] / GIB:.2f} GiB | {w} GiB |"
    )
    ship = dask["shipped"][0] if dask["shipped"] else {}
    print(
        f"\noverhead dask / local at {dask['pairs']:,} pairs: "
        f"{dask['seconds'] / local[-1]['seconds']:.2f}× (cluster start and imports "
        f"{cluster_start:.1f} s, not included); summaries byte-identical"
    )
    if ship:
        print(
            f"shipped: {ship['shared_bytes'] / 1e6:.1f} MB scattered once to each of "
            f"{ship['workers']} workers, {ship['task_bytes'] / 1e6:.1f} MB with {ship['tasks']} "
            f"tasks, {ship['result_bytes'] / 1e6:.1f} MB gathered "
            f"({ship['result_bytes'] / dask['pairs']:.1f} B per pair)"
        )
    print(
        f"local, fitted over {len(pairs)} sizes: {slope:.1f} B and {t_slope * 1e6:.2f} µs per "
        f"pair (+ {intercept / GIB:.2f} GiB, {t_icpt:.1f} s fixed); 8 GB hold ≈ {fits:,.0f} "
        f"pairs (≈ {fits / args.queries:,.0f} principals × {args.queries:,} queries)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="which", required=True)
    a = sub.add_parser("all", help="local at each size, dask at the largest, and the fits")
    a.add_argument("--queries", type=int, default=10_000)
    a.add_argument("--depth", type=int, default=100)
    a.add_argument("--docs", type=int, default=100_003, help="a prime")
    a.add_argument("--groups", type=int, default=100)
    a.add_argument("--grants", type=int, default=5, help="groups per principal")
    a.add_argument("--principals", default="250,500,1000", help="principal counts, ascending")
    a.add_argument("--workers", type=int, default=2)
    a.add_argument("--k", default="10")
    a.add_argument("--resamples", type=int, default=2000)
    a.add_argument("--block", type=int, default=0, help="principals per task (0: automatic)")
    a.add_argument("--seed", type=int, default=0)
    o = sub.add_parser("one", help="one measurement (JSON line)")
    o.add_argument("--dir", required=True)
    o.add_argument("--n-principals", type=int, required=True)
    o.add_argument("--engine", default="local")
    o.add_argument("--scheduler", default="")
    o.add_argument("--out", required=True)
    o.add_argument("--k", default="10")
    o.add_argument("--resamples", type=int, default=2000)
    o.add_argument("--block", type=int, default=0)
    args = parser.parse_args()
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    if args.which == "all":
        args.principal_counts = [int(x) for x in args.principals.split(",")]
        run_all(args)
    else:
        one(args)


if __name__ == "__main__":
    main()
