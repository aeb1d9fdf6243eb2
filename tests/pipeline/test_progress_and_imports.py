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

from tests.helpers import FAST_PROOF, ROOT, fast_config, with_vector_search

#: Libraries that cost a second or more to import, each needed by one optional path only.
HEAVY = (
    "mlflow",
    "sklearn",
    "lancedb",
    "faiss",
    "matplotlib",
    "hypothesis",
    "torch",
    "dask",
    "distributed",
    "chromadb",
)
MAIN_STAGES = ("generate", "rank", "filter", "score", "prove", "report")
LINE = re.compile(r"^arecall: (?P<stage>[a-z_]+): (?P<text>.*)$")


def _stage_lines(stdout: str) -> list[tuple[str, str]]:
    return [(m["stage"], m["text"]) for m in map(LINE.match, stdout.splitlines()) if m]


def test_arecall_run_prints_each_stage_start_with_its_work_and_end_with_seconds(
    tmp_path, arecall, monkeypatch
):
    monkeypatch.delenv(PROGRESS_ENV, raising=False)  # a command talks by default, on a pipe too
    proc = arecall("run", "tracking.enabled=false", f"hydra.run.dir={tmp_path}", FAST_PROOF)
    assert proc.returncode == 0, proc.stderr
    assert _stage_lines(proc.stderr) == []  # stderr is for errors
    lines = _stage_lines(proc.stdout)
    started = [stage for stage, text in lines if text.endswith("…")]
    ended = [stage for stage, text in lines if re.fullmatch(r"done in \d+\.\d\d s", text)]
    assert started[: len(MAIN_STAGES)] == list(MAIN_STAGES)
    assert started == ended  # every stage that starts, ends, in order
    current = None  # a stage may say more (rank: what it kept) between its two lines
    for stage, text in lines:
        if text.endswith("…"):
            assert current is None, (stage, text)
            current = stage
        else:
            assert stage == current, (stage, text)
            if text.startswith("done in "):
                current = None
    work = dict(line for line in lines if line[1].endswith("…"))
    assert work["generate"] == "corpus discovery …"
    assert work["rank"] == "24 queries × 40 documents, retriever tfidf …"
    assert work["filter"] == "4 principals × 24 queries, K ≤ 10 …"
    assert work["score"] == "96 query-principal pairs × 4 K …"
    assert work["prove"] == "property claims × 5 cases, 96 pairs × 4 K of this run …"


def test_a_stage_failing_on_bad_data_leaves_its_start_line_on_stdout_and_one_error_line(
    tmp_path, arecall, monkeypatch
):
    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "corpus.json").write_text("{not json", encoding="utf-8")
    proc = arecall(
        "run",
        "tracking.enabled=false",
        "corpus=seed_json",
        f"corpus.path={corpus}",
        f"hydra.run.dir={tmp_path / 'run'}",
        FAST_PROOF,
    )
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("arecall: error: "), proc.stderr
    assert ("generate", "corpus seed_json (" + str(corpus) + ") …") in _stage_lines(proc.stdout)


@pytest.mark.long
def test_arecall_progress_0_silences_the_stage_lines(tmp_path, arecall, monkeypatch):
    monkeypatch.setenv(PROGRESS_ENV, "0")
    proc = arecall("run", "tracking.enabled=false", f"hydra.run.dir={tmp_path}", FAST_PROOF)
    assert proc.returncode == 0, proc.stderr
    assert _stage_lines(proc.stdout) == [] and _stage_lines(proc.stderr) == []


def test_a_library_call_prints_no_stage_lines(capsys, monkeypatch):
    from arecall.pipeline.run import run_in_memory

    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    run_in_memory(fast_config("tracking.enabled=false"))
    captured = capsys.readouterr()
    assert _stage_lines(captured.out) == [] and _stage_lines(captured.err) == []


