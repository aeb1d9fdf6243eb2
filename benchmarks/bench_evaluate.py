"""``arecall evaluate`` against the parser's floor, ranx and trec_eval, on the same TREC files.

Two measurements, each tool in a fresh process (what a user waits for: start to exit):

``compare`` (the default; issue 34's table) — a run of ``--queries`` × ``--depth`` results
(9,474 × 994 = 9.4M lines by default) and graded qrels. Per tool, the median of ``--repeats``
paired runs, taken in rotating order so that load on a shared machine falls on every tool:

* **bare pyarrow**: ``pyarrow.csv.read_csv`` of the run file and nothing else — the floor;
* **arecall**: ``arecall evaluate --run … --qrels … --k 10,100 --out FILE``;
* **ranx**: read both files and evaluate, cold (an empty numba cache: it compiles) and warm;
* **pytrec_eval** (trec_eval's C): read both files (its own parsers) and evaluate;

each with its peak memory (the child's ``ru_maxrss``). In-process, once per tool in a process
of its own: the time to read the files and the time to compute on what was read (arecall:
`load_run` + `load_qrels`, then `evaluate` on the objects). Every measure of every query
agrees between the three tools (asserted; ranx to 1e-9 on tie-free runs, trec_eval too).

``scale`` — peak memory and wall time of ``arecall evaluate`` as the run grows (10M and 100M
lines), with a ``--principals``-principal group ACL (documents granted to one of 100 groups,
2% also to one principal; each principal in 3 groups), and ``--dask``: the same evaluation on
a local Dask cluster (2 workers on 127.0.0.1), whose report must be byte-identical.

``breakdown`` — where an evaluation with the ACL spends its CPU, in one process: the CPU time
of the calling thread in each part (reading the ACL, looking documents up in it, preparing a
block, the pair kernel, tallying the pairs, the standard measures), summed over the blocks;
Arrow's own reader threads are in the process total only. The profile the kernels are tuned by.

    .venv/bin/python benchmarks/bench_evaluate.py compare [--queries 9474 --depth 994]
    .venv/bin/python benchmarks/bench_evaluate.py scale --queries 100000 --depth 1000 --dask
    .venv/bin/python benchmarks/bench_evaluate.py breakdown --queries 10000 --depth 1000

The generated files live in a temporary directory (or ``--dir``, to keep and reuse them).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

warnings.filterwarnings("ignore", message=".*unsafe cast.*")  # numba, inside ranx

KS = (10, 100)
#: arecall's measure -> (ranx's, trec_eval's); MRR is cut at K in arecall and ranx only
MEASURES = {
    "recall": ("recall", "recall"),
    "precision": ("precision", "P"),
    "ndcg": ("ndcg", "ndcg_cut"),
    "map": ("map", "map_cut"),
    "mrr": ("mrr", None),
}
N_DOCS = 1_000_003  # prime: any step walks distinct documents
BIN = Path(sys.executable).parent


def _ids(prefix: str, numbers: np.ndarray) -> pa.Array:
    return pc.binary_join_element_wise(prefix, pa.array(numbers).cast(pa.string()), "")


_OPTIONS = pacsv.WriteOptions(include_header=False, delimiter=" ", quoting_style="none")


def generate(directory: Path, n_queries: int, depth: int, seed: int) -> tuple[Path, Path]:
    """A tie-free run (``depth`` distinct documents per query, written a slice of queries at a
    time, so a 100M-line file costs a slice of memory) and graded qrels."""
    rng = np.random.default_rng(seed)
    start = rng.integers(0, N_DOCS, n_queries)
    step = rng.integers(1, N_DOCS, n_queries)
    run = directory / "run.trec"
    with pacsv.CSVWriter(
        run,
        pa.schema([(n, t) for n, t in zip(
            ("qid", "q0", "doc", "rank", "score", "tag"),
            (pa.string(), pa.string(), pa.string(), pa.int64(), pa.float64(), pa.string()),
            strict=True,
        )]),
        write_options=_OPTIONS,
    ) as writer:  # fmt: skip
        per = max(1, 2_000_000 // depth)
        for lo in range(0, n_queries, per):
            hi = min(lo + per, n_queries)
            query = np.repeat(np.arange(lo, hi), depth)
            position = np.tile(np.arange(depth), hi - lo)
            doc = (start[query] + position * step[query]) % N_DOCS
            score = np.round(depth - position + 0.5 * rng.random(len(query)), 6)
            writer.write_table(
                pa.table(
                    {
                        "qid": _ids("q", query),
                        "q0": pa.array(np.full(len(query), "Q0", dtype=object), pa.string()),
                        "doc": _ids("d", doc),
                        "rank": pa.array(position + 1),
                        "score": pa.array(score),
                        "tag": pa.array(np.full(len(query), "bench", dtype=object), pa.string()),
                    }
                )
            )
    # qrels: up to 20 judged documents per query, some retrieved (mostly near the top), some
    # not; grades 0..3; about 2% of the queries have nothing relevant
    n_judged = rng.integers(1, 21, n_queries)
    q_of = np.repeat(np.arange(n_queries), n_judged)
    retrieved = rng.random(len(q_of)) < 0.7
    pos = np.minimum((rng.exponential(0.15, len(q_of)) * depth).astype(np.int64), depth - 1)
    judged_doc = np.where(
        retrieved,
        (start[q_of] + pos * step[q_of]) % N_DOCS,
        N_DOCS + rng.integers(0, 10 * N_DOCS, len(q_of)),
    )
    rel = rng.integers(0, 4, len(q_of))
    rel[np.isin(q_of, np.flatnonzero(rng.random(n_queries) < 0.02))] = 0
    key = q_of.astype(np.int64) * (11 * N_DOCS) + judged_doc
    _, first = np.unique(key, return_index=True)  # one judgment per (query, document)
    first.sort()
    qrels = directory / "qrels.txt"
    pacsv.write_csv(
        pa.table(
            {
                "qid": _ids("q", q_of[first]),
                "iter": pa.array(np.zeros(len(first), dtype=np.int64)),
                "doc": _ids("d", judged_doc[first]),
                "rel": pa.array(rel[first]),
            }
        ),
        qrels,
        write_options=_OPTIONS,
    )
    return run, qrels


def generate_acl(directory: Path, n_principals: int, seed: int, groups: int = 100) -> None:
    """acl.tsv (every document → one of ``groups`` groups; 2% also → one principal) and
    groups.tsv (each principal in 3 groups)."""
    rng = np.random.default_rng(seed + 1)
    docs = np.arange(N_DOCS)
    direct = np.flatnonzero(rng.random(N_DOCS) < 0.02)
    tab = pacsv.WriteOptions(include_header=False, delimiter="\t", quoting_style="none")
    pacsv.write_csv(
        pa.table(
            {
                "doc": pa.concat_arrays([_ids("d", docs), _ids("d", direct)]),
                "name": pa.concat_arrays(
                    [
                        _ids("g", docs % groups),
                        _ids("p", rng.integers(0, n_principals, len(direct))),
                    ]
                ),
            }
        ),
        directory / "acl.tsv",
        write_options=tab,
    )
    member = np.argsort(rng.random((n_principals, groups)), axis=1)[:, :3]
    pacsv.write_csv(
        pa.table(
            {
                "principal": _ids("p", np.repeat(np.arange(n_principals), 3)),
                "group": _ids("g", member.ravel()),
            }
        ),
        directory / "groups.tsv",
        write_options=tab,
    )


# -- timing a child process ------------------------------------------------------------------------


def timed(cmd: list[str], env: dict[str, str] | None = None) -> dict[str, float]:
    """Wall seconds, CPU seconds (user + system) and peak resident memory (bytes) of one child
    process: CPU time is the figure other load on a shared machine disturbs least."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **(env or {})}
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    out = proc.stdout.read().decode() if proc.stdout else ""
    err = proc.stderr.read().decode() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{err}")
    cpu = usage.ru_utime + usage.ru_stime
    return {"wall": wall, "cpu": cpu, "rss": usage.ru_maxrss * 1024, "stdout": out}  # type: ignore[dict-item]


