"""Bad input ends with one clear line, exit status ≠ 0, no traceback, nothing half-written.

`arecall run` is called in-process (the `arecall` fixture); the DVC stage, a separate
``python -m`` process per stage, is run as DVC runs it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from arecall.retrievers import RETRIEVERS

from tests.helpers import ROOT, VENV_BIN, write_seed_dir

KNOWN = ", ".join(sorted(RETRIEVERS))


def _edit(path: Path, fn) -> None:
    data = json.loads(path.read_text())
    fn(data)
    path.write_text(json.dumps(data))


def _duplicate_first_profile(path: Path) -> None:
    """profiles.json with principal p0 listed a second time (JSON allows it; the last wins)."""
    profiles = json.loads(path.read_text())["profiles"]
    first = json.dumps(profiles["p0"])
    entries = ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in profiles.items())
    path.write_text(f'{{"profiles": {{{entries}, "p0": {first}}}}}')


CASES = {
    "missing file": (lambda d: (d / "queries.json").unlink(), "queries.json: file not found"),
    "invalid json": (
        lambda d: (d / "profiles.json").write_text('{"profiles": {\n  "a": }'),
        "profiles.json: line 2: invalid JSON",
    ),
    "missing field": (
        lambda d: _edit(d / "queries.json", lambda q: q["queries"][2].pop("relevant")),
        "queries.json: queries[2]: missing field 'relevant'",
    ),
    "unknown relevant id": (
        lambda d: _edit(d / "queries.json", lambda q: q["queries"][1]["relevant"].append("nope")),
        "queries.json: queries[1].relevant[",
    ),
    "duplicate dataset id": (
        lambda d: _edit(d / "corpus.json", lambda c: c["datasets"].append(dict(c["datasets"][0]))),
        "corpus.json: duplicate dataset id",
    ),
    "no queries": (
        lambda d: _edit(d / "queries.json", lambda q: q.update(queries=[])),
        "queries.json: queries: there are no queries",
    ),
    "no profiles": (
        lambda d: _edit(d / "profiles.json", lambda p: p.update(profiles={})),
        "profiles.json: profiles: there are no profiles",
    ),
    "no datasets": (
        lambda d: _edit(d / "corpus.json", lambda c: c.update(datasets=[])),
        "corpus.json: datasets: there are no datasets",
    ),
    "principal listed twice": (
        lambda d: _duplicate_first_profile(d / "profiles.json"),
        "profiles.json: profiles: principal 'p0' is listed twice",
    ),
    "dataset field given twice": (
        lambda d: (d / "corpus.json").write_text(
            (d / "corpus.json").read_text().replace('"domain": ', '"domain": "x", "domain": ', 1)
        ),
        "corpus.json: datasets[0]: field 'domain' is given twice",
    ),
    "grant to unknown id": (
        lambda d: _edit(
            d / "profiles.json", lambda p: p["profiles"]["p0"]["grants"].update({"ghost": []})
        ),
        "profiles.json: profiles['p0']",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_seed_json_gives_one_line_and_writes_nothing(
    tmp_path, case, arecall, mlflow_store
):
    d = write_seed_dir(tmp_path / "corpus", 3)
    breaker, expected = CASES[case]
    breaker(d)
    out = tmp_path / "out"
    proc = arecall("run", "corpus=seed_json", f"corpus.path={d}", f"hydra.run.dir={out}")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("arecall: error: ") and expected in lines[0], lines[0]
    assert not (out / "metrics.json").exists()
    assert not (out / "data" / "corpus").exists()


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("evaluation.ks=[1,0]", "evaluation.ks[1]: must be a positive integer, got 0"),
        ("corpus=seed_json", "corpus.path: required"),
    ],
)
def test_bad_config_values_give_one_line(tmp_path, override, expected, arecall):
    proc = arecall("run", override, f"hydra.run.dir={tmp_path / 'out'}")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert expected in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_unknown_retriever_is_refused_by_name_without_traceback(tmp_path, arecall):
    proc = arecall("run", "retriever=bogus", f"hydra.run.dir={tmp_path / 'out'}")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == (
        f"arecall: error: retriever=bogus: no such retriever config (known: {KNOWN})"
    )


@pytest.mark.parametrize("flag", [[], ["-m"]])
@pytest.mark.parametrize(
    ("override", "known"),
    [("hydra/launcher=nope", "basic, dask, joblib"), ("hydra/sweeper=nope", "basic")],
)
def test_an_unknown_hydra_plugin_is_refused_like_an_unknown_group_option(
    tmp_path, flag, override, known, arecall
):
    """Hydra's own groups get our one line, with the options Hydra found on its search path."""
    group = override.split("=")[0]
    proc = arecall("run", *flag, override, f"hydra.run.dir={tmp_path / 'out'}")
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"arecall: error: {override}: no such {group} config (known: {known})"
    )


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            ["vector_search.index.store=qdrant"],
            "vector_search.index.store: must be one of chroma, faiss, lancedb, milvus",
        ),
        (
            ["vector_search.index.store=chroma"],  # the default placements include auto
            "vector_search.index.placements: store chroma does not answer 'auto' "
            "(it answers post, pushdown and pre)",
        ),
        (
            ["vector_search.index.store=lancedb", "vector_search.index.placements=[auto]"],
            "vector_search.index.placements: store lancedb does not answer 'auto'",
        ),
    ],
)
def test_a_store_that_cannot_answer_the_placements_is_refused_before_any_stage(
    tmp_path, overrides, expected, arecall
):
    """Found by running it: the store and its placements were checked by the vectors stage,
    after six stages had written their outputs; they are part of the config."""
    out = tmp_path / "out"
    proc = arecall("run", *overrides, f"hydra.run.dir={out}")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], proc.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            ["index=hnsw", "retriever=dense_lsa", "evaluation.ks=[5,100]"],
            "index.ef_search: must be at least the largest K (evaluation.ks: 100): HNSW keeps "
            "ef_search candidates, got 64",
        ),
        (
            ["vector_search.index.ef_search=5"],
            "vector_search.index.ef_search: must be at least vector_search.corpus.k (10): HNSW "
            "keeps ef_search candidates, got 5",
        ),
    ],
)
def test_an_ef_search_below_the_k_searched_is_refused_before_any_stage(
    tmp_path, overrides, expected, arecall
):
    """Found by running K = 100 with index=hnsw: the index stage refused ef_search=64 after
    six stages had written their outputs, naming neither key."""
    out = tmp_path / "out"
    proc = arecall("run", *overrides, f"hydra.run.dir={out}")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].endswith(expected), proc.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            ["evaluation.significance.resamples=2"],
            "evaluation.significance.resamples: must be at least 40 for a 95% interval (each "
            "tail of the bootstrap needs a resample), got 2",
        ),
        (
            ["evaluation.significance.confidence=0.99", "evaluation.significance.resamples=100"],
            "evaluation.significance.resamples: must be at least 200 for a 99% interval",
        ),
    ],
)
def test_too_few_resamples_for_the_interval_are_refused(tmp_path, overrides, expected, arecall):
    """Found by running resamples=2: a numpy RuntimeWarning on stderr and a 'CI' of
    [+0.013, +0.025] around a gap of +0.027, which is no interval at all."""
    proc = arecall("run", *overrides, f"hydra.run.dir={tmp_path / 'out'}")
    assert proc.returncode == 2 and "Warning" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], proc.stderr


