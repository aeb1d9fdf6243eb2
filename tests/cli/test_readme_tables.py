"""The README and the docs show exactly the tables the pipeline produces, from the default config."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from arecall.cli.readme import BLOCKS, markers, pages, sync_pages
from arecall.core.errors import ArecallError
from arecall.pipeline.config import load_params
from arecall.pipeline.run import run_in_memory

from tests.helpers import ROOT


def test_every_generated_table_in_the_readme_and_docs_equals_its_report():
    assert sync_pages(ROOT, check=True) == [], "generated tables differ from reports/: make repro"


def test_the_readme_keeps_the_results_and_the_docs_the_vector_table():
    shown = {
        name: [
            p.relative_to(ROOT).as_posix()
            for p in pages(ROOT)
            if markers(name, src)[0] in p.read_text()
        ]
        for name, src in BLOCKS.items()
    }
    assert "README.md" in shown["tables"] and "docs/index.md" in shown["tables"]
    assert shown["vectors"] == ["docs/concepts/vector-search.md"]


def test_committed_reports_equal_what_the_pipeline_produces_now():
    cfg = load_params(ROOT / "params.yaml")
    cfg.evaluation.proof.max_examples = 5  # proof.json is checked end to end elsewhere
    fresh = run_in_memory(cfg)
    assert fresh["metrics"] == json.loads((ROOT / "reports" / "metrics.json").read_text())
    assert fresh["tables"] == (ROOT / "reports" / "tables.md").read_text()


def _page(path: Path, *parts: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(parts) + "\n")
    return path


def test_sync_rewrites_only_the_marked_blocks_in_the_readme_and_every_docs_page(tmp_path):
    (tmp_path / "t.md").write_text("| new |\n")
    begin, end = markers("t", "t.md")
    readme = _page(tmp_path / "README.md", "intro", begin, "old", end, "outro")
    deep = _page(tmp_path / "docs" / "a" / "b.md", "# B", begin, "older", end, "", begin, end)
    untouched = _page(tmp_path / "docs" / "c.md", "# C, no block")
    assert sync_pages(tmp_path, blocks={"t": "t.md"}) == [readme, deep]
    assert readme.read_text() == f"intro\n{begin}\n| new |\n{end}\noutro\n"
    assert deep.read_text() == f"# B\n{begin}\n| new |\n{end}\n\n{begin}\n| new |\n{end}\n"
    assert untouched.read_text() == "# C, no block\n"
    assert sync_pages(tmp_path, check=True, blocks={"t": "t.md"}) == []


def test_check_names_the_stale_page_and_writes_nothing(tmp_path):
    (tmp_path / "t.md").write_text("| new |\n")
    begin, end = markers("t", "t.md")
    _page(tmp_path / "README.md", begin, "| new |", end)
    stale = _page(tmp_path / "docs" / "p.md", begin, "| old |", end)
    assert sync_pages(tmp_path, check=True, blocks={"t": "t.md"}) == [stale]
    assert "| old |" in stale.read_text()


def test_a_marker_in_a_code_block_or_inline_is_an_example_not_a_block(tmp_path):
    (tmp_path / "t.md").write_text("| new |\n")
    begin, end = markers("t", "t.md")
    text = f"```text\n{begin}\n…\n{end}\n```\n\nwrite `{begin}` to show it\n\n{begin}\nold\n{end}\n"
    page = _page(tmp_path / "README.md", text)
    sync_pages(tmp_path, blocks={"t": "t.md"})
    assert page.read_text() == text.replace("old", "| new |") + "\n"


def test_a_generated_table_no_page_shows_is_an_error(tmp_path):
    (tmp_path / "t.md").write_text("x\n")
    _page(tmp_path / "README.md", "no markers")
    with pytest.raises(ArecallError, match=r"no page shows the generated block 't' \(t.md\)"):
        sync_pages(tmp_path, check=True, blocks={"t": "t.md"})


def test_an_unknown_or_unterminated_block_is_one_error_naming_the_file_and_line(tmp_path):
    (tmp_path / "t.md").write_text("x\n")
    begin, end = markers("t", "t.md")
    _page(tmp_path / "README.md", begin, "x", end)
    _page(tmp_path / "docs" / "p.md", "# P", markers("nope", "t.md")[0])
    with pytest.raises(ArecallError, match=r"docs/p.md: line 2: unknown generated block 'nope'"):
        sync_pages(tmp_path, blocks={"t": "t.md"})
    _page(tmp_path / "docs" / "p.md", "# P", "", begin, "x")
    with pytest.raises(ArecallError, match=r"docs/p.md: line 3: block 't' has no"):
        sync_pages(tmp_path, blocks={"t": "t.md"})


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The files `arecall readme` reads, copied from this checkout; the working directory."""
    for name in ("README.md", "params.yaml", "dvc.lock"):
        shutil.copy2(ROOT / name, tmp_path / name)
    for name in ("docs", "reports"):
        shutil.copytree(ROOT / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_readme_refuses_in_one_line_when_params_yaml_holds_another_corpus(workspace, arecall):
    # what `dvc exp run -S corpus=seed_json -S corpus.path=…` leaves in the workspace
    params = yaml.safe_load((workspace / "params.yaml").read_text())
    params["corpus"] = {"name": "seed_json", "path": "my_corpus"}
    (workspace / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (workspace / "reports" / "tables.md").write_text("corpus `seed_json`: 36 documents\n")
    before = _snapshot(workspace)
    for args in (["readme"], ["readme", "--check"], ["readme", "--params-only"]):
        result = arecall(*args)
        assert result.returncode == 2, args
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith("arecall: error: params.yaml is not conf/'s default config")
        assert "corpus.name: seed_json, not discovery" in lines[0]
        assert "`git checkout params.yaml`" in lines[0] and "dvc exp apply" in lines[0]
    assert _snapshot(workspace) == before  # the README kept the default config's numbers


def test_readme_refuses_when_dvc_lock_says_reports_came_from_another_config(workspace, arecall):
    lock = yaml.safe_load((workspace / "dvc.lock").read_text())
    lock["stages"]["generate"]["params"]["params.yaml"]["corpus"] = {"name": "seed_json"}
    (workspace / "dvc.lock").write_text(yaml.safe_dump(lock, sort_keys=False))
    before = _snapshot(workspace)
    result = arecall("readme")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "arecall: error: dvc.lock: reports/ were made from another config than conf/'s defaults "
        "(corpus.name: seed_json, not discovery); run make repro to regenerate them from "
        "params.yaml"
    ]
    assert _snapshot(workspace) == before
    assert arecall("readme", "--params-only").returncode == 0  # make repro may go on: dvc fixes it


def test_readme_syncs_a_stale_docs_page_in_the_default_workspace(workspace, arecall):
    page = workspace / "docs" / "concepts" / "vector-search.md"
    fresh = page.read_text()
    page.write_text(fresh.replace("| 1% | 21 | `post` |", "| 1% | 21 | `stale` |"))
    check = arecall("readme", "--check")
    assert check.returncode == 2
    assert check.stderr.startswith("arecall: error: docs/concepts/vector-search.md: the generated")
    assert arecall("readme").returncode == 0
    assert page.read_text() == fresh
    assert arecall("readme", "--check").returncode == 0
    assert arecall("readme", "--bogus").returncode == 2
