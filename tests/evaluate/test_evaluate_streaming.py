"""``evaluate`` on a run read a block of queries at a time (issue 34) gives what the run held in
memory gives; bad input it meets is one line, exit 2, nothing written (issues 34 and 38).

Block sizes here are a few hundred bytes, so every block boundary, a query longer than a block
and a query split by an ungrouped file are met on files of a few kilobytes.
"""

from __future__ import annotations

import gzip
import json
import os
import resource
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arecall.cli.evaluate import evaluate_main
from arecall.core.errors import ArecallError
from arecall.evaluate import compare, evaluate, pairs
from arecall.io.trec import Run, load_run, read_run

from tests.helpers import VENV_BIN

DOCS = [f"d{i}" for i in range(40)]
SCORES = [0.5, 1.0, 1.5, 2.0]  # few values: many ties


def _run_lines(rankings: dict[str, dict[str, float]]) -> str:
    return "".join(
        f"{q} Q0 {d} {i + 1} {s} sys\n"
        for q, docs in rankings.items()
        for i, (d, s) in enumerate(docs.items())
    )


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@st.composite
def cases(draw):
    n_q = draw(st.integers(1, 6))
    queries = [f"q{i}" for i in range(n_q)]
    run = {
        q: draw(st.dictionaries(st.sampled_from(DOCS), st.sampled_from(SCORES), max_size=30))
        for q in queries
    }
    run = {q: r for q, r in run.items() if r}
    qrels = {
        q: draw(st.dictionaries(st.sampled_from(DOCS), st.integers(0, 3), min_size=1, max_size=8))
        for q in queries
    }
    acl = {p: draw(st.sets(st.sampled_from(DOCS))) for p in ("alice", "bob", "carol")}
    return run, qrels, acl


def _same(a, b) -> None:
    assert json.dumps(a.summary()) == json.dumps(b.summary())
    assert a.per_query.equals(b.per_query)
    if a.per_pair is not None:
        assert a.per_pair.equals(b.per_pair)


@settings(max_examples=60, deadline=None)
@given(cases(), st.sampled_from([64, 200, 10_000]), st.sampled_from(["docid", "trec_eval"]))
def test_a_file_read_in_blocks_equals_the_run_in_memory(tmp_path_factory, case, block, ties):
    run, qrels, acl = case
    if not run:
        return
    d = tmp_path_factory.mktemp("blocks")
    path = _write(d / "run.trec", _run_lines(run))
    ks = (1, 3, 10)
    streamed = evaluate(path, qrels, acl=acl, k=ks, ties=ties, block=block, n_resamples=99)
    memory = evaluate(Run.from_dict(run, ties=ties, name="sys"), qrels, acl=acl, k=ks,
                      n_resamples=99)  # fmt: skip
    _same(streamed, memory)


@settings(max_examples=30, deadline=None)
@given(cases(), st.sampled_from([64, 10_000]))
def test_tallied_pairs_equal_kept_pairs_and_do_not_depend_on_the_blocks(
    tmp_path_factory, case, block
):
    """Past `RETAIN_CELLS`, pairs are tallied: exact means, equal to the kept ones' to 1e-12,
    and the same to the last bit whatever the blocks."""
    run, qrels, acl = case
    if not run:
        return
    path = _write(tmp_path_factory.mktemp("tally") / "run.trec", _run_lines(run))
    ks = (1, 5)
    kept = evaluate(path, qrels, acl=acl, k=ks, n_resamples=99).summary()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pairs, "RETAIN_CELLS", 0)
        tallied = evaluate(path, qrels, acl=acl, k=ks, block=block, n_resamples=99).summary()
        in_memory = evaluate(Run.from_dict(run, name="sys"), qrels, acl=acl, k=ks, n_resamples=99)
    assert json.dumps(tallied) == json.dumps(in_memory.summary())
    for k in map(str, ks):
        for key, value in kept["k"][k].items():
            if isinstance(value, float):
                assert tallied["k"][k][key] == pytest.approx(value, abs=1e-12), key