_BARE = """
import sys
import pyarrow.csv as pacsv
table = pacsv.read_csv(
    sys.argv[1],
    read_options=pacsv.ReadOptions(autogenerate_column_names=True),
    parse_options=pacsv.ParseOptions(delimiter=" "),
)
print(table.num_rows)
"""

_RANX = """
import sys, time, warnings
warnings.filterwarnings("ignore")
t0 = time.perf_counter()
from ranx import Qrels, Run, evaluate
metrics = [f"{m}@{k}" for m in ("recall", "precision", "ndcg", "mrr", "map") for k in (10, 100)]
t1 = time.perf_counter()
run = Run.from_file(sys.argv[1], kind="trec")
qrels = Qrels.from_file(sys.argv[2], kind="trec")
t2 = time.perf_counter()
evaluate(qrels, run, metrics)
t3 = time.perf_counter()
print(t2 - t1, t3 - t2)
"""

_TREC_EVAL = """
import sys, time
import pytrec_eval
t1 = time.perf_counter()
with open(sys.argv[1]) as fh:
    run = pytrec_eval.parse_run(fh)
with open(sys.argv[2]) as fh:
    qrels = pytrec_eval.parse_qrel(fh)
t2 = time.perf_counter()
measures = {f"{m}_{k}" for m in ("recall", "P", "ndcg_cut", "map_cut") for k in (10, 100)}
pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
t3 = time.perf_counter()
print(t2 - t1, t3 - t2)
"""