@pytest.mark.long  # a whole process with MLflow or DVC: make test-faults
def test_a_dvc_stage_prints_its_start_and_end_lines(tmp_path):
    cfg = fast_config("tracking.enabled=false").params()
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    env = {k: v for k, v in __import__("os").environ.items() if k != PROGRESS_ENV}
    for stage in ("generate", "rank"):
        proc = subprocess.run(
            [sys.executable, "-m", f"arecall.pipeline.stages.{stage}"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, proc.stderr
        lines = _stage_lines(proc.stdout)
        assert {s for s, _ in lines} == {stage}, proc.stdout
        assert lines[0][1].endswith("…") and lines[-1][1].startswith("done in ")
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


# -- what a run no longer pays for: a recomputed vector experiment, pyplot, extra compositions --

#: A vector experiment small enough for the default suite (exact index: no graph build).
SMALL_VECTORS = {
    "corpus": {
        "name": "vectors",
        "n_docs": 300,
        "dims": 8,
        "n_queries": 5,
        "seed": 0,
        "selectivities": [0.5, 1.0],
        "k": 5,
    },
    "index": {"name": "exact"},
}
VECTOR_FILES = ("vector_table", "vector_csv", "vector_curve", "vector_plot")


def _vector_outputs(layout) -> dict[str, bytes]:
    return {name: getattr(layout, name).read_bytes() for name in VECTOR_FILES}


def test_an_unchanged_vector_experiment_is_copied_from_the_cache_byte_identical(
    tmp_path, monkeypatch
):
    from arecall.pipeline import vector_cache
    from arecall.pipeline.layout import Layout
    from arecall.pipeline.stages import vectors

    calls = []
    compute = vectors._compute
    monkeypatch.setattr(vectors, "_compute", lambda *a: calls.append(1) or compute(*a))
    monkeypatch.setenv(vector_cache.CACHE_ENV, str(tmp_path / "cache"))
    cfg = with_vector_search(SMALL_VECTORS)
    first = vectors.vector_search(cfg, Layout.run(tmp_path / "a"))
    second = vectors.vector_search(cfg, Layout.run(tmp_path / "b"))
    assert len(calls) == 1  # the second run computed nothing
    assert (first.attrs["cache"], second.attrs["cache"]) == ("miss", "hit")
    assert _vector_outputs(Layout.run(tmp_path / "a")) == _vector_outputs(
        Layout.run(tmp_path / "b")
    )
    assert second.drop(columns="qps").equals(first.drop(columns="qps"))
    assert second.attrs["k"] == first.attrs["k"]
    # a changed section is another experiment: computed again
    other = with_vector_search({**SMALL_VECTORS, "corpus": {**SMALL_VECTORS["corpus"], "seed": 1}})
    vectors.vector_search(other, Layout.run(tmp_path / "c"))
    assert len(calls) == 2


@pytest.mark.parametrize("store, library", [("chroma", "chromadb"), ("lancedb", "lancedb")])
def test_a_changed_store_library_is_another_cache_entry(store, library, monkeypatch):
    """The store's library computes the table: a new version of it must not be served the old
    one (the key listed lancedb but not chromadb, so a changed Chroma hit a stale entry)."""
    import importlib.metadata

    from arecall.pipeline import vector_cache

    index = {"name": "hnsw", "store": store, "placements": ["post", "pushdown", "pre"]}
    section = with_vector_search({**SMALL_VECTORS, "index": index})
    section = section.vector_search
    before = vector_cache.cache_key(section)
    real = importlib.metadata.version

    def upgraded(name: str) -> str:
        return "999.0" if name == library else real(name)

    monkeypatch.setattr(importlib.metadata, "version", upgraded)
    assert vector_cache.cache_key(section) != before


def test_a_damaged_cache_entry_is_recomputed_never_used(tmp_path, monkeypatch):
    from arecall.pipeline import vector_cache
    from arecall.pipeline.layout import Layout
    from arecall.pipeline.stages import vectors

    monkeypatch.setenv(vector_cache.CACHE_ENV, str(tmp_path / "cache"))
    cfg = with_vector_search(SMALL_VECTORS)
    vectors.vector_search(cfg, Layout.run(tmp_path / "a"))
    (entry,) = (tmp_path / "cache" / "vectors").iterdir()
    (entry / "vector_search.csv").write_text("selectivity\n0.0\n")  # a torn or edited entry
    again = vectors.vector_search(cfg, Layout.run(tmp_path / "b"))
    assert again.attrs["cache"] == "miss"
    assert _vector_outputs(Layout.run(tmp_path / "a")) == _vector_outputs(
        Layout.run(tmp_path / "b")
    )
    assert vectors.vector_search(cfg, Layout.run(tmp_path / "c")).attrs["cache"] == "hit"


def test_a_second_writer_of_the_same_entry_loses_quietly_and_the_entry_stays_whole(
    tmp_path, monkeypatch
):
    from arecall.pipeline import vector_cache
    from arecall.pipeline.layout import Layout
    from arecall.pipeline.stages import vectors

    root = tmp_path / "cache"
    monkeypatch.setenv(vector_cache.CACHE_ENV, str(root))
    cfg = with_vector_search(SMALL_VECTORS)
    table = vectors.vector_search(cfg, Layout.run(tmp_path / "a"))
    key = vector_cache.cache_key(cfg.vector_search)
    before = {p.name: p.read_bytes() for p in (root / "vectors" / key).iterdir()}
    # as a concurrent run that computed the same experiment would: publish again
    vector_cache.publish(root / "vectors", key, Layout.run(tmp_path / "a"), table)
    after = {p.name: p.read_bytes() for p in (root / "vectors" / key).iterdir()}
    assert after == before
    assert [p.name for p in (root / "vectors").iterdir()] == [key]  # no temporary left


def test_the_cache_can_be_turned_off(tmp_path, monkeypatch):
    from arecall.pipeline import vector_cache
    from arecall.pipeline.layout import Layout
    from arecall.pipeline.stages import vectors

    monkeypatch.setenv(vector_cache.CACHE_ENV, "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    table = vectors.vector_search(with_vector_search(SMALL_VECTORS), Layout.run(tmp_path / "a"))
    assert "cache" not in table.attrs
    assert not (tmp_path / "xdg").exists() and not (tmp_path / "home").exists()


@pytest.mark.long
def test_a_cache_hit_and_the_report_plot_load_neither_faiss_nor_pyplot(tmp_path, monkeypatch):
    from arecall.pipeline import vector_cache
    from arecall.pipeline.layout import Layout
    from arecall.pipeline.stages import vectors

    monkeypatch.setenv(vector_cache.CACHE_ENV, str(tmp_path / "cache"))
    vectors.vector_search(with_vector_search(SMALL_VECTORS), Layout.run(tmp_path / "warm"))
    out = tmp_path / "out"
    out.mkdir()
    (out / "metrics.json").write_bytes((ROOT / "reports" / "metrics.json").read_bytes())
    code = (
        "from arecall.pipeline.layout import Layout\n"
        "from arecall.pipeline.stages.vectors import vector_search\n"
        "from arecall.pipeline.stages.report import report\n"
        "from arecall.pipeline.config import checked, default_config\n"
        f"layout = Layout.run({str(out)!r})\n"
        f"section = {{**{SMALL_VECTORS!r}, 'enabled': True}}\n"
        "cfg = checked({**default_config().params(), 'vector_search': section})\n"
        "table = vector_search(cfg, layout)\n"
        "assert table.attrs['cache'] == 'hit'\n"
        "report(default_config(), layout)\n"
        "import sys\n"
        "print('matplotlib.pyplot' in sys.modules)\n"
    )
    probe = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip().splitlines()[-1] == "False"  # no pyplot
    loaded = _imported(code, tmp_path)
    assert "matplotlib" in loaded  # the report's plot was drawn
    assert loaded & {"faiss", "mlflow", "sklearn"} == set()


def test_a_single_run_composes_its_config_once(tmp_path, arecall, monkeypatch):
    from hydra._internal.config_loader_impl import ConfigLoaderImpl

    calls = []
    load = ConfigLoaderImpl.load_configuration

    def counted(self, *args, **kwargs):
        calls.append(1)
        return load(self, *args, **kwargs)

    monkeypatch.setattr(ConfigLoaderImpl, "load_configuration", counted)
    proc = arecall("run", "tracking.enabled=false", f"hydra.run.dir={tmp_path}/o", FAST_PROOF)
    assert proc.returncode == 0, proc.stderr
    assert len(calls) == 1  # hydra.main alone composes twice, the check before it once more
    saved = yaml.safe_load((tmp_path / "o" / ".hydra" / "config.yaml").read_text())
    assert saved["evaluation"]["proof"]["max_examples"] == 5
    assert (tmp_path / "o" / "arecall.log").is_file()  # Hydra's job: its log, its name
    # the report's Agg canvas (no pyplot) draws the committed plot byte for byte
    committed = (ROOT / "reports" / "arecall_at_k.png").read_bytes()
    assert (tmp_path / "o" / "arecall_at_k.png").read_bytes() == committed