def test_the_dask_engine_without_a_scheduler_is_refused_before_any_stage(tmp_path, arecall):
    """Found by running it: the score stage refused it after generate, rank and filter ran."""
    out = tmp_path / "out"
    proc = arecall("run", "evaluation.engine.name=dask", f"hydra.run.dir={out}")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0] == (
        "arecall: error: evaluation.engine.name=dask: evaluation.engine.name: dask needs "
        "evaluation.engine.scheduler, a scheduler address such as tcp://127.0.0.1:8786, "
        "got 'dask'"
    ), lines[0]
    assert not out.exists()


def test_a_store_with_placements_it_answers_composes():
    from arecall.pipeline.config import default_config

    for store in ("chroma", "lancedb", "faiss"):
        cfg = default_config(
            [f"vector_search.index.store={store}", "vector_search.index.placements=[post,pre]"]
        ).params()
        assert cfg["vector_search"]["index"]["store"] == store


def test_unknown_retriever_in_params_yaml_fails_the_first_dvc_stage_with_one_line(tmp_path):
    # params.yaml is checked whole before any stage runs, so even `generate`, which never
    # ranks, refuses it and writes nothing.
    work = tmp_path / "w"
    work.mkdir()
    params = (ROOT / "params.yaml").read_text().replace("name: tfidf", "name: bogus")
    (work / "params.yaml").write_text(params)
    shutil.copytree(ROOT / "reports", work / "reports")
    proc = subprocess.run(
        [str(VENV_BIN / "python"), "-m", "arecall.pipeline.stages.generate"],
        cwd=work,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("arecall: error: params.yaml: "), lines
    assert "retriever.name" in lines[0] and "'bogus'" in lines[0] and KNOWN in lines[0]
    assert not (work / "data").exists()


@pytest.mark.long  # a whole process with MLflow or DVC: make test-faults
def test_a_first_run_on_a_fresh_store_still_fails_in_one_line(tmp_path, arecall):
    """Creating the MLflow store is not news: no line of MLflow's before the error."""
    d = write_seed_dir(tmp_path / "corpus", 3)
    (d / "queries.json").unlink()
    proc = arecall("run", "corpus=seed_json", f"corpus.path={d}", f"hydra.run.dir={tmp_path}/o")
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "queries.json: file not found" in lines[0], proc.stderr
