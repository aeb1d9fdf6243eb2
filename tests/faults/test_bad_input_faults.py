"""Faults and bad input the pipeline must survive: one line, exit 2, nothing half-written.

Issue 10, the input and file side: an interrupted write leaves no temporary file (item 5); an
empty ACL file, a malformed seed file, a K or a corpus too large for memory, a full disk or an
unwritable reports/ is one ``arecall: error: <file or key>: <what>`` line (item 7); options that
cannot work together are refused at composition, before any stage runs (item 8); the minor
items (a string K, whitespace queries, empty principal names, file modes, ``.hypothesis/``,
item 9). `arecall run` is called in-process; a subprocess only where a signal or a resource
limit has to hit a real process.
"""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from arecall.core.errors import ArecallError
from arecall.io import atomic
from arecall.io.atomic import atomic_path, write_text
from arecall.pipeline.config import default_config, load_params
from arecall.pipeline.layout import Layout

from tests.helpers import FAST_PROOF, ROOT, VENV_BIN, write_seed_dir

GIB = 1 << 30


@pytest.fixture(autouse=True)
def _store(mlflow_store):
    """A ready MLflow store: a fresh one logs its creation, which is not what is tested here."""
    return mlflow_store


def _one_line(result, *expected: str) -> str:
    """The single ``arecall: error:`` line of a refused command, holding every ``expected``."""
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("arecall: error: "), lines[0]
    for part in expected:
        assert part in lines[0], (part, lines[0])
    return lines[0]


def _params(tmp_path: Path, choices: list[str], **patch) -> Path:
    """params.yaml as DVC writes it for ``choices``, with dotted keys patched raw."""
    data = default_config(choices).params()
    for dotted, value in patch.items():
        *path, leaf = dotted.split("__")
        node = data
        for part in path:
            node = node[part]
        node[leaf] = value
    p = tmp_path / "params.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def _nothing_written(out: Path) -> None:
    """No stage wrote into the run directory (Hydra's own .hydra/ aside)."""
    written = [p for p in out.rglob("*") if ".hydra" not in p.parts and p.suffix != ".log"]
    assert not [p for p in written if p.is_file()], written


# -- item 5: no temporary file survives ------------------------------------------------------------


def test_a_temp_file_is_named_after_its_target_and_its_process(tmp_path):
    with atomic_path(tmp_path / "metrics.json") as tmp:
        assert re.fullmatch(rf"\.metrics\.json\.{os.getpid()}\.[a-z0-9_]+\.tmp", tmp.name)
        assert tmp.parent == tmp_path


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_stale_temp_files_of_dead_processes_are_removed_on_the_next_write(tmp_path):
    dead, live = _dead_pid(), os.getppid()
    stale = tmp_path / f".tables.md.{dead}.k3j9x0q1.tmp"
    busy = tmp_path / f".tables.md.{live}.a8b7c6d5.tmp"  # a live process may be writing it
    legacy = tmp_path / ".tables.md.q1w2e3r4.tmp"  # before temps carried a pid: by age
    fresh_legacy = tmp_path / ".tables.md.z9y8x7w6.tmp"
    other = tmp_path / f".other.md.{dead}.k3j9x0q1.tmp"  # another target's: not this write's
    for p in (stale, busy, legacy, fresh_legacy, other):
        p.write_text("partial")
    old = time.time() - 2 * 3600
    os.utime(legacy, (old, old))
    write_text(tmp_path / "tables.md", "ok\n")
    assert (tmp_path / "tables.md").read_text() == "ok\n"
    assert not stale.exists() and not legacy.exists()
    assert busy.exists() and fresh_legacy.exists() and other.exists()


