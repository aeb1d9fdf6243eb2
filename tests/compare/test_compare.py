"""``arecall compare``: the runs side by side, with each run's own numbers.

The table's numbers are checked against each run's ``headline.json`` (the file the run wrote,
not what MLflow holds), the figure is a PNG of the expected size, and every way of naming runs
(ids, a filter) and every way of naming them wrong is one line.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from arecall.compare.points import Point
from arecall.compare.render import MAX_COLUMNS, table

from tests.helpers import FAST_PROOF, check_against_headlines, parse_table

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def logged(tmp_path_factory, mlflow_template):
    """Two tracked runs (the corpus's grants, random grants) in a store of this module: the
    store, and each run's id and headline.json. Made once: the tests only read them."""
    import contextlib
    import io
    import shutil

    from arecall.cli import main

    where = tmp_path_factory.mktemp("compare")
    store = f"sqlite:///{where / 'store.db'}"
    shutil.copyfile(mlflow_template, where / "store.db")
    found = {}
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", store)
        for profiles in ("corpus", "random"):
            out = where / profiles
            with contextlib.redirect_stdout(io.StringIO()) as printed:
                assert (
                    main(["run", f"profiles={profiles}", f"hydra.run.dir={out}", FAST_PROOF]) == 0
                )
            (run_id,) = re.findall(r"^mlflow: logged run (\w+) to ", printed.getvalue(), re.M)
            found[profiles] = (run_id, json.loads((out / "headline.json").read_text()))
    for handler in root.handlers[:]:  # Hydra's job logging, as the `arecall` fixture undoes it
        if handler not in handlers:
            root.removeHandler(handler)
            handler.close()
    root.setLevel(level)
    return store, found


@pytest.fixture
def two_runs(logged, monkeypatch):
    """The module's two runs, with their store as this test's."""
    store, found = logged
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    return found


def test_compare_run_ids_draws_each_runs_headline_and_its_choices(two_runs, arecall, tmp_path):
    ids = [run_id for run_id, _ in two_runs.values()]
    out = tmp_path / "cmp"
    proc = arecall("compare", *ids, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    rows = parse_table(proc.stdout)
    assert {r["profiles"] for r in rows} == {"corpus", "random"}  # the choice that differs
    assert {r["retriever"] for r in rows} == {"tfidf"}  # always shown
    labels = {r["run"]: r["profiles"] for r in rows}
    check_against_headlines(
        proc.stdout, {label: two_runs[profiles][1] for label, profiles in labels.items()}
    )
    assert (out / "comparison.md").read_text() == proc.stdout
    png = (out / "comparison.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    # the best value per K and column is bold: at K = 5 the corpus's grants give the higher
    # ARecall post (0.954 against random's), which is marked, and random's is not
    at5 = [r for r in parse_table(proc.stdout, bold=True) if r["K"] == "5"]
    marked = {r["profiles"]: r["ARecall post"].startswith("**") for r in at5}
    post = {p: two_runs[p][1]["k"]["5"]["arecall_post"] for p in two_runs}
    best = max(post, key=post.__getitem__)
    assert marked == {p: p == best for p in post}


def test_compare_filter_takes_mlflows_search_syntax(two_runs, arecall):
    proc = arecall("compare", "--filter", "params.profiles.name = 'random'", "--out", "-")
    assert proc.returncode == 0, proc.stderr
    rows = parse_table(proc.stdout)
    assert {r["K"] for r in rows} == {"1", "3", "5", "10"}
    assert len(rows) == 4  # one run, four K
    (label,) = {r["run"] for r in rows}
    check_against_headlines(proc.stdout, {label: two_runs["random"][1]})


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["0" * 32], "run 00000000000000000000000000000000: not found in "),
        (["--filter", "params.nope = 'x'"], "--filter \"params.nope = 'x'\": no finished"),
        (["--filter", "params.profiles.name ==="], "--filter 'params.profiles.name ===': "),
        ([], "compare: name MLflow runs (RUN_ID…, --filter) or DVC experiments (--dvc)"),
        (["abc", "--dvc"], "compare: MLflow runs or DVC experiments (--dvc), not both"),
        (["--bogus"], "compare: unrecognized arguments: --bogus"),
    ],
)
def test_a_comparison_that_cannot_be_made_is_one_line(two_runs, arecall, args, message):
    proc = arecall("compare", *args)
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("arecall: error: "), proc.stderr
    assert message in lines[0]


