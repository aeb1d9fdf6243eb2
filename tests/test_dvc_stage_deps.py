"""Every DVC stage lists, as deps, each arecall module it imports (transitively).

Derived from the code, not a hand list: a change to any module a stage can run reruns that stage,
so `dvc repro` never reports "up to date" over stale results.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
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


@cache
def _imports(path: Path) -> set[str]:
    """Every arecall module an import anywhere in the file (function-level too) can load."""
    found: set[str] = set()
    package = ".".join(path.relative_to(SRC).with_suffix("").parts)
    if path.name == "__init__.py":
        package = package.removesuffix(".__init__")
    else:
        package = package.rpartition(".")[0]
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
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
