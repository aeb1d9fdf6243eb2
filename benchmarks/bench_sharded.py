"""Sharded evaluation (issues 13, 36): ``arecall evaluate`` with an ACL, local engine vs a Dask
cluster, and what each part holds as pairs grow.

    .venv/bin/python benchmarks/bench_sharded.py all [--queries 10000 --principals 1000,10000]

Writes a synthetic TREC run (``--queries`` × ``--depth`` results over ``--docs`` documents),
qrels, an ACL naming groups and a groups file giving every principal ``--grants`` of
``--groups`` groups, then runs `arecall.evaluate.evaluate` (arecall's readers, the evaluate
path) in a fresh process per measurement, at each principal count:

* **local**: wall time and peak RSS (``getrusage``), and the in-process time of the per-pair
  kernel (`arecall.evaluate.pairs.reduce_block`, summed over blocks) per pair;
* **dask**: on a loopback cluster started here — ``dask scheduler --host 127.0.0.1`` and
  ``--workers`` ``dask worker --host 127.0.0.1 --nthreads 1`` processes (nannies, as users run
  them), restarted before each measurement so each worker's peak is that measurement's — wall
  time (cluster start excluded, reported on its own), the client's peak RSS, each worker's
  peak RSS, the bytes gathered back to the client (dask's ``sizeof`` of the blocks' results,
  which are tallies), and the kernel's time per pair on the workers (the task stream's compute
  time of the ``reduce_block`` tasks). The JSON summaries of both engines must be
  byte-identical (asserted).

Then the client's memory per pair (the slope between the sizes) and the worker / local ratio
of the kernel's per-pair time. Every process started here is stopped at the end, however it
ends.

``one``: one measurement (used by ``all``; prints one JSON line).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import signal
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


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _thread_cpu() -> dict[str, float]:
    """This process's CPU seconds by thread: the event loop (a Dask worker's main thread) and
    the rest (the task threads, and any other)."""
    import threading

    tick = os.sysconf("SC_CLK_TCK")
    main = threading.main_thread().native_id
    out = {"loop": 0.0, "other": 0.0}
    for tid in os.listdir("/proc/self/task"):
        try:
            stat = Path(f"/proc/self/task/{tid}/stat").read_text()
        except OSError:  # the thread ended
            continue
        fields = stat.rsplit(")", 1)[1].split()
        out["loop" if int(tid) == main else "other"] += (int(fields[11]) + int(fields[12])) / tick
    return out


def one(args: argparse.Namespace) -> None:
    """One evaluation in this process; prints wall time, peak RSS and (dask) what was shipped."""
    import arecall.evaluate.evaluation as evaluation
    from arecall.core.engine import make_engine
    from arecall.evaluate.evaluation import evaluate

    d = Path(args.dir)
    principals = [f"p{i}" for i in range(args.n_principals)]
    if args.untuned:  # as before issue 36's fix: the workers keep Dask's profiler, and a
        import arecall.core.dask_workers as dask_workers  # block up to 2 GiB of temporaries
        import arecall.core.engine as engine_module

        dask_workers.register = lambda client: None  # type: ignore[assignment]
        engine_module.WORKER_BLOCK_BYTES = (1 << 26, 1 << 31)
    kernel, kernel_cpu, calls, loop_cpu = [0.0], [0.0], [0], [0.0]
    if args.engine == "local":  # the per-pair kernel's own time, as the task stream has it
        reduce_block = evaluation.reduce_block

        def timed(*a: Any, **kw: Any) -> Any:
            t, cpu = time.perf_counter(), time.thread_time()
            try:
                return reduce_block(*a, **kw)
            finally:
                kernel[0] += time.perf_counter() - t
                kernel_cpu[0] += time.thread_time() - cpu
                calls[0] += 1

        evaluation.reduce_block = timed  # type: ignore[assignment]
    started = time.perf_counter()
    with make_engine(args.engine, args.scheduler, args.block or None) as engine:
        stream = contextlib.nullcontext()
        if args.engine == "dask":  # the workers' CPU so far (their start, arecall's import)
            before = engine.client.run(_cpu_seconds)  # type: ignore[attr-defined]
            kernel_cpu[0] = -sum(before.values())
            threads = engine.client.run(_thread_cpu)  # type: ignore[attr-defined]
            loop_cpu[0] = -sum(t["loop"] for t in threads.values())
        if args.engine == "dask":
            import distributed

            stream = distributed.get_task_stream(client=engine.client)  # type: ignore[attr-defined]
        with stream as tasks:
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
            # the workers' CPU time during the evaluation: the kernel and everything a worker
            # does for it (receiving, deserialising, sending back)
            kernel_cpu[0] += sum(
                engine.client.run(_cpu_seconds).values()  # type: ignore[attr-defined]
            )
            threads = engine.client.run(_thread_cpu)  # type: ignore[attr-defined]
            loop_cpu[0] += sum(t["loop"] for t in threads.values())
            kernel[0] = sum(
                part["stop"] - part["start"]
                for task in tasks.data
                if "reduce_block" in str(task["key"])
                for part in task["startstops"]
                if part["action"] == "compute"
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
                "kernel_seconds": kernel[0],
                "kernel_cpu": kernel_cpu[0],
                "loop_cpu": loop_cpu[0],
                "tasks": sum(x["tasks"] for x in shipped) or calls[0],
                "load": os.getloadavg()[0],
                "gathered_bytes": sum(x["result_bytes"] for x in shipped),
                "scattered_bytes": sum(x["shared_bytes"] * x["workers"] for x in shipped),
                "task_bytes": sum(x["task_bytes"] for x in shipped),
            }
        )
    )


def _measure(
    args: argparse.Namespace,
    d: Path,
    n_p: int,
    engine: str,
    scheduler: str = "",
    extra: tuple[str, ...] = (),
) -> dict[str, Any]:
    out = d / f"summary-{engine}-{n_p}.json"
    cmd = [
        sys.executable, __file__, "one", "--dir", str(d), "--n-principals", str(n_p),
        "--engine", engine, "--out", str(out), "--k", args.k, "--resamples", str(args.resamples),
        "--block", str(args.block),
    ]  # fmt: skip
    if scheduler:
        cmd += ["--scheduler", scheduler]
    cmd += extra
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr)
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    row["summary"] = out.read_bytes()
    return row


@contextlib.contextmanager
def loopback_cluster(directory: Path, workers: int) -> Any:
    """``dask scheduler`` and ``workers`` ``dask worker`` processes (one thread each), every
    socket on 127.0.0.1; yields the scheduler's address; stops every process it started."""
    bin_dir = Path(sys.executable).parent
    scheduler_file = directory / "scheduler.json"
    # the HTTP servers listen on every interface unless told: bound to loopback like the rest
    common = ["--host", "127.0.0.1", "--no-dashboard", "--dashboard-address", "127.0.0.1:0"]
    procs: list[subprocess.Popen[bytes]] = []
    logs = directory / "cluster.log"
    try:
        with logs.open("ab") as log:
            procs.append(
                subprocess.Popen(
                    [
                        str(bin_dir / "dask"),
                        "scheduler",
                        *common,
                        "--port",
                        "0",
                        "--scheduler-file",
                        str(scheduler_file),
                        "--idle-timeout",
                        "3600",
                    ],
                    stdout=log,
                    stderr=log,
                    start_new_session=True,
                )
            )
            deadline = time.monotonic() + 60
            while not scheduler_file.is_file() or not scheduler_file.read_text().strip():
                if time.monotonic() > deadline or procs[0].poll() is not None:
                    raise SystemExit(f"the scheduler did not start: see {logs}")
                time.sleep(0.2)
            for i in range(workers):
                procs.append(
                    subprocess.Popen(
                        [
                            str(bin_dir / "dask"),
                            "worker",
                            *common,
                            "--nthreads",
                            "1",
                            "--scheduler-file",
                            str(scheduler_file),
                            "--memory-limit",
                            "6GiB",
                            "--death-timeout",
                            "60",
                            "--local-directory",
                            str(directory / f"worker-{i}"),
                        ],
                        stdout=log,
                        stderr=log,
                        start_new_session=True,
                    )
                )
        time.sleep(0.2)
        yield json.loads(scheduler_file.read_text())["address"]
    finally:
        for proc in reversed(procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


def _fresh_workers(address: str, workers: int, untuned: bool = False) -> None:
    """Restart the workers (each measurement's peak RSS its own) and import arecall on them;
    ``untuned``: first take arecall's worker plugin off the scheduler, so the restarted
    workers run as they were started (Dask's profiler on) until an engine registers it."""
    import distributed

    with distributed.Client(address, timeout=60) as client:
        client.wait_for_workers(workers, timeout=120)
        if untuned:
            from arecall.core.dask_workers import WORKER_TUNING

            with contextlib.suppress(Exception):  # not registered yet
                client.unregister_worker_plugin(WORKER_TUNING)
        client.restart(timeout=120)
        client.wait_for_workers(workers, timeout=120)
        # a long-lived cluster has imported arecall once: not part of an evaluation
        client.run(lambda: __import__("arecall.evaluate.evaluation"))


def run_all(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        generate(d, args)
        local = {n_p: _measure(args, d, n_p, "local") for n_p in args.principal_counts}
        started = time.perf_counter()
        with loopback_cluster(d, args.workers) as address:
            _fresh_workers(address, args.workers)
            cluster_start = time.perf_counter() - started
            dask = {}
            for n_p in args.principal_counts:
                _fresh_workers(address, args.workers)
                dask[n_p] = _measure(args, d, n_p, "dask", address)
    for n_p in args.principal_counts:
        assert dask[n_p]["summary"] == local[n_p]["summary"], f"summaries differ at {n_p}"
    print(
        f"synthetic: {args.queries:,} queries × {args.depth} results over {args.docs:,} documents; "
        f"ACL of {args.groups} groups, {args.grants} per principal; K = {args.k}; "
        f"{args.resamples} resamples; cluster: scheduler + {args.workers} workers × 1 thread on "
        f"127.0.0.1 (start {cluster_start:.1f} s, not included); summaries byte-identical\n"
    )
    print(
        "| engine | principals | pairs | wall time | client peak RSS | workers' peak RSS "
        "| gathered to the client | kernel µs per pair (wall) | CPU µs per pair |"
    )
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    for n_p in args.principal_counts:
        for name, r in (("local", local[n_p]), (f"dask ({args.workers} × 1 thread)", dask[n_p])):
            w = ", ".join(f"{x / GIB:.2f}" for x in r["workers_rss"]) or "–"
            gathered = f"{r['gathered_bytes'] / 1e3:.1f} kB" if r["tasks"] else "–"
            print(
                f"| {name} | {n_p:,} | {r['pairs']:,} | {r['seconds']:.1f} s "
                f"| {r['rss'] / GIB:.2f} GiB | {w} | {gathered} "
                f"| {r['kernel_seconds'] / r['pairs'] * 1e6:.3f} "
                f"| {r['kernel_cpu'] / r['pairs'] * 1e6:.3f} |"
            )
    print()
    for n_p in args.principal_counts:
        r, loc = dask[n_p], local[n_p]
        print(
            f"{r['pairs']:,} pairs: dask/local wall {r['seconds'] / loc['seconds']:.2f}×, "
            f"per pair on a worker / local kernel: wall "
            f"{r['kernel_seconds'] / loc['kernel_seconds']:.2f}×, CPU "
            f"{r['kernel_cpu'] / loc['kernel_cpu']:.2f}×; "
            f"{r['tasks']} tasks, {r['scattered_bytes'] / 1e6:.1f} MB scattered (all workers), "
            f"{r['task_bytes'] / 1e6:.1f} MB with the tasks, {r['gathered_bytes']:,} bytes "
            f"gathered ({r['gathered_bytes'] / r['pairs']:.2e} B per pair)"
        )
    if len(args.principal_counts) > 1:
        lo, hi = args.principal_counts[0], args.principal_counts[-1]
        added = dask[hi]["pairs"] - dask[lo]["pairs"]
        worker = (dask[hi]["kernel_cpu"] - dask[lo]["kernel_cpu"]) / added * 1e6
        kernel = (local[hi]["kernel_cpu"] - local[lo]["kernel_cpu"]) / added * 1e6
        print(
            f"CPU per added pair from {dask[lo]['pairs']:,} to {dask[hi]['pairs']:,}: workers "
            f"{worker:.3f} µs, local kernel {kernel:.3f} µs ({worker / kernel:.2f}×; what a "
            f"measurement's fresh workers pay once — imports, the shared arrays — drops out)"
        )
        for name, runs in (("local", local), ("dask client", dask)):
            slope = (runs[hi]["rss"] - runs[lo]["rss"]) / (runs[hi]["pairs"] - runs[lo]["pairs"])
            growth = runs[hi]["rss"] / runs[lo]["rss"]
            print(
                f"{name}: peak RSS ×{growth:.2f} from {runs[lo]['pairs']:,} to "
                f"{runs[hi]['pairs']:,} pairs ({slope:.2f} B per added pair)"
            )


#: Which stage each block function's tasks belong to (the task stream's keys name the function).
_STAGE_OF = {
    "_rank_query_block": "rank",
    "_place_block": "filter",
    "_reduce_block": "score",
    "_check_block": "prove",
}


def _pipeline_once(args: argparse.Namespace, n_q: int, n_p: int, work: Path) -> dict[str, Any]:
    """Every stage at ``n_q`` queries and ``n_p`` principals on a fresh loopback cluster: per
    stage the wall time, the client's peak RSS, the workers' peak RSS (workers restarted before
    each stage) and the bytes the stage's blocks sent back (the task stream's ``nbytes`` of
    their results)."""
    import distributed
    import yaml

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_pipeline import STAGES, _run_stage, scale_overrides

    from arecall.pipeline.config import default_config

    args = argparse.Namespace(**{**vars(args), "queries": n_q, "principals": n_p})
    with loopback_cluster(work, args.workers) as address:
        overrides = [
            *scale_overrides(args),
            "evaluation.engine.name=dask",
            f"evaluation.engine.scheduler={address}",
        ]
        cfg = default_config(overrides)
        (work / "params.yaml").write_text(yaml.safe_dump(cfg.params(), sort_keys=False))
        rows = []
        with distributed.Client(address, timeout=60) as client:
            client.get_task_stream()  # installs the scheduler's task-stream plugin
            for name in STAGES:
                _fresh_workers(address, args.workers)
                seconds, gib = _run_stage(name, work)
                workers_rss = client.run(
                    lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
                )
                rows.append(
                    {
                        "stage": name,
                        "seconds": seconds,
                        "client_gib": gib,
                        "workers_gib": max(workers_rss.values()) / GIB,
                    }
                )
                print(f"  {n_q}×{n_p}: {name}: {seconds:.1f} s, {gib:.2f} GiB", file=sys.stderr)
            records = client.get_task_stream(count=1_000_000)
    metrics = json.loads((work / "reports" / "metrics.json").read_text())
    sent: dict[str, int] = {}
    tasks: dict[str, int] = {}
    for r in records:
        key = str(r["key"])
        stage = _STAGE_OF.get(key.split("-")[1]) if key.startswith("arecall-") else None
        if stage:
            nbytes = r.get("nbytes", 0)
            nbytes = sum(nbytes.values()) if isinstance(nbytes, dict) else int(nbytes)
            sent[stage] = sent.get(stage, 0) + nbytes
            tasks[stage] = tasks.get(stage, 0) + 1
    for row in rows:
        row["sent_bytes"] = sent.get(row["stage"])
        row["tasks"] = tasks.get(row["stage"])
    return {"metrics": metrics, "rows": rows}


def run_pipeline(args: argparse.Namespace) -> None:
    """Every DVC stage as its own process with ``evaluation.engine.name=dask`` on a loopback
    cluster, at each principal count (``--principals 100,1000``: 10^6 and 10^7 pairs at 10,000
    queries) or query count (``--queries 1000,10000 --principals 1000``: the same pairs over
    one ACL): per stage the wall time, the client's peak RSS, the workers' peak RSS and the
    bytes sent back, then the client's growth from the smallest to the largest count."""
    queries = [int(x) for x in str(args.queries).split(",")]
    principals = [int(x) for x in str(args.principals).split(",")]
    if len(queries) > 1 and len(principals) > 1:
        raise SystemExit("--queries or --principals may list several counts, not both")
    counts = [(q, p) for q in queries for p in principals]
    load = os.getloadavg()
    runs = {}
    for n_q, n_p in counts:
        with tempfile.TemporaryDirectory() as tmp:
            runs[(n_q, n_p)] = _pipeline_once(args, n_q, n_p, Path(tmp))
    print(
        f"pipeline: synthetic, {args.docs:,} documents, queries × principals "
        + ", ".join(f"{q:,} × {p:,}" for q, p in counts)
        + f", K up to {args.kmax}; evaluation.engine.name=dask on {args.workers} workers × 1 "
        f"thread, 127.0.0.1; load average at the start {load[0]:.2f} / {load[1]:.2f} / "
        f"{load[2]:.2f} (1/5/15 min), at the end "
        + " / ".join(f"{x:.2f}" for x in os.getloadavg())
        + "\n"
    )
    print(
        "| pairs | stage | wall time | client peak RSS | workers' peak RSS | tasks "
        "| sent back to the client |"
    )
    print("|--:|---|--:|--:|--:|--:|--:|")
    for size in counts:
        pairs = runs[size]["metrics"]["pairs"]
        for row in runs[size]["rows"]:
            sent = row["sent_bytes"]
            sent_text = "–" if sent is None else f"{sent / 1e3:,.1f} kB ({sent / pairs:.4f} B/pair)"
            print(
                f"| {pairs:,} | {row['stage']} | {row['seconds']:.1f} s "
                f"| {row['client_gib']:.2f} GiB | {row['workers_gib']:.2f} GiB "
                f"| {row['tasks'] or '–'} | {sent_text} |"
            )
        total = sum(r["seconds"] for r in runs[size]["rows"])
        peak = max(r["client_gib"] for r in runs[size]["rows"])
        print(f"| {pairs:,} | **total** | **{total / 60:.1f} min** | **{peak:.2f} GiB** | | | |")
    if len(counts) > 1:
        lo, hi = runs[counts[0]], runs[counts[-1]]
        print()
        for a, b in zip(lo["rows"], hi["rows"], strict=True):
            print(
                f"{a['stage']}: client peak ×{b['client_gib'] / a['client_gib']:.2f} from "
                f"{lo['metrics']['pairs']:,} to {hi['metrics']['pairs']:,} pairs"
            )


def kernel_once(args: argparse.Namespace) -> None:
    """The kernel's time per pair in this process (the environment decides the allocator)."""
    from arecall.core.dask_workers import tune_allocator
    from arecall.evaluate.inputs import as_acl, as_qrels
    from arecall.evaluate.kernels import EvalQrels, authorization_tables, pair_inputs, prepare
    from arecall.evaluate.pairs import reduce_block
    from arecall.io.trec import load_run

    d, n_p, step = Path(args.dir), args.n_principals, 20
    if args.tune:
        tune_allocator()
    acl = as_acl(d / "acl.tsv", [f"p{i}" for i in range(n_p)], d / "groups.tsv")
    judg = EvalQrels.of(as_qrels(d / "qrels.txt"), (int(args.k),))
    inputs = pair_inputs(prepare(load_run(d / "run.trec"), judg, acl), judg.ks)
    tables = [authorization_tables(acl, s, min(s + step, n_p)) for s in range(0, n_p, step)]
    times = []
    for _ in range(args.repeats):
        t = time.perf_counter()
        for i, s in enumerate(range(0, n_p, step)):
            reduce_block(s, min(s + step, n_p), tables[i], keep="none", part_prefix=None, **inputs)
        times.append(time.perf_counter() - t)
    median = sorted(times)[len(times) // 2]
    print(json.dumps({"us_per_pair": median / (n_p * judg.n_queries) * 1e6}))


def run_allocator(args: argparse.Namespace) -> None:
    """The kernel per pair in fresh processes, interleaved: as a plain process, with the
    nanny's ``MALLOC_TRIM_THRESHOLD_=65536``, and with that variable and the allocator tuned."""
    args.principal_counts = [args.principals]
    cases = {
        "plain process": ({}, []),
        "MALLOC_TRIM_THRESHOLD_=65536 (Dask's nanny)": ({"MALLOC_TRIM_THRESHOLD_": "65536"}, []),
        "the same, allocator tuned": ({"MALLOC_TRIM_THRESHOLD_": "65536"}, ["--tune"]),
    }
    found: dict[str, list[float]] = {name: [] for name in cases}
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        generate(d, args)
        for _ in range(args.rounds):
            for name, (env, extra) in cases.items():
                cmd = [sys.executable, __file__, "kernel", "--dir", str(d), "--k", args.k,
                       "--n-principals", str(args.principals), *extra]  # fmt: skip
                out = subprocess.run(
                    cmd, capture_output=True, text=True, check=True, env={**os.environ, **env}
                )
                found[name].append(json.loads(out.stdout.strip().splitlines()[-1])["us_per_pair"])
    print(
        f"reduce_block on {args.queries:,} queries × {args.principals} principals, K = {args.k}, "
        f"blocks of 20 principals; median of {args.rounds} interleaved rounds\n"
    )
    print("| process | µs per pair |")
    print("|---|--:|")
    for name, values in found.items():
        print(f"| {name} | {float(np.median(values)):.2f} |")


def run_worker(args: argparse.Namespace) -> None:
    """A pair's CPU cost on a worker against the local engine's, on the same blocks: one
    ``dask scheduler`` + one ``dask worker --nthreads 1`` (as users start them, Dask's profiler
    on), and per round, interleaved, each a fresh process: the local engine (the kernel's CPU,
    ``reduce_block`` summed over blocks), the worker as before issue 36's fix (arecall's worker
    plugin kept off: profiler on; automatic blocks up to 2 GiB) and the worker as arecall now
    leaves it (the plugin registered by the engine: profiler off, allocator tuned; blocks up
    to the local engine's 256 MiB). A worker's cost is its whole
    process's CPU during the evaluation: the kernel, and receiving, deserialising and sending
    back, its event loop and everything Dask runs there. The worker is restarted before each
    measurement (a fresh heap, as a user's new worker)."""
    n_p = args.principals
    args.principal_counts = [n_p]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        generate(d, args)
        with loopback_cluster(d, 1) as address:
            for _ in range(args.rounds):
                local = _measure(args, d, n_p, "local")
                _fresh_workers(address, 1, untuned=True)
                before = _measure(args, d, n_p, "dask", address, ("--untuned",))
                _fresh_workers(address, 1)
                after = _measure(args, d, n_p, "dask", address)
                for r in (before, after):
                    assert r["summary"] == local["summary"], "summaries differ"
                    if args.block:  # automatic: a small call's blocks may differ
                        assert r["tasks"] == local["tasks"], (r["tasks"], local["tasks"])
                rows.append({"local": local, "before": before, "after": after})
    pairs = rows[0]["local"]["pairs"]
    print(
        f"synthetic: {args.queries:,} queries × {args.depth} results, {n_p:,} principals "
        f"({pairs:,} pairs), K = {args.k}; blocks of {args.block or 'automatic'} principals "
        f"({rows[0]['local']['tasks']} local, {rows[0]['after']['tasks']} on the worker); "
        f"one worker × 1 thread on 127.0.0.1; "
        f"{args.rounds} interleaved rounds; summaries byte-identical\n"
    )
    print(
        "| round | load average | local kernel CPU µs/pair | worker before (profiler on) "
        "| worker now | before / local | now / local | worker's event loop, before → now |"
    )
    print("|--:|--:|--:|--:|--:|--:|--:|--:|")
    for i, row in enumerate(rows, 1):
        loc, old, new = (row[k]["kernel_cpu"] / pairs * 1e6 for k in ("local", "before", "after"))
        load = ", ".join(f"{row[k]['load']:.1f}" for k in ("local", "before", "after"))
        loop = " → ".join(
            f"{row[k]['loop_cpu']:.2f} s ({row[k]['loop_cpu'] / row[k]['seconds']:.3f} s/s)"
            for k in ("before", "after")
        )
        print(
            f"| {i} | {load} | {loc:.3f} | {old:.3f} | {new:.3f} | {old / loc:.2f}× "
            f"| {new / loc:.2f}× | {loop} |"
        )
    ratio = [r["after"]["kernel_cpu"] / r["local"]["kernel_cpu"] for r in rows]
    was = [r["before"]["kernel_cpu"] / r["local"]["kernel_cpu"] for r in rows]
    print(
        f"\nmedian worker / local CPU per pair: now {float(np.median(ratio)):.2f}× "
        f"(before {float(np.median(was)):.2f}×)"
    )


def run_blocks(args: argparse.Namespace) -> None:
    """The local engine's kernel CPU per pair at fixed block sizes (fresh processes, rounds
    interleaved): why a Dask worker's block is capped at the local engine's 256 MiB."""
    n_p = args.principals
    args.principal_counts = [n_p]
    sizes = [int(x) for x in args.sizes.split(",")]
    found: dict[int, list[float]] = {b: [] for b in sizes}
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        generate(d, args)
        for _ in range(args.rounds):
            for b in sizes:
                args.block = b
                r = _measure(args, d, n_p, "local")
                found[b].append(r["kernel_cpu"] / r["pairs"] * 1e6)
    print(
        f"reduce_block (local engine), {args.queries:,} queries × {n_p:,} principals, "
        f"K = {args.k}; median of {args.rounds} interleaved rounds\n"
    )
    print("| principals per block | kernel CPU µs per pair | / best |")
    print("|--:|--:|--:|")
    best = min(float(np.median(v)) for v in found.values())
    for b, values in found.items():
        m = float(np.median(values))
        print(f"| {b:,} | {m:.3f} | {m / best:.2f}× |")


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
    a.add_argument("--principals", default="100,1000", help="principal counts, ascending")
    a.add_argument("--workers", type=int, default=2)
    a.add_argument("--k", default="10")
    a.add_argument("--resamples", type=int, default=2000)
    a.add_argument("--block", type=int, default=0, help="principals per task (0: automatic)")
    a.add_argument("--seed", type=int, default=0)
    pl = sub.add_parser("pipeline", help="every stage with evaluation.engine.name=dask")
    pl.add_argument("--docs", type=int, default=100_000)
    pl.add_argument("--queries", default="10000", help="query counts, ascending")
    pl.add_argument("--principals", default="100,1000", help="principal counts, ascending")
    pl.add_argument("--kmax", type=int, default=10)
    pl.add_argument("--retriever", default="tfidf")
    pl.add_argument("--corpus", default="realistic")
    pl.add_argument("--workers", type=int, default=2)
    al = sub.add_parser("allocator", help="the kernel per pair under the nanny's allocator")
    al.add_argument("--queries", type=int, default=2_000)
    al.add_argument("--depth", type=int, default=100)
    al.add_argument("--docs", type=int, default=100_003)
    al.add_argument("--groups", type=int, default=100)
    al.add_argument("--grants", type=int, default=5)
    al.add_argument("--principals", type=int, default=400)
    al.add_argument("--k", default="10")
    al.add_argument("--rounds", type=int, default=3)
    al.add_argument("--seed", type=int, default=0)
    ke = sub.add_parser("kernel", help="one kernel timing (JSON line; used by allocator)")
    ke.add_argument("--dir", required=True)
    ke.add_argument("--n-principals", type=int, required=True)
    ke.add_argument("--k", default="10")
    ke.add_argument("--repeats", type=int, default=3)
    ke.add_argument("--tune", action="store_true")
    w = sub.add_parser("worker", help="a pair's CPU on a worker vs the local engine")
    w.add_argument("--queries", type=int, default=10_000)
    w.add_argument("--depth", type=int, default=100)
    w.add_argument("--docs", type=int, default=100_003)
    w.add_argument("--groups", type=int, default=100)
    w.add_argument("--grants", type=int, default=5)
    w.add_argument("--principals", type=int, default=3_000)
    w.add_argument("--k", default="10")
    w.add_argument("--resamples", type=int, default=200)
    w.add_argument("--block", type=int, default=0, help="principals per block (0: automatic)")
    w.add_argument("--rounds", type=int, default=3)
    w.add_argument("--seed", type=int, default=0)
    b = sub.add_parser("blocks", help="the local kernel per pair at fixed block sizes")
    b.add_argument("--queries", type=int, default=10_000)
    b.add_argument("--depth", type=int, default=100)
    b.add_argument("--docs", type=int, default=100_003)
    b.add_argument("--groups", type=int, default=100)
    b.add_argument("--grants", type=int, default=5)
    b.add_argument("--principals", type=int, default=3_000)
    b.add_argument("--sizes", default="100,250,750,1500", help="principals per block")
    b.add_argument("--k", default="10")
    b.add_argument("--resamples", type=int, default=200)
    b.add_argument("--rounds", type=int, default=3)
    b.add_argument("--seed", type=int, default=0)
    o = sub.add_parser("one", help="one measurement (JSON line)")
    o.add_argument("--dir", required=True)
    o.add_argument("--n-principals", type=int, required=True)
    o.add_argument("--engine", default="local")
    o.add_argument("--scheduler", default="")
    o.add_argument("--out", required=True)
    o.add_argument("--k", default="10")
    o.add_argument("--resamples", type=int, default=2000)
    o.add_argument("--block", type=int, default=0)
    o.add_argument("--untuned", action="store_true", help="dask: no worker plugin (as before)")
    args = parser.parse_args()
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    if args.which == "all":
        args.principal_counts = [int(x) for x in args.principals.split(",")]
        run_all(args)
    elif args.which == "pipeline":
        run_pipeline(args)
    elif args.which == "allocator":
        run_allocator(args)
    elif args.which == "blocks":
        run_blocks(args)
    elif args.which == "worker":
        run_worker(args)
    elif args.which == "kernel":
        kernel_once(args)
    else:
        one(args)


if __name__ == "__main__":
    main()