def test_spilled_pairs_give_the_kept_rows_worst_pairs_and_comparison(tmp_path) -> None:
    """Past `RETAIN_CELLS` with keep_pairs, every pair is spilled to disk and read back a
    slice of principals at a time: rows, worst pairs, values and a comparison as kept ones."""
    rng = np.random.default_rng(3)
    docs = [f"d{i}" for i in range(60)]
    run_a = {f"q{q}": {d: float(rng.integers(1, 5)) for d in rng.choice(docs, 25, False)}
             for q in range(12)}  # fmt: skip
    run_b = {q: {d: -s for d, s in r.items()} for q, r in run_a.items()}
    qrels = {q: {d: int(rng.integers(0, 3)) for d in rng.choice(docs, 8, False)} for q in run_a}
    acl = {f"p{i}": set(rng.choice(docs, 20, False)) for i in range(7)}
    path = _write(tmp_path / "a.trec", _run_lines(run_a))

    def both() -> tuple:
        a = evaluate(path, qrels, acl=acl, k=(1, 5), n_resamples=99, keep_pairs=True, block=300)
        b = evaluate(Run.from_dict(run_b), qrels, acl=acl, k=(1, 5), n_resamples=99,
                     keep_pairs=True)  # fmt: skip
        return a, b

    kept_a, kept_b = both()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pairs, "RETAIN_CELLS", 0)
        mp.setattr("arecall.evaluate.result._ROWS_AT_ONCE", 24)  # 2 principals a slice
        spilled_a, spilled_b = both()
        assert spilled_a._core.spill is not None and spilled_a._core.retained is None
        assert spilled_a.per_pair.equals(kept_a.per_pair)
        assert spilled_a.worst(4).equals(kept_a.worst(4))
        spilled_a.write_rows(tmp_path / "spilled.csv")
        kept_a.write_rows(tmp_path / "kept.csv")
        assert (tmp_path / "spilled.csv").read_bytes() == (tmp_path / "kept.csv").read_bytes()
        np.testing.assert_array_equal(spilled_a.values("gap", 5), kept_a.values("gap", 5))
        compared = compare(spilled_a, spilled_b, n_resamples=99)
    expected = compare(kept_a, kept_b, n_resamples=99)
    assert compared[["k", "measure", "n"]].equals(expected[["k", "measure", "n"]])
    for column in ("mean_a", "mean_b", "mean_diff"):
        np.testing.assert_allclose(compared[column], expected[column], atol=1e-12)


def test_a_deep_run_gives_the_seed_definitions_for_pre_filtering(tmp_path) -> None:
    """Relevant results hundreds of ranks down, principals who may use 2% to 90%: the window
    scan counts each pair's authorized results above each relevant one exactly."""
    rng = np.random.default_rng(7)
    docs = [f"d{i}" for i in range(3000)]
    run = {f"q{q}": {d: float(1000 - i) for i, d in enumerate(rng.choice(docs, 700, False))}
           for q in range(5)}  # fmt: skip
    qrels = {q: {d: 1 for d in list(r)[::97]} for q, r in run.items()}
    acl = {f"p{i}": set(rng.choice(docs, int(3000 * s), False)) for i, s in
           enumerate([0.02, 0.1, 0.5, 0.9])}  # fmt: skip
    ev = evaluate(run, qrels, acl=acl, k=(1, 10, 40), significance=False)
    rows = ev.per_pair.set_index(["principal", "query_id"])
    for p, allowed in acl.items():
        for q, ranking in run.items():
            ranked = list(ranking)
            relevant = {d for d in qrels[q]} & allowed
            for k in (1, 10, 40):
                pre = [d for d in ranked if d in allowed][:k]
                expected = len(relevant & set(pre)) / len(relevant) if relevant else 1.0
                assert rows.loc[(p, q), f"arecall_pre@{k}"] == expected


# -- reading: boundaries, order, gzip, pipes ---------------------------------------------------------


