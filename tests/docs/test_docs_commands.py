"""Every command the README and the docs show is run by a test as written, or says why not.

The coverage test reads every shell code block (tests/_docs.py) and holds each command to one
of: a test that runs it (``documented("…")``, the quick ones here, the long ones in
test_docs_recipes.py and test_docs_cluster.py), a benchmark whose arguments its own parser
accepts, a suite CI runs, or `NOT_RUN` with a reason. The quick commands run here, as written,
in a fresh directory whose ``.venv`` is this test run's venv.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests._docs import (
    BENCHMARK,
    NOT_RUN,
    RUN_BY_CI,
    commands_in,
    documented_calls,
    link_venv,
    sh,
    shown_commands,
    write_trec_files,
)
from tests.helpers import ROOT, write_seed_dir


def test_every_command_the_docs_show_is_run_by_a_test_or_listed_with_its_reason():
    shown = shown_commands()
    run = documented_calls()
    unknown = {c: w for c, w in shown.items() if c not in run and c not in NOT_RUN}
    unknown = {c: w for c, w in unknown.items() if not BENCHMARK.match(c) and c not in RUN_BY_CI}
    assert unknown == {}, "commands no test runs and no reason covers:\n" + "\n".join(
        f"  {c!r} ({', '.join(w)})" for c, w in unknown.items()
    )
    stale = sorted(set(run) - set(shown)) + sorted(set(NOT_RUN) - set(shown))
    assert stale == [], f"tests or reasons for commands the docs no longer show: {stale}"
    twice = sorted(set(run) & set(NOT_RUN))
    assert twice == [], f"run by a test and listed as not run: {twice}"


def test_the_suites_the_docs_name_are_the_ones_ci_runs():
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert [line for line in ci if line.startswith("make ")] == list(RUN_BY_CI)
    assert set(RUN_BY_CI) <= set(shown_commands())


def test_commands_are_read_from_shell_blocks_only_with_continuations_joined():
    text = (
        "```bash\nmake x   # why\n# a comment\na \\\n    b 'c # d'\n```\n"
        "```text\nnot a command\n```\n    ```bash\n  indented\n    ```\n"
    )
    assert commands_in(text) == [(2, "make x"), (4, "a b 'c # d'"), (11, "indented")]


_PARSE_ONLY = """
import argparse, json, runpy, sys

class Parsed(Exception):
    pass

parse = argparse.ArgumentParser.parse_args

def parse_then_stop(self, args=None, namespace=None):
    result = parse(self, args, namespace)  # exits 2 on an unknown flag or a bad value
    if self.prog == sys.argv[0].rsplit("/", 1)[-1]:  # the benchmark's own parser, not a library's
        raise Parsed
    return result

argparse.ArgumentParser.parse_args = parse_then_stop
results = {}
for argv in json.loads(sys.argv.pop(1)):
    sys.argv = argv
    try:
        runpy.run_path(argv[0], run_name="__main__")
        results[" ".join(argv)] = "ran to the end without parsing its arguments"
    except Parsed:
        results[" ".join(argv)] = "parsed"
    except SystemExit as exc:
        results[" ".join(argv)] = f"refused its arguments (exit {exc.code})"
print(json.dumps(results))
"""


def test_every_benchmark_command_the_docs_show_is_accepted_by_its_parser():
    """Benchmarks run for minutes to hours on an idle machine: their flags are checked, not run."""
    import shlex

    benchmarks = sorted(c for c in shown_commands() if BENCHMARK.match(c))
    assert len(benchmarks) >= 10, benchmarks
    argvs = [shlex.split(c)[1:] for c in benchmarks]  # without .venv/bin/python
    proc = subprocess.run(
        [sys.executable, "-c", _PARSE_ONLY, json.dumps(argvs)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    assert results == {" ".join(a): "parsed" for a in argvs}, proc.stderr[-3000:]


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A user's working directory: the venv at .venv and the files the commands name."""
    return write_trec_files(link_venv(tmp_path))


def test_evaluate_scores_a_trec_run_as_the_readme_shows(work: Path):
    out = sh(work, ".venv/bin/arecall evaluate --run my.run --qrels test.qrels --k 1,3,5,10")
    assert "queries: 6 judged" in out.stdout
    assert [line.split()[0] for line in out.stdout.splitlines()[3:7]] == ["1", "3", "5", "10"]


