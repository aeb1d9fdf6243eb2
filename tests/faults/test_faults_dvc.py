"""kill -9 in the middle of any stage, then `dvc repro`: the same bytes, nothing left behind.

Each stage is killed at its worst moment: after writing an artifact to its temporary file and
before the rename that publishes it. The fault is injected from outside the product through a
``sitecustomize`` module on PYTHONPATH that replaces ``os.replace`` in stage processes only, so
the code under test is the code users run. After the kills, one `dvc repro` recovers; the reports
must equal the committed ones byte for byte, `git status` must be clean and no
temporary file may remain anywhere in the workspace.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import ROOT, dvc, git, snapshot_repo

INJECTOR = """
import os, signal, sys

_target = os.environ.get("ARECALL_TEST_KILL_AT")
if _target:
    _replace = os.replace

    def _killing_replace(src, dst, *args, **kwargs):
        if "pipeline/stages" in (sys.argv[0] if sys.argv else "") and str(dst).endswith(_target):
            os.kill(os.getpid(), signal.SIGKILL)  # the temp file is written, not yet published
        return _replace(src, dst, *args, **kwargs)

    os.replace = _killing_replace
"""

#: For each stage, the artifact whose publication is interrupted.
KILL_POINTS = {
    "generate": "data/corpus/acl.parquet",
    "rank": "data/rank/ranking.npz",
    "filter": "data/filter/lists.npz",
    "score": "reports/metrics.json",
    "prove": "reports/proof.json",
    "report": "reports/arecall_at_k.png",
    "vectors": "reports/vector_search.csv",
}


@pytest.mark.faults
def test_kill_9_at_each_stage_then_dvc_repro_recovers_byte_identical(tmp_path: Path):
    work = snapshot_repo(tmp_path / "arecall")
    injector = tmp_path / "inject"
    injector.mkdir()
    (injector / "sitecustomize.py").write_text(INJECTOR)
    proc = dvc(work, "repro")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # last stage first, so each forced stage finds its inputs in place (-s: that stage only)
    for stage, artifact in reversed(KILL_POINTS.items()):
        proc = dvc(
            work,
            "repro",
            "--force",
            "--single-item",
            stage,
            PYTHONPATH=str(injector),
            ARECALL_TEST_KILL_AT=artifact,
        )
        assert proc.returncode != 0, f"{stage}: the injected kill did not happen\n{proc.stdout}"
        target = work / artifact
        # killed between writing and publishing: the temp file is there, the artifact is not
        assert list(target.parent.glob(f".{target.name}.*tmp")), f"{stage}: no temp file left"
        assert not target.exists()
    proc = dvc(work, "repro")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in (
        "metrics.json",
        "proof.json",
        "tables.md",
        "arecall_at_k.png",
        "vector_search.csv",
    ):
        assert (work / "reports" / name).read_bytes() == (ROOT / "reports" / name).read_bytes()
    assert git(work, "status", "--porcelain") == ""
    leftovers = [p for p in work.rglob("*.tmp") if ".dvc" not in p.parts and ".git" not in p.parts]
    assert leftovers == []


def _runs_of(store: Path) -> dict[str, str]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{store}")
    ids = [e.experiment_id for e in client.search_experiments()]
    return {r.info.run_id: r.info.status for r in client.search_runs(ids)}


@pytest.mark.faults
def test_sigterm_to_dvc_repro_while_track_logs_ends_the_run_killed_wherever_it_lands(
    tmp_path: Path,
):
    """SIGTERM to `dvc repro`'s process group (a terminal, a job runner) while the track stage
    has just created its run, while it uploads, and once its run is logged FINISHED but its
    record is not yet written: the stage says so in one line, its run ends KILLED, nothing is
    left RUNNING, and the next `dvc repro` leaves `git status` clean."""
    import os
    import signal
    import subprocess

    from tests._holding import holding_at, release, wait_ready
    from tests.helpers import VENV_BIN, dvc_env

    work = snapshot_repo(tmp_path / "arecall")
    proc = dvc(work, "repro")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    store = work / "mlflow.db"
    from mlflow.tracking import MlflowClient

    # results logged FINISHED are not logged again (the track stage names their run instead):
    # the first repro's run goes, so each forced track stage below makes a run of its own
    for run_id in _runs_of(store):
        MlflowClient(tracking_uri=f"sqlite:///{store}").delete_run(run_id)
    for point in ("created", "uploading", "logged"):
        hold = tmp_path / point
        hold.mkdir()
        before = _runs_of(store)
        repro = subprocess.Popen(
            [str(VENV_BIN / "dvc"), "repro", "--force", "--single-item", "track"],
            cwd=work,
            env=dvc_env(**holding_at(hold, point, "track")),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        wait_ready(hold, repro)
        os.killpg(repro.pid, signal.SIGTERM)
        release(hold)
        _, err = repro.communicate(timeout=120)  # the stage holds the pipes until it exits
        new = {i: s for i, s in _runs_of(store).items() if i not in before}
        assert list(new.values()) == ["KILLED"], (point, new, err)
        assert "arecall: interrupted by SIGTERM" in err, (point, err)
    proc = dvc(work, "repro")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "RUNNING" not in _runs_of(store).values()
    assert git(work, "status", "--porcelain") == ""


def test_sqlites_files_beside_the_store_are_ignored_by_git():
    names = ["mlflow.db-journal", "mlflow.db-wal", "mlflow.db-shm", ".mlflow.db.123.ab12cd.tmp"]
    ignored = git(ROOT, "check-ignore", "--no-index", *names).split()
    assert ignored == names