RUN = "q1 Q0 a 1 0.9 sys\nq1 Q0 x 2 0.8 sys\nq1 Q0 b 3 0.7 sys\nq2 Q0 c 1 0.5 sys\nq2 Q0 d 2 0.5 sys\n"
QRELS = "q1 0 a 1\nq1 0 b 2\nq1 0 c 0\nq2 0 d 1\nq3 0 e 1\n"
ACL = "doc_id\tprincipal\nb\tstaff\nx\talice\nd\tbob\n"
GROUPS = "alice\tstaff\nbob\tstaff\n"


@pytest.fixture
def files(tmp_path: Path) -> Path:
    for name, text in (("run.trec", RUN), ("qrels.txt", QRELS), ("acl.tsv", ACL),
                       ("groups.tsv", GROUPS)):  # fmt: skip
        (tmp_path / name).write_text(text)
    return tmp_path


def test_a_query_longer_than_a_block_stays_in_one_block(tmp_path) -> None:
    lines = "".join(f"q1 Q0 d{i} {i + 1} {100 - i} s\n" for i in range(60))
    path = _write(tmp_path / "run.trec", lines + "q2 Q0 z 1 1 s\n")
    blocks = list(read_run(path, block=64))
    assert [b.query_ids.to_pylist() for b in blocks] == [["q1"], ["q2"]]
    assert len(blocks[0]) == 60


def test_an_ungrouped_file_is_read_through_buckets_and_scored_once(tmp_path) -> None:
    """q1's results continue after q2's: read as blocks, q1 would be two queries (and scored
    twice); the run is detected as ungrouped and read again, grouped on disk."""
    text = RUN.replace("q2 Q0 c", "q1 Q0 y 4 0.1 sys\nq2 Q0 c") + "q1 Q0 z 5 0.05 sys\n"
    path = _write(tmp_path / "run.trec", text)
    with pytest.raises(ArecallError, match="results of query 'q1' continue after"):
        list(read_run(path, block=40))
    streamed = evaluate(path, QRELS_DICT, k=(1, 5), block=40)
    memory = evaluate(load_run(path), QRELS_DICT, k=(1, 5))
    _same(streamed, memory)
    assert streamed.per_query.set_index("query_id").loc["q1", "depth"] == 5


QRELS_DICT = {"q1": {"a": 1, "b": 2, "c": 0}, "q2": {"d": 1}, "q3": {"e": 1}}


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="names a pipe by /proc/self/fd")
def test_an_ungrouped_run_from_a_pipe_is_one_line_naming_it() -> None:
    """Blocks of 40 bytes split q1 across blocks; a pipe cannot be read again to group it."""
    text = RUN.replace("q2 Q0 c", "q1 Q0 y 4 0.1 sys\nq2 Q0 c") + "q1 Q0 z 5 0.05 sys\n"
    with _pipe(text) as name, pytest.raises(ArecallError) as err:
        evaluate(name, QRELS_DICT, block=40)
    message = str(err.value)
    assert message.startswith(f"{name}: line ") and "not grouped by query id" in message
    assert "a pipe is read once" in message and "\n" not in message


def test_gzip_runs_read_in_blocks_equal_the_plain_file(tmp_path) -> None:
    lines = "".join(f"q{i % 7} Q0 d{i} 1 {i % 5} s\n" for i in range(300))
    plain = _write(tmp_path / "run.trec", lines)
    packed = tmp_path / "run.trec.gz"
    packed.write_bytes(gzip.compress(lines.encode()))
    a = evaluate(plain, {"q1": {"d1": 1, "d8": 2}}, k=(1, 10))
    b = evaluate(packed, {"q1": {"d1": 1, "d8": 2}}, k=(1, 10), block=100)
    _same(a, b)


