"""The planner's tuned numbers live in one typed config, each saying what it trades, how it was
chosen and the command that measures it; the planner reads them from there alone (issue 35)."""

from __future__ import annotations

import ast
import importlib.util
import itertools
import re
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from arecall.core.errors import ArecallError
from arecall.vector.adversarial import adversarial_corpus, with_duplicates
from arecall.vector.index import build_index
from arecall.vector.placement import DEFAULTS, PlannerSettings, calibrate_auto

PACKAGE = Path(__file__).parents[2] / "src" / "arecall" / "vector" / "placement"
COMMANDS = ("BENCH", ".venv/bin/python benchmarks/", "tests/")


def field_docstrings() -> dict[str, str]:
    """Each PlannerSettings field's docstring, read from the source (the string after it)."""
    tree = ast.parse((PACKAGE / "settings.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "PlannerSettings")
    out: dict[str, str] = {}
    for node, after in itertools.pairwise(cls.body):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            ok = isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
            out[node.target.id] = str(after.value.value) if ok else ""  # type: ignore[union-attr]
    return out


def test_every_tuned_number_says_what_it_trades_how_it_was_chosen_and_its_command() -> None:
    docs = field_docstrings()
    assert set(docs) == {f.name for f in fields(PlannerSettings)}
    for name, doc in docs.items():
        first = doc.split(".")[0]
        assert len(first) > 20, f"{name}: no line saying what it trades"
        assert any(c in doc for c in COMMANDS), f"{name}: no command that measures it"


def test_the_planner_package_keeps_no_tuned_number_outside_its_settings() -> None:
    # A number at module level, or a numeric default other than 0 (seeds, floors), is a tuned
    # number read from somewhere other than the one config.
    for path in sorted(PACKAGE.glob("*.py")):
        if path.name == "settings.py":
            continue
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.Assign | ast.AnnAssign):
                value = node.value
                assert not (
                    isinstance(value, ast.Constant) and isinstance(value.value, int | float)
                ), f"{path.name}:{node.lineno}: a module-level number"
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                defaults = node.args.defaults + [d for d in node.args.kw_defaults if d]
                for d in defaults:
                    number = isinstance(d, ast.Constant) and type(d.value) in (int, float)
                    assert not number or d.value == 0, f"{path.name}: {node.name} = {d.value}"


def test_no_function_of_the_planner_package_is_over_eighty_lines() -> None:
    for path in sorted(PACKAGE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                lines = node.end_lineno - node.lineno + 1
                assert lines <= 80, f"{path.name}: {node.name} is {lines} lines"


def test_a_changed_setting_is_what_the_planner_calibrates_and_plans_with() -> None:
    corpus = adversarial_corpus("lowrank-uniform", 3000, 32, 40, seed=3)
    index = build_index(corpus.data.vectors)
    cal = corpus.data.calibration_queries(100)
    coarse = replace(DEFAULTS, ladder_steps=1)
    planner = calibrate_auto(index, 10, queries=cal, graph_cost=2.0, settings=coarse)
    assert planner.settings is coarse and planner.cells is not None
    assert planner.cells.settings is coarse
    efs = [ef for ef, _ in planner.recall]
    assert efs[:4] == [10, 16, 32, 64]  # one rung per doubling, not four


def load_bench() -> Any:
    path = Path(__file__).parents[2] / "benchmarks" / "bench_adversarial.py"
    spec = importlib.util.spec_from_file_location("bench_adversarial_settings", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_the_benchmark_sets_a_setting_by_name_and_refuses_an_unknown_one(capsys) -> None:
    bench = load_bench()
    assert bench._setting("walk_doubt=1.15") == ("walk_doubt", 1.15)
    assert bench._setting("cost_efs=64,256") == ("cost_efs", (64, 256))
    assert bench._setting("sample_min=32") == ("sample_min", 32)
    for bad in ("nope=1", "walk_doubt", "sample_min=x"):
        with pytest.raises(SystemExit):
            bench._parser().parse_args(["--set", bad])
        assert "--set" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"sample_min": 0}, "planner setting sample_min=0: must be at least 1"),
        ({"sample_min": 2.5}, "planner setting sample_min=2.5: must be an integer"),
        ({"tail_share": 1.5}, "planner setting tail_share=1.5: must be a share in (0, 1)"),
        ({"pilot_share": 0.0}, "planner setting pilot_share=0.0: must be a share in (0, 1]"),
        ({"margin": -0.01}, "planner setting margin=-0.01: must not be negative"),
        ({"graph_cost": float("nan")}, "planner setting graph_cost=nan: must be finite"),
        ({"escalate_factor": 1.0}, "planner setting escalate_factor=1.0: must be above 1"),
        ({"memo_entries": -1}, "planner setting memo_entries=-1: must be at least 0"),
        ({"cost_efs": ()}, "planner setting cost_efs=(): needs at least one value"),
        (
            {"second_look_shares": (0.05, 1.2)},
            "planner setting second_look_shares=0.05,1.2: must be a share in (0, 1)",
        ),
        ({"deep_share": 0.05}, "the deep part must be a smaller share than the tail"),
    ],
)
def test_a_setting_the_planner_cannot_mean_is_refused_in_one_line_naming_it(
    change: dict[str, Any], says: str
) -> None:
    with pytest.raises(ArecallError) as refused:
        replace(DEFAULTS, **change)
    assert says in str(refused.value)
    assert "\n" not in str(refused.value)


