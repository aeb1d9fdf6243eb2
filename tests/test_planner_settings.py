"""The planner's tuned numbers live in one typed config, each saying what it trades, how it was
chosen and the command that measures it; the planner reads them from there alone (issue 35)."""

from __future__ import annotations

import ast
import itertools
from dataclasses import fields, replace
from pathlib import Path

from arecall.vector.adversarial import adversarial_corpus
from arecall.vector.index import build_index
from arecall.vector.placement import DEFAULTS, PlannerSettings, calibrate_auto

PACKAGE = Path(__file__).parents[1] / "src" / "arecall" / "vector" / "placement"
COMMANDS = ("BENCH", ".venv/bin/python benchmarks/", "tests/test_")


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