class _pipe:
    """A FIFO fed by a thread: what a shell's ``<(cat file)`` gives (read once, not seekable)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __enter__(self) -> str:
        r, w = os.pipe()
        self.r = r
        data = self.text.encode()

        def feed() -> None:
            with os.fdopen(w, "wb") as fh:
                fh.write(data)

        self.thread = threading.Thread(target=feed, daemon=True)
        self.thread.start()
        return f"/proc/self/fd/{r}"

    def __exit__(self, *exc: object) -> None:
        self.thread.join(timeout=10)
        os.close(self.r)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="names a pipe by /proc/self/fd")
def test_run_qrels_and_acl_from_pipes_read_like_files(files, capsys) -> None:
    """``--run <(cat run)`` was refused as 'file not found' (issue 38 item 7)."""
    argv = ["--acl", str(files / "acl.tsv"), "--groups", str(files / "groups.tsv"),
            "--format", "json"]  # fmt: skip
    assert evaluate_main(["--run", str(files / "run.trec"), "--qrels", str(files / "qrels.txt"),
                          *argv]) == 0  # fmt: skip
    expected = capsys.readouterr().out
    with _pipe(RUN) as run, _pipe(QRELS) as qrels, _pipe(ACL) as acl:
        code = evaluate_main(["--run", run, "--qrels", qrels, "--acl", acl,
                              "--groups", str(files / "groups.tsv"), "--format", "json"])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.out == expected


def test_dev_stdin_is_read_as_the_run(files) -> None:
    proc = subprocess.run(
        [
            str(VENV_BIN / "arecall"),
            "evaluate",
            "--run",
            "/dev/stdin",
            "--qrels",
            str(files / "qrels.txt"),
            "--format",
            "csv",
        ],
        input=RUN,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("k,recall")


def test_worst_lists_what_a_piped_run_returned(files, capsys) -> None:
    with _pipe(RUN) as run:
        code = evaluate_main(["--run", run, "--qrels", str(files / "qrels.txt"), "--worst", "2"])
    out = capsys.readouterr().out
    assert code == 0 and "returned: a x b" in out, out


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (b"q9 Q0 d9 1 0.5 \n", "line 301: expected 6 fields"),  # an empty tag
        (b"q9  d9 1 0.5 t\n", "line 301: expected 6 fields"),  # an empty Q0
        (b"q9 Q0 d9 1 0.5 t\xe9\n", "line 301: not valid UTF-8"),  # Latin-1 in the tag
        (b"q9 Q\xe90 d9 1 0.5 t\n", "line 301: not valid UTF-8"),
    ],
)
def test_the_columns_parsed_unread_are_checked_as_the_strict_reader_checks_them(
    tmp_path, bad, message
) -> None:
    """Q0 and the tag are parsed as raw bytes (the fast path never needs their text): an empty
    one or one that is not UTF-8 still gets the strict reader's message."""
    good = "".join(f"q{i // 10} Q0 d{i} 1 {i} t\n" for i in range(300)).encode()
    path = tmp_path / "run.trec"
    path.write_bytes(good + bad)
    with pytest.raises(ArecallError, match=message):
        list(read_run(path))


# -- bad input: one line, exit 2, nothing written -------------------------------------------------


def _refused(capsys, code: int, *parts: str) -> str:
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert code == 2, captured.err
    assert len(lines) == 1 and lines[0].startswith("arecall: error: "), lines
    for part in parts:
        assert part in lines[0], (part, lines[0])
    assert captured.out == ""
    return lines[0]


def test_a_groups_file_passed_as_the_acl_is_refused(files, capsys) -> None:
    """It was accepted and scored ARecall 1.0 at every K: none of its 'documents' (alice, bob)
    is judged or retrieved."""
    out = files / "out.json"
    code = evaluate_main(["--run", str(files / "run.trec"), "--qrels", str(files / "qrels.txt"),
                          "--acl", str(files / "groups.tsv"), "--out", str(out)])  # fmt: skip
    _refused(capsys, code, f"{files / 'groups.tsv'}: grants none of the documents judged")
    assert not out.exists()


def test_an_unknown_principal_is_neither_one_nor_the_other(files, capsys) -> None:
    code = evaluate_main(["--run", str(files / "run.trec"), "--qrels", str(files / "qrels.txt"),
                          "--acl", str(files / "acl.tsv"), "--principals", "carol"])  # fmt: skip
    line = _refused(capsys, code, "'staff' is neither a listed principal nor a group")
    assert "principals: carol" in line