# The writer is busy in Python, in short sleeps: CPython runs a signal's handler in the main
# thread between bytecodes, and the kernel may hand a process-directed signal to another thread
# (numpy's BLAS starts one at import). A main thread inside one 60 s sleep then saw it only
# when the sleep ended, and the test timed out (about one run in fifteen under make test).
WRITER = """
import signal, sys, time
from pathlib import Path
from arecall.io.atomic import write_with

def slow(tmp):
    tmp.write_bytes(b"half of a png")
    Path(sys.argv[2]).write_text("ready")
    for _ in range(1200):
        time.sleep(0.05)

write_with(Path(sys.argv[1]) / "arecall_at_k.png", slow)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=str)
def test_a_signal_while_writing_leaves_no_temp_file(tmp_path, sig):
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "arecall_at_k.png").write_bytes(b"the previous png")
    ready = tmp_path / "ready"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(reports), str(ready)],
        stderr=subprocess.PIPE,
        # a shell's background job ignores SIGINT, nohup ignores SIGHUP, and children inherit
        # that: restore the default, so the writer meets the signal as a user would deliver it
        preexec_fn=lambda: signal.signal(sig, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert len(list(reports.glob(".arecall_at_k.png.*.tmp"))) == 1
        proc.send_signal(sig)
        proc.wait(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode != 0
    assert sorted(p.name for p in reports.iterdir()) == ["arecall_at_k.png"]
    assert (reports / "arecall_at_k.png").read_bytes() == b"the previous png"


#: Writes that may bypass io.atomic: a lock file (appended, never published); the report's plot
#: function, whose ``path`` is write_with's temporary file (checked below).
_NOT_ARTIFACTS = {
    ("tracking/store.py", 'lock_path.open("a")'),
    # files of a private directory published whole by one rename (a vector-cache entry) or
    # uploaded and deleted (MLflow's artifact staging): never seen half-written
    ("pipeline/vector_cache.py", "(work / "),
    ("pipeline/vector_cache.py", "table.to_parquet(work / _TABLE"),
    ("tracking/run.py", "(root / name).write_text("),
    ("pipeline/stages/report.py", "fig.savefig(path,"),
    # a run read from a pipe, copied to a private temporary file to be read again
    ("evaluate/inputs.py", 'with os.fdopen(handle, "wb") as out'),
    # the comparison's figure: `arecall.compare.compare` draws it into write_with's temporary
    ("compare/render.py", "fig.savefig(path,"),
    # the run directory's write test: a private file, removed at once, never published
    ("cli/run_directory.py", 'os.fdopen(fd, "wb")'),
}


def test_every_writer_in_the_package_goes_through_io_atomic():
    writes = re.compile(
        r"\.(to_parquet|savefig|to_csv|write_text|write_bytes|tofile)\(|np\.savez|"
        r"open\([^)]*[\"'][wax]b?[\"']|\.dump\("
    )
    found = []
    for path in sorted((ROOT / "src" / "arecall").rglob("*.py")):
        rel = path.relative_to(ROOT / "src" / "arecall").as_posix()
        if rel == "io/atomic.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.strip()
            if code.startswith(">>>") or code.startswith("...") or not writes.search(code):
                continue
            to_temp = re.search(r"\((tmp|fh|zf)\b", code) or "(tmp," in code
            to_string = re.search(r"\.to_csv\((index|sep)=", code)
            if to_temp or to_string or any(rel == f and s in code for f, s in _NOT_ARTIFACTS):
                continue
            found.append(f"{rel}:{number}: {code}")
    assert not found, "\n".join(found)
    report = (ROOT / "src" / "arecall" / "pipeline" / "stages" / "report.py").read_text()
    assert "write_with(layout.plot, lambda tmp: _plot(curve, tmp))" in report
    compare = (ROOT / "src" / "arecall" / "compare" / "__init__.py").read_text()
    assert "write_with(where / FIGURE, lambda tmp: figure(points, tmp))" in compare


# -- item 7: empty ACL files, malformed seed files, memory, full disk, unwritable reports ---------


def _beir_dir(path: Path) -> Path:
    (path / "qrels").mkdir(parents=True)
    docs = [{"_id": f"d{i}", "text": f"alpha beta word{i}"} for i in range(6)]
    (path / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (path / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "alpha"}) + "\n")
    (path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    return path


@pytest.mark.parametrize("content", ["", "doc_id\tprincipal\n", "# only a comment\n\n"])
@pytest.mark.parametrize("where", ["profiles=acl_file", "corpus=beir"])
def test_an_empty_or_header_only_acl_file_is_one_line(tmp_path, arecall, content, where):
    acl = tmp_path / "acl.tsv"
    acl.write_text(content)
    if where == "corpus=beir":
        args = ["corpus=beir", f"corpus.path={_beir_dir(tmp_path / 'beir')}", f"corpus.acl={acl}"]
    else:
        args = ["profiles=acl_file", f"profiles.path={acl}"]
    out = tmp_path / "out"
    line = _one_line(arecall("run", *args, f"hydra.run.dir={out}"), f"{acl}: ")
    assert "expected doc_id<TAB>principal lines" in line
    _nothing_written(out)


@pytest.mark.parametrize(
    ("relevant", "path"),
    [
        ([["ds-000"]], "queries[0].relevant[0]"),
        ([7], "queries[0].relevant[0]"),
        (["x", None], "queries[0].relevant[1]"),
    ],
    ids=["a list", "a number", "null"],
)
def test_a_relevant_id_that_is_not_a_string_is_one_line(tmp_path, arecall, relevant, path):
    d = write_seed_dir(tmp_path / "corpus", 3)
    data = json.loads((d / "queries.json").read_text())
    data["queries"][0]["relevant"] = relevant
    (d / "queries.json").write_text(json.dumps(data))
    out = tmp_path / "out"
    result = arecall("run", "corpus=seed_json", f"corpus.path={d}", f"hydra.run.dir={out}")
    _one_line(result, "queries.json: ", path)
    _nothing_written(out)


@pytest.fixture
def memory_20gib(monkeypatch):
    """What the machine has free, fixed, so the refusals do not depend on the test machine."""
    monkeypatch.setattr("arecall.pipeline.budget.available_memory", lambda: 20 * GIB)


def test_a_k_beyond_memory_is_refused_at_composition(tmp_path, arecall, memory_20gib):
    out = tmp_path / "out"
    result = arecall("run", "evaluation.ks=[1,1000000000]", f"hydra.run.dir={out}")
    line = _one_line(result, "evaluation.ks=[1,1000000000]: evaluation.ks: ")
    # discovery: 24 queries, four int32 lists of K for one principal (lists go by blocks)
    assert "K = 1000000000 needs about 357.6 GiB for one principal's placed lists" in line, line
    assert "20.0 GiB available" in line, line
    assert not out.exists()
    p = _params(tmp_path, [], evaluation__ks=[1, 10**9])
    with pytest.raises(
        ArecallError, match=rf"^{re.escape(str(p))}: evaluation\.ks: K = 1000000000"
    ):
        load_params(p)


def test_a_k_within_memory_is_accepted(memory_20gib):
    assert default_config(["evaluation.ks=[1,1000]"]).evaluation.ks == [1, 1000]


def test_a_k_whose_lists_fit_one_principal_at_a_time_is_accepted(memory_20gib):
    # discovery's 4 principals × 24 queries at K = 3·10^7: 42.9 GiB of lists in all, which the
    # stages keep on disk; one principal's block is 10.7 GiB, which fits
    ks = [1, 30_000_000]
    assert default_config([f"evaluation.ks=[{ks[0]},{ks[1]}]"]).evaluation.ks == ks


@pytest.mark.parametrize(
    ("overrides", "key", "what"),
    [
        (["corpus=synthetic", "corpus.n_docs=1000000000000"], "corpus.n_docs", "documents"),
        (
            ["corpus=synthetic", "corpus.docs_per_domain=1000000000000"],
            "corpus.docs_per_domain",
            "documents",
        ),
        (
            ["vector_search.corpus.n_docs=1000000000000"],
            "vector_search.corpus.n_docs",
            "vectors",
        ),
        (  # issue 38 item 7: resamples were never estimated (~100 s, then a memory traceback)
            ["evaluation.significance.resamples=10000000000000"],
            "evaluation.significance.resamples",
            "resamples",
        ),
    ],
    ids=lambda v: v[-1] if isinstance(v, list) else None,
)
def test_a_corpus_beyond_memory_is_refused_at_composition(
    tmp_path, arecall, memory_20gib, overrides, key, what
):
    out = tmp_path / "out"
    line = _one_line(
        arecall("run", *overrides, f"hydra.run.dir={out}"), f"{overrides[-1]}: {key}: "
    )
    assert re.search(rf"{what} need about [\d.]+ [TP]iB .*; 20\.0 GiB available", line), line
    assert not out.exists()
    *choices, last = overrides
    dotted, _, raw = last.partition("=")
    p = _params(tmp_path, choices, **{dotted.replace(".", "__"): int(raw)})
    with pytest.raises(ArecallError, match=rf"^{re.escape(str(p))}: {re.escape(key)}: "):
        load_params(p)


def test_without_the_budget_stub_an_absurd_k_is_refused_on_any_machine(tmp_path, arecall):
    out = tmp_path / "out"
    _one_line(arecall("run", "evaluation.ks=[1000000000000]", f"hydra.run.dir={out}"), "available")
    assert not out.exists()


def test_a_k_beyond_memory_on_a_corpus_read_from_files_is_refused_before_ranking(
    tmp_path, arecall, monkeypatch
):
    # seed_json's size is known only once generate has read it: 8 queries. The composition's
    # lower bound (1 query × K × 16 bytes = 16 GB) fits in 100 GiB, one principal's real need
    # (128 GB) does not: the rank stage refuses before it writes anything.
    monkeypatch.setattr("arecall.pipeline.budget.available_memory", lambda: 100 * GIB)
    d = write_seed_dir(tmp_path / "corpus", 3)
    out = tmp_path / "out"
    result = arecall(
        "run",
        "corpus=seed_json",
        f"corpus.path={d}",
        "evaluation.ks=[1000000000]",
        f"hydra.run.dir={out}",
    )
    _one_line(result, "evaluation.ks: K = 1000000000 needs about", "(8 queries × K × 16 bytes)")
    layout = Layout.run(out)
    assert layout.corpus.is_dir() and not layout.ranking.parent.exists()
    assert not layout.lists.exists() and not layout.metrics.exists()


FULL_DISK = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # so write() fails with EFBIG, as on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))
from arecall.pipeline.stages import run_stage
from arecall.pipeline.stages.report import report
sys.exit(run_stage(report))
"""


