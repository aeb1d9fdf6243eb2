"""One reader per format: every entry point reads runs, qrels, ACL and groups files identically.

The same bytes with a UTF-8 BOM, CRLF line ends, gzip compression or a header line must mean
the same thing to ``arecall evaluate``, the BEIR source and ``profiles=acl_file``; bad values
are refused on every path with ``file: line N``; files arecall writes honour the umask.
"""

from __future__ import annotations

import gzip
import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arecall.cli.evaluate import evaluate_main, fuse_main
from arecall.core.errors import ArecallError
from arecall.data.authorization import apply_profiles
from arecall.data.collection import Collection
from arecall.data.sources import load_corpus
from arecall.data.sources.beir import read_beir
from arecall.evaluate.evaluation import evaluate, load_acl
from arecall.io.atomic import write_text
from arecall.io.trec import load_qrels, load_run

RUN = "q1 Q0 a 1 0.9 sys\nq1 Q0 x 2 0.8 sys\nq1 Q0 b 3 0.7 sys\nq2 Q0 c 1 0.5 sys\nq2 Q0 d 2 0.5 sys\n"
QRELS = "q1 0 a 1\nq1 0 b 2\nq1 0 c 0\nq2 0 d 1\nq3 0 e 1\n"
ACL = "a\talice\nb\tstaff\nx\talice\nd\tbob\n"
GROUPS = "alice\tstaff\nbob\tstaff\n"
BOM = "\ufeff"


def _write(path: Path, text: str, *, gz: bool = False, crlf: bool = False) -> Path:
    data = (text.replace("\n", "\r\n") if crlf else text).encode("utf-8")
    path.write_bytes(gzip.compress(data, mtime=0) if gz else data)
    return path


def _error(fn, *args, **kwargs) -> str:
    with pytest.raises(ArecallError) as info:
        fn(*args, **kwargs)
    text = str(info.value)
    assert "\n" not in text, text
    return text


def _summary(run: Path, qrels: Path, acl: Path | None = None, groups: Path | None = None):
    ev = evaluate(run, qrels, acl=acl, groups=groups, k=(1, 3), significance=False)
    return ev.summary()


@pytest.fixture
def files(tmp_path: Path) -> Path:
    for name, text in (
        ("run.trec", RUN),
        ("qrels.txt", QRELS),
        ("acl.tsv", ACL),
        ("groups.tsv", GROUPS),
    ):
        _write(tmp_path / name, text)
    return tmp_path


# -- BOM -----------------------------------------------------------------------------------------


def test_a_bom_in_the_acl_keeps_the_first_grant(files: Path) -> None:
    bom = _write(files / "bom.tsv", BOM + ACL)
    assert load_acl(bom).allowed("alice") == {"a", "x"}
    assert _summary(files / "run.trec", files / "qrels.txt", bom) == _summary(
        files / "run.trec", files / "qrels.txt", files / "acl.tsv"
    )


def test_a_bom_in_the_groups_file_keeps_alice_in_her_group(files: Path, capsys) -> None:
    _write(files / "bom_groups.tsv", BOM + GROUPS)
    common = ["--run", str(files / "run.trec"), "--qrels", str(files / "qrels.txt")]
    common += ["--acl", str(files / "acl.tsv"), "--format", "json"]
    assert evaluate_main([*common, "--groups", str(files / "groups.tsv")]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert evaluate_main([*common, "--groups", str(files / "bom_groups.tsv")]) == 0
    assert json.loads(capsys.readouterr().out) == plain
    acl = load_acl(files / "acl.tsv", groups=files / "bom_groups.tsv")
    assert acl.principals == ("alice", "bob") and "b" in acl.allowed("alice")


# -- header lines --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "header", ["corpus-id\tprincipal", "doc_id\tprincipal", "DocID\tprincipal"]
)
def test_an_acl_header_is_a_header_for_evaluate(files: Path, header: str) -> None:
    with_header = _write(files / "h.tsv", f"{header}\n{ACL}")
    acl = load_acl(with_header)
    assert acl.principals == ("alice", "bob", "staff"), "no phantom principal 'principal'"
    assert _summary(files / "run.trec", files / "qrels.txt", with_header) == _summary(
        files / "run.trec", files / "qrels.txt", files / "acl.tsv"
    )


