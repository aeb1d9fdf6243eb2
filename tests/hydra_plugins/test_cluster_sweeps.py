"""``arecall run -m hydra/launcher=dask``: sweep points run on a Dask cluster's workers.

Against a real cluster on this machine (a scheduler and two worker processes started by
`_cluster.dask_cluster`, every socket on 127.0.0.1) and a real ``mlflow server``: each point is
one MLflow run nested under the sweep's parent, with the numbers a local run gives, written by
a worker process (its ``arecall.pid``), and the points are spread over both workers.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import psutil
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mlflow.tracking import MlflowClient

from tests._cluster import LOOPBACK, dask_cluster
from tests.helpers import FAST_PROOF, ROOT, VENV_BIN, write_seed_dir


def _arecall(
    *args: str, env: dict[str, str], cwd: Path, timeout: float = 600
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(VENV_BIN / "arecall"), "run", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=cwd,
    )


def _children(client: MlflowClient) -> tuple[object, list]:
    experiment = client.get_experiment_by_name("arecall")
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if r.data.tags.get("arecall.sweep") == "parent"]
    assert len(parents) == 1
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    assert {r.data.tags["mlflow.parentRunId"] for r in children} == {parents[0].info.run_id}
    return parents[0], children


def _slow_two_point_sweep(address: str, where: Path) -> subprocess.Popen:
    """``arecall run -m`` of two points on the cluster at ``address``, each open long enough
    (a 2,000-example proof) for a test to find its worker and kill it mid-run."""
    return subprocess.Popen(
        [
            str(VENV_BIN / "arecall"),
            "run",
            "-m",
            "hydra/launcher=dask",
            f"hydra.launcher.address={address}",
            "retriever=tfidf,bm25",
            f"hydra.sweep.dir={where}/sweep",
            "evaluation.proof.max_examples=2000",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=where,
    )


@pytest.mark.long
def test_a_four_point_sweep_runs_on_two_dask_workers_and_lands_nested_in_the_server(
    tmp_path,
    mlflow_server,
):
    decoy = tmp_path / "worker-own-store.db"  # the workers' own MLFLOW_TRACKING_URI: never used
    with dask_cluster(
        tmp_path / "dask", 2, worker_env={"MLFLOW_TRACKING_URI": f"sqlite:///{decoy}"}
    ) as cluster:
        listening = cluster.listening()
        assert {s.port for s in listening} >= {int(cluster.address.rsplit(":", 1)[1])}
        assert [s for s in listening if s.ip != LOOPBACK] == []
        workers = cluster.worker_pids()
        assert len(workers) == 2
        started = time.monotonic()
        proc = _arecall(
            "-m",
            "hydra/launcher=dask",
            f"hydra.launcher.address={cluster.address}",
            "retriever=tfidf,bm25",
            "evaluation.ks=[1,5],[5]",
            f"hydra.sweep.dir={tmp_path}/sweep",
            FAST_PROOF,
            env={**os.environ, "MLFLOW_TRACKING_URI": mlflow_server},
            cwd=tmp_path,
        )
        elapsed = time.monotonic() - started
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        # the points' sockets (to the tracking server) are clients: still nothing but loopback
        assert [s for s in cluster.listening() if s.ip != LOOPBACK] == []
    print(f"4-point sweep on 2 Dask workers: {elapsed:.1f} s")

    client = MlflowClient(tracking_uri=mlflow_server)
    parent, children = _children(client)
    assert parent.info.status == "FINISHED"
    points = sorted(
        (r.data.params["retriever.name"], r.data.params["evaluation.ks"]) for r in children
    )
    assert points == [("bm25", "[1, 5]"), ("bm25", "[5]"), ("tfidf", "[1, 5]"), ("tfidf", "[5]")]
    assert {r.info.status for r in children} == {"FINISHED"}

    # run by the workers' processes (not the launching one), and by both of them
    pids = {int(r.data.tags["arecall.pid"]) for r in children}
    assert pids <= set(workers.values()), (pids, workers)
    assert len(pids) == 2
    assert {r.data.tags["arecall.host"] for r in children} == {socket.gethostname()}
    assert not decoy.exists()

    # the numbers a local run gives: the committed tfidf metrics, K=5 the same with or without K=1
    committed = json.loads((ROOT / "reports" / "metrics.json").read_text())["k"]["5"]
    by_point = {
        (r.data.params["retriever.name"], r.data.params["evaluation.ks"]): r.data.metrics
        for r in children
    }
    for name in ("arecall_pre", "arecall_post", "recall"):
        assert by_point["tfidf", "[5]"][f"{name}_at_5"] == pytest.approx(committed[name], abs=1e-12)
        for retriever in ("tfidf", "bm25"):
            assert (
                by_point[retriever, "[1, 5]"][f"{name}_at_5"]
                == by_point[retriever, "[5]"][f"{name}_at_5"]
            )
    assert "arecall_pre_at_1" in by_point["bm25", "[1, 5]"]
    assert "arecall_pre_at_1" not in by_point["bm25", "[5]"]

    # each point's outputs are in the sweep directory, and its tables were printed here
    for num in range(4):
        assert (tmp_path / "sweep" / str(num) / "metrics.json").is_file()
    assert proc.stdout.count("| K | Recall |") == 4
    assert "retriever `bm25`" in proc.stdout and "retriever `tfidf`" in proc.stdout
    # the sweep ended by comparing its points: printed, and held by the parent run
    top = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"comparison.md", "comparison.png"} <= top
    comparison = (tmp_path / "sweep" / "comparison.md").read_text()
    assert comparison in proc.stdout and "| evaluation.ks=[5],retriever=bm25 " in comparison


@pytest.mark.long
def test_without_an_address_a_local_loopback_cluster_runs_the_sweep_and_a_failed_point_is_named(
    tmp_path, mlflow_store
):
    """No scheduler given: the launcher's own cluster, every socket on 127.0.0.1, gone after.

    One point's corpus is bad: its one-line error is printed by the launching process, as the
    local launcher prints it, the other point still runs, and the sweep's parent run is FAILED.
    """
    good = write_seed_dir(tmp_path / "good", 7)
    bad = write_seed_dir(tmp_path / "bad", 7)
    queries = json.loads((bad / "queries.json").read_text())
    del queries["queries"][0]["relevant"]
    (bad / "queries.json").write_text(json.dumps(queries))
    proc = subprocess.Popen(
        [
            str(VENV_BIN / "arecall"),
            "run",
            "-m",
            "hydra/launcher=dask",
            "corpus=seed_json",
            f"corpus.path={bad},{good}",
            f"hydra.sweep.dir={tmp_path}/sweep",
            FAST_PROOF,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    seen: set[tuple[str, int]] = set()
    deadline = time.monotonic() + 600
    try:
        while proc.poll() is None:
            assert time.monotonic() < deadline
            try:
                family = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(True)]
            except psutil.NoSuchProcess:
                break
            for member in family:
                try:
                    for c in member.net_connections(kind="inet"):
                        if c.status == psutil.CONN_LISTEN:
                            seen.add((c.laddr.ip, c.laddr.port))
                except psutil.NoSuchProcess:
                    pass
            time.sleep(0.5)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert len(seen) >= 3  # a scheduler and two workers (and their nannies) were listening
    assert {ip for ip, _ in seen} == {LOOPBACK}
    assert proc.returncode == 2, out[-3000:] + err[-3000:]
    point = f"corpus.path={bad},corpus=seed_json,{FAST_PROOF}"
    lines = err.splitlines()
    assert (
        f"arecall: error: sweep point 0 ({point}): {bad}/queries.json: queries[0]: "
        "missing field 'relevant'"
    ) in lines
    assert (
        f"arecall: error: the sweep had a failed point ({point}: see above); the other points ran"
    ) in lines
    assert "Traceback" not in err
    assert "corpus `seed_json`" in out  # the good point's tables, printed here
    # the sweep's log holds our lines only: Dask's INFO lines (the scheduler starting, workers
    # registering and being retired, ~40 of them) and its nannies' lines about ending the
    # launcher's own workers stay out
    logged = [line.split("][HYDRA] ", 1)[1] for line in out.splitlines() if "][HYDRA] " in line]
    ours = re.compile(r"(Dask launcher: \d+ jobs on |\t#\d+ : |\t#\d+ ran on )")
    assert logged and [m for m in logged if not ours.match(m)] == [], logged
    assert not [line for line in err.splitlines() if "distributed" in line or "Worker" in line]

    client = MlflowClient(tracking_uri=mlflow_store)
    parent, children = _children(client)
    assert parent.info.status == "FAILED"
    status = {r.data.params["corpus.path"]: r.info.status for r in children}
    assert status == {str(bad): "FAILED", str(good): "FINISHED"}
    assert all(int(r.data.tags["arecall.pid"]) != proc.pid for r in children)
    assert not [p for p in psutil.process_iter(["ppid"]) if p.info["ppid"] == proc.pid]


def test_an_unreachable_scheduler_is_one_line_naming_the_address():
    from types import SimpleNamespace

    from hydra_plugins.arecall_dask_launcher._core import ClusterError, _connect

    address = f"tcp://{LOOPBACK}:{_closed_port()}"
    started = time.monotonic()
    with pytest.raises(ClusterError) as caught:
        _connect(SimpleNamespace(address=address, connect_timeout=1.0))
    assert time.monotonic() - started < 10
    assert str(caught.value) == (
        f"arecall: error: hydra.launcher.address={address}: no Dask scheduler answered within 1 s"
    )


def _heartbeat_during_close(plugin: object | None) -> list[str]:
    """What ``distributed.worker`` lets through when a worker's heartbeat is in flight as the
    worker closes and the connection dies under it: the race of dask/distributed#7105, made
    certain. A real scheduler and worker on 127.0.0.1, in this process; the scheduler's
    answer waits until the worker is closing, then fails as a closed stream does."""
    import asyncio
    import logging

    from distributed import Scheduler, Worker
    from distributed.comm.core import CommClosedError
    from distributed.core import Status

    seen: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    class DiesAtClose:
        def __init__(self, rpc: object, worker: Worker) -> None:
            self.rpc, self.worker = rpc, worker

        def __getattr__(self, name: str) -> object:
            return getattr(self.rpc, name)

        async def heartbeat_worker(self, **_: object) -> None:
            while self.worker.status not in (Status.closing, Status.closed):
                await asyncio.sleep(0.01)
            raise CommClosedError("in <TCP Worker->Scheduler>: Stream is closed")

    async def race() -> None:
        async with Scheduler(host=LOOPBACK, port=0, dashboard_address=":0") as scheduler:
            worker = Worker(scheduler.address, host=LOOPBACK, nthreads=1, dashboard=False)
            await worker
            if plugin is not None:
                await worker.plugin_add(plugin)
            worker.scheduler = DiesAtClose(worker.scheduler, worker)
            beat = asyncio.ensure_future(worker.heartbeat())
            await asyncio.sleep(0.05)
            await worker.close()
            await beat

    handler = Collect()
    logger = logging.getLogger("distributed.worker")
    logger.addHandler(handler)
    try:
        asyncio.run(race())
    finally:
        logger.removeHandler(handler)
        for quiet in [f for f in logger.filters if type(f).__name__ == "ClosingHeartbeatFilter"]:
            logger.removeFilter(quiet)
    return seen


def test_a_closing_workers_failed_heartbeat_prints_no_traceback_with_the_launchers_plugin():
    """The traceback a sweep's last line could be followed by (seen once under load), made
    certain: without the plugin distributed logs it, with it the closing worker is quiet."""
    from hydra_plugins.arecall_dask_launcher._closing import HEARTBEAT_FAILED, QuietClose

    assert any(m.startswith(HEARTBEAT_FAILED) for m in _heartbeat_during_close(None))
    assert not any(m.startswith(HEARTBEAT_FAILED) for m in _heartbeat_during_close(QuietClose()))


def test_the_launchers_own_cluster_carries_the_plugin_and_a_users_cluster_does_not():
    """Only workers the launcher started are quietened; a given scheduler's are left alone.
    Both get arecall's worker tuning (allocator tuned, Dask's profiler off: issue 36): a
    point's stages run on them."""
    from types import SimpleNamespace

    from distributed import LocalCluster

    from hydra_plugins.arecall_dask_launcher._core import _close, _connect

    def quietened(dask_worker) -> bool:  # runs in the worker's process
        import logging

        names = {type(f).__name__ for f in logging.getLogger("distributed.worker").filters}
        return "ClosingHeartbeatFilter" in names or "arecall-quiet-close" in dask_worker.plugins

    def tuned(dask_worker) -> bool:  # runs in the worker's process
        from arecall.core.dask_workers import PROFILER_CALLBACKS, WORKER_TUNING

        profiling = set(PROFILER_CALLBACKS) & set(dask_worker.periodic_callbacks)
        return WORKER_TUNING in dask_worker.plugins and not profiling

    ours = SimpleNamespace(address=None, n_workers=1, threads_per_worker=1, connect_timeout=60.0)
    client, cluster = _connect(ours)
    try:
        assert cluster is not None
        assert list(client.run(quietened).values()) == [True]
        assert list(client.run(tuned).values()) == [True]
    finally:
        _close(client, cluster)
    with LocalCluster(
        n_workers=1, processes=False, protocol="tcp", host=LOOPBACK, dashboard_address=":0"
    ) as users_cluster:
        theirs = SimpleNamespace(address=users_cluster.scheduler_address, connect_timeout=60.0)
        client, cluster = _connect(theirs)
        try:
            assert cluster is None
            assert list(client.run(quietened).values()) == [False]
            assert list(client.run(tuned).values()) == [True]
        finally:
            _close(client, cluster)


