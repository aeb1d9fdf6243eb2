"""A tracked ``arecall run`` logs through a tracker process started at launch.

The claims: the run's own process never imports MLflow (its tracker does, while the stages run),
the run still lands FINISHED with the same params, metrics and artifacts as an in-process run,
and a run that ends untracked or refused leaves no tracker process behind. What happens when
the run's process is killed is in test_tracking_faults.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from mlflow.tracking import MlflowClient

from arecall.tracking.tracker import TrackerProcess, wants_tracker

from tests.helpers import FAST_PROOF


def _tracker_children() -> list[psutil.Process]:
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if "arecall.tracking.tracker" in " ".join(child.cmdline()):
                found.append(child)
        except psutil.NoSuchProcess:
            pass
    return found


@pytest.mark.long  # a whole tracked run in a fresh interpreter: make test-faults (CI)
def test_a_tracked_run_imports_mlflow_only_in_its_tracker_and_lands_finished(
    tmp_path: Path, mlflow_store: str
):
    probe = (
        "import json, sys\n"
        "from arecall.cli import main\n"
        f"code = main(['run', 'hydra.run.dir={tmp_path}/out', '{FAST_PROOF}'])\n"
        "print(json.dumps({'code': code, 'mlflow': 'mlflow' in sys.modules}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env={**os.environ, "MLFLOW_TRACKING_URI": mlflow_store},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"code": 0, "mlflow": False}
    client = MlflowClient(tracking_uri=mlflow_store)
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert run.info.status == "FINISHED"
    assert run.data.params["evaluation.proof.max_examples"] == "5"
    assert "arecall_pre_at_5" in run.data.metrics
    assert run.data.tags["arecall.entry"] == "arecall run"
    assert {a.path for a in client.list_artifacts(run.info.run_id)} >= {"reports", "tables"}


@pytest.mark.long
def test_an_untracked_run_and_a_refused_one_leave_no_tracker_behind(tmp_path, arecall, monkeypatch):
    # the tracker is started before the config is known: a guess it must undo
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert wants_tracker(["tracking.enabled=False"]) is False
    result = arecall("run", "evaluation.ks=[0]", f"hydra.run.dir={tmp_path}/bad")
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert _tracker_children() == []
    monkeypatch.setattr("arecall.tracking.tracker.wants_tracker", lambda argv: True)  # wrong
    result = arecall("run", "tracking.enabled=false", f"hydra.run.dir={tmp_path}/u", FAST_PROOF)
    assert result.returncode == 0, result.stderr
    assert _tracker_children() == []
    assert not (tmp_path / "mlflow.db").exists()


def test_a_tracker_sent_nothing_is_stopped_at_once():
    tracker = TrackerProcess(".")
    tracker.close()
    assert tracker.proc.returncode is not None and _tracker_children() == []


def test_a_dead_tracker_is_one_line_naming_its_exit(tmp_path: Path):
    tracker = TrackerProcess(tmp_path)
    tracker.proc.kill()
    answer = tracker.answer()
    tracker.close()
    assert answer["error"].startswith("the tracking process exited with status -9")


def test_a_process_with_mlflow_already_imported_logs_in_process():
    # nothing left to overlap: called from Python (a notebook, a test) with MLflow loaded
    assert "mlflow" in sys.modules
    assert wants_tracker(["retriever=bm25"]) is False
