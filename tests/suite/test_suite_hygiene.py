"""The test suite itself: it ends cleanly, and its layout mirrors the code.

Ending cleanly: no KeyboardInterrupt traceback after a passing run. A passing ``make test`` printed a KeyboardInterrupt traceback (a PytestUnraisableExceptionWarning
from Hypothesis's gc callback). Cause: after an xdist worker reports, pytest runs full garbage
collections, each walking every object the imports made (hundreds of thousands; seconds each on
a loaded machine), and execnet gives the worker 5 s to end before it sends SIGINT, which landed
in the gc callback. The conftest now freezes what the imports made once collection is done and
does the last collection before the worker reports, so what is left for the collections after
the report is what the last moments made. Checked in a pytest session of its own: the objects
those collections walk, counted when pytest starts unconfiguring.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT, dvc_env

pytestmark = pytest.mark.slow

SPY = """
import gc
import pytest

@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config):
    with open({out!r}, "w") as fh:
        fh.write(f"{{len(gc.get_objects())}} {{gc.get_freeze_count()}}")
"""


def test_the_collections_after_a_session_reports_walk_only_what_its_end_made(tmp_path):
    (tmp_path / "after_report_spy.py").write_text(SPY.format(out=str(tmp_path / "counts")))
    env = dvc_env(PYTHONPATH=str(tmp_path))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "after_report_spy",
            "-p",
            "no:cacheprovider",
            "tests/cli/test_cli_help.py::test_run_help_shows_the_config_its_overrides_compose",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    walked, frozen = map(int, (tmp_path / "counts").read_text().split())
    assert frozen > 100_000  # the imports' objects: what a full collection used to walk
    assert walked < frozen // 10, (walked, frozen)


# --- the layout: tests mirror the code -----------------------------------------------------------
#
# The rule: a test file lives in tests/<package>/, where <package> is the arecall package whose
# code it tests (src/arecall/<package>), or in one of the folders below for what is not one
# package. A file at the top of tests/ or in another folder fails the first test, which names it
# and the package it imports most (where it most likely belongs).

TESTS = ROOT / "tests"

#: folders for tests that are not about one arecall package
OTHER_FOLDERS = {
    "docs": "the docs' commands, run as written",
    "faults": "fault injection across the pipeline (kill -9, signals, outages, concurrency)",
    "hydra_plugins": "the Dask launcher (src/hydra_plugins)",
    "suite": "the test suite itself",
}


def _packages() -> set[str]:
    src = ROOT / "src" / "arecall"
    return {p.parent.name for p in src.glob("*/__init__.py")}


def _test_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if "__pycache__" not in p.parts)


def _most_imported_package(path: Path) -> str:
    counts: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = (
            [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else []
        )
        for name in names:
            parts = name.split(".")
            if parts[0] == "arecall" and len(parts) > 1 and parts[1] in _packages():
                counts[parts[1]] = counts.get(parts[1], 0) + 1
    return f"arecall.{max(counts, key=lambda p: counts[p])}" if counts else "no arecall package"


def test_every_test_file_lives_in_the_folder_of_the_package_it_tests():
    folders = _packages() | OTHER_FOLDERS.keys()
    misplaced = [
        f"{p.relative_to(ROOT)} (imports {_most_imported_package(p)} most)"
        for p in _test_files()
        if p.parent.parent != TESTS or p.parent.name not in folders
    ]
    assert not misplaced, f"move into tests/<package>/ (one of {sorted(folders)}):\n" + "\n".join(
        misplaced
    )


def test_every_test_folder_is_a_package_so_same_named_modules_never_clash():
    folders = {p.parent for p in _test_files()} | {TESTS}
    assert [f for f in sorted(folders) if not (f / "__init__.py").is_file()] == []


def test_no_test_imports_from_conftest_its_helpers_have_a_module_of_their_own():
    importing = [
        str(p.relative_to(ROOT))
        for p in sorted(TESTS.rglob("*.py"))
        if re.search(r"^\s*(from|import) (tests\.)?conftest\b", p.read_text(), re.M)
    ]
    assert importing == [], "import from tests.helpers instead"


def test_every_test_path_the_repository_names_exists():
    named = {}
    texts = [*ROOT.glob("*.md"), *ROOT.glob("*.yaml"), ROOT / "Makefile", ROOT / ".ci" / "run"]
    for folder, pattern in [
        ("docs", "*.md"),
        ("src", "*.py"),
        ("benchmarks", "*.py"),
        ("tests", "*.py"),
    ]:
        texts += (ROOT / folder).rglob(pattern)
    for path in texts:
        for name in re.findall(r"\btests/[\w/]+\.py\b", path.read_text(encoding="utf-8")):
            named.setdefault(name, str(path.relative_to(ROOT)))
    assert named  # the docs do name test files: the search reads them
    assert {n: where for n, where in named.items() if not (ROOT / n).is_file()} == {}