def test_every_setting_has_one_range_and_the_what_ifs_its_docstring_names_sit_in_it() -> None:
    from arecall.vector.placement import settings

    kinds = [getattr(settings, name) for name in dir(settings) if name.isupper()]
    ranged = [name for kind in kinds if isinstance(kind, frozenset) for name in kind]
    assert sorted(ranged) == sorted(f.name for f in fields(PlannerSettings))
    # Each setting's docstring names the `--set NAME=VALUE` that measures it: the planner
    # accepts every one of those values, and the tests' own (no wait for a timed cost).
    bench = load_bench()
    named = [
        bench._setting(m.group(1))
        for doc in field_docstrings().values()
        for m in re.finditer(r"--set\s+([a-z_]+=[0-9.,]+)", doc)
    ]
    assert len(named) >= 35  # nearly every setting names one
    for name, value in [*named, ("cost_min_time", 0.0)]:
        assert getattr(replace(DEFAULTS, **{name: value}), name) == value, name


def test_the_benchmark_refuses_a_setting_out_of_range_in_one_line(capsys, monkeypatch) -> None:
    bench = load_bench()
    monkeypatch.setattr("sys.argv", ["benchmarks/bench_adversarial.py"])
    with pytest.raises(SystemExit) as stopped:
        bench.main(["--n", "1000", "--set", "sample_min=0"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["bench_adversarial: --set: planner setting sample_min=0: must be at least 1"]


def test_a_corpus_with_copies_holds_exact_duplicates_and_keeps_its_filter_keys() -> None:
    corpus = adversarial_corpus("lowrank-uniform", 2000, 16, 5, seed=3)
    copied = with_duplicates(corpus, 0.55, seed=3)
    distinct = np.unique(copied.data.vectors, axis=0).shape[0]
    assert 0.40 * 2000 < distinct < 0.50 * 2000
    np.testing.assert_array_equal(copied.data.draws, corpus.data.draws)
    np.testing.assert_array_equal(copied.data.queries, corpus.data.queries)
    with pytest.raises(ArecallError, match=r"duplicates=1\.0"):
        with_duplicates(corpus, 1.0)


def test_the_benchmark_calibrates_on_the_workload_and_scores_copies_by_score_ties(
    tmp_path,
) -> None:
    # --calibrate-on workload: held-out queries of the scored kind; --duplicates: a corpus of
    # copies, where recall by ids would never reach the target and every yardstick would read
    # "none". Both say so in the table's header.
    bench = load_bench()
    out = tmp_path / "bench.md"
    argv = ["--n", "3000", "--queries", "20", "--corpora", "lowrank-uniform", "--min-calls", "2"]
    argv += ["--min-time", "0.01", "--workload-queries", "100", "--selectivities", "1"]
    argv += ["--calibrate-on", "workload", "--duplicates", "0.55", "--set", "walk_doubt=1.5"]
    assert bench.main([*argv, "--output", str(out)]) == 0
    text = out.read_text()
    assert "calibrated on queries drawn like the workload" in text
    assert "55% of the documents exact copies" in text and "setting walk_doubt=1.5" in text
    assert "every cell: met" in text
    assert bench.main([*argv[:-2], "--duplicates", "1"]) == 2
    # Counted by ids, a walk that returns another copy than the scan's loses recall it did
    # not lose; the benchmark counts it found.
    corpus = with_duplicates(adversarial_corpus("lowrank-uniform", 3000, 128, 200), 0.55)
    index = build_index(corpus.data.vectors)
    q = corpus.data.queries
    truth, hits = index.exact(q, 10), index.search(q, 10, ef_search=128)
    pairs = zip(hits.rows(), truth.rows(), strict=True)
    by_ids = np.mean([len(set(a) & set(b)) / 10 for a, b in pairs])
    assert by_ids < 0.95 <= bench._recall(hits, truth, index, q)