class _Workers:
    """Stands in for a Dask client: the hostnames its workers report."""

    def __init__(self, *hosts: str) -> None:
        self.hosts = hosts

    def run(self, function):
        return {f"tcp://w{i}:1": host for i, host in enumerate(self.hosts)}


def test_a_sqlite_store_is_refused_only_when_workers_run_on_other_hosts(monkeypatch, tmp_path):
    from omegaconf import OmegaConf

    from hydra_plugins.arecall_dask_launcher._core import ClusterError, _check_store

    here = socket.gethostname()
    tracked = OmegaConf.create({"tracking": {"enabled": True}})
    store = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    _check_store(_Workers(here, here), tracked)  # one machine: the file is shared
    with pytest.raises(ClusterError) as caught:
        _check_store(_Workers(here, "node-b", "node-a"), tracked)
    assert str(caught.value) == (
        f"arecall: error: the MLflow store {store} is a file on {here}; the workers on "
        "node-a, node-b cannot write it: start an mlflow server and set "
        "MLFLOW_TRACKING_URI=http://HOST:PORT (docs: Run on a cluster)"
    )
    _check_store(_Workers("node-a"), OmegaConf.create({"tracking": {"enabled": False}}))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")
    _check_store(_Workers("node-a"), tracked)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])  # closed once the block ends: nothing listens there


