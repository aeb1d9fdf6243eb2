"""The shell commands the README and the docs show, and how the tests run them as written.

Every line of a ``bash`` code block in README.md or a page under docs/ is a command (a ``\\``
continuation joins the next line; a ``#`` comment is not part of it). Each must be

- run as written by a test, which names it with `documented` (checked against the docs, so a
  test cannot run a command the docs no longer show); quick ones in ``make test``, long ones
  under the ``long`` marker in ``make test-faults``;
- a benchmark (``.venv/bin/python benchmarks/…``): its arguments are parsed by the benchmark's
  own parser, since a benchmark runs for minutes to hours on an idle machine;
- one of the suites CI runs (`RUN_BY_CI`, checked against .ci/run);
- or listed in `NOT_RUN` with the reason it cannot run here.

tests/docs/test_docs_commands.py holds every command to exactly one of these.
"""

from __future__ import annotations

import ast
import contextlib
import fcntl
import functools
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from tests.helpers import ROOT, VENV_BIN, snapshot_repo

#: what the test suite cannot run, and why (each reason says what covers the command instead)
NOT_RUN: dict[str, str] = {
    "pip install -e '.[cluster]'": (
        "installs packages from the registry into the user's own environment; the same extra "
        "is installed by `make install`, which every test run and CI start from"
    ),
}

#: the suites CI runs itself (.ci/run): a test cannot run the suite it is part of
RUN_BY_CI = ("make test", "make test-faults", "make docs")

#: a benchmark command: parsed by the benchmark's own argument parser, not run
BENCHMARK = re.compile(r"^\.venv/bin/python benchmarks/\w+\.py\b")

_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+)(?P<info>[\w-]*)")
_SHELLS = {"bash", "sh", "shell", "console"}


def doc_files(root: Path = ROOT) -> list[Path]:
    """README.md and every Markdown page of docs/."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def _without_comment(line: str) -> str:
    """``line`` up to a ``#`` that starts a shell comment (outside quotes, after a blank)."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def commands_in(text: str) -> list[tuple[int, str]]:
    """The commands of the shell code blocks of one Markdown text, with their first lines.

    Examples
    --------
    >>> commands_in("x\\n```bash\\n# setup\\nmake a   # note\\nrun --x \\\\\\n    --y 'a # b'\\n```\\n")
    [(4, 'make a'), (5, "run --x --y 'a # b'")]
    """
    out: list[tuple[int, str]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opened = _FENCE.match(lines[i])
        i += 1
        if not opened:
            continue
        fence, shell = opened["fence"], opened["info"] in _SHELLS
        pending, start = "", 0
        while i < len(lines) and not lines[i].lstrip().startswith(fence):
            line = lines[i]
            i += 1
            if not shell:
                continue
            if not pending:
                start = i
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1].strip() + " "
                continue
            command = _without_comment((pending + line.strip()).strip())
            pending = ""
            if command:
                out.append((start, " ".join(command.split(" ")).strip()))
        i += 1  # the closing fence
    return out


@functools.cache
def shown_commands(root: Path = ROOT) -> Mapping[str, tuple[str, ...]]:
    """Every command the docs show → where (``file:line``)."""
    where: dict[str, list[str]] = {}
    for path in doc_files(root):
        for line, command in commands_in(path.read_text(encoding="utf-8")):
            where.setdefault(command, []).append(f"{path.relative_to(root)}:{line}")
    return {command: tuple(places) for command, places in where.items()}


def documented(command: str) -> str:
    """``command``, asserting the docs show it exactly so (a test runs what users read)."""
    assert command in shown_commands(), f"the docs do not show {command!r}"
    return command


def documented_calls(tests: Path = ROOT / "tests") -> dict[str, list[str]]:
    """Command → the tests that run it: the literals of ``documented(…)`` and ``sh(work, …)``."""
    found: dict[str, list[str]] = {}
    for path in sorted(tests.rglob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef) or not func.name.startswith("test_"):
                continue
            for node in ast.walk(func):
                if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
                    continue
                # documented(command); sh(work, command, …) and background(…) call it on each
                args = {
                    "documented": node.args[:1],
                    "sh": node.args[1:],
                    "background": node.args[1:],
                }
                args = args.get(node.func.id, [])
                for arg in args:
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                        found.setdefault(arg.value, []).append(
                            f"{path.relative_to(tests).as_posix()}::{func.name}"
                        )
    return found


def link_venv(work: Path) -> Path:
    """Make ``work/.venv`` this test run's venv, so the docs' ``.venv/bin/…`` paths work there."""
    venv = work / ".venv"
    if not venv.exists():
        venv.symlink_to(VENV_BIN.parent, target_is_directory=True)
    return work


