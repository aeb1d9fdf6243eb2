"""Tracking never loses results, never leaves a run RUNNING and never breaks a store.

Fast checks run in-process against a copy of a migrated store (`mlflow_store`); the faults a user
meets — concurrent writers on a fresh store, SIGTERM / SIGINT / kill -9, a failed sweep point, an
unreachable server — run the real ``arecall`` command in subprocesses (marked ``faults``).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from mlflow.tracking import MlflowClient

from arecall.pipeline.layout import Layout
from arecall.pipeline.run import run_all
from arecall.tracking.pipeline import log_run
from arecall.tracking.run import TrackedRun
from arecall.tracking.store import TrackingError, open_store
from arecall.tracking.vector import vector_metrics

from tests._holding import holding_at, holding_env, release, wait_ready
from tests.helpers import FAST_PROOF, VENV_BIN, fast_config

RUN = "q1 Q0 a 1 0.9 sys\nq1 Q0 x 2 0.8 sys\nq1 Q0 b 3 0.7 sys\nq2 Q0 c 1 0.5 sys\n"
QRELS = "q1 0 a 1\nq1 0 b 2\nq2 0 d 1\n"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _runs(uri: str, experiment: str = "arecall") -> list:
    client = MlflowClient(tracking_uri=uri)
    found = client.get_experiment_by_name(experiment)
    return [] if found is None else client.search_runs([found.experiment_id])


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


# -- keys, params, statuses (in-process) -----------------------------------------------------------


def test_principal_names_become_distinct_safe_keys_with_their_mapping(tmp_path, mlflow_store):
    names = ["../../x", "n" * 300, "a:b", "a;b", "ok"]
    table = pd.DataFrame(
        [{"mode": "post", "principal": n, "recall": i / 10} for i, n in enumerate(names)]
    )
    metrics, keys = vector_metrics(table)
    assert len(metrics) == len(names)  # no two names share a key
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,250}", k) for k in metrics)
    assert sorted(keys.values()) == sorted(names)
    path = tmp_path / "vector_search.csv"
    table.to_csv(path, index=False)
    nested: dict[str, str | None] = {}
    log_run(fast_config("vector_search.enabled=true").params(), {"vector_csv": path}, nested=nested)
    run_id = nested["vector_search"]  # the vector experiment's own run
    client = MlflowClient(tracking_uri=mlflow_store)
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    logged = json.loads(
        Path(client.download_artifacts(run_id, "keys.json", str(tmp_path))).read_text()
    )
    for key, name in logged.items():
        assert run.data.metrics[f"vector_post_recall_{key}"] == names.index(name) / 10


def test_a_param_value_past_mlflows_limit_is_cut_and_kept_in_full(tmp_path, mlflow_store):
    with TrackedRun(mlflow_store, "t", params={"long": "v" * 7000, "short": "s"}) as run:
        run.start()
        run_id = run.finish({"m": 1.0})
    client = MlflowClient(tracking_uri=mlflow_store)
    params = client.get_run(run_id).data.params
    assert len(params["long"]) <= 6000 and params["short"] == "s"
    full = client.download_artifacts(run_id, "params_full.json", str(tmp_path))
    assert json.loads(Path(full).read_text()) == {"long": "v" * 7000}


def test_an_exception_ends_the_run_failed_with_the_error(mlflow_store):
    run = TrackedRun(mlflow_store, "t")
    with pytest.raises(ValueError), run:
        run.start()
        raise ValueError("stage broke")
    got = MlflowClient(tracking_uri=mlflow_store).get_run(run.run_id)
    assert got.info.status == "FAILED"
    assert got.data.tags["arecall.error"] == "ValueError: stage broke"


def test_a_run_of_a_dead_process_is_closed_by_the_next_writer(mlflow_store):
    client = MlflowClient(tracking_uri=mlflow_store)
    pid = _dead_pid()
    orphan = client.create_run(
        "0", tags={"arecall.pid": str(pid), "arecall.host": socket.gethostname()}
    )
    alive = client.create_run(
        "0", tags={"arecall.pid": str(os.getpid()), "arecall.host": socket.gethostname()}
    )
    with open_store(mlflow_store):
        pass
    closed = client.get_run(orphan.info.run_id)
    assert closed.info.status == "KILLED"
    assert f"process {pid}" in closed.data.tags["arecall.orphaned"]
    assert client.get_run(alive.info.run_id).info.status == "RUNNING"


def test_an_unreachable_server_is_one_line_naming_the_results_within_seconds(monkeypatch):
    uri = f"http://127.0.0.1:{_closed_port()}"
    started = time.monotonic()
    run = TrackedRun(uri, "t", results=("/runs/r1", "/runs/r1"))
    with pytest.raises(TrackingError) as caught, run:
        run.start()
        run.finish({"m": 1.0})
    assert time.monotonic() - started < 15
    assert str(caught.value) == (
        f"tracking server {uri} unreachable; results are in /runs/r1; "
        "log them later with: arecall log /runs/r1"
    )


def test_on_error_warn_finishes_untracked_with_the_same_line(capsys):
    uri = f"http://127.0.0.1:{_closed_port()}"
    run = TrackedRun(uri, "t", results=("reports/", "."), on_error="warn")
    with run:
        run.start()
        assert run.finish({"m": 1.0}) is None
    assert capsys.readouterr().err == (
        f"arecall: warning: tracking server {uri} unreachable; results are in reports/; "
        "log them later with: arecall log .\n"
    )


# -- the real command, in subprocesses -------------------------------------------------------------


def _arecall(*args: str, cwd: Path, uri: str, hold: bool = False, **kw: object) -> subprocess.Popen:
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "MLFLOW_DISABLE_TELEMETRY": "true"}
    if hold:  # the run stays RUNNING before proof.json: a test acts on it, whatever the speed
        env.update(holding_env(cwd))
    return subprocess.Popen(
        [str(VENV_BIN / "arecall"), *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,  # type: ignore[call-overload]
    )


def _wait_running(uri: str, proc: subprocess.Popen, timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        running = [r for r in _runs(uri) if r.info.status == "RUNNING"]
        if running:
            return str(running[0].info.run_id)
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.3)
    proc.kill()
    pytest.fail("no RUNNING run appeared")


@pytest.mark.faults
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_during_a_tracked_run_ends_it_killed(tmp_path, mlflow_store, sig, code):
    proc = _arecall(
        "run", f"hydra.run.dir={tmp_path}/out", cwd=tmp_path, uri=mlflow_store, hold=True
    )
    run_id = _wait_running(mlflow_store, proc)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert "Traceback" not in err
    assert MlflowClient(tracking_uri=mlflow_store).get_run(run_id).info.status == "KILLED"


@pytest.mark.faults
def test_a_run_whose_process_is_killed_is_ended_killed_by_its_tracker_at_once(
    tmp_path, mlflow_store
):
    proc = _arecall(
        "run", f"hydra.run.dir={tmp_path}/out", cwd=tmp_path, uri=mlflow_store, hold=True
    )
    run_id = _wait_running(mlflow_store, proc)
    proc.kill()  # kill -9 of the run's process only: its tracker reads end-of-file
    proc.communicate(timeout=30)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # no other writer: only the tracker can end it
        run = MlflowClient(tracking_uri=mlflow_store).get_run(run_id)
        if run.info.status != "RUNNING":
            break
        time.sleep(0.2)
    assert run.info.status == "KILLED"
    assert "died" in run.data.tags["arecall.error"]
    assert run.data.tags["arecall.pid"] == str(proc.pid)  # the run's owner is the run's process


@pytest.mark.faults
def test_a_run_killed_with_its_tracker_is_closed_by_the_next_run(tmp_path, mlflow_store):
    proc = _arecall(
        "run",
        f"hydra.run.dir={tmp_path}/out",
        cwd=tmp_path,
        uri=mlflow_store,
        hold=True,
        start_new_session=True,
    )
    run_id = _wait_running(mlflow_store, proc)
    os.killpg(proc.pid, signal.SIGKILL)  # the run's process and its tracker, at once
    proc.wait(timeout=30)
    log_run(fast_config().params(), {})  # the next writer on this store
    orphan = MlflowClient(tracking_uri=mlflow_store).get_run(run_id)
    assert orphan.info.status == "KILLED"
    assert orphan.data.tags["arecall.pid"] == str(proc.pid)
    assert "arecall.orphaned" in orphan.data.tags


@pytest.mark.faults
@pytest.mark.parametrize(
    ("point", "sig", "code"),
    [
        ("uploading", signal.SIGTERM, 143),
        ("uploading", signal.SIGKILL, -9),
        ("logged", signal.SIGTERM, 143),
        ("logged", signal.SIGKILL, -9),
    ],
)
def test_a_signal_or_kill_at_the_end_of_a_run_ends_it_killed_as_its_exit_says(
    tmp_path, mlflow_store, point, sig, code
):
    """During the final upload (held in the tracker before the artifacts) or once the run was
    logged FINISHED (held in the run's process as it prints its tables): the run is KILLED, as
    the process's exit says, and keeps every metric it had logged."""
    held = "tracker" if point == "uploading" else "run"
    env = {**os.environ, "MLFLOW_TRACKING_URI": mlflow_store, "MLFLOW_DISABLE_TELEMETRY": "true"}
    env.update(holding_at(tmp_path, point, held))
    proc = subprocess.Popen(
        [str(VENV_BIN / "arecall"), "run", f"hydra.run.dir={tmp_path}/out", FAST_PROOF],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_ready(tmp_path, proc)
    proc.send_signal(sig)  # the run's process only: a kill -9 leaves its tracker behind
    release(tmp_path)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err
    assert "Traceback" not in err
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # after a kill -9 its tracker ends it, on its own time
        (run,) = _runs(mlflow_store)
        if run.info.status == "KILLED":
            break
        time.sleep(0.2)
    assert run.info.status == "KILLED"
    assert run.data.metrics["arecall_pre_at_5"] == pytest.approx(0.9875)  # all logged:
    assert len(run.data.metrics) == 7 * 4 + 3  # the headline's 7 per K, and its 3 curves
    reason = run.data.tags.get("arecall.error", "")
    if point == "logged":
        assert "after its results were logged" in reason
    elif code == -9:
        assert "died" in reason


@pytest.mark.faults
def test_a_failed_sweep_point_is_failed_and_the_others_still_run(
    tmp_path, mlflow_store, seed_dir, arecall
):
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in ("corpus.json", "queries.json"):  # profiles.json is missing
        (broken / name).write_bytes((seed_dir / name).read_bytes())
    proc = arecall(
        "run",
        "-m",
        "corpus=seed_json",
        f"corpus.path={broken},{seed_dir}",
        f"hydra.sweep.dir={tmp_path}/sweep",
        FAST_PROOF,
    )
    assert proc.returncode == 2  # a user error, as in a single run
    assert "profiles.json" in proc.stderr and "Traceback" not in proc.stderr
    runs = _runs(mlflow_store)
    (parent,) = [r for r in runs if r.data.tags.get("arecall.sweep") == "parent"]
    points = {r.data.params["corpus.path"]: r for r in runs if r is not parent}
    assert points[str(broken)].info.status == "FAILED"
    assert "profiles.json" in points[str(broken)].data.tags["arecall.error"]
    assert points[str(seed_dir)].info.status == "FINISHED"
    assert "arecall_pre_at_5" in points[str(seed_dir)].data.metrics
    assert parent.info.status == "FAILED"
    assert parent.data.params["sweep.override.0"] == "corpus=seed_json"  # logged at its start


@pytest.mark.faults
@pytest.mark.parametrize("on_error", ["fail", "warn"])
def test_an_unreachable_server_keeps_the_results_and_arecall_log_logs_them(
    tmp_path, mlflow_store, on_error
):
    uri = f"http://127.0.0.1:{_closed_port()}"
    out = tmp_path / "out"
    proc = _arecall(
        "run",
        f"hydra.run.dir={out}",
        FAST_PROOF,
        f"tracking.on_error={on_error}",
        cwd=tmp_path,
        uri=uri,
    )
    _, err = proc.communicate(timeout=300)
    line = (
        f"tracking server {uri} unreachable; results are in {out}; "
        f"log them later with: arecall log {out}"
    )
    if on_error == "fail":
        assert (proc.returncode, err) == (2, f"arecall: error: {line}\n")
    else:
        assert (proc.returncode, err) == (0, f"arecall: warning: {line}\n")
    assert (out / "metrics.json").is_file()
    later = _arecall("log", str(out), cwd=tmp_path, uri=mlflow_store)
    _, err = later.communicate(timeout=120)
    assert later.returncode == 0, err
    (run,) = _runs(mlflow_store)
    assert run.info.status == "FINISHED"
    assert run.data.metrics["arecall_pre_at_5"] == pytest.approx(0.9875)
    assert run.data.tags["arecall.entry"] == "arecall log"


LOG_RUN = """
import sys
from arecall.pipeline.config import default_config
from arecall.pipeline.layout import Layout
from arecall.tracking.pipeline import log_run
cfg = default_config(["evaluation.proof.max_examples=5"]).params()
log_run(cfg, Layout.run(sys.argv[1]).report_files(), run_name=sys.argv[2])
"""


@pytest.mark.faults
def test_eight_concurrent_writers_on_a_fresh_store_all_land_and_the_store_stays_usable(tmp_path):
    results = tmp_path / "results"
    run_all(fast_config(), Layout.run(results))
    (tmp_path / "run.trec").write_text(RUN)
    (tmp_path / "qrels.txt").write_text(QRELS)
    uri = f"sqlite:///{tmp_path}/fresh.db"  # does not exist yet: the writers create it
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "MLFLOW_DISABLE_TELEMETRY": "true"}
    evaluate = [str(VENV_BIN / "arecall"), "evaluate", "--run", "run.trec", "--qrels"]
    commands = [[*evaluate, "qrels.txt", "--mlflow"] for _ in range(4)]
    commands += [[sys.executable, "-c", LOG_RUN, str(results), f"writer{i}"] for i in range(4)]
    procs = [
        subprocess.Popen(
            c, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        for c in commands
    ]
    errors = [p.communicate(timeout=300)[1].decode() for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, errors
    evaluated = _runs(uri, "arecall-evaluate")
    logged = _runs(uri)
    assert len(evaluated) == 4 and len(logged) == 4
    assert all(r.info.status == "FINISHED" for r in evaluated + logged)
    assert all(r.data.metrics["queries"] == 2 for r in evaluated)
    assert all(r.data.metrics["arecall_pre_at_5"] == pytest.approx(0.9875) for r in logged)
    again = subprocess.run(
        [*evaluate, "qrels.txt", "--mlflow"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    assert len(_runs(uri, "arecall-evaluate")) == 5


def test_arecall_log_dot_logs_a_dvc_repository_params_and_reports(tmp_path, mlflow_store, arecall):
    from tests.helpers import ROOT

    (tmp_path / "reports").mkdir()
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(fast_config().params()))
    for name in ("metrics.json", "proof.json", "tables.md"):
        (tmp_path / "reports" / name).write_bytes((ROOT / "reports" / name).read_bytes())
    proc = arecall("log", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    (run,) = _runs(mlflow_store)
    assert run.data.tags["arecall.logged_from"] == "dvc"
    # the headline, derived from metrics.json when headline.json is not there
    assert run.data.metrics["arecall_pre_at_5"] == pytest.approx(0.9875)
    assert run.data.metrics["gap_nonempty_ci_low_at_5"] == pytest.approx(0.06, abs=1e-6)
    assert arecall("log", str(tmp_path / "reports")).stderr.startswith(
        f"arecall: error: {tmp_path / 'reports'}: not a run directory"
    )


@pytest.mark.long
def test_arecall_log_refuses_results_already_in_the_store_unless_forced(
    tmp_path, mlflow_store, arecall
):
    out = tmp_path / "out"
    proc = arecall("run", f"hydra.run.dir={out}", FAST_PROOF)  # tracked: logged already
    assert proc.returncode == 0, proc.stderr
    (run,) = _runs(mlflow_store)
    again = arecall("log", str(out))
    assert again.returncode == 2
    lines = again.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"arecall: error: {out}: "), lines
    assert f"already logged (run {run.info.run_id} in {mlflow_store})" in lines[0]
    assert len(_runs(mlflow_store)) == 1  # nothing logged twice
    forced = arecall("log", "--force", str(out))
    assert forced.returncode == 0, forced.stderr
    assert len(_runs(mlflow_store)) == 2
    # other results (a changed report) are not "already logged"
    (out / "tables.md").write_text((out / "tables.md").read_text() + "\nedited\n")
    assert arecall("log", str(out)).returncode == 0
    assert len(_runs(mlflow_store)) == 3


def _run_dir(tmp_path: Path, config: dict) -> Path:
    """A run directory as `arecall run` leaves it: Hydra's saved config and the reports."""
    from tests.helpers import ROOT

    out = tmp_path / "run"
    (out / ".hydra").mkdir(parents=True)
    (out / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config))
    for name in ("metrics.json", "proof.json", "tables.md"):
        (out / name).write_bytes((ROOT / "reports" / name).read_bytes())
    return out


def test_arecall_log_never_resolves_an_interpolation_from_the_run_directory(
    tmp_path, mlflow_store, arecall, monkeypatch
):
    monkeypatch.setenv("ARECALL_TEST_SECRET", "s3cr3t-token")
    cfg = fast_config().params()
    cfg["tracking"]["experiment"] = "${oc.env:ARECALL_TEST_SECRET}"
    out = _run_dir(tmp_path, cfg)
    proc = arecall("log", str(out))
    assert proc.returncode == 2
    assert proc.stderr == (
        f"arecall: error: {out / '.hydra' / 'config.yaml'}: tracking.experiment is an "
        "interpolation; arecall log resolves none from a run directory (write its value there)\n"
    )
    assert "s3cr3t-token" not in proc.stdout + proc.stderr
    names = [e.name for e in MlflowClient(tracking_uri=mlflow_store).search_experiments()]
    assert not [n for n in names if "s3cr3t" in n] and len(names) == 1  # nothing created


def test_arecall_log_reads_the_vector_corpus_name_hydra_leaves_unresolved(
    tmp_path, mlflow_store, arecall
):
    from tests.helpers import ROOT

    cfg = fast_config("vector_search.enabled=true").params()
    assert cfg["vector_search"]["corpus"]["name"] == "vectors"
    cfg["vector_search"]["corpus"]["name"] = "${arecall.vector_search_only:}"  # as Hydra saves it
    out = _run_dir(tmp_path, cfg)
    (out / "vector_search.csv").write_bytes((ROOT / "reports" / "vector_search.csv").read_bytes())
    proc = arecall("log", str(out))
    assert proc.returncode == 0, proc.stderr
    runs = {r.data.tags["arecall.kind"]: r for r in _runs(mlflow_store)}
    assert runs["vector_search"].data.params["vector_search.corpus.name"] == "vectors"
    assert runs["pipeline"].data.metrics["arecall_pre_at_5"] == pytest.approx(0.9875)


# -- liveness: whether a run's owner lives does not depend on the wall clock -----------------------


def _owned_run(client: MlflowClient, tags: dict[str, str]) -> str:
    return str(client.create_run("0", tags=tags).info.run_id)


OWNER = """
import sys, time
from arecall.tracking.run import TrackedRun
run = TrackedRun(sys.argv[1], "t")
run.start()
print(run.run_id, flush=True)
time.sleep(120)
"""


@pytest.mark.faults  # a process of its own, killed at the end: seconds
def test_a_live_owner_is_not_an_orphan_when_process_start_times_move(mlflow_store, monkeypatch):
    """psutil's start times are wall-clock seconds (boot time + ticks): on a busy machine they
    moved ~17 s after an event-loop stall, and a live sweep's parent run was closed as an
    orphan. A live process holds a RUNNING run; the next writer sees its start time moved by
    that much, either way: the run stays RUNNING."""
    import psutil

    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, mlflow_store], stdout=subprocess.PIPE, text=True
    )
    try:
        assert owner.stdout is not None
        run_id = owner.stdout.readline().strip()
        client = MlflowClient(tracking_uri=mlflow_store)
        assert client.get_run(run_id).info.status == "RUNNING"
        real = psutil.Process.create_time
        for shift in (17.0, -17.0):
            monkeypatch.setattr(psutil.Process, "create_time", lambda self, s=shift: real(self) + s)
            with open_store(mlflow_store):  # the next writer: closes orphans
                pass
            assert client.get_run(run_id).info.status == "RUNNING", shift
        owner.kill()
        owner.wait()
        with open_store(mlflow_store):  # and once it is gone, it is an orphan
            pass
        assert client.get_run(run_id).info.status == "KILLED"
    finally:
        owner.kill()
        owner.wait()


def test_a_reused_pid_a_dead_pid_and_another_boot_are_orphans(mlflow_store):
    from arecall.tracking.orphans import owner_alive, owner_tags

    mine = owner_tags()
    assert owner_alive(mine, 0)
    if "arecall.process" not in mine:  # pragma: no cover - off Linux: the wall-clock check
        pytest.skip("no /proc: process identities are Linux's")
    boot, _, ticks = mine["arecall.process"].partition("/")
    assert not owner_alive({**mine, "arecall.process": f"{boot}/{int(ticks) + 1}"}, 0)  # reused
    assert not owner_alive({**mine, "arecall.process": f"another-boot/{ticks}"}, 0)
    assert not owner_alive({**mine, "arecall.pid": str(_dead_pid())}, 0)
    client = MlflowClient(tracking_uri=mlflow_store)
    reused = _owned_run(client, {**mine, "arecall.process": f"{boot}/{int(ticks) + 1}"})
    with open_store(mlflow_store):
        pass
    assert client.get_run(reused).info.status == "KILLED"