@pytest.mark.long
def test_a_sweep_on_an_unreachable_scheduler_is_one_line_and_no_point_runs(tmp_path, arecall):
    port = _closed_port()
    result = arecall(
        "run",
        "-m",
        "hydra/launcher=dask",
        f"hydra.launcher.address=tcp://{LOOPBACK}:{port}",
        "hydra.launcher.connect_timeout=1",
        "retriever=tfidf,bm25",
        "tracking.enabled=false",
        f"hydra.sweep.dir={tmp_path}/sweep",
    )
    assert result.returncode == 2  # a user error, as in a single run
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines[0] == (
        f"arecall: error: hydra.launcher.address=tcp://{LOOPBACK}:{port}: "
        "no Dask scheduler answered within 1 s"
    )
    assert [p.name for p in (tmp_path / "sweep").iterdir()] == ["multirun.yaml"]  # no point ran


_NAMES = st.sampled_from(["ARECALL_A", "ARECALL_B", "MLFLOW_X", "MLFLOW_Y", "OTHER_Z"])


@settings(max_examples=50, deadline=None)
@given(
    before=st.dictionaries(_NAMES, st.text("abc", max_size=3)),
    shipped=st.dictionaries(_NAMES.filter(lambda n: not n.startswith("OTHER")), st.text("xyz")),
)
def test_a_job_sees_exactly_the_launching_environment_and_the_worker_gets_its_own_back(
    before, shipped
):
    from hydra_plugins.arecall_dask_launcher._core import _environment

    names = ["ARECALL_A", "ARECALL_B", "MLFLOW_X", "MLFLOW_Y", "OTHER_Z"]
    saved = {n: os.environ.pop(n) for n in names if n in os.environ}
    try:
        os.environ.update(before)
        with _environment(shipped, ("ARECALL_", "MLFLOW_")):
            inside = {n: os.environ[n] for n in names if n in os.environ}
        after = {n: os.environ[n] for n in names if n in os.environ}
    finally:
        for n in names:
            os.environ.pop(n, None)
        os.environ.update(saved)
    expected = dict(shipped)
    if "OTHER_Z" in before:
        expected["OTHER_Z"] = before["OTHER_Z"]
    assert inside == expected
    assert after == before


