"""The test suite itself ends cleanly: no KeyboardInterrupt traceback after a passing run.

A passing ``make test`` printed a KeyboardInterrupt traceback (a PytestUnraisableExceptionWarning
from Hypothesis's gc callback). Cause: after an xdist worker reports, pytest runs full garbage
collections, each walking every object the imports made (hundreds of thousands; seconds each on
a loaded machine), and execnet gives the worker 5 s to end before it sends SIGINT, which landed
in the gc callback. The conftest now freezes what the imports made once collection is done and
does the last collection before the worker reports, so what is left for the collections after
the report is what the last moments made. Checked in a pytest session of its own: the objects
those collections walk, counted when pytest starts unconfiguring.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import ROOT, dvc_env

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
            "tests/test_cli_help.py::test_run_help_shows_the_config_its_overrides_compose",
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
