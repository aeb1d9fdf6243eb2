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

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"


def _module_file(name: str) -> Path | None:
    base = SRC / Path(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node that can run: ``if TYPE_CHECKING:`` bodies are for type checkers only."""
    out: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))
    return out


@cache
def _lazy_names(path: Path) -> dict[str, str]:
    """A package's ``_LAZY`` table (public name -> defining module), if it has one."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "_LAZY":
            return ast.literal_eval(node.value)
    return {}


_FACTORY = re.compile(r"^(arecall(?:\.\w+)+):[\w.]+$")


def _calls_load(node: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "load"
        for n in ast.walk(node)
    )


@cache
def _registry(path: Path) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """A registry module's component modules (its ``Registered`` factory paths), its registry
    names (``X = Registry(...)``) and its loaders: functions that call ``load()``, directly or
    through another loader of the module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    factories: set[str] = set()
    registries: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Registered":
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    match = _FACTORY.match(arg.value)
                    if match:
                        factories.add(match.group(1))
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and getattr(node.value.func, "id", None) == "Registry"
        ):
            registries.update(t.id for t in node.targets if isinstance(t, ast.Name))
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    loaders = {name for name, fn in functions.items() if _calls_load(fn)}
    while True:
        more = {
            name
            for name, fn in functions.items()
            if name not in loaders
            and any(
                getattr(c.func, "id", None) in loaders
                for c in ast.walk(fn)
                if isinstance(c, ast.Call)
            )
        }
        if not more:
            break
        loaders |= more
    return frozenset(factories), frozenset(registries), frozenset(loaders)


@cache
def _imports(path: Path) -> set[str]:
    """Every arecall module an import anywhere in the file (function-level too) can load."""
    found: set[str] = set()
    package = ".".join(path.relative_to(SRC).with_suffix("").parts)
    if path.name == "__init__.py":
        package = package.removesuffix(".__init__")
    else:
        package = package.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    loads_here = _calls_load(tree)
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("arecall"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            if base.startswith("arecall"):
                found.add(base)
                init = _module_file(base)
                lazy = _lazy_names(init) if init is not None else {}
                found.update(lazy.get(a.name, f"{base}.{a.name}") for a in node.names)
                if init is not None:  # a registry's components, where this module loads them
                    factories, registries, loaders = _registry(init)
                    names = {a.name for a in node.names}
                    if names & loaders or (loads_here and names & registries):
                        found.update(factories)
    return found


def stage_modules(entry: str) -> set[Path]:
    """The files of ``entry`` and of every arecall module it imports, with parent packages."""
    seen: set[Path] = set()
    todo = [entry]
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__ and a/b/__init__
            path = _module_file(".".join(parts[:i]))
            if path is not None and path not in seen:
                seen.add(path)
                todo.extend(_imports(path))
    return seen


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