def _beir(root: Path, acl: str, groups: str | None = None, qrels: str | None = None) -> Path:
    (root / "qrels").mkdir(parents=True)
    docs = [{"_id": d, "text": f"text {d}"} for d in "abcdx"]
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    queries = [{"_id": q, "text": f"query {q}"} for q in ("q1", "q2")]
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    default = "query-id\tcorpus-id\tscore\nq1\ta\t1\nq2\td\t1\n"
    (root / "qrels" / "test.tsv").write_text(default if qrels is None else qrels)
    (root / "acl.tsv").write_text(acl)
    if groups is not None:
        (root / "groups.tsv").write_text(groups)
    return root


def _grants(c: Collection) -> set[tuple[str, str]]:
    return set(zip(c.acl["principal"].astype(str), c.acl["doc_id"].astype(str), strict=True))


@pytest.mark.parametrize("prefix", ["corpus-id\tprincipal\n", BOM, BOM + "doc_id\tprincipal\r\n"])
def test_the_beir_source_reads_header_and_bom_as_evaluate_does(tmp_path: Path, prefix: str) -> None:
    plain = read_beir(_beir(tmp_path / "plain", ACL, GROUPS), acl="acl.tsv", groups="groups.tsv")
    other = read_beir(
        _beir(tmp_path / "other", prefix + ACL, BOM + GROUPS), acl="acl.tsv", groups="groups.tsv"
    )
    assert _grants(other) == _grants(plain)
    assert other.principal_names.tolist() == ["alice", "bob"]
    evaluated = load_acl(tmp_path / "other" / "acl.tsv", groups=tmp_path / "other" / "groups.tsv")
    assert {(p, d) for p in evaluated.principals for d in evaluated.allowed(p)} == _grants(plain)


def test_comment_lines_are_skipped_in_acl_and_groups_files_on_every_path(tmp_path: Path) -> None:
    acl = "# who may read what\n" + ACL + "# end\n"
    groups = "# memberships\n" + GROUPS
    c = read_beir(_beir(tmp_path / "b", acl, groups), acl="acl.tsv", groups="groups.tsv")
    plain = read_beir(_beir(tmp_path / "p", ACL, GROUPS), acl="acl.tsv", groups="groups.tsv")
    assert _grants(c) == _grants(plain)
    loaded = load_acl(tmp_path / "b" / "acl.tsv", groups=tmp_path / "b" / "groups.tsv")
    assert loaded.principals == ("alice", "bob")


def test_profiles_acl_file_reads_header_and_bom_too(tmp_path: Path) -> None:
    discovery = load_corpus({"name": "discovery"})
    body = "clinical-dose-cohorts\tann\nsupply-lot-inventory\tbob\n"
    plain = _write(tmp_path / "plain.tsv", body)
    messy = _write(tmp_path / "messy.tsv", BOM + "corpus-id\tprincipal\n" + body, crlf=True)
    a = apply_profiles(discovery, {"name": "acl_file", "path": str(plain)})
    b = apply_profiles(discovery, {"name": "acl_file", "path": str(messy)})
    assert _grants(a) == _grants(b) and a.principal_names.tolist() == ["ann", "bob"]


def test_nested_groups_are_refused_on_the_evaluate_path_too(files: Path) -> None:
    _write(files / "nested.tsv", "alice\tstaff\nstaff\tall\n")
    text = _error(load_acl, files / "acl.tsv", groups=files / "nested.tsv")
    assert text.startswith(f"{files / 'nested.tsv'}: line 2: 'staff' is both a principal")


# -- integers ------------------------------------------------------------------------------------


def test_relevance_1_5_is_refused_by_the_trec_and_the_beir_paths(tmp_path: Path) -> None:
    trec = _write(tmp_path / "qrels.txt", "q1 0 a 1\nq1 0 b 1.5\n")
    assert _error(load_qrels, trec) == f"{trec}: line 2: relevance '1.5' is not an integer"
    beir_tsv = _write(tmp_path / "qrels.tsv", "query-id\tcorpus-id\tscore\nq1\ta\t1\nq2\td\t1.5\n")
    assert _error(load_qrels, beir_tsv) == f"{beir_tsv}: line 3: relevance '1.5' is not an integer"
    root = _beir(tmp_path / "b", ACL, qrels="query-id\tcorpus-id\tscore\nq1\ta\t1\nq2\td\t1.5\n")
    path = root / "qrels" / "test.tsv"
    assert _error(read_beir, root) == f"{path}: line 3: relevance '1.5' is not an integer"
    root = _beir(tmp_path / "t", ACL, qrels="q1 0 a 1\nq2 0 d 1.5\n")
    path = root / "qrels" / "test.tsv"
    assert _error(read_beir, root) == f"{path}: line 2: relevance '1.5' is not an integer"