def _report_workspace(tmp_path: Path) -> Path:
    work = tmp_path / "w"
    (work / "reports").mkdir(parents=True)
    (work / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    for name in ("metrics.json", "tables.md", "arecall_at_k.csv", "arecall_at_k.png"):
        (work / "reports" / name).write_bytes((ROOT / "reports" / name).read_bytes())
    return work


def test_a_full_disk_is_one_line_and_leaves_the_previous_reports(tmp_path):
    work = _report_workspace(tmp_path)
    before = {p.name: p.read_bytes() for p in (work / "reports").iterdir()}
    proc = subprocess.run(
        [str(VENV_BIN / "python"), "-c", FULL_DISK], cwd=work, capture_output=True, text=True
    )
    _one_line(proc, "reports/tables.md: cannot write: File too large")
    after = {p.name: p.read_bytes() for p in (work / "reports").iterdir()}
    assert after == before  # the same files, byte for byte, and no temporary file


def test_a_file_where_a_directory_should_be_is_one_line(tmp_path):
    (tmp_path / "reports").write_text("not a directory")
    with pytest.raises(ArecallError) as err:
        write_text(tmp_path / "reports" / "tables.md", "x")
    assert str(err.value) == (
        f"{tmp_path}/reports/tables.md: cannot write: {tmp_path}/reports is not a directory"
    )


def test_an_unwritable_report_in_the_report_stage_is_one_line(tmp_path, monkeypatch, capsys):
    from arecall.pipeline.stages import run_stage
    from arecall.pipeline.stages.report import report

    work = _report_workspace(tmp_path)
    monkeypatch.chdir(work)
    (work / "reports" / "tables.md").unlink()
    (work / "reports" / "tables.md").mkdir()  # what rename cannot replace
    assert run_stage(report) == 2
    err = capsys.readouterr().err
    assert err == "arecall: error: reports/tables.md: cannot write: Is a directory\n", err
    assert sorted(p.name for p in (work / "reports").iterdir()) == [
        "arecall_at_k.csv",
        "arecall_at_k.png",
        "metrics.json",
        "tables.md",
    ]


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_a_directory_that_refuses_new_files_is_one_line_naming_the_file(capsys):
    """Found with ``arecall evaluate --out /proc/x.json``: the temporary file could not be
    created there (ENOENT from a directory that exists) and the user got a traceback."""
    with pytest.raises(ArecallError) as err:
        write_text("/proc/arecall-test.json", "{}\n")
    assert str(err.value) == "/proc/arecall-test.json: cannot write: No such file or directory"


@pytest.mark.parametrize("code", [errno.EACCES, errno.EROFS, errno.ENOSPC])
def test_a_refused_write_is_one_line_naming_the_file(tmp_path, monkeypatch, code):
    # As root, chmod 0555 does not stop a write; the refusal the OS would give is injected at
    # the publishing step (the temp file is written, the rename fails).
    target = tmp_path / "reports" / "metrics.json"
    target.parent.mkdir()
    target.write_text("previous\n")

    def refuse(src, dst):
        raise OSError(code, os.strerror(code), str(dst))

    monkeypatch.setattr(atomic.os, "replace", refuse)
    with pytest.raises(ArecallError) as err:
        write_text(target, "new\n")
    assert str(err.value) == f"{target}: cannot write: {os.strerror(code)}"
    assert target.read_text() == "previous\n"
    assert [p.name for p in target.parent.iterdir()] == ["metrics.json"]


def _read_only_bind_works(tmp_path: Path) -> bool:
    """Whether this process may mount (a private mount namespace, as root in most CI)."""
    probe = tmp_path / "probe"
    probe.mkdir()
    try:
        proc = subprocess.run(
            ["unshare", "-m", "sh", "-c", f"mount --bind -o ro {probe} {probe}"],
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        probe.rmdir()
    return proc.returncode == 0


def test_a_read_only_reports_directory_is_one_line_and_leaves_the_reports(tmp_path):
    # A read-only file system stops root too: reports/ is bind-mounted read-only in a private
    # mount namespace, and the report stage runs there as DVC runs it.
    if not _read_only_bind_works(tmp_path):
        pytest.skip("cannot mount here (needs unshare -m and mount)")
    work = _report_workspace(tmp_path)
    before = {p.name: p.read_bytes() for p in (work / "reports").iterdir()}
    script = (
        "mount --bind -o ro reports reports && "
        f"exec {VENV_BIN / 'python'} -m arecall.pipeline.stages.report"
    )
    proc = subprocess.run(
        ["unshare", "-m", "sh", "-c", script], cwd=work, capture_output=True, text=True
    )
    _one_line(proc, "reports/tables.md: cannot write: Read-only file system")
    assert {p.name: p.read_bytes() for p in (work / "reports").iterdir()} == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a 0555 directory")
def test_a_read_only_reports_directory_is_one_line(tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    reports.chmod(0o555)
    try:
        with pytest.raises(ArecallError, match=r"reports/tables\.md: cannot write: Permission"):
            write_text(reports / "tables.md", "x")
    finally:
        reports.chmod(0o755)


# -- item 8: options that cannot work together, refused at composition ----------------------------

LATE = [
    (["index=hnsw"], "index=hnsw: index.name: ", "retriever=dense_lsa"),
    (["index=exact", "retriever=bm25"], "index=exact: index.name: ", "retriever=dense_lsa"),
    (["retriever=dense_lsa", "index=hnsw", "index.m=0"], "index.m=0: index.m: ", "got 0"),
    (
        ["evaluation.significance.confidence=2"],
        "evaluation.significance.confidence=2: evaluation.significance.confidence: ",
        "must be a number in (0, 1), got 2",
    ),
    (
        ["retriever=../corpus/discovery"],
        "retriever=../corpus/discovery: no such retriever config (known: ",
        "bm25, dense_lsa, embeddings, model2vec, sklearn_tfidf, tfidf)",
    ),
    (["retriever=sub/tfidf"], "retriever=sub/tfidf: no such retriever config", ""),
    (["corpus=./discovery"], "corpus=./discovery: no such corpus config", ""),
]


@pytest.mark.parametrize(("overrides", "start", "what"), LATE, ids=[c[0][-1] for c in LATE])
def test_arecall_run_refuses_a_late_failure_at_composition(
    tmp_path, arecall, overrides, start, what
):
    out = tmp_path / "out"
    line = _one_line(arecall("run", *overrides, f"hydra.run.dir={out}"), what)
    assert line.startswith(f"arecall: error: {start}"), line
    assert not out.exists()


def test_a_path_in_a_sweep_choice_is_refused_before_any_point_runs(tmp_path, arecall):
    out = tmp_path / "sweep"
    result = arecall("run", "-m", "retriever=tfidf,../corpus/discovery", f"hydra.sweep.dir={out}")
    _one_line(result, "retriever=../corpus/discovery: no such retriever config")
    assert not out.exists()


@pytest.mark.parametrize(
    ("choices", "patch", "expected"),
    [
        (
            ["retriever=dense_lsa", "index=hnsw"],
            {"retriever": {"name": "tfidf", "depth": None, "chunk_queries": 1024}},
            "index.name: index=hnsw needs a retriever with dense embeddings",
        ),
        (["retriever=dense_lsa", "index=hnsw"], {"index__m": 0}, "index.m: must be a positive"),
        ([], {"evaluation__significance__confidence": 2}, "evaluation.significance.confidence: "),
        ([], {"retriever__name": "../corpus/discovery"}, "retriever.name: unknown retriever"),
    ],
)
def test_params_yaml_refuses_the_same_late_failures(tmp_path, choices, patch, expected):
    p = _params(tmp_path, choices, **patch)
    with pytest.raises(ArecallError) as err:
        load_params(p)
    assert str(err.value).startswith(f"{p}: {expected}"), str(err.value)


# -- item 9 -------------------------------------------------------------------------------------


def test_chunk_queries_zero_is_refused_not_replaced(tmp_path, arecall):
    out = tmp_path / "out"
    _one_line(
        arecall("run", "retriever.chunk_queries=0", f"hydra.run.dir={out}"),
        "retriever.chunk_queries=0: retriever.chunk_queries: must be a positive integer, got 0",
    )
    with pytest.raises(ArecallError, match=r"retriever\.chunk_queries: must be a positive"):
        load_params(_params(tmp_path, [], retriever__chunk_queries=0))


def test_a_quoted_k_is_refused_as_a_string_on_both_paths(tmp_path, arecall):
    out = tmp_path / "out"
    _one_line(
        arecall("run", 'evaluation.ks=["5"]', f"hydra.run.dir={out}"),
        """evaluation.ks=["5"]: evaluation.ks[0]: must be a positive integer, got '5' (a string)""",
    )
    assert not out.exists()
    with pytest.raises(ArecallError, match=r"evaluation\.ks\[0\]: .*got '5' \(a string\)$"):
        load_params(_params(tmp_path, [], evaluation__ks=["5"]))


@pytest.mark.parametrize(
    ("breaker", "expected"),
    [
        (
            lambda d: _patch(d, "queries.json", lambda q: q["queries"][1].update(query=" \t ")),
            "queries.json: queries[1].query: must be a non-empty string",
        ),
        (
            lambda d: _patch(
                d, "profiles.json", lambda p: p["profiles"].update({"": p["profiles"]["p0"]})
            ),
            "profiles.json: profiles['']: a principal name must be non-empty",
        ),
        (
            lambda d: _patch(
                d, "profiles.json", lambda p: p["profiles"].update({"  ": p["profiles"]["p0"]})
            ),
            "profiles.json: profiles['  ']: a principal name must be non-empty",
        ),
    ],
    ids=["whitespace query", "empty principal", "blank principal"],
)
def test_seed_json_refuses_what_beir_refuses(tmp_path, arecall, breaker, expected):
    d = write_seed_dir(tmp_path / "corpus", 3)
    breaker(d)
    out = tmp_path / "out"
    _one_line(
        arecall("run", "corpus=seed_json", f"corpus.path={d}", f"hydra.run.dir={out}"), expected
    )
    _nothing_written(out)


def _patch(d: Path, name: str, fn) -> None:
    data = json.loads((d / name).read_text())
    fn(data)
    (d / name).write_text(json.dumps(data))


@pytest.mark.faults  # a whole run, ~7 s
def test_every_output_honours_the_umask_and_prove_leaves_no_example_database(tmp_path, monkeypatch):
    # DVC restores outputs 0644 (umask 022); a stage must write them with the same mode, and
    # under any umask: 027 gives 0640 everywhere (Parquet, npz, JSON, Markdown, CSV, PNG).
    from arecall.pipeline.run import run_all

    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    old = os.umask(0o027)
    try:
        run_all(
            default_config([FAST_PROOF, "index=exact", "retriever=dense_lsa"]),
            Layout.run(work / "run"),
        )
    finally:
        os.umask(old)
    files = [p for p in (work / "run").rglob("*") if p.is_file()]
    assert {p.suffix for p in files} >= {".parquet", ".npz", ".json", ".md", ".csv", ".png"}
    modes = {p.relative_to(work).as_posix(): oct(p.stat().st_mode & 0o777) for p in files}
    assert set(modes.values()) == {"0o640"}, modes
    assert sorted(p.name for p in work.iterdir()) == ["run"]  # no .hypothesis/, nothing else


def test_a_sweep_whose_points_fail_on_bad_input_prints_only_their_lines(tmp_path, arecall):
    """Each failed point's one line and the sweep's one line: not Hydra's "Error executing job
    with overrides" nor its hint to set HYDRA_FULL_ERROR for a stack trace there is none of."""
    missing, empty = tmp_path / "missing", tmp_path / "empty"
    empty.mkdir()
    result = arecall(
        "run",
        "-m",
        "corpus=seed_json",
        f"corpus.path={missing},{empty}",
        f"hydra.sweep.dir={tmp_path}/sweep",
    )
    assert result.returncode == 2, result.stderr
    point = f"corpus.path={missing},corpus=seed_json"
    assert [ln for ln in result.stderr.splitlines() if ln.strip()] == [
        f"arecall: error: sweep point 0 ({point}): {missing}/corpus.json: file not found",
        f"arecall: error: sweep point 1 (corpus.path={empty},corpus=seed_json): "
        f"{empty}/corpus.json: file not found",
        f"arecall: error: the sweep had a failed point ({point}: see above); the other points ran",
    ]