_AREC_INPROC = """
import sys, time
from arecall.evaluate import evaluate
from arecall.io.trec import load_qrels, load_run
t1 = time.perf_counter()
run = load_run(sys.argv[1])
qrels = load_qrels(sys.argv[2])
t2 = time.perf_counter()
evaluate(run, qrels, k=(10, 100)).summary()
t3 = time.perf_counter()
print(t2 - t1, t3 - t2)
"""


def _median(rows: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def compare(args: argparse.Namespace, d: Path) -> None:
    run, qrels = d / "run.trec", d / "qrels.txt"
    if not run.exists():
        generate(d, args.queries, args.depth, args.seed)
    size = run.stat().st_size / 1e6
    with run.open("rb") as fh:
        lines = sum(1 for _ in fh)
    out = d / "summary.txt"
    cache = d / "numba-cache"
    arecall = [str(BIN / "arecall"), "evaluate", "--run", str(run), "--qrels", str(qrels)]
    tools: dict[str, tuple[list[str], dict[str, str] | None]] = {
        "bare pyarrow": ([sys.executable, "-c", _BARE, str(run)], None),
        "arecall": ([*arecall, "--k", "10,100", "--out", str(out)], None),
        "ranx (warm)": (
            [sys.executable, "-c", _RANX, str(run), str(qrels)],
            {"NUMBA_CACHE_DIR": str(cache)},
        ),
        "pytrec_eval": ([sys.executable, "-c", _TREC_EVAL, str(run), str(qrels)], None),
    }
    # ranx cold: an empty numba cache, so the process compiles (then the cache is warm)
    cold = timed([sys.executable, "-c", _RANX, str(run), str(qrels)],
                 {"NUMBA_CACHE_DIR": str(d / "numba-cold")})  # fmt: skip
    timed(*tools["ranx (warm)"])  # fills the warm cache
    results: dict[str, list[dict[str, float]]] = {name: [] for name in tools}
    names = list(tools)
    for r in range(args.repeats):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            results[name].append(timed(*tools[name]))
    inproc = {
        "arecall": timed([sys.executable, "-c", _AREC_INPROC, str(run), str(qrels)]),
        "ranx (warm)": results["ranx (warm)"][0],
        "pytrec_eval": results["pytrec_eval"][0],
    }
    split = {k: [float(x) for x in v["stdout"].split()] for k, v in inproc.items()}
    agreement = check_agreement(run, qrels)
    floor = _median(results["bare pyarrow"], "wall")
    load = os.getloadavg()
    print(
        f"{args.queries:,} queries × {args.depth:,} results ({lines:,} lines, {size:,.0f} MB run "
        f"file); recall, precision, nDCG, MAP (and MRR: arecall, ranx) at K = 10, 100; "
        f"{os.cpu_count()} cores, Python {platform.python_version()}; medians of {args.repeats} "
        f"paired runs in rotating order; load average after: {load[0]:.1f}"
    )
    print(agreement + "\n")
    print("| | process wall | ÷ bare pyarrow | CPU | read (in process) | compute | peak memory |")
    print("|---|--:|--:|--:|--:|--:|--:|")
    for name in tools:
        wall, rss = _median(results[name], "wall"), _median(results[name], "rss")
        read, compute = split.get(name, [None, None])
        cells = [
            f"{wall:.2f} s",
            f"{wall / floor:.2f}×",
            f"{_median(results[name], 'cpu'):.2f} s",
            f"{read:.2f} s" if read is not None else "–",
            f"{compute:.2f} s" if compute is not None else "–",
            f"{rss / 2**30:.2f} GiB",
        ]
        print(f"| {name} | " + " | ".join(cells) + " |")
    ranx_cold = [float(x) for x in cold["stdout"].split()]
    print(
        f"| ranx (cold: numba compiles) | {cold['wall']:.2f} s | {cold['wall'] / floor:.2f}× | "
        f"{cold['cpu']:.2f} s | "
        f"{ranx_cold[0]:.2f} s | {ranx_cold[1]:.2f} s (compile included) | "
        f"{cold['rss'] / 2**30:.2f} GiB |"
    )


def check_agreement(run: Path, qrels: Path) -> str:
    """Every measure of every query, arecall vs ranx and vs trec_eval (asserted)."""
    import pytrec_eval
    from ranx import Qrels as RanxQrels
    from ranx import Run as RanxRun
    from ranx import evaluate as ranx_evaluate

    from arecall.evaluate import evaluate

    ours = evaluate(run, qrels, k=KS, significance=False).per_query.set_index("query_id")
    r = RanxRun.from_file(str(run), kind="trec")
    q = RanxQrels.from_file(str(qrels), kind="trec")
    ranx_evaluate(q, r, [f"{m[0]}@{k}" for m in MEASURES.values() for k in KS])
    with open(run) as fh:
        trec_run = pytrec_eval.parse_run(fh)
    with open(qrels) as fh:
        trec_qrels = pytrec_eval.parse_qrel(fh)
    wanted = {f"{m[1]}_{k}" for m in MEASURES.values() if m[1] for k in KS}
    theirs = pytrec_eval.RelevanceEvaluator(trec_qrels, wanted).evaluate(trec_run)
    worst_ranx = worst_trec = 0.0
    for ours_name, (ranx_name, trec_name) in MEASURES.items():
        for k in KS:
            col = ours[f"{ours_name}@{k}"]
            ranx_scores = r.scores[f"{ranx_name}@{k}"]
            mine = col.reindex(list(ranx_scores)).to_numpy()
            theirs_ranx = np.fromiter(ranx_scores.values(), float)
            worst_ranx = max(worst_ranx, float(np.abs(mine - theirs_ranx).max()))
            if trec_name:
                ids = [x for x in theirs if x in col.index]
                values = np.array([theirs[x][f"{trec_name}_{k}"] for x in ids])
                worst_trec = max(
                    worst_trec, float(np.abs(col.reindex(ids).to_numpy() - values).max())
                )
    assert worst_ranx <= 1e-9 and worst_trec <= 1e-9, (worst_ranx, worst_trec)
    return (
        f"every measure of all {len(ours):,} queries agrees: max |arecall − ranx| "
        f"{worst_ranx:.1e}, max |arecall − trec_eval| {worst_trec:.1e}"
    )


# -- scale ---------------------------------------------------------------------------------------


def _own_usage() -> tuple[int, float]:
    """Peak resident bytes and CPU seconds of the calling process (run on each Dask worker)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime


def scale(args: argparse.Namespace, d: Path) -> None:
    run, qrels = d / "run.trec", d / "qrels.txt"
    if not run.exists():
        t = time.perf_counter()
        generate(d, args.queries, args.depth, args.seed)
        print(f"generated in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    if not (d / "acl.tsv").exists():
        generate_acl(d, args.principals, args.seed)
    size = run.stat().st_size / 1e9
    base = [str(BIN / "arecall"), "evaluate", "--run", str(run), "--qrels", str(qrels)]
    acl = ["--acl", str(d / "acl.tsv"), "--groups", str(d / "groups.tsv")]
    rows: list[tuple[str, dict[str, Any]]] = []
    rows.append(("no ACL", timed([*base, "--format", "json", "--out", str(d / "plain.json")])))
    local = timed([*base, *acl, "--format", "json", "--out", str(d / "local.json")])
    rows.append((f"{args.principals}-principal ACL", local))
    identical = None
    if args.dask:
        import distributed

        with distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
            dashboard_address=None, silence_logs=40,
            # the scheduler's HTTP server (/health) on a free loopback port, not 8787
            scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
        ) as cluster:  # fmt: skip
            dask = timed([*base, *acl, "--engine", "dask", "--scheduler",
                          cluster.scheduler_address, "--format", "json",
                          "--out", str(d / "dask.json")])  # fmt: skip
            with distributed.Client(cluster) as client:  # the workers' own peaks and CPU
                worker = client.run(_own_usage)
        dask["rss_workers"] = max(u[0] for u in worker.values())
        dask["cpu"] += sum(u[1] for u in worker.values())
        rows.append((f"{args.principals}-principal ACL, --engine dask", dask))
        identical = (d / "dask.json").read_bytes() == (d / "local.json").read_bytes()
        assert identical, "the Dask engine's report differs from the local one"
    summary = json.loads((d / "local.json").read_text())
    print(
        f"{args.queries:,} queries × {args.depth:,} results ({size:.1f} GB run file), "
        f"{summary['pairs']:,} query-principal pairs with the ACL; {os.cpu_count()} cores; "
        f"load average after: {os.getloadavg()[0]:.1f}"
        + ("; dask report byte-identical to local" if identical else "")
    )
    print("\n| arecall evaluate | process wall | CPU (user + system) | peak memory |")
    print("|---|--:|--:|--:|")
    for name, row in rows:
        peak = f"{row['rss'] / 2**30:.2f} GiB"
        if "rss_workers" in row:
            peak += f" (client); {row['rss_workers'] / 2**30:.2f} GiB (largest worker)"
        print(f"| {name} | {row['wall']:.1f} s | {row['cpu']:.1f} s | {peak} |")


# -- breakdown -----------------------------------------------------------------------------------


def breakdown(args: argparse.Namespace, d: Path) -> None:
    import threading

    import arecall.evaluate.evaluation as evaluation
    import arecall.evaluate.inputs as inputs
    import arecall.evaluate.kernels as kernels
    import arecall.evaluate.pairs as pairs
    import arecall.io.acl as acl

    if not (d / "run.trec").exists():
        generate(d, args.queries, args.depth, args.seed)
    if not (d / "acl.tsv").exists():
        generate_acl(d, args.principals, args.seed)
    parts: dict[str, list[float]] = {}
    lock = threading.Lock()

    def timing(owner: Any, name: str, label: str, *also: Any) -> None:
        inner = getattr(owner, name)

        def timed_part(*a: Any, **k: Any) -> Any:
            wall, cpu = time.perf_counter(), time.thread_time()
            try:
                return inner(*a, **k)
            finally:
                with lock:
                    row = parts.setdefault(label, [0.0, 0.0, 0])
                    row[0] += time.thread_time() - cpu
                    row[1] += time.perf_counter() - wall
                    row[2] += 1

        for where in (owner, *also):
            setattr(where, name, timed_part)

    timing(acl, "load_acl", "read the ACL and groups (load_acl)", inputs, evaluation)
    timing(acl.Acl, "doc_patterns", "look documents up in the ACL (Acl.doc_patterns)")
    timing(kernels, "prepare", "prepare a block, look-ups included (kernels.prepare)", evaluation)
    timing(kernels, "pair_counts", "pair kernel (kernels.pair_counts)", evaluation)
    timing(kernels, "standard", "standard measures (kernels.standard)", evaluation)
    timing(pairs.Tallies, "add", "tally the pairs (pairs.Tallies.add)")
    before, started = _own_usage()[1], time.perf_counter()
    result = evaluation.evaluate(
        d / "run.trec", d / "qrels.txt", d / "acl.tsv", groups=d / "groups.tsv", k=KS
    )
    result.summary()
    peak, cpu = _own_usage()
    print(
        f"{args.queries:,} queries × {args.depth:,} results, {args.principals:,} principals; "
        f"in process: {time.perf_counter() - started:.1f} s wall, {cpu - before:.1f} s CPU, "
        f"peak {peak / 2**30:.2f} GiB; load average after: {os.getloadavg()[0]:.1f}"
    )
    print("\n| part | thread CPU | wall | calls |")
    print("|---|--:|--:|--:|")
    for label, (part_cpu, wall, calls) in sorted(parts.items(), key=lambda kv: -kv[1][0]):
        print(f"| {label} | {part_cpu:.2f} s | {wall:.2f} s | {calls} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "what", nargs="?", choices=("compare", "scale", "breakdown"), default="compare"
    )
    parser.add_argument("--queries", type=int, default=9_474)
    parser.add_argument("--depth", type=int, default=994)
    parser.add_argument("--principals", type=int, default=1_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dask", action="store_true", help="scale: also on a Dask cluster")
    parser.add_argument("--dir", help="where the files are (kept, and reused if there)")
    args = parser.parse_args()
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    if args.dir:
        d = Path(args.dir)
        d.mkdir(parents=True, exist_ok=True)
        _WHAT[args.what](args, d)
        return
    with tempfile.TemporaryDirectory(prefix="arecall-bench-") as tmp:
        _WHAT[args.what](args, Path(tmp))


_WHAT = {"compare": compare, "scale": scale, "breakdown": breakdown}

if __name__ == "__main__":
    main()
