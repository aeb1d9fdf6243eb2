"""The README shows exactly the tables the pipeline produces."""

from __future__ import annotations

import json

from arecall.config import load_params
from arecall.pipeline import run_in_memory
from arecall.readme import BEGIN, END, sync_readme

from conftest import ROOT


def test_readme_tables_equal_reports_tables():
    assert sync_readme(ROOT / "README.md", ROOT / "reports" / "tables.md", check=True), (
        "README.md's tables differ from reports/tables.md: run `make repro`"
    )


def test_committed_reports_equal_what_the_pipeline_produces_now():
    cfg = load_params(ROOT / "params.yaml")
    cfg["evaluation"]["proof"]["max_examples"] = 5  # proof.json is checked end to end elsewhere
    fresh = run_in_memory(cfg)
    assert fresh["metrics"] == json.loads((ROOT / "reports" / "metrics.json").read_text())
    assert fresh["tables"] == (ROOT / "reports" / "tables.md").read_text()


def test_readme_sync_rewrites_only_the_marked_block(tmp_path):
    readme = tmp_path / "README.md"
    tables = tmp_path / "tables.md"
    readme.write_text(f"intro\n{BEGIN}\nold\n{END}\noutro\n")
    tables.write_text("| new |\n")
    assert not sync_readme(readme, tables)
    assert readme.read_text() == f"intro\n{BEGIN}\n| new |\n{END}\noutro\n"
    assert sync_readme(readme, tables, check=True)