def clone_of(tmp_path: Path, name: str = "origin") -> Path:
    """A clean clone's files, committed, with this run's venv at .venv (make sees it installed)."""
    repo = link_venv(snapshot_repo(tmp_path / name))
    os.utime(repo / "pyproject.toml", (0, 0))  # older than .venv/.installed: no reinstall
    return repo


def shell_env(**extra: str) -> dict[str, str]:
    """A user's shell: no test-suite MLflow store, no telemetry, the Makefile's hash seed.

    Output goes to a pipe, so no terminal width either: a ``COLUMNS`` left in the worker's
    environment by an earlier test would make ``arecall compare`` narrow its table.
    """
    env = {
        k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "COLUMNS", "LINES")
    }
    env.update(MLFLOW_DISABLE_TELEMETRY="true", DVC_NO_ANALYTICS="1", PYTHONHASHSEED="0")
    env.update(extra)
    return env


def sh(
    work: Path, *commands: str, timeout: float = 600, check: bool = True, **env: str
) -> subprocess.CompletedProcess[str]:
    """Run documented commands in one bash, in ``work``, stopping at the first that fails."""
    script = "set -e\n" + "\n".join(documented(c) for c in commands) + "\n"
    proc = subprocess.run(
        ["bash", "-c", script],
        cwd=work,
        env=shell_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check:
        assert proc.returncode == 0, f"{commands}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


def write_trec_files(work: Path) -> Path:
    """The files the evaluate commands name: TREC runs, qrels, an ACL with groups.

    A small seeded world: 30 documents, 6 queries with graded judgements, runs of 12 results,
    an ACL over the principals alice and bob and their groups sales and eng.
    """
    import random

    rng = random.Random(3)
    docs = [f"d{i:02d}" for i in range(30)]
    queries = [f"q{i}" for i in range(1, 7)]
    with (work / "test.qrels").open("w") as f:
        for q in queries:
            for d in rng.sample(docs, 4):
                f.write(f"{q} 0 {d} {rng.choice([1, 1, 2])}\n")
    for name in ("my.run", "a.run", "b.run", "bm25.run", "dense.run"):
        with (work / name).open("w") as f:
            for q in queries:
                for rank, d in enumerate(rng.sample(docs, 12), 1):
                    f.write(f"{q} Q0 {d} {rank} {20 - rank}.5 {name.split('.')[0]}\n")
    with (work / "acl.tsv").open("w") as f:
        for d in docs:
            for who in rng.sample(["sales", "eng", "alice", "bob"], 2):
                f.write(f"{d}\t{who}\n")
    (work / "groups.tsv").write_text("alice\tsales\nbob\teng\n")
    return work


@contextlib.contextmanager
def fixed_ports(*ports: int, wait: float = 300) -> Iterator[None]:
    """Hold the fixed ports the docs name (5000, 8786) while a test uses them.

    The commands are run as written, so they bind those ports: a lock file serialises the test
    runs on this machine, and each port must be free (nothing accepting) within ``wait`` s.
    """
    deadline = time.monotonic() + wait
    with open(Path(tempfile.gettempdir()) / "arecall-docs-ports.lock", "w") as lock:
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                assert time.monotonic() < deadline, f"ports {ports}: another test run holds them"
                time.sleep(1)
        try:
            for port in ports:
                while _accepting(port):
                    assert time.monotonic() < deadline, f"127.0.0.1:{port} is in use"
                    time.sleep(1)
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _accepting(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def wait_http(url: str, timeout: float = 120) -> None:
    """Until ``url`` answers 200 (bounded)."""
    import urllib.request

    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        assert time.monotonic() < deadline, f"{url} did not answer within {timeout} s"
        time.sleep(0.5)


@contextlib.contextmanager
def background(work: Path, *commands: str, log: Path, **env: str) -> Iterator[int]:
    """Run documented commands in a bash of their own; when the block ends, however it ends,
    stop it and every process it started, also those that left its process group (``mlflow
    ui`` starts its server and job consumers in groups of their own): SIGTERM, then SIGKILL."""
    import psutil

    script = "\n".join(documented(c) for c in commands) + "\nwait\n"
    with log.open("w") as out:
        proc = subprocess.Popen(
            ["bash", "-c", script],
            cwd=work,
            env=shell_env(**env),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    started: dict[int, psutil.Process] = {}

    def remember() -> None:
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(proc.pid).children(recursive=True):
                started.setdefault(child.pid, child)

    try:
        yield proc.pid
    finally:
        remember()
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            for child in started.values():
                with contextlib.suppress(psutil.Error):
                    child.send_signal(sig)
            _, alive = psutil.wait_procs(list(started.values()), timeout=20)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
            if not alive and proc.poll() is not None:
                break
        proc.wait(timeout=10)