def test_an_empty_principals_list_is_refused(files, capsys) -> None:
    code = evaluate_main(["--run", str(files / "run.trec"), "--qrels", str(files / "qrels.txt"),
                          "--acl", str(files / "acl.tsv"), "--principals", ""])  # fmt: skip
    _refused(capsys, code, "--principals: expected a comma-separated list of names, got ''")


@pytest.mark.parametrize("spelled", ["1000000000000", "1e12"])
def test_resamples_that_cannot_fit_are_refused_before_any_file_is_read(
    tmp_path, capsys, spelled
) -> None:
    """``--resamples 1e12`` ran 52 s, then died in a memory traceback."""
    code = evaluate_main(["--run", str(tmp_path / "missing.trec"), "--qrels",
                          str(tmp_path / "missing.txt"), "--resamples", spelled])  # fmt: skip
    _refused(capsys, code, "--resamples: 1000000000000 resamples need about 21.8 TiB")


@pytest.mark.parametrize("case", ["truncated gzip", "latin-1", "latin-1 comment"])
def test_a_damaged_groups_file_is_refused(files, capsys, case) -> None:
    data = ("# members\n" if case == "latin-1 comment" else "") + GROUPS + "björn\tstaff\n"
    raw = data.encode("latin-1")
    if case == "truncated gzip":
        raw = gzip.compress(data.encode())[:-6]
    (files / "groups.tsv").write_bytes(raw)
    code = evaluate_main(["--run", str(files / "run.trec"), "--qrels", str(files / "qrels.txt"),
                          "--acl", str(files / "acl.tsv"), "--groups", str(files / "groups.tsv")])  # fmt: skip
    what = "cannot read" if case == "truncated gzip" else "not valid UTF-8"
    _refused(capsys, code, f"{files / 'groups.tsv'}: line ", what)


_LIMITED = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
from arecall.cli.evaluate import evaluate_main
sys.exit(evaluate_main(sys.argv[1:]))
"""


def _limited(*argv: str) -> subprocess.CompletedProcess[str]:
    """``arecall evaluate`` in a process that may map 3 GiB: a read of the whole input dies."""
    return subprocess.run(
        [str(VENV_BIN / "python"), "-c", _LIMITED, *argv],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.skipif(not hasattr(resource, "RLIMIT_AS"), reason="needs RLIMIT_AS")
def test_a_decompression_bomb_is_one_line(files) -> None:
    """6 GiB of zeros in 6 MB of gzip: a read of the whole file ended in MemoryError."""
    member = gzip.compress(bytes(64 << 20), compresslevel=1)
    bomb = files / "bomb.trec.gz"
    with bomb.open("wb") as fh:
        for _ in range(96):
            fh.write(member)
    out = files / "out.txt"
    proc = _limited("--run", str(bomb), "--qrels", str(files / "qrels.txt"), "--out", str(out))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.splitlines() == [
        f"arecall: error: {bomb}: line 1: more than 1 MiB without a line end "
        "(not a text file of lines)"
    ]
    assert not out.exists()


@pytest.mark.skipif(not hasattr(resource, "RLIMIT_AS"), reason="needs RLIMIT_AS")
def test_a_six_gib_single_line_is_one_line(files) -> None:
    line = files / "line.trec"
    with line.open("wb") as fh:
        fh.truncate(6 << 30)  # sparse: no disk, and no line end
    proc = _limited("--run", str(line), "--qrels", str(files / "qrels.txt"))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.splitlines() == [
        f"arecall: error: {line}: line 1: more than 1 MiB without a line end "
        "(not a text file of lines)"
    ]


def test_one_query_larger_than_the_limit_is_one_line(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr("arecall.io.trec.MAX_QUERY", 1 << 20)
    lines = "".join(f"q1 Q0 d{i} 1 {i} s\n" for i in range(80_000))
    path = _write(tmp_path / "run.trec", lines)
    with pytest.raises(ArecallError, match=r"run\.trec: line 1: more than 1 MiB of one query"):
        list(read_run(path, block=1 << 16))