def test_evaluate_reads_beir_qrels(files: Path) -> None:
    body = QRELS.replace(" 0 ", "\t").replace(" ", "\t")
    beir = _write(files / "q.tsv", "query-id\tcorpus-id\tscore\n" + body)
    assert load_qrels(beir).to_dict() == load_qrels(files / "qrels.txt").to_dict()


@pytest.mark.parametrize("rank", ["2.5", "x", "1e3"])
@pytest.mark.parametrize("sep", [" ", "\t", "  "])
def test_a_rank_that_is_not_an_integer_is_refused(tmp_path: Path, rank: str, sep: str) -> None:
    path = _write(
        tmp_path / "run.trec", f"q1 Q0 a 1 0.9 t\nq1 Q0 b {rank} 0.5 t\n".replace(" ", sep)
    )
    assert _error(load_run, path) == f"{path}: line 2: rank {rank!r} is not an integer"


def test_an_id_with_a_tab_inside_is_refused_by_the_fast_path_too(tmp_path: Path) -> None:
    path = _write(tmp_path / "run.trec", "q1 Q0 a 1 0.9 t\nq1 Q0 b\tc 2 0.5 t\n")
    assert _error(load_run, path).startswith(f"{path}: line 2: expected 6 fields")


# -- gzip, CRLF, BOM -----------------------------------------------------------------------------


def test_gzip_runs_qrels_and_acl_read_equal_to_the_plain_ones(files: Path) -> None:
    run = _write(files / "run.trec.gz", RUN, gz=True)
    qrels = _write(files / "qrels.txt.gz", QRELS, gz=True)
    acl = _write(files / "acl.tsv.gz", ACL, gz=True)
    groups = _write(files / "groups.tsv.gz", GROUPS, gz=True)
    assert load_run(run).to_dict() == load_run(files / "run.trec").to_dict()
    assert load_run(run).name == "sys"
    assert load_qrels(qrels).to_dict() == load_qrels(files / "qrels.txt").to_dict()
    assert _summary(run, qrels, acl, groups) == _summary(
        files / "run.trec", files / "qrels.txt", files / "acl.tsv", files / "groups.tsv"
    )


def test_crlf_files_read_equal_to_the_plain_ones(files: Path) -> None:
    run = _write(files / "crlf.trec", RUN, crlf=True)
    qrels = _write(files / "crlf.qrels", QRELS, crlf=True)
    acl = _write(files / "crlf.acl", ACL, crlf=True)
    groups = _write(files / "crlf.groups", GROUPS, crlf=True)
    assert load_run(run).to_dict() == load_run(files / "run.trec").to_dict()
    assert load_run(run).name == "sys"
    assert _summary(run, qrels, acl, groups) == _summary(
        files / "run.trec", files / "qrels.txt", files / "acl.tsv", files / "groups.tsv"
    )


DOC = st.sampled_from(["a", "b", "c", "d1", "D1", "é", "x_y", "z9"])
QID = st.sampled_from(["q1", "q2", "q10", "Q3"])


@settings(max_examples=25, deadline=None)
@given(
    run=st.dictionaries(QID, st.dictionaries(DOC, st.integers(-5, 5), min_size=1), min_size=1),
    sep=st.sampled_from([" ", "\t", " \t "]),
    variant=st.sampled_from(["gz", "bom", "crlf", "bom+crlf+gz", "blank lines"]),
)
def test_variants_of_a_random_file_parse_identically(run, sep, variant, tmp_path_factory) -> None:
    d = tmp_path_factory.mktemp("variants")
    run_lines = [
        sep.join([q, "Q0", doc, str(i + 1), str(s / 2), "tag"])
        for q, docs in run.items()
        for i, (doc, s) in enumerate(docs.items())
    ]
    qrels_lines = [
        sep.join([q, "0", doc, str(s)]) for q, docs in run.items() for doc, s in docs.items()
    ]
    acl_lines = [f"{doc}\t{q}" for q, docs in run.items() for doc in docs]
    for name, lines in (("run", run_lines), ("qrels", qrels_lines), ("acl", acl_lines)):
        text = "\n".join(lines) + "\n"
        _write(d / f"{name}.plain", text)
        if "blank lines" in variant:
            text = "\n\n".join(lines) + "\n\n"
        if "bom" in variant:
            text = BOM + text
        _write(d / f"{name}.other", text, gz="gz" in variant, crlf="crlf" in variant)
    a, b = load_run(d / "run.plain"), load_run(d / "run.other")
    assert (a.to_dict(), a.name) == (b.to_dict(), b.name)
    assert load_qrels(d / "qrels.plain").to_dict() == load_qrels(d / "qrels.other").to_dict()
    x, y = load_acl(d / "acl.plain"), load_acl(d / "acl.other")
    assert x.principals == y.principals
    assert all(x.allowed(p) == y.allowed(p) for p in x.principals)


