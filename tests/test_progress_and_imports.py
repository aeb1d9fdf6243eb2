"""Fast and talkative: each stage says when it starts and ends; heavy libraries load only if used.

Stage lines are checked in-process (``arecall run``) and as DVC runs a stage (a process per
stage); what a command imports is checked in a fresh interpreter, through ``sys.modules``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import yaml

from arecall.pipeline.stages import PROGRESS_ENV

from conftest import FAST_PROOF, fast_config

#: Libraries that cost a second or more to import, each needed by one optional path only.
HEAVY = ("mlflow", "sklearn", "lancedb", "faiss", "matplotlib", "hypothesis", "torch")
MAIN_STAGES = ("generate", "rank", "filter", "score", "prove", "report")
LINE = re.compile(r"^arecall: (?P<stage>[a-z_]+): (?P<text>.*)$")


def _stage_lines(stderr: str) -> list[tuple[str, str]]:
    return [(m["stage"], m["text"]) for m in map(LINE.match, stderr.splitlines()) if m]


def test_arecall_run_prints_each_stage_start_with_its_work_and_end_with_seconds(
    tmp_path, arecall, monkeypatch
):
    monkeypatch.setenv(PROGRESS_ENV, "1")
    proc = arecall("run", "tracking.enabled=false", f"hydra.run.dir={tmp_path}", FAST_PROOF)
    assert proc.returncode == 0, proc.stderr
    lines = _stage_lines(proc.stderr)
    started = [stage for stage, text in lines if text.endswith("…")]
    ended = [stage for stage, text in lines if re.fullmatch(r"done in \d+\.\d\d s", text)]
    assert started[: len(MAIN_STAGES)] == list(MAIN_STAGES)
    assert started == ended  # every stage that starts, ends, in order
    assert len(lines) == 2 * len(started)
    work = dict(line for line in lines if line[1].endswith("…"))
    assert work["generate"] == "corpus discovery …"
    assert work["rank"] == "24 queries × 40 documents, retriever tfidf …"
    assert work["filter"] == "4 principals × 24 queries, K ≤ 10 …"
    assert work["score"] == "96 query-principal pairs × 4 K …"
    assert work["prove"] == "property claims × 5 cases, 96 pairs × 4 K of this run …"


def test_no_stage_lines_on_a_pipe_unless_asked(tmp_path, arecall, monkeypatch):
    # stderr is captured here, as in a script: a user error must stay its one line
    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    proc = arecall("run", "tracking.enabled=false", f"hydra.run.dir={tmp_path}", FAST_PROOF)
    assert proc.returncode == 0, proc.stderr
    assert _stage_lines(proc.stderr) == []


def test_a_dvc_stage_prints_its_start_and_end_lines(tmp_path):
    cfg = fast_config("tracking.enabled=false")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    env = {k: v for k, v in __import__("os").environ.items() if k != PROGRESS_ENV}
    for stage in ("generate", "rank"):
        proc = subprocess.run(
            [sys.executable, "-m", f"arecall.pipeline.stages.{stage}"],
            cwd=tmp_path,
            env={**env, PROGRESS_ENV: "1"},
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, proc.stderr
        lines = _stage_lines(proc.stderr)
        assert [s for s, _ in lines] == [stage, stage], proc.stderr
        assert lines[1][1].startswith("done in ")
    assert lines[0][1] == "24 queries × 40 documents, retriever tfidf …"


def _imported(code: str, cwd) -> set[str]:
    """The top-level packages loaded by running ``code`` in a fresh interpreter."""
    probe = f"{code}\nimport sys, json\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    proc = subprocess.run(
        [sys.executable, "-c", probe], cwd=cwd, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize(
    "module",
    [
        "arecall",
        "arecall.cli",
        "arecall.cli.run",
        *(f"arecall.pipeline.stages.{s}" for s in ("generate", "rank", "filter", "score")),
        "arecall.pipeline.stages.prove",
        "arecall.pipeline.stages.report",
        "arecall.pipeline.stages.track",
    ],
)
def test_entry_points_import_no_heavy_library_up_front(module, tmp_path):
    assert _imported(f"import {module}", tmp_path) & set(HEAVY) == set()


def test_an_untracked_run_loads_neither_mlflow_nor_sklearn_nor_hypothesis(tmp_path):
    code = (
        "from arecall.cli import main\n"
        f"assert main(['run', 'tracking.enabled=false', 'hydra.run.dir={tmp_path}/out', "
        f"'{FAST_PROOF}']) == 0"
    )
    loaded = _imported(code, tmp_path)
    assert loaded & {"mlflow", "sklearn", "lancedb", "hypothesis", "torch"} == set()
    assert "matplotlib" in loaded  # the report's plot: the probe does see what a run uses
