"""Sharded evaluation (issue 13): score, prove and ``arecall evaluate`` with an ACL on a real
Dask cluster give the local engine's bytes.

The cluster is a scheduler and two worker processes on this machine, every socket on
127.0.0.1 (checked), started once for the module and stopped in a finally, bounded in time.
The engine-independent parts — blocks of any size give the same arrays and counterexamples —
are checked without a cluster.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

import arecall.pipeline.proof as proof
from arecall.cli.evaluate import evaluate_main
from arecall.core.engine import DaskEngine, LocalEngine, blocks_of, engine_from_config, make_engine
from arecall.core.errors import ArecallError
from arecall.core.placed_lists import place_all
from arecall.core.ranking import rank_queries
from arecall.core.scoring import score_pairs
from arecall.evaluate.evaluation import evaluate
from arecall.pipeline.config import checked, default_config
from arecall.pipeline.run import Layout, filter_lists, generate, prove, rank, score
from arecall.pipeline.schema import EngineConfig

from tests.helpers import FAST_PROOF

#: Seconds the cluster may take to start, and to stop.
START_TIMEOUT, STOP_TIMEOUT = 60, 30


# -- the cluster -----------------------------------------------------------------------------------


@contextmanager
def local_cluster(n_workers: int = 2) -> Iterator[Any]:
    """A scheduler (this process) and ``n_workers`` worker processes, all on 127.0.0.1.

    Stopped on exit whatever happened, within `STOP_TIMEOUT`; a worker process still alive then
    is killed by its pid (only the processes this cluster started).
    """
    import distributed
    import psutil

    cluster = distributed.LocalCluster(
        n_workers=n_workers,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,  # no dashboard; its HTTP server (/health) on a free port, not
        scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},  # 8787 first (a warning if taken)
        worker_dashboard_address=None,
        timeout=START_TIMEOUT,
        silence_logs=40,
    )
    pids = [w.process.pid for w in cluster.workers.values() if w.process is not None]
    try:
        yield cluster
    finally:
        try:
            cluster.close(timeout=STOP_TIMEOUT)
        finally:
            for pid in pids:
                with suppress(psutil.NoSuchProcess):
                    psutil.Process(pid).kill()


def cluster_pids(cluster: Any) -> list[int]:
    """The scheduler's process (this one: LocalCluster runs it in-process) and the workers'."""
    workers = [w.process.pid for w in cluster.workers.values() if w.process is not None]
    return [os.getpid(), *workers]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with local_cluster(2) as c:
        yield c


def wait_for_workers(address: str, n: int) -> None:
    import distributed

    with distributed.Client(address, timeout=START_TIMEOUT) as client:
        client.wait_for_workers(n, timeout=START_TIMEOUT)


# -- engine-independent: blocks of any size give the same answer ----------------------------------


def test_blocks_cover_every_principal_once():
    for n in range(0, 12):
        for size in range(1, 6):
            spans = blocks_of(n, size)
            covered = [p for s, e in spans for p in range(s, e)]
            assert covered == list(range(n))
            assert all(0 < e - s <= size for s, e in spans)
    with pytest.raises(ArecallError, match="block size"):
        blocks_of(3, 0)


def test_engine_config_errors_are_one_line():
    with pytest.raises(
        ArecallError, match=r"evaluation\.engine\.name: expected one of local, dask"
    ):
        make_engine("ray")
    with pytest.raises(ArecallError, match="needs a scheduler address"):
        engine_from_config(EngineConfig(name="dask", scheduler=""))
    with pytest.raises(ArecallError, match=r"block_principals: expected N >= 0"):
        make_engine("local", block=-1)


@pytest.mark.long
def test_an_unreachable_scheduler_is_one_line():
    with pytest.raises(ArecallError, match="cannot reach the Dask scheduler"):
        DaskEngine("tcp://127.0.0.1:9", timeout=1)


def test_the_config_takes_the_engine_section():
    address = "tcp://127.0.0.1:8786"
    cfg = default_config(
        [
            "evaluation.engine.name=dask",
            f"evaluation.engine.scheduler={address}",
            "evaluation.engine.block_principals=3",
        ]
    )
    assert cfg.params()["evaluation"]["engine"] == {
        "name": "dask",
        "scheduler": address,
        "block_principals": 3,
        "block_queries": 0,
        "doc_shards": 1,
    }
    with pytest.raises(ArecallError, match=r"engine\.name: dask needs evaluation\.engine\.sch"):
        default_config(["evaluation.engine.name=dask"])  # no scheduler: refused at composition
    with pytest.raises(ArecallError, match=r"engine\.name"):
        default_config(["evaluation.engine.name=spark"])
    assert engine_from_config(EngineConfig(name="local", scheduler="")) == LocalEngine()
    before = {**default_config().params(), "evaluation": {"ks": [1, 3, 5, 10]}}
    # a params.yaml from before the setting
    assert engine_from_config(checked(before).evaluation.engine) == LocalEngine()


def _random_world(seed: int, n_p: int = 7, n_q: int = 9, n_d: int = 40):
    rng = np.random.default_rng(seed)
    scores = sp.random(n_q, n_d, density=0.5, random_state=rng, format="csr")
    rel = sp.random(n_q, n_d, density=0.2, random_state=rng, format="csr")
    acl = sp.csr_matrix(rng.random((n_p, n_d)) < rng.random((n_p, 1)))
    return scores, rel, acl


@pytest.mark.parametrize("seed", range(4))
def test_score_pairs_is_the_same_for_every_block_size(seed):
    scores, rel, acl = _random_world(seed)
    ks = (1, 3, 5, 10)
    ranking = rank_queries(
        [scores], n_queries=scores.shape[0], depth=3, acl=acl, k_max=10, relevance=rel
    )
    lists = place_all(ranking, acl, 10)
    whole = score_pairs(ranking, lists, rel, acl, ks)
    for block in (1, 2, 5, 100):
        part = score_pairs(ranking, lists, rel, acl, ks, engine=LocalEngine(block=block))
        for name, values in whole.metrics.items():
            assert part.metrics[name].tobytes() == values.tobytes(), (block, name)


def _names(n_p: int, n_q: int, n_d: int) -> dict[str, np.ndarray]:
    return {
        "query_ids": np.array([f"q{i}" for i in range(n_q)], dtype=object),
        "principals": np.array([f"p{i}" for i in range(n_p)], dtype=object),
        "doc_ids": np.array([f"d{i}" for i in range(n_d)], dtype=object),
    }


@pytest.mark.parametrize("seed", range(6))
def test_a_broken_run_names_the_same_counterexample_for_every_block_size(seed):
    scores, rel, acl = _random_world(seed)
    ks = (1, 3, 5, 10)
    ranking = rank_queries([scores], n_queries=scores.shape[0], relevance=rel)
    lists = place_all(ranking, acl, 10)
    s = score_pairs(ranking, lists, rel, acl, ks)
    rng = np.random.default_rng(100 + seed)
    pre, post = lists.pre.copy(), lists.post.copy()
    for _ in range(3):  # break a few pre lists and slip unauthorized items in
        p, q = rng.integers(0, pre.shape[0]), rng.integers(0, pre.shape[1])
        pre[p, q, rng.integers(0, pre.shape[2])] = rng.integers(0, acl.shape[1])
        post[p, q, 0] = rng.integers(0, acl.shape[1])
    broken = dataclasses.replace(lists, pre=pre, post=post)
    names = _names(*acl.shape[:1], scores.shape[0], acl.shape[1])
    want = proof.check_run(broken, s, acl, **names)
    assert not all(r.passed for r in want)
    for block in (1, 3, 64):
        got = proof.check_run(broken, s, acl, **names, engine=LocalEngine(block=block))
        assert got == want, block


# -- on the cluster --------------------------------------------------------------------------------


@pytest.mark.long
def test_every_socket_of_the_cluster_listens_on_loopback(cluster):
    import psutil

    listening = []
    for pid in cluster_pids(cluster):
        for conn in psutil.Process(pid).net_connections(kind="inet"):
            if conn.status == psutil.CONN_LISTEN:
                listening.append((pid, conn.laddr.ip, conn.laddr.port))
    workers = cluster_pids(cluster)[1:]
    assert len(workers) == 2
    assert {pid for pid, _, _ in listening} >= set(workers)  # each worker listens …
    assert all(ip == "127.0.0.1" for _, ip, _ in listening), listening  # … on loopback only
    assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")


def test_the_test_clusters_scheduler_takes_no_fixed_http_port(cluster):
    """The scheduler's HTTP server (health, metrics; no dashboard) defaulted to Dask's 8787,
    with a warning when another job held it: it takes a free port on loopback."""
    server = cluster.scheduler.http_server
    assert server.address == "127.0.0.1" and server.port not in (8787, 0), (
        server.address,
        server.port,
    )


@pytest.fixture(scope="module")
def pipeline_run(tmp_path_factory):
    """generate → rank → filter once; score and prove then run on each engine."""
    cfg = default_config([FAST_PROOF])
    layout = Layout.run(tmp_path_factory.mktemp("pipeline"))
    for stage in (generate, rank, filter_lists):
        stage(cfg, layout)
    return cfg, layout


def _score_and_prove(cfg: dict[str, Any], layout: Layout) -> dict[str, bytes]:
    filter_lists(cfg, layout)
    score(cfg, layout)
    prove(cfg, layout)
    files = (layout.lists, layout.metrics, layout.headline, layout.pairs, layout.proof)
    return {Path(f).name: Path(f).read_bytes() for f in files}


@pytest.mark.long
def test_score_and_prove_on_the_cluster_write_the_local_bytes(cluster, pipeline_run):
    import distributed

    cfg, layout = pipeline_run
    local = _score_and_prove(cfg, layout)
    plain = cfg.params()
    plain["evaluation"]["engine"] = {
        "name": "dask",
        "scheduler": cluster.scheduler_address,
        "block_principals": 1,  # one principal per task: many shards
    }
    sharded = checked(plain)
    with (
        distributed.Client(cluster.scheduler_address) as client,
        distributed.get_task_stream(client) as stream,
    ):
        started = time.perf_counter()
        on_cluster = _score_and_prove(sharded, layout)
        elapsed = time.perf_counter() - started
    assert on_cluster == local
    names = ("_place_block", "_reduce_block", "_check_block")
    tasks = [t for t in stream.data if any(n in str(t["key"]) for n in names)]
    n_p = json.loads(local["metrics.json"])["profiles"]
    assert len(tasks) >= 3 * n_p  # filter, score and prove: one task per principal
    assert len({t["worker"] for t in tasks}) == 2  # both workers took shards
    assert elapsed < 120


@pytest.mark.long
def test_the_score_stage_on_the_cluster_gets_back_sums_not_pairs(cluster, pipeline_run):
    # each block sends back its exact sums and Δ histograms (and its part file's name): what
    # comes back per block does not grow with the pairs, and holds no per-pair array
    from arecall.core.scoring import BlockSums

    cfg, layout = pipeline_run
    filter_lists(cfg, layout)
    engine = DaskEngine(cluster.scheduler_address, block=2)
    try:
        score(cfg, layout, engine)
    finally:
        engine.close()
    shipped = engine.shipped[-1]
    per_block = shipped["result_bytes"] / shipped["tasks"]
    assert shipped["tasks"] >= 2 and per_block < 16 << 10, shipped
    lists_bytes = Path(layout.lists).stat().st_size  # what the client once sliced and sent
    assert shipped["task_bytes"] < lists_bytes / 4  # the blocks' ACL rows, never their lists
    with pytest.MonkeyPatch.context() as mp:  # what a block returns: its sums, no arrays
        returned: list[Any] = []
        real = LocalEngine.map_blocks

        def keep(self: Any, *a: Any, **k: Any) -> list[Any]:
            out = real(self, *a, **k)
            returned.extend(out)
            return out

        mp.setattr(LocalEngine, "map_blocks", keep)
        score(cfg, layout, LocalEngine(block=2))
    assert returned and all(isinstance(r, BlockSums) for r in returned)


@pytest.mark.long
def test_evaluate_with_an_acl_on_the_cluster_gives_the_local_figures(cluster, tmp_path):
    rng = np.random.default_rng(7)
    docs = [f"d{i:03d}" for i in range(60)]
    run_lines, qrel_lines = [], []
    for q in range(25):
        ranked = rng.permutation(60)[: rng.integers(5, 40)]
        run_lines += [f"q{q} Q0 {docs[d]} {r + 1} {100 - r} sys" for r, d in enumerate(ranked)]
        qrel_lines += [f"q{q} 0 {docs[d]} {rng.integers(1, 3)}" for d in rng.permutation(60)[:6]]
    acl_lines = [f"{d}\tp{p}" for d in docs for p in range(6) if rng.random() < 0.4]
    (tmp_path / "run.trec").write_text("\n".join(run_lines) + "\n")
    (tmp_path / "qrels.txt").write_text("\n".join(qrel_lines) + "\n")
    (tmp_path / "acl.tsv").write_text("\n".join(acl_lines) + "\n")
    args = [
        "--run", str(tmp_path / "run.trec"),
        "--qrels", str(tmp_path / "qrels.txt"),
        "--acl", str(tmp_path / "acl.tsv"),
        "--k", "1,5,10",
        "--resamples", "500",
        "--compare-run", str(tmp_path / "run.trec"),  # a second evaluation on the same engine
    ]  # fmt: skip
    outputs = {}
    for name, extra in {
        "local": [],
        "dask": [
            "--engine",
            "dask",
            "--scheduler",
            cluster.scheduler_address,
            "--block-principals",
            "2",
        ],
    }.items():
        for fmt in ("json", "table"):
            out = tmp_path / f"{name}.{fmt}"
            rows = tmp_path / f"{name}.{fmt}.csv"
            code = evaluate_main(
                [*args, *extra, "--format", fmt, "--out", str(out), "--rows", str(rows)]
            )
            assert code == 0
            outputs[name, fmt] = (out.read_bytes(), rows.read_bytes())
    for fmt in ("json", "table"):
        assert outputs["dask", fmt] == outputs["local", fmt]
    summary = json.loads(outputs["local", "json"][0])
    assert summary["pairs"] == 6 * 25 and "significance" in summary["k"]["10"]
    # and the library call, with an engine object: the pairs come back only when asked for,
    # from the files the workers wrote
    inputs = (tmp_path / "run.trec", tmp_path / "qrels.txt")
    with DaskEngine(cluster.scheduler_address, block=4) as engine:
        ev = evaluate(*inputs, acl=tmp_path / "acl.tsv", engine=engine, keep_pairs=True)
        tallied = evaluate(*inputs, acl=tmp_path / "acl.tsv", engine=engine)
    local = evaluate(*inputs, acl=tmp_path / "acl.tsv")
    assert ev.summary() == local.summary() == tallied.summary()
    assert ev.per_pair.equals(local.per_pair)
    with pytest.raises(ArecallError, match="keep_pairs=True"):
        tallied.per_pair  # noqa: B018 - nothing per pair came back to this process


def _block_bytes(start: int, stop: int, data: Any) -> int:
    return int(data.nbytes)


def test_block_data_reaches_the_cluster_without_a_large_task_graph(cluster):
    """``evaluate --engine dask`` printed distributed's "Sending large graph of size 23.85 MiB"
    warning: each block's ACL rows travelled inside the task graph, through the scheduler.
    They are scattered to the workers instead; the results are the same."""
    import warnings

    blocks = [np.full(3_000_000, i, dtype=np.int64) for i in range(2)]  # 24 MB each
    with (
        DaskEngine(cluster.scheduler_address) as engine,
        warnings.catch_warnings(record=True) as seen,
    ):
        warnings.simplefilter("always")
        got = engine.map_blocks(_block_bytes, 2, block_data=lambda s, e: blocks[s], size=1)
    assert got == [24_000_000, 24_000_000]
    assert [str(w.message).splitlines()[0] for w in seen if "large graph" in str(w.message)] == []


def test_evaluate_refuses_a_dask_engine_without_what_it_needs(tmp_path, capsys):
    (tmp_path / "run.trec").write_text("q1 Q0 d1 1 1.0 x\n")
    (tmp_path / "qrels.txt").write_text("q1 0 d1 1\n")
    base = ["--run", str(tmp_path / "run.trec"), "--qrels", str(tmp_path / "qrels.txt")]
    assert evaluate_main([*base, "--engine", "dask", "--scheduler", "tcp://127.0.0.1:9"]) == 2
    assert "--engine dask needs --acl" in capsys.readouterr().err
    (tmp_path / "acl.tsv").write_text("d1\tp\n")
    assert evaluate_main([*base, "--acl", str(tmp_path / "acl.tsv"), "--engine", "dask"]) == 2
    assert "needs --scheduler" in capsys.readouterr().err


@pytest.mark.faults
def test_a_map_survives_the_death_of_every_worker_holding_its_shared_data():
    """Scattered data dies with the workers holding it, and Dask cannot rebuild it: it
    forgets the keys and cancels every block that needs them (dask/distributed#3149; the
    sweep launcher met it as "FutureCancelledError ... already forgotten"). The engine
    scatters its shared arrays to every worker, so one death is survived; here every holder
    is killed while the blocks run, and the engine scatters again and reruns what was lost.
    """
    import signal
    import threading

    import distributed

    values = np.arange(40, dtype=np.int64)

    def slow_sum(start: int, stop: int, data: Any, *, values: np.ndarray) -> int:
        time.sleep(0.4)
        return int(values[start:stop].sum())

    with local_cluster(2) as c, DaskEngine(c.scheduler_address, block=4) as engine:
        out: dict[str, Any] = {}

        def run() -> None:
            try:
                out["result"] = engine.map_blocks(slow_sum, 40, shared={"values": values})
            except BaseException as exc:  # reported by the assertion below
                out["error"] = exc

        thread = threading.Thread(target=run)
        thread.start()
        with distributed.Client(c.scheduler_address, timeout=START_TIMEOUT) as client:
            deadline = time.monotonic() + 60
            holders: set[str] = set()
            while not holders:
                assert time.monotonic() < deadline, "the shared data was never scattered"
                time.sleep(0.1)
                holders = {
                    worker
                    for key, workers in client.who_has().items()
                    if not str(key).startswith("arecall-slow_sum-")
                    for worker in workers
                }
            pids = dict(client.run(os.getpid))
            time.sleep(0.5)  # a block or two under way
            for worker in holders:
                os.kill(pids[worker], signal.SIGKILL)
        thread.join(timeout=180)
        assert not thread.is_alive(), "the map never returned"
    assert "error" not in out, repr(out.get("error"))
    assert [int(x) for x in out["result"]] == [
        int(values[s : s + 4].sum()) for s in range(0, 40, 4)
    ]


def test_a_cluster_that_keeps_losing_the_shared_data_is_one_line_after_two_rescatters(capsys):
    # Rescattering is bounded: a cluster whose workers keep dying is named, not retried forever;
    # each rerun is told in one line.
    from distributed.client import FutureCancelledError

    class Lost:
        status = "cancelled"

        def __init__(self, key: str = "arecall-x") -> None:
            self.key = key

        def release(self) -> None:
            pass

        def result(self) -> Any:
            raise FutureCancelledError(self.key, reason="lost dependencies")

    class Client:
        scatters = 0

        def scatter(self, values: list[Any], **kwargs: Any) -> list[Lost]:
            Client.scatters += 1
            return [Lost() for _ in values]

        def submit(self, *args: Any, key: str = "", **kwargs: Any) -> Lost:
            return Lost(key)

    engine = object.__new__(DaskEngine)
    LocalEngine.__init__(engine, block=2)
    engine.client, engine.scheduler, engine.shipped = Client(), "tcp://127.0.0.1:8786", []
    engine._as_completed = lambda futures: iter(futures)  # type: ignore[method-assign]
    with pytest.raises(ArecallError) as err:
        engine.map_blocks(lambda s, e, d, *, v: s, 6, shared={"v": np.zeros(3)})
    assert Client.scatters == 3
    message = str(err.value)
    assert "\n" not in message and "tcp://127.0.0.1:8786 lost the shared data 3 times" in message
    told = capsys.readouterr().err.splitlines()
    assert len(told) == 2 and all("lost 3 of 3 blocks" in line for line in told), told


def _acl_evaluation(directory: Path, n_principals: int, n_queries: int) -> dict[str, Path]:
    """A run, qrels and an ACL with enough principals for many blocks of one principal."""
    rng = np.random.default_rng(11)
    docs = [f"d{i:03d}" for i in range(80)]
    run_lines, qrel_lines = [], []
    for q in range(n_queries):
        ranked = rng.permutation(80)[: rng.integers(5, 60)]
        run_lines += [f"q{q} Q0 {docs[d]} {r + 1} {100 - r} sys" for r, d in enumerate(ranked)]
        qrel_lines += [f"q{q} 0 {docs[d]} 1" for d in rng.permutation(80)[:8]]
    acl_lines = [f"{d}\tp{p}" for d in docs for p in range(n_principals) if rng.random() < 0.3]
    paths = {"run": directory / "run.trec", "qrels": directory / "qrels.txt"}
    paths["acl"] = directory / "acl.tsv"
    paths["run"].write_text("\n".join(run_lines) + "\n")
    paths["qrels"].write_text("\n".join(qrel_lines) + "\n")
    paths["acl"].write_text("\n".join(acl_lines) + "\n")
    return paths


@pytest.mark.faults
def test_a_worker_killed_mid_reduce_loses_no_block_and_counts_none_twice(tmp_path):
    """kill -9 of a worker process while the blocks of an evaluation are being reduced: its
    blocks run again elsewhere, each block's tallies are merged once (the summary equals the
    local one, pair counts included) and each block's pair file is read once (the rows equal
    the local rows)."""
    import signal
    import threading

    import distributed

    paths = _acl_evaluation(tmp_path, 300, 120)
    inputs = (paths["run"], paths["qrels"])
    local = evaluate(*inputs, acl=paths["acl"], k=[1, 5, 10], n_resamples=200)
    with local_cluster(2) as c, DaskEngine(c.scheduler_address, block=1) as engine:
        out: dict[str, Any] = {}

        def run() -> None:
            try:
                ev = evaluate(
                    *inputs, acl=paths["acl"], k=[1, 5, 10], n_resamples=200, engine=engine,
                    keep_pairs=True,
                )  # fmt: skip
                out["summary"], out["rows"] = ev.summary(), ev.per_pair
            except BaseException as exc:  # reported by the assertion below
                out["error"] = exc

        thread = threading.Thread(target=run)
        thread.start()
        killed = None
        with distributed.Client(c.scheduler_address, timeout=START_TIMEOUT) as client:
            pids = dict(client.run(os.getpid))
            deadline = time.monotonic() + 120
            while killed is None and thread.is_alive():
                assert time.monotonic() < deadline, "no block was ever under way"
                busy = [
                    worker
                    for worker, keys in client.processing().items()
                    if any("reduce_block" in str(key) for key in keys)
                ]
                done = sum("reduce_block" in str(key) for key in client.who_has())
                if busy and done >= 10:  # some blocks finished, others under way
                    killed = pids[busy[0]]
                    os.kill(killed, signal.SIGKILL)
                time.sleep(0.02)
        thread.join(timeout=300)
        assert not thread.is_alive(), "the evaluation never returned"
    assert killed is not None, "the evaluation ended before a worker could be killed"
    assert "error" not in out, repr(out.get("error"))
    assert out["summary"] == local.summary()
    assert out["summary"]["pairs"] == 300 * 120
    assert out["rows"].equals(local.per_pair)


@pytest.mark.faults
def test_a_lost_scheduler_is_one_line_naming_it_and_nothing_is_written(tmp_path, capsys):
    """The scheduler goes away while ``arecall evaluate --engine dask`` runs: one line naming
    the scheduler, exit status 2, and no report, rows file or temporary file left behind."""
    import threading

    paths = _acl_evaluation(tmp_path, 300, 120)
    cluster_cm = local_cluster(2)
    c = cluster_cm.__enter__()
    address = c.scheduler_address
    result: dict[str, Any] = {}
    before = set(Path(tempfile.gettempdir()).glob("arecall-pairs-*"))

    def run() -> None:
        result["code"] = evaluate_main(
            [
                "--run", str(paths["run"]), "--qrels", str(paths["qrels"]),
                "--acl", str(paths["acl"]), "--k", "1,5,10", "--resamples", "200",
                "--engine", "dask", "--scheduler", address, "--block-principals", "1",
                "--out", str(tmp_path / "report.json"), "--format", "json",
                "--rows", str(tmp_path / "rows.csv"),
            ]
        )  # fmt: skip

    thread = threading.Thread(target=run)
    try:
        thread.start()
        time.sleep(3.0)  # connected, blocks under way
        assert thread.is_alive(), "the evaluation ended before the scheduler was stopped"
    finally:
        cluster_cm.__exit__(None, None, None)
    thread.join(timeout=300)
    assert not thread.is_alive(), "the evaluation never returned"
    err = capsys.readouterr().err.strip().splitlines()
    assert result["code"] == 2
    assert len(err) == 1 and address in err[0] and "Traceback" not in err[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["acl.tsv", "qrels.txt", "run.trec"]
    assert set(Path(tempfile.gettempdir()).glob("arecall-pairs-*")) <= before


def _tuned_here() -> Any:
    import arecall.core.dask_workers as dask_workers

    return dask_workers._tuned


def test_workers_run_blocks_with_the_allocator_tuned_against_the_nannys_trim_threshold(cluster):
    """Dask's nanny starts workers with MALLOC_TRIM_THRESHOLD_=65536, which pins glibc's mmap
    threshold at 128 KiB: every block temporary was mapped and unmapped afresh (a pair cost
    1.6-1.9x the local engine's). A worker that ran a block has the thresholds reset."""
    import distributed

    with DaskEngine(cluster.scheduler_address, block=1) as engine:
        engine.map_blocks(_block_bytes, 8, block_data=lambda s, e: np.zeros(4), size=1)
    with distributed.Client(cluster.scheduler_address, timeout=START_TIMEOUT) as client:
        environ = client.run(lambda: os.environ.get("MALLOC_TRIM_THRESHOLD_"))
        tuned = client.run(_tuned_here)
    assert set(environ.values()) == {"65536"}  # the nanny's setting, which the fix undoes
    assert any(tuned.values()) and set(tuned.values()) <= {True, None}, tuned


def test_block_sizes_come_from_memory_and_keep_every_worker_busy(cluster):
    """The default block was ``max(1, 2**22 // cells)`` principals: one principal once a
    principal's work is large. Now a block holds what the engine's memory allows (a quarter of
    a worker thread's memory limit on Dask), cut further to give each worker thread 4 blocks."""
    from arecall.core.engine import (
        BLOCKS_PER_THREAD,
        LOCAL_BLOCK_BYTES,
        WORKER_BLOCK_BYTES,
        WORKER_SHARE,
    )

    assert LocalEngine().spans(10, per_principal=LOCAL_BLOCK_BYTES // 4)[0] == (0, 4)
    with DaskEngine(cluster.scheduler_address) as engine:
        workers = engine.client.scheduler_info()["workers"].values()
        limit = min(w["memory_limit"] // w["nthreads"] for w in workers)
        threads = sum(w["nthreads"] for w in workers)
        low, high = WORKER_BLOCK_BYTES
        assert high == LOCAL_BLOCK_BYTES  # larger blocks only cost more per pair (issue 36)
        assert engine.block_bytes() == max(min(limit // WORKER_SHARE, high), low)
        per = engine.block_bytes() // 50  # memory holds 50 principals per block
        assert {e - s for s, e in engine.spans(30, per_principal=per)[:-1]} == {
            -(-30 // (BLOCKS_PER_THREAD * threads))
        }
        assert len(engine.spans(10_000, per_principal=per)) == -(-10_000 // 50)


def _profiler_and_allocator(dask_worker: Any) -> tuple[list[str], Any]:
    """A worker's running profiler callbacks, and whether it tuned its allocator."""
    import arecall.core.dask_workers as dask_workers

    running = [
        name
        for name in ("profile", "profile-cycle")
        if name in dask_worker.periodic_callbacks
        and dask_worker.periodic_callbacks[name].is_running()
    ]
    return running, dask_workers._tuned


def test_a_dask_engine_stops_the_profiler_and_tunes_the_allocator_of_every_worker(cluster):
    """Issue 36: a worker spent more CPU per pair than the local engine. Besides the nanny's
    allocator setting, Dask's statistical profiler samples a running task's stack every 10 ms
    on the event loop, a cost per second of wall time. Users start workers with the profiler
    on (as this cluster's are); connecting a DaskEngine turns it off and tunes the allocator on
    every worker before any block runs, and leaves the plugin with the scheduler for workers
    that join later."""
    from arecall.core.dask_workers import WORKER_TUNING

    with DaskEngine(cluster.scheduler_address) as engine:
        after = engine.client.run(_profiler_and_allocator)
        plugins = engine.client.run_on_scheduler(
            lambda dask_scheduler: list(dask_scheduler.worker_plugins)
        )
    assert len(after) == 2 and all(v == ([], True) for v in after.values()), after
    assert WORKER_TUNING in plugins


@pytest.mark.long
def test_workers_that_join_after_the_engine_connected_run_without_the_profiler(cluster):
    """A worker joining the cluster (here: every worker restarted by its nanny) sets up its
    plugins before it starts its periodic callbacks: `WorkerTuning` takes the profiler's out,
    so it is not started. Without arecall's plugin, restarted workers profile again."""
    import distributed

    from arecall.core.dask_workers import WORKER_TUNING

    with distributed.Client(cluster.scheduler_address, timeout=START_TIMEOUT) as client:
        with suppress(Exception):  # registered by an earlier test's engine: start over
            client.unregister_worker_plugin(WORKER_TUNING)
        client.restart(timeout=START_TIMEOUT)
        before = client.run(_profiler_and_allocator)
        assert all(v == (["profile", "profile-cycle"], None) for v in before.values()), before
        DaskEngine(cluster.scheduler_address).close()
        client.restart(timeout=START_TIMEOUT)  # new worker processes join the cluster
        client.wait_for_workers(len(before), timeout=START_TIMEOUT)
        rejoined = client.run(_profiler_and_allocator)
    assert len(rejoined) == len(before)
    assert all(v == ([], True) for v in rejoined.values()), rejoined
