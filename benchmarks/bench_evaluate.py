"""arecall vs ranx on the same TREC files: 10,000 queries × 1,000 results, K = 10 and 100.

Why: issue 5 asks that evaluating a user's run be at least as fast as ranx (the reference the
values are checked against), excluding numba's compile time, which is reported on its own.
Both tools read the same run and qrels files and compute recall, precision, nDCG, MRR and MAP at
K = 10 and 100 in one process; the script asserts that every per-query value agrees to 1e-9
and prints a Markdown table of wall-clock times.

The run has no tied scores (ranx orders ties by an unstable sort, so on tied runs the two tools
are not comparing the same ranking). ranx's numba compile time is measured by a warm-up on a
tiny input before the timed runs; ranx compiles once per length of the longest doc id, so the
tiny input's ids are as long as the files' (with numba's on-disk cache warm, the warm-up is
mostly loading the cache).

    .venv/bin/python benchmarks/bench_evaluate.py [--queries 10000 --depth 1000]
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

warnings.filterwarnings("ignore", message=".*unsafe cast.*")  # numba, inside ranx

MEASURES = {
    "recall": "recall",
    "precision": "precision",
    "ndcg": "ndcg",
    "mrr": "mrr",
    "map": "map",
}
KS = (10, 100)


def _ids(prefix: str, numbers: np.ndarray) -> pa.Array:
    return pc.binary_join_element_wise(prefix, pa.array(numbers).cast(pa.string()), "")


def generate(directory: Path, n_queries: int, depth: int, seed: int) -> tuple[Path, Path, int, int]:
    """A tie-free run (``depth`` distinct documents per query) and graded qrels, plus the
    longest document id in each (ranx compiles its code once per id length)."""
    rng = np.random.default_rng(seed)
    n_docs = 1_000_003  # prime: any step walks distinct documents
    query = np.repeat(np.arange(n_queries), depth)
    position = np.tile(np.arange(depth), n_queries)
    start = rng.integers(0, n_docs, n_queries)
    step = rng.integers(1, n_docs, n_queries)
    doc = (start[query] + position * step[query]) % n_docs
    score = np.round(depth - position + 0.5 * rng.random(len(query)), 6)
    run = directory / "run.trec"
    table = pa.table(
        {
            "qid": _ids("q", query),
            "q0": pa.array(["Q0"] * len(query)),
            "doc": _ids("d", doc),
            "rank": pa.array(position + 1),
            "score": pa.array(score),
            "tag": pa.array(["bench"] * len(query)),
        }
    )
    options = pacsv.WriteOptions(include_header=False, delimiter=" ", quoting_style="none")
    pacsv.write_csv(table, run, write_options=options)
    # qrels: up to 20 judged documents per query, some retrieved (mostly near the top), some
    # not; grades 0..3; about 2% of the queries have nothing relevant
    n_judged = rng.integers(1, 21, n_queries)
    q_of = np.repeat(np.arange(n_queries), n_judged)
    retrieved = rng.random(len(q_of)) < 0.7
    pos = np.minimum((rng.exponential(0.15, len(q_of)) * depth).astype(np.int64), depth - 1)
    judged_doc = np.where(
        retrieved,
        (start[q_of] + pos * step[q_of]) % n_docs,
        n_docs + rng.integers(0, 10 * n_docs, len(q_of)),
    )
    rel = rng.integers(0, 4, len(q_of))
    rel[np.isin(q_of, np.flatnonzero(rng.random(n_queries) < 0.02))] = 0
    key = q_of.astype(np.int64) * (11 * n_docs) + judged_doc
    _, first = np.unique(key, return_index=True)  # one judgment per (query, document)
    first.sort()
    qrels = directory / "qrels.txt"
    judged = _ids("d", judged_doc[first])
    pacsv.write_csv(
        pa.table(
            {
                "qid": _ids("q", q_of[first]),
                "iter": pa.array(np.zeros(len(first), dtype=np.int64)),
                "doc": judged,
                "rel": pa.array(rel[first]),
            }
        ),
        qrels,
        write_options=options,
    )
    longest_run = pc.max(pc.utf8_length(table["doc"])).as_py()
    longest_qrels = pc.max(pc.utf8_length(judged)).as_py()
    return run, qrels, int(longest_run), int(longest_qrels)


def ranx_metrics() -> list[str]:
    return [f"{MEASURES[m]}@{k}" for m in MEASURES for k in KS]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--depth", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="arecall-bench-") as tmp:
        t = time.perf_counter()
        run_path, qrels_path, run_len, qrels_len = generate(
            Path(tmp), args.queries, args.depth, args.seed
        )
        gen = time.perf_counter() - t
        size = run_path.stat().st_size / 1e6

        # ranx: compile (or load from numba's cache) on a tiny input, outside the timings.
        # ranx specialises its code on the length of the longest doc id (numpy '<U{n}'
        # arrays), so the tiny input has ids exactly as long as the files' longest ones.
        t = time.perf_counter()
        from ranx import Qrels as RanxQrels
        from ranx import Run as RanxRun
        from ranx import evaluate as ranx_evaluate

        tiny_q = RanxQrels.from_dict({f"t{i}": {"x" * qrels_len: 1, "y": 2} for i in range(12)})
        tiny_r = RanxRun.from_dict({f"t{i}": {"x" * run_len: 0.5, "w": 0.9} for i in range(12)})
        ranx_evaluate(tiny_q, tiny_r, ranx_metrics())
        ranx_compile = time.perf_counter() - t

        # arecall (imports are light; included)
        t = time.perf_counter()
        from arecall.evaluate.evaluation import evaluate
        from arecall.io.trec import load_qrels, load_run

        run = load_run(run_path)
        qrels = load_qrels(qrels_path)
        ours_load = time.perf_counter() - t
        t = time.perf_counter()
        ev = evaluate(run, qrels, k=KS)
        ours_frame = ev.per_query.set_index("query_id")
        ours_eval = time.perf_counter() - t

        # ranx on the same files
        t = time.perf_counter()
        r = RanxRun.from_file(str(run_path), kind="trec")
        q = RanxQrels.from_file(str(qrels_path), kind="trec")
        ranx_load = time.perf_counter() - t
        t = time.perf_counter()
        means = ranx_evaluate(q, r, ranx_metrics())
        ranx_eval = time.perf_counter() - t

        worst = 0.0
        for m, name in MEASURES.items():
            for k in KS:
                theirs = r.scores[f"{name}@{k}"]
                ours = ours_frame[f"{m}@{k}"].reindex(list(theirs)).to_numpy()
                diff = np.abs(ours - np.fromiter(theirs.values(), dtype=np.float64))
                worst = max(worst, float(diff.max()))
                assert abs(ours.mean() - means[f"{name}@{k}"]) <= 1e-9, (m, k)
        assert worst <= 1e-9, worst
        assert len(ours_frame) == len(r.scores["recall@10"]) == args.queries

    ours_total, ranx_total = ours_load + ours_eval, ranx_load + ranx_eval
    print(
        f"{args.queries:,} queries × {args.depth:,} results ({size:,.0f} MB run file; "
        f"generated in {gen:.1f} s), recall/precision/nDCG/MRR/MAP at K = 10, 100; "
        f"{os.cpu_count()} cores, Python {platform.python_version()}"
    )
    print(
        f"all {len(MEASURES) * len(KS)} measures × {args.queries:,} queries agree "
        f"(max |difference| {worst:.1e})\n"
    )
    print("| step | arecall | ranx | ranx / arecall |")
    print("|---|---:|---:|---:|")
    for label, a, b in (
        ("read run + qrels files", ours_load, ranx_load),
        ("compute the measures", ours_eval, ranx_eval),
        ("total", ours_total, ranx_total),
    ):
        print(f"| {label} | {a:.2f} s | {b:.2f} s | {b / a:.1f}× |")
    print(f"| ranx numba compile / cache load (excluded above) | – | {ranx_compile:.2f} s | |")


if __name__ == "__main__":
    main()
