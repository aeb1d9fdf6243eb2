"""Every DVC stage lists, as deps, each arecall module it imports (transitively).

Derived from the code, not a hand list: a change to any module a stage can run reruns that stage,
so `dvc repro` never reports "up to date" over stale results. A registry
(`arecall.core.registry`) names its components' modules as ``"module:attribute"`` strings that
``load()`` imports on first use: a stage depends on them when it imports a function that loads
from the registry (``make_retriever``, ``load_corpus``), not when it only reads the registry's
schemas for the config check. So `generate` does not depend on the retrievers' code, and
editing a retriever leaves it up to date (the last test here runs `dvc status` to show it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import ROOT, SRC, stage_modules


def _covered(path: Path, deps: list[str]) -> bool:
    rel = path.relative_to(ROOT)
    return any(rel == Path(d) or Path(d) in rel.parents for d in deps)


def test_every_stage_lists_the_modules_it_imports():
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    missing = {}
    for name, stage in stages.items():
        entry = stage["cmd"].split(" -m ", 1)[1].split()[0]
        deps = [d for d in stage.get("deps", []) if isinstance(d, str)]
        lacking = sorted(
            str(p.relative_to(ROOT)) for p in stage_modules(entry) if not _covered(p, deps)
        )
        if lacking:
            missing[name] = lacking
    assert not missing, f"dvc.yaml stages miss deps on modules they import: {missing}"


def test_the_import_walk_sees_function_level_imports():
    files = {p.relative_to(SRC).as_posix() for p in stage_modules("arecall.pipeline.stages.track")}
    assert "arecall/tracking/pipeline.py" in files  # imported inside track()


def test_generate_does_not_reach_the_retrievers_code():
    files = {
        p.relative_to(SRC).as_posix() for p in stage_modules("arecall.pipeline.stages.generate")
    }
    retrievers = {
        p.relative_to(SRC).as_posix()
        for p in (SRC / "arecall" / "retrievers").glob("*.py")
        if p.name not in ("__init__.py", "schema.py")
    }
    assert retrievers and not files & retrievers, sorted(files & retrievers)


@pytest.mark.long  # dvc init, commit and status in a copy: seconds, not a unit test
def test_editing_a_retriever_leaves_generate_up_to_date(tmp_path: Path) -> None:
    dvc = str(Path(sys.executable).with_name("dvc"))
    for name in ("dvc.yaml", "params.yaml", ".dvcignore"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(SRC, tmp_path / "src", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for out in ("data/corpus", "data/rank"):  # stand-in outputs: only the deps are compared
        (tmp_path / out).mkdir(parents=True)
        (tmp_path / out / "part").write_text(out, encoding="utf-8")
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}

    def dvc_run(*args: str) -> str:
        done = subprocess.run(
            [dvc, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    dvc_run("init", "--no-scm", "-q")
    dvc_run("commit", "-f", "-q", "generate", "rank")  # dvc.lock records the deps as they are
    assert json.loads(dvc_run("status", "--json", "generate", "rank")) == {}
    bm25 = tmp_path / "src" / "arecall" / "retrievers" / "bm25.py"
    bm25.write_text(bm25.read_text(encoding="utf-8") + "# edited\n", encoding="utf-8")
    status = json.loads(dvc_run("status", "--json", "generate", "rank"))
    assert "generate" not in status  # up to date: its config check reads only the schemas
    assert status["rank"] == [{"changed deps": {"src/arecall/retrievers": "modified"}}]
