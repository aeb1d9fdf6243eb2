"""The README shows exactly the tables the pipeline produces."""

from __future__ import annotations

import json

from arecall.cli.readme import markers, sync_readme
from arecall.pipeline.config import load_params
from arecall.pipeline.run import run_in_memory

from conftest import ROOT


def test_readme_tables_equal_the_reports():
    assert sync_readme(ROOT / "README.md", ROOT, check=True), (
        "README.md's tables differ from reports/: run `make repro`"
    )


def test_committed_reports_equal_what_the_pipeline_produces_now():
    cfg = load_params(ROOT / "params.yaml")
    cfg["evaluation"]["proof"]["max_examples"] = 5  # proof.json is checked end to end elsewhere
    fresh = run_in_memory(cfg)
    assert fresh["metrics"] == json.loads((ROOT / "reports" / "metrics.json").read_text())
    assert fresh["tables"] == (ROOT / "reports" / "tables.md").read_text()


def test_readme_sync_rewrites_only_the_marked_block(tmp_path):
    begin, end = markers("tables", "t.md")
    readme = tmp_path / "README.md"
    (tmp_path / "t.md").write_text("| new |\n")
    readme.write_text(f"intro\n{begin}\nold\n{end}\noutro\n")
    assert not sync_readme(readme, tmp_path, blocks={"tables": "t.md"})
    assert readme.read_text() == f"intro\n{begin}\n| new |\n{end}\noutro\n"
    assert sync_readme(readme, tmp_path, check=True, blocks={"tables": "t.md"})
