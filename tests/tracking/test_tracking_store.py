"""The tracking store is created whole or not at all, and a half-made store is rebuilt.

MLflow creates a sqlite store by running its migrations one transaction at a time; a kill, a full
disk or a file-size limit in between used to leave a half-made schema, and every later run then
failed ("table _alembic_tmp_datasets already exists"). Each route is taken here with the real
``arecall evaluate --mlflow`` as the store's first writer (marked ``faults``: seconds each), then
the next writer must land its run. The quick checks rebuild a store cut short in-process.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from arecall.tracking.store import holds_nothing, open_store

from tests.helpers import VENV_BIN

RUN = "q1 Q0 a 1 0.9 sys\nq1 Q0 x 2 0.8 sys\nq1 Q0 b 3 0.7 sys\nq2 Q0 c 1 0.5 sys\n"
QRELS = "q1 0 a 1\nq1 0 b 2\nq2 0 d 1\n"

#: Injected into the first writer (sitecustomize on PYTHONPATH): a full disk as sqlite meets it
#: (SQLITE_FULL, "database or disk is full", once the file reaches a few pages), or a hold after
#: some of MLflow's migrations, so the test can kill -9 the writer mid-creation.
INJECT = """
import os

if os.environ.get("ARECALL_TEST_FULL_DISK"):
    import sqlite3
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    @event.listens_for(Engine, "connect")
    def _full(dbapi_connection, record):
        if isinstance(dbapi_connection, sqlite3.Connection):
            dbapi_connection.execute("PRAGMA max_page_count = 60")

if os.environ.get("ARECALL_TEST_HOLD_MIGRATION"):
    import time
    from alembic.runtime.migration import HeadMaintainer

    _step = HeadMaintainer.update_to_step
    _done = []

    def _holding(self, step):
        _step(self, step)
        _done.append(step)
        if len(_done) == 12:
            open(os.environ["ARECALL_TEST_HOLD_MIGRATION"], "w").close()
            time.sleep(120)

    HeadMaintainer.update_to_step = _holding
"""


def _evaluate(tmp_path: Path, uri: str, **kw: object) -> subprocess.Popen:
    (tmp_path / "run.trec").write_text(RUN)
    (tmp_path / "qrels.txt").write_text(QRELS)
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "MLFLOW_DISABLE_TELEMETRY": "true"}
    env.update(kw.pop("env", {}))  # type: ignore[call-overload]
    command = ["evaluate", "--run", "run.trec", "--qrels", "qrels.txt", "--mlflow"]
    return subprocess.Popen(
        [str(VENV_BIN / "arecall"), *command],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        **kw,  # type: ignore[call-overload]
    )


def _injected(tmp_path: Path, **env: str) -> dict[str, str]:
    inject = tmp_path / "inject"
    inject.mkdir(exist_ok=True)
    (inject / "sitecustomize.py").write_text(INJECT)
    return {"PYTHONPATH": str(inject), **env}


def _next_writer_lands(tmp_path: Path, uri: str) -> None:
    """A later ``evaluate --mlflow`` logs its run FINISHED; no temporary file stays behind.

    Checked first, as the user meets it; then that the interrupted creation had left no store.
    """
    half_made = (tmp_path / "mlflow.db").exists()
    proc = _evaluate(tmp_path, uri)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name("arecall-evaluate").experiment_id])
    assert run.info.status == "FINISHED" and run.data.metrics["queries"] == 2
    db = Path(uri.removeprefix("sqlite:///"))
    assert sorted(p.name for p in db.parent.glob(f"*{db.name}*")) == [db.name, f"{db.name}.lock"]
    assert not half_made  # whole or not at all


@pytest.mark.faults
def test_a_file_size_limit_during_creation_leaves_no_store_and_the_next_run_creates_it(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    limit = 200 * 1024  # `ulimit -f 200`: the schema is about 950 KB

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = _evaluate(tmp_path, uri, preexec_fn=limited)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 2
    assert err.startswith(f"arecall: error: tracking store {uri} failed: ") and err.count("\n") == 1
    _next_writer_lands(tmp_path, uri)


@pytest.mark.faults
def test_a_full_disk_during_creation_leaves_no_store_and_the_next_run_creates_it(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    proc = _evaluate(tmp_path, uri, env=_injected(tmp_path, ARECALL_TEST_FULL_DISK="1"))
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 2
    assert "database or disk is full" in err and err.count("\n") == 1, err
    _next_writer_lands(tmp_path, uri)


@pytest.mark.faults
def test_a_kill_during_creation_leaves_no_store_and_the_next_run_creates_it(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    held = tmp_path / "held"
    proc = _evaluate(tmp_path, uri, env=_injected(tmp_path, ARECALL_TEST_HOLD_MIGRATION=str(held)))
    deadline = time.monotonic() + 300
    while not held.exists():  # twelve of MLflow's migrations are in, the rest are not
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    _next_writer_lands(tmp_path, uri)


# -- a store cut short before stores were built beside: rebuilt, never one with data ------------


#: MLflow's first schema migration: a store stamped with it has every later one still to run.
FIRST_MIGRATION = "451aebb31d03"


def _cut_short(template: Path, path: Path) -> Path:
    """A store as a creation killed mid-migration leaves it: later tables made, version behind.

    (The real thing, made by killing MLflow mid-creation, is what the ``faults`` tests above
    produce without the atomic creation; this copy of a migrated store fails the same way.)
    """
    shutil.copyfile(template, path)
    with sqlite3.connect(path) as con:
        con.execute("UPDATE alembic_version SET version_num = ?", (FIRST_MIGRATION,))
        con.execute("DELETE FROM experiments")  # the default experiment comes after migrations
        con.execute("DROP TABLE registered_models")  # a table the migrations would make again
    return path


#: MLflow's migrations, rerun on a cut-short store by MLflow alone, warn about a constraint.
_RERUN_WARNING = "ignore:Unnamed CHECK constraint:UserWarning"


@pytest.mark.filterwarnings(_RERUN_WARNING)
def test_a_store_whose_creation_was_cut_short_is_rebuilt_by_the_next_writer(
    tmp_path, mlflow_template
):
    path = _cut_short(mlflow_template, tmp_path / "mlflow.db")
    raw = shutil.copyfile(path, tmp_path / "raw.db")
    with pytest.raises(Exception, match="already exists"):  # MLflow alone: bricked for good
        MlflowClient(tracking_uri=f"sqlite:///{raw}").search_experiments()
    assert holds_nothing(path)
    with open_store(f"sqlite:///{path}") as client:
        run = client.create_run("0")
        client.set_terminated(run.info.run_id)
    assert not holds_nothing(path)
    assert MlflowClient(f"sqlite:///{path}").get_run(run.info.run_id).info.status == "FINISHED"


@pytest.mark.filterwarnings(_RERUN_WARNING)
def test_a_store_with_any_row_of_data_is_never_rebuilt(tmp_path, mlflow_template):
    path = _cut_short(mlflow_template, tmp_path / "mlflow.db")
    with sqlite3.connect(path) as con:
        con.execute(
            "INSERT INTO experiments (experiment_id, name, lifecycle_stage) VALUES (7, 'kept', 'active')"
        )
    assert not holds_nothing(path)
    with pytest.raises(Exception, match="already exists"), open_store(f"sqlite:///{path}") as c:
        c.search_experiments()  # MLflow's own error, as before: the store is not replaced
    with sqlite3.connect(path) as con:
        assert con.execute("SELECT name FROM experiments").fetchall() == [("kept",)]
