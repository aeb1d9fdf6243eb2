"""The MLflow UI reads like an experiment tracker's, checked through a real server's REST API.

What the UI shows is what its REST API answers: the experiment's kind (which page it opens on),
each run's start and end (Duration), Source, Dataset, description, metrics and top-level
artifacts. Each entry point is run as a user runs it (a process of its own) against an
``mlflow server`` on 127.0.0.1 that the test starts and stops; the DVC entry points are in
test_dvc_queue_temp.py.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from tests import _rest as rest
from tests._holding import holding_env, release
from tests.helpers import FAST_PROOF, VENV_BIN, check_against_headlines, parse_table

pytestmark = [pytest.mark.slow, pytest.mark.long]

#: A vector experiment small enough to run in seconds (an exact scan: no graph build).
SMALL_VECTORS = (
    "vector_search.enabled=true",
    "index@vector_search.index=exact",
    "vector_search.corpus.n_docs=300",
    "vector_search.corpus.dims=8",
    "vector_search.corpus.n_queries=5",
    "vector_search.corpus.k=5",
    "vector_search.corpus.selectivities=[0.5,1.0]",
)
#: The headline's MLflow names per K (headline.json's keys; its CI as ``…_ci_low``).
HEADLINE = ("recall", "arecall_post", "arecall_pre", "gap", "gap_nonempty",
            "gap_nonempty_ci_low", "gap_nonempty_ci_high")  # fmt: skip


def _arecall(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(VENV_BIN / "arecall"), *args],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=900,
    )


def _stage_seconds(stdout: str, *, but: tuple[str, ...] = ()) -> float:
    return sum(
        float(s)
        for stage, s in re.findall(r"^arecall: (\w+): done in ([\d.]+) s$", stdout, re.M)
        if stage not in but
    )


def _by_kind(url: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for run in rest.runs(url):
        out.setdefault(rest.tags_of(run).get("arecall.kind", "?"), []).append(run)
    return out


def test_a_run_opens_on_the_runs_table_and_says_what_it_measured_and_how_long_it_took(
    tmp_path,
    mlflow_server,
):
    url = mlflow_server
    # an experiment made before arecall set its kind: the run updates it
    rest.post(url, "/api/2.0/mlflow/experiments/create", {"name": "arecall"})
    assert "mlflow.experimentKind" not in rest.tags_of(rest.experiment(url))
    out = tmp_path / "out"
    args = ["run", f"hydra.run.dir={out}", FAST_PROOF, *SMALL_VECTORS]
    env = {"MLFLOW_TRACKING_URI": url, **holding_env(tmp_path)}
    started = time.time() * 1000
    proc = subprocess.Popen(
        [str(VENV_BIN / "arecall"), *args],
        cwd=tmp_path,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    before = []
    for line in proc.stdout:  # the prove stage has started, and waits for the gate
        before.append(line)
        if line.startswith("arecall: prove:"):
            break
    time.sleep(3)  # so the pipeline takes 3 s at least
    release(tmp_path)
    rest_of_stdout, stderr = proc.communicate(timeout=900)
    stdout = "".join(before) + rest_of_stdout
    ended = time.time() * 1000
    assert proc.returncode == 0, stderr

    # the experiment opens on the runs table (MLflow's "Machine learning" kind)
    assert rest.tags_of(rest.experiment(url))["mlflow.experimentKind"] == "custom_model_development"
    kinds = _by_kind(url)
    assert sorted(kinds) == ["pipeline", "vector_search"]
    (run,), (vector,) = kinds["pipeline"], kinds["vector_search"]
    run_id, tags = run["info"]["run_id"], rest.tags_of(run)

    # every tracked command prints its runs' ids
    assert re.findall(r"^mlflow: logged run (\w+)", stdout, re.M) == [
        run_id,
        vector["info"]["run_id"],
    ]
    # Source: the entry point; the command as typed
    assert tags["mlflow.source.name"] == tags["arecall.entry"] == "arecall run"
    assert tags["mlflow.source.type"] == "LOCAL"
    assert tags["arecall.command"] == "arecall run " + shlex.join(args[1:])
    # Duration: the pipeline's, from its first stage's start to its last stage's end
    start, end = int(run["info"]["start_time"]), int(run["info"]["end_time"])
    assert started <= start < end <= ended
    stages = _stage_seconds(stdout, but=("vectors",))
    assert stages >= 3.0  # the held prove stage
    assert stages - 0.1 <= (end - start) / 1000 <= stages + 2.0
    # Dataset: the corpus measured, by its content
    (dataset,) = rest.datasets(run)
    assert dataset["name"] == "discovery" and dataset["tags"]["mlflow.data.context"] == "evaluation"
    from arecall.io.digest import files_digest

    parquet = sorted((out / "data" / "corpus").glob("*.parquet"))
    assert dataset["digest"] == files_digest((p.name, p) for p in parquet)[:12]
    assert json.loads(dataset["profile"]) == {
        "profiles": "corpus",
        "documents": 40,
        "queries": 24,
        "principals": 4,
    }
    # the description: the run's tables
    assert tags["mlflow.note.content"] == (out / "tables.md").read_text()
    # metrics: the Authorized-Recall headline per K, and its curves stepped by K
    headline = json.loads((out / "headline.json").read_text())
    # the runs table opens (arecall ui's address) on columns this run fills: its choices and
    # ARecall post, pre and gap at each of its K
    view = json.loads(rest.tags_of(rest.experiment(url))["mlflow.sharedViewState.arecall"])
    columns = [c.split(".", 1) for c in view["selectedColumns"]]
    shown = {kind: [key.strip("`") for k, key in columns if k == kind] for kind, _ in columns}
    assert shown["attributes"] == ["Source", "Dataset"]
    assert set(shown["params"]) == {"retriever.name", "profiles.name"} <= set(rest.params(run))
    assert shown["metrics"] == [
        f"{key}_at_{k}" for k in headline["k"] for key in ("arecall_post", "arecall_pre", "gap")
    ]
    assert set(shown["metrics"]) <= set(rest.metrics(run))
    expected = {f"{key}_at_{k}" for key in HEADLINE for k in headline["k"]}
    assert set(rest.metrics(run)) == expected | {"arecall_post", "arecall_pre", "recall"}
    for k, line in headline["k"].items():
        assert rest.metrics(run)[f"arecall_pre_at_{k}"] == pytest.approx(line["arecall_pre"])
    assert [s for s, _ in rest.history(url, run_id, "arecall_pre")] == [1, 3, 5, 10]
    # diagnostics are an artifact, not tags; the table and plot are at the top, for Compare
    assert not [t for t in tags if t.startswith(("arecall.rank.", "arecall.vectors"))]
    assert not [p for p in rest.params(run) if p.startswith("vector_search.")]
    top = rest.artifacts(url, run_id)
    assert {"tables.md", "arecall_at_k.png", "diagnostics.json"} <= set(top)

    # the vector experiment: a run of its own, nested, with its table and plot at the top
    vtags = rest.tags_of(vector)
    assert vtags["mlflow.parentRunId"] == run_id and vtags["mlflow.runName"] == "vector_search"
    assert vtags["mlflow.source.name"] == "arecall run"
    assert rest.params(vector)["vector_search.corpus.n_docs"] == "300"
    assert all(m.startswith("vector_") for m in rest.metrics(vector)) and rest.metrics(vector)
    assert {"vector_search.md", "vector_search.png"} <= set(
        rest.artifacts(url, vector["info"]["run_id"])
    )
    assert vtags["mlflow.note.content"] == (out / "vector_search.md").read_text()


def test_a_sweep_prints_every_run_id_each_table_once_and_its_parent_holds_the_comparison(
    tmp_path,
    mlflow_server,
):
    url = mlflow_server
    sweep = tmp_path / "sweep"
    args = ["run", "-m", "profiles=corpus,random", f"hydra.sweep.dir={sweep}", FAST_PROOF]
    proc = _arecall(tmp_path, *args, *SMALL_VECTORS, MLFLOW_TRACKING_URI=url)
    assert proc.returncode == 0, proc.stderr
    kinds = _by_kind(url)
    (parent,) = kinds["sweep"]
    points = kinds["pipeline"]
    parent_id = parent["info"]["run_id"]
    assert {rest.tags_of(p)["mlflow.parentRunId"] for p in points} == {parent_id}
    for run in (*points, parent):
        tags = rest.tags_of(run)
        assert tags["mlflow.source.name"] == tags["arecall.entry"] == "arecall run -m"
        assert tags["arecall.command"].startswith("arecall run -m profiles=corpus,random ")
    # every run's id printed: the points', their vector runs', the parent's
    printed = re.findall(r"^mlflow: logged run (\w+)", proc.stdout, re.M)
    every = [r["info"]["run_id"] for rs in kinds.values() for r in rs]
    assert sorted(printed) == sorted(every)
    # the same vector table (both points ask for the same experiment) is printed once
    caption = (sweep / "0" / "vector_search.md").read_text().splitlines()[0]
    assert proc.stdout.count(caption) == 1
    # the parent holds the comparison: top-level table and figure, and as its description
    top = rest.artifacts(url, parent_id)
    assert {"comparison.md", "comparison.png"} <= set(top)
    text = (sweep / "comparison.md").read_text()
    assert rest.tags_of(parent)["mlflow.note.content"] == text
    headlines = {
        f"profiles={p}": json.loads((sweep / str(i) / "headline.json").read_text())
        for i, p in enumerate(("corpus", "random"))
    }
    check_against_headlines(text, headlines)
    assert {r["profiles"] for r in parse_table(text)} == {"corpus", "random"}


def test_evaluate_mlflow_logs_a_run_like_the_pipelines(tmp_path, mlflow_server):
    url = mlflow_server
    files = tmp_path / "in"
    files.mkdir()
    (files / "my.run").write_text("q1 Q0 d1 1 2.0 sys\nq1 Q0 d2 2 1.0 sys\nq2 Q0 d2 1 1.0 sys\n")
    (files / "my.qrels").write_text("q1 0 d1 1\nq2 0 d1 1\n")
    (files / "acl.tsv").write_text("d1\talice\nd2\tbob\n")
    args = ["evaluate", "--run", str(files / "my.run"), "--qrels", str(files / "my.qrels")]
    args += ["--acl", str(files / "acl.tsv"), "--k", "1,2", "--format", "json", "--mlflow"]
    proc = _arecall(
        tmp_path, *args, MLFLOW_TRACKING_URI=url, MLFLOW_EXPERIMENT_NAME="arecall-evaluate"
    )
    assert proc.returncode == 0, proc.stderr
    experiment = rest.experiment(url, "arecall-evaluate")
    assert rest.tags_of(experiment)["mlflow.experimentKind"] == "custom_model_development"
    (run,) = rest.runs(url, "arecall-evaluate")
    run_id, tags = run["info"]["run_id"], rest.tags_of(run)
    assert f"mlflow: logged run {run_id} to {url}" in proc.stderr
    assert tags["mlflow.source.name"] == tags["arecall.entry"] == "arecall evaluate"
    assert tags["arecall.command"].startswith("arecall evaluate --run ")
    roles = {d["tags"]["mlflow.data.context"]: d["name"] for d in rest.datasets(run)}
    assert roles == {"run": "my.run", "qrels": "my.qrels", "acl": "acl.tsv"}
    assert "evaluation.txt" in rest.artifacts(url, run_id)
    assert tags["mlflow.note.content"].startswith("```text\nrun: sys")
    assert int(run["info"]["end_time"]) >= int(run["info"]["start_time"])
    assert rest.metrics(run)["arecall_pre_at_1"] == pytest.approx(0.75)