# -- paths ---------------------------------------------------------------------------------------


def test_a_directory_given_as_a_file_says_so(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    d = tmp_path / "d"
    for reader in (load_run, load_qrels, load_acl):
        assert _error(reader, d) == f"{d}: is a directory"
    root = _beir(tmp_path / "b", ACL)
    (root / "acl_dir").mkdir()
    assert _error(read_beir, root, acl="acl_dir") == f"{root / 'acl_dir'}: is a directory"
    assert _error(read_beir, root, qrels="qrels") == f"{root / 'qrels'}: is a directory"


def test_a_missing_file_says_so(tmp_path: Path) -> None:
    for reader in (load_run, load_qrels, load_acl):
        assert _error(reader, tmp_path / "none") == f"{tmp_path / 'none'}: file not found"


def test_a_run_matching_no_judged_query_is_an_error_naming_the_file(files: Path, capsys) -> None:
    other = _write(files / "run.txt", RUN.replace("q1", "t1").replace("q2", "t2"))
    text = _error(evaluate, other, files / "qrels.txt")
    assert text == f"{other}: no query id matches the qrels (2 queries in the run)"
    assert evaluate_main(["--run", str(other), "--qrels", str(files / "qrels.txt")]) == 2
    assert "no query id matches the qrels" in capsys.readouterr().err


# -- umask ---------------------------------------------------------------------------------------


@contextmanager
def _umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o077])
def test_written_files_honour_the_umask(tmp_path: Path, mask: int) -> None:
    target = tmp_path / "x.txt"
    target.write_text("old")
    target.chmod(0o644)
    with _umask(mask):
        write_text(target, "new")
        write_text(tmp_path / "fresh.txt", "new")
    assert _mode(target) == 0o666 & ~mask
    assert _mode(tmp_path / "fresh.txt") == 0o666 & ~mask


def test_evaluate_out_rows_and_fuse_out_honour_the_umask(files: Path, capsys) -> None:
    out, rows, fused = files / "out.txt", files / "rows.csv", files / "fused.trec"
    with _umask(0o022):
        argv = ["--run", str(files / "run.trec"), "--qrels", str(files / "qrels.txt")]
        assert evaluate_main([*argv, "--out", str(out), "--rows", str(rows)]) == 0
        assert fuse_main([str(files / "run.trec"), "--out", str(fused)]) == 0
    assert [_mode(p) for p in (out, rows, fused)] == [0o644, 0o644, 0o644]


_THREADS_AFTER_A_READ = """
import os, sys
from arecall.io.text import fast_table
import pyarrow as pa
before = len(os.listdir("/proc/self/task"))
table = fast_table(sys.argv[1], "whitespace", {3: pa.int64()}, 6)
print(len(os.listdir("/proc/self/task")) - before, table is None)
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
@pytest.mark.parametrize("rank", ["1", "two"])
def test_a_small_file_is_read_without_starting_arrows_cpu_thread_pool(tmp_path, rank) -> None:
    # A console-script run that read a two-line run through Arrow's CPU pool once died at
    # exit with SIGABRT ("terminate called without an active exception", -6) after its
    # one-line error: Arrow's worker threads racing the process's teardown. A file under
    # 1 MB gains little from the pool, so it is parsed serially and starts none.
    run = tmp_path / "r.run"
    run.write_text(f"q1 Q0 d1 1 3.0 A\nq1 Q0 d2 {rank} 2.0 A\n")
    out = subprocess.run(
        [sys.executable, "-c", _THREADS_AFTER_A_READ, str(run)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    # Arrow's I/O pool may start one reader thread; the CPU pool would add one per core.
    assert int(out[0]) <= 1, out
    assert out[1] == str(rank != "1")