def test_compare_writes_nothing_with_out_dash(two_runs, arecall, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ids = [run_id for run_id, _ in two_runs.values()]
    before = sorted(p.name for p in tmp_path.iterdir())
    assert arecall("compare", *ids, "--out", "-").returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_the_printed_table_fits_an_80_column_terminal_and_the_file_holds_it_whole(
    two_runs, arecall, tmp_path, monkeypatch
):
    ids = [run_id for run_id, _ in two_runs.values()]
    monkeypatch.setenv("COLUMNS", "80")
    proc = arecall("compare", *ids, "--out", str(tmp_path / "cmp"))
    assert proc.returncode == 0, proc.stderr
    assert max(len(line) for line in proc.stdout.splitlines()) <= 80, proc.stdout
    rows = parse_table(proc.stdout)
    headlines = {r["run"]: two_runs[r["run"].removeprefix("profiles=")][1] for r in rows}
    assert len(rows) == 2 * 4  # every run at every K
    for row in rows:
        line = headlines[row["run"]]["k"][row["K"]]
        assert (row["Recall"], row["post"], row["pre"], row["gap≠∅"]) == (
            f"{line['recall']:.3f}",
            f"{line['arecall_post']:.3f}",
            f"{line['arecall_pre']:.3f}",
            f"{line['gap_nonempty']:+.3f}",
        )
    assert "in comparison.md (--out DIR)" in proc.stdout  # where the intervals are
    check_against_headlines((tmp_path / "cmp" / "comparison.md").read_text(), headlines)
    monkeypatch.setenv("COLUMNS", "200")  # room enough: the table as the file holds it
    wide = arecall("compare", *ids, "--out", "-")
    assert wide.stdout == (tmp_path / "cmp" / "comparison.md").read_text()


def test_a_wide_comparison_stays_within_a_screens_columns():
    """Many differing keys: the table keeps MAX_COLUMNS columns and names the rest."""
    line = {"recall": 0.5, "arecall_post": 0.4, "arecall_pre": 0.5, "gap": 0.1}
    points = [
        Point(f"p{i}", {f"corpus.key{j}": str(i * j) for j in range(30)}, {"k": {"5": line}})
        for i in range(3)
    ]
    text = table(points)
    header = text.splitlines()[0]
    assert header.count("|") - 1 == MAX_COLUMNS
    assert "Also differing (not shown): " in text


def test_a_sweeps_parent_holds_the_comparison_of_its_points(tmp_path, mlflow_store, arecall):
    sweep = tmp_path / "sweep"
    proc = arecall("run", "-m", "profiles=corpus,random", f"hydra.sweep.dir={sweep}", FAST_PROOF)
    assert proc.returncode == 0, proc.stderr
    client = MlflowClient(tracking_uri=mlflow_store)
    runs = client.search_runs([client.get_experiment_by_name("arecall").experiment_id])
    (parent,) = [r for r in runs if r.data.tags.get("arecall.sweep") == "parent"]
    points = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    # every run's id is printed: each point's, and the parent's with its comparison
    printed = re.findall(r"^mlflow: logged run (\w+)", proc.stdout, re.M)
    assert sorted(printed) == sorted([parent.info.run_id, *(p.info.run_id for p in points)])
    top = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"comparison.md", "comparison.png"} <= top
    text = Path(
        client.download_artifacts(parent.info.run_id, "comparison.md", str(tmp_path / "dl"))
    ).read_text()
    assert parent.data.tags["mlflow.note.content"] == text
    assert (sweep / "comparison.md").read_text() == text
    headlines = {
        f"profiles={p}": json.loads((sweep / str(i) / "headline.json").read_text())
        for i, p in enumerate(("corpus", "random"))
    }
    check_against_headlines(text, headlines)
    assert text in proc.stdout  # printed as the sweep ends