def test_evaluate_reads_a_run_from_a_pipe_as_the_guide_shows(work: Path):
    import gzip

    (work / "my.run.gz").write_bytes(gzip.compress((work / "my.run").read_bytes()))
    piped = sh(work, ".venv/bin/arecall evaluate --run <(zcat my.run.gz) --qrels test.qrels")
    plain = subprocess.run(
        [str(work / ".venv/bin/arecall"), "evaluate", "--run", "my.run", "--qrels", "test.qrels"],
        cwd=work, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert piped.stdout == plain.stdout


def test_evaluate_shows_the_authorized_view_with_deeper_and_the_worst_pairs(work: Path):
    out = sh(
        work,
        ".venv/bin/arecall evaluate --run my.run --qrels test.qrels --acl acl.tsv --groups "
        "groups.tsv --principals alice,bob --placement post --worst 5 --format table",
    )
    assert "authorized view: 2 principals × 6 queries = 12 pairs; placement post" in out.stdout
    header = next(line for line in out.stdout.splitlines() if "95% CI of gap" in line)
    assert header.split()[-2:] == ["U@K", "deeper"]
    assert out.stdout.count("  query ") == 5  # --worst 5


def test_evaluate_compares_two_runs_and_fuse_writes_the_fused_run(work: Path):
    compared = sh(
        work, ".venv/bin/arecall evaluate --run a.run --compare-run b.run --qrels test.qrels"
    )
    assert "paired comparison, Δ = A − B" in compared.stdout
    sh(work, ".venv/bin/arecall fuse bm25.run dense.run --out fused.run")
    fused = (work / "fused.run").read_text().splitlines()
    assert fused and all(len(line.split()) == 6 for line in fused)
    assert {line.split()[0] for line in fused} == {f"q{i}" for i in range(1, 7)}


def _runs(work: Path) -> list:
    client = MlflowClient(tracking_uri=f"sqlite:///{work / 'mlflow.db'}")
    return client.search_runs([e.experiment_id for e in client.search_experiments()])


@pytest.mark.long  # two whole runs: in make test-faults, with the other long runs
def test_one_point_and_a_seed_layout_corpus_run_into_the_directories_the_guide_names(work: Path):
    write_seed_dir(work / "my_corpus", 11)
    sh(
        work,
        ".venv/bin/arecall run retriever=bm25 hydra.run.dir=outputs/bm25",
        ".venv/bin/arecall run corpus=seed_json corpus.path=my_corpus hydra.run.dir=outputs/mine",
    )
    for name, corpus in (("bm25", "discovery"), ("mine", "seed_json")):
        written = work / "outputs" / name
        for report in ("metrics.json", "headline.json", "proof.json", "tables.md"):
            assert (written / report).is_file(), (name, report)
        assert f"corpus `{corpus}`" in (written / "tables.md").read_text()
    runs = _runs(work)  # the embedded store in the working directory
    assert sorted(r.data.params["corpus.name"] for r in runs) == ["discovery", "seed_json"]
    assert {r.info.status for r in runs} == {"FINISHED"}


@pytest.mark.long  # two whole runs: in make test-faults, with the other long runs
def test_a_run_that_asks_for_the_vector_experiment_measures_it_as_the_vector_page_says(
    work: Path,
):
    sh(work, ".venv/bin/arecall run vector_search.enabled=true")
    (written,) = (work / "outputs").glob("*/*")
    table = (written / "vector_search.md").read_text()
    assert table == (ROOT / "reports" / "vector_search.md").read_text()  # the page's table


@pytest.mark.long
def test_the_sweep_guides_grids_run_as_written(work: Path):
    sh(
        work,
        ".venv/bin/arecall run -m corpus=synthetic corpus.n_docs=1000,10000 retriever=tfidf,bm25",
        ".venv/bin/arecall run -m hydra/launcher=joblib hydra.launcher.n_jobs=2 "
        "retriever=tfidf,bm25",
        timeout=1500,
    )
    runs = _runs(work)
    points = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(points) == 4 + 2 and len(runs) == 4 + 2 + 2  # each sweep's parent run too
    grid = {
        (r.data.params["corpus.n_docs"], r.data.params["retriever.name"])
        for r in points
        if r.data.params["corpus.name"] == "synthetic"
    }
    assert grid == {(n, r) for n in ("1000", "10000") for r in ("tfidf", "bm25")}
    assert {r.info.status for r in runs} == {"FINISHED"}
    # the compare guide's filter: the synthetic grid's four points, side by side
    out = sh(work, ".venv/bin/arecall compare --filter \"params.corpus.name = 'synthetic'\"")
    table = [line for line in out.stdout.splitlines() if line.startswith("| ")]
    header = [c.strip() for c in table[0].strip("|").split("|")]
    assert header[:3] == ["run", "retriever", "corpus.n_docs"]  # the choices that differ
    assert len(table) == 1 + 4 * 4  # the header, four points at four K
    assert (work / "outputs" / "comparison" / "comparison.png").is_file()


@pytest.mark.long
def test_the_vector_experiment_runs_on_chroma_as_the_stores_page_shows(work: Path):
    sh(
        work,
        ".venv/bin/arecall run vector_search.enabled=true vector_search.index.store=chroma "
        "'vector_search.index.placements=[post,pushdown,pre]'",
        timeout=900,
    )
    (written,) = (work / "outputs").glob("*/*")
    table = (written / "vector_search.md").read_text()
    assert "`post`" in table and "`pushdown`" in table and "`auto`" not in table