@pytest.mark.faults
def test_a_point_whose_worker_is_killed_reruns_on_another_and_the_sweep_succeeds(
    tmp_path, mlflow_store
):
    """kill -9 of the worker process running a point: Dask reruns the point elsewhere.

    The killed attempt's MLflow run is closed KILLED as an orphan (``arecall.orphaned``), the
    rerun FINISHED, and the sweep exits 0.
    """
    with dask_cluster(tmp_path / "dask", 2) as cluster:
        workers = set(cluster.worker_pids().values())
        proc = _slow_two_point_sweep(cluster.address, tmp_path)
        try:
            client = MlflowClient(tracking_uri=mlflow_store)
            killed = None
            deadline = time.monotonic() + 300
            while killed is None:
                assert proc.poll() is None and time.monotonic() < deadline, "no point started"
                time.sleep(0.3)
                experiment = client.get_experiment_by_name("arecall")
                if experiment is None:
                    continue
                for run in client.search_runs([experiment.experiment_id]):
                    tags = run.data.tags
                    if tags.get("mlflow.parentRunId") and run.info.status == "RUNNING":
                        # frozen first, so the point cannot finish between the look and the kill
                        pid = int(tags["arecall.pid"])
                        os.kill(pid, signal.SIGSTOP)
                        if client.get_run(run.info.run_id).info.status == "RUNNING":
                            os.kill(pid, signal.SIGKILL)
                            killed = pid
                            break
                        os.kill(pid, signal.SIGCONT)
            out, err = proc.communicate(timeout=600)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert killed in workers
    assert proc.returncode == 0, out[-3000:] + err[-3000:]
    # the user is told, in one line, which point ran again
    told = [line for line in err.splitlines() if "ran again" in line]
    assert len(told) == 1 and "the worker running it died" in told[0], err[-3000:]
    parent, children = _children(client)
    final = {r.data.params["retriever.name"] for r in children if r.info.status == "FINISHED"}
    assert final == {"tfidf", "bm25"}
    lost = [r for r in children if r.info.status != "FINISHED"]
    assert [(int(r.data.tags["arecall.pid"]), r.info.status) for r in lost] == [(killed, "KILLED")]
    assert "arecall.orphaned" in lost[0].data.tags
    # the lost attempt is superseded by its rerun: every point finished, so the sweep did
    assert parent.info.status == "FINISHED"


@pytest.mark.faults
def test_a_sweep_survives_the_death_of_every_worker_holding_the_points_shared_payload(
    tmp_path, mlflow_store
):
    """The payload every point shares (Hydra's context, the task function) is recomputable.

    Scattered data dies with the workers holding it: Dask cannot rebuild it, forgets it, and
    cancels every point that needs it (dask/distributed#3149). A make test-faults run saw both
    points of a sweep "lost on the cluster: FutureCancelledError ... already forgotten" after
    one worker was killed. Here every holder of a key that is not a point's is killed while a
    point runs; the points rerun on the restarted workers and the sweep succeeds.
    """
    from distributed import Client

    with dask_cluster(tmp_path / "dask", 2) as cluster:
        proc = _slow_two_point_sweep(cluster.address, tmp_path)
        try:
            client = MlflowClient(tracking_uri=mlflow_store)
            deadline = time.monotonic() + 300
            running = False
            while not running:
                assert proc.poll() is None and time.monotonic() < deadline, "no point started"
                time.sleep(0.3)
                experiment = client.get_experiment_by_name("arecall")
                if experiment is not None:
                    running = any(
                        r.data.tags.get("mlflow.parentRunId") and r.info.status == "RUNNING"
                        for r in client.search_runs([experiment.experiment_id])
                    )
            with Client(cluster.address, timeout=30) as dask:
                pids = dict(dask.run(os.getpid))
                holders = {
                    worker
                    for key, workers in dask.who_has().items()
                    if not str(key).startswith("arecall-job-")
                    for worker in workers
                }
            assert holders, "no worker holds the shared payload"
            for worker in holders:
                os.kill(pids[worker], signal.SIGKILL)
            out, err = proc.communicate(timeout=600)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 0, out[-3000:] + err[-3000:]
    parent, children = _children(client)
    final = {r.data.params["retriever.name"] for r in children if r.info.status == "FINISHED"}
    assert final == {"tfidf", "bm25"}
    assert parent.info.status == "FINISHED"
