"""``arecall evaluate`` / ``arecall fuse`` through their entry functions: output formats,
fusion end to end, MLflow, and bad input as one stderr line, exit 2, nothing written."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from arecall.cli.evaluate import evaluate_main, fuse_main
from arecall.evaluate.evaluation import evaluate
from arecall.io.trec import load_run

RUN = "q1 Q0 a 1 0.9 sys\nq1 Q0 x 2 0.8 sys\nq1 Q0 b 3 0.7 sys\nq2 Q0 c 1 0.5 sys\nq2 Q0 d 2 0.5 sys\n"
RUN2 = "q1 Q0 b 1 3 bm25\nq1 Q0 a 2 2 bm25\nq2 Q0 d 1 1 bm25\nq2 Q0 e 2 0.5 bm25\n"
QRELS = "q1 0 a 1\nq1 0 b 2\nq1 0 c 0\nq2 0 d 1\nq3 0 e 1\n"
ACL = "doc_id\tprincipal\nb\tstaff\nx\talice\nd\tbob\n"
GROUPS = "alice\tstaff\nbob\tstaff\n"


@pytest.fixture
def files(tmp_path: Path) -> Path:
    for name, text in (
        ("run.trec", RUN),
        ("run2.trec", RUN2),
        ("qrels.txt", QRELS),
        ("acl.tsv", ACL),
        ("groups.tsv", GROUPS),
    ):
        (tmp_path / name).write_text(text)
    return tmp_path


def args(d: Path, *extra: str) -> list[str]:
    return ["--run", str(d / "run.trec"), "--qrels", str(d / "qrels.txt"), *extra]


def acl_args(d: Path, *extra: str) -> list[str]:
    return args(d, "--acl", str(d / "acl.tsv"), "--groups", str(d / "groups.tsv"), *extra)


def test_json_output_is_the_api_summary(files: Path, capsys) -> None:
    assert evaluate_main(acl_args(files, "--format", "json", "--k", "1,2")) == 0
    printed = json.loads(capsys.readouterr().out)
    api = evaluate(
        files / "run.trec",
        files / "qrels.txt",
        acl=files / "acl.tsv",
        groups=files / "groups.tsv",
        k=(1, 2),
    ).summary()
    assert printed == json.loads(json.dumps(api))
    assert printed["principals"] == ["alice", "bob"]
    assert printed["k"]["1"]["arecall_pre"] == pytest.approx(5 / 6)


def test_table_output_shows_standard_and_authorized_blocks(files: Path, capsys) -> None:
    assert (
        evaluate_main(acl_args(files, "--worst", "2", "--compare-run", str(files / "run2.trec")))
        == 0
    )
    out = capsys.readouterr().out
    assert "nDCG-exp" in out and "authorized view: 2 principals × 3 queries = 6 pairs" in out
    assert "1 missing from the run" in out
    assert "excluding pairs where nothing relevant is authorized (n=3 of 6)" in out
    assert "paired comparison, Δ = A − B" in out and "worst pairs:" in out


def test_csv_output_has_one_row_per_k(files: Path, capsys) -> None:
    assert evaluate_main(args(files, "--format", "csv", "--k", "1,3")) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["k"] for r in rows] == ["1", "3"]
    assert float(rows[1]["recall"]) == pytest.approx(2 / 3)


def test_out_and_rows_files_are_written(files: Path, capsys) -> None:
    out, rows = files / "report" / "summary.json", files / "rows.csv"
    assert (
        evaluate_main(acl_args(files, "--format", "json", "--out", str(out), "--rows", str(rows)))
        == 0
    )
    assert capsys.readouterr().out == ""
    assert json.loads(out.read_text())["pairs"] == 6
    assert rows.read_text().splitlines()[0].startswith("principal,query_id,n_relevant")


def test_help_states_the_tie_rule(capsys) -> None:
    assert evaluate_main(["--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "equal scores by doc id ascending" in text and "comp_sim_docno" in text
    assert "deny by default" in text


def test_fuse_writes_a_run_that_evaluate_reads(files: Path, capsys) -> None:
    fused, contrib = files / "fused.trec", files / "contrib.tsv"
    assert (
        fuse_main(
            [
                str(files / "run.trec"),
                str(files / "run2.trec"),
                "--out",
                str(fused),
                "--weights",
                "1,0.5",
                "--limit",
                "3",
                "--contributions",
                str(contrib),
            ]
        )
        == 0
    )
    assert "fused 2 runs: 2 queries" in capsys.readouterr().err
    run = load_run(fused)
    assert run.name == "rrf"
    # a: 1/61 + 0.5/62; b: 1/63 + 0.5/61 — a first
    assert run.ranking("q1") == ["a", "b", "x"]
    assert contrib.read_text().splitlines()[:3] == [
        "query_id\tdoc_id\tsource\trank",
        f"q1\ta\t{files / 'run.trec'}\t1",
        f"q1\ta\t{files / 'run2.trec'}\t2",
    ]
    assert evaluate_main(["--run", str(fused), "--qrels", str(files / "qrels.txt")]) == 0
    assert "run: rrf" in capsys.readouterr().out


@pytest.mark.long  # a whole process with MLflow or DVC: make test-faults
def test_mlflow_logs_the_summary_as_a_run(files: Path, monkeypatch, capsys) -> None:
    uri = f"sqlite:///{files / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    assert evaluate_main(acl_args(files, "--k", "1,2", "--mlflow")) == 0
    assert f"to {uri}" in capsys.readouterr().err
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)  # not the global URI: later tests in this process
    experiment = client.get_experiment_by_name("arecall-evaluate")
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.data.metrics["arecall_pre_at_1"] == pytest.approx(5 / 6)
    assert "gap_p_value_at_2" in run.data.metrics
    assert run.data.params["placement"] == "post"


@pytest.mark.parametrize("to_file", [True, False])
def test_an_unreachable_tracking_server_says_where_the_report_is(
    files: Path, monkeypatch, capsys, to_file: bool
) -> None:
    """The report is written before logging; the one line says so, as ``arecall run``'s does."""
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        uri = f"http://127.0.0.1:{s.getsockname()[1]}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    out = files / "summary.json"
    extra = ["--format", "json", *(["--out", str(out)] if to_file else [])]
    assert evaluate_main(acl_args(files, "--mlflow", *extra)) == 2
    captured = capsys.readouterr()
    where = str(out) if to_file else "stdout"
    assert captured.err.splitlines() == [
        f"arecall: error: tracking server {uri} unreachable; the report is in {where}; "
        "nothing was logged (run again with --mlflow to log it)"
    ]
    report = out.read_text() if to_file else captured.out
    assert json.loads(report)["pairs"] > 0


BAD = {
    "run: wrong column count": (
        "run.trec",
        RUN.replace("q2 Q0 c 1 0.5 sys", "q2 Q0 c 1 0.5"),
        "run.trec: line 4: expected 6 fields",
    ),
    "run: non-numeric score": (
        "run.trec",
        RUN.replace("0.8", "high"),
        "run.trec: line 2: score 'high' is not a number",
    ),
    "run: non-numeric rank": (
        "run.trec",
        RUN.replace("x 2", "x two"),
        "run.trec: line 2: rank 'two' is not an integer",
    ),
    "run: NaN score": ("run.trec", RUN.replace("0.7", "NaN"), "run.trec: line 3: score is nan"),
    "run: duplicate pair": (
        "run.trec",
        RUN + "q1 Q0 x 9 0.1 sys\n",
        "run.trec: line 6: duplicate result: document 'x'",
    ),
    "run: empty": ("run.trec", "", "run.trec: line 1: no results"),
    "qrels: non-numeric relevance": (
        "qrels.txt",
        QRELS.replace("q2 0 d 1", "q2 0 d yes"),
        "qrels.txt: line 4: relevance 'yes' is not an integer",
    ),
    "qrels: duplicate pair": (
        "qrels.txt",
        QRELS + "q1 0 a 2\n",
        "qrels.txt: line 6: duplicate judgment",
    ),
    "qrels: empty": ("qrels.txt", "\n", "qrels.txt: line 1: no judgments"),
    "acl: unknown principal": (
        "acl.tsv",
        ACL + "c\tmallory\n",
        "acl.tsv: line 5: 'mallory' is neither a listed principal",
    ),
    "acl: wrong column count": (
        "acl.tsv",
        ACL + "c\talice\textra\n",
        "acl.tsv: line 5: expected 2 tab-separated fields",
    ),
    "acl: empty": ("acl.tsv", "", "acl.tsv: line 1: the file is empty"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_exit_2_and_nothing_written(files: Path, capsys, case) -> None:
    name, content, message = BAD[case]
    (files / name).write_text(content)
    out, rows = files / "out.json", files / "rows.csv"
    code = evaluate_main(
        acl_args(files, "--principals", "alice,bob", "--out", str(out), "--rows", str(rows))
    )
    captured = capsys.readouterr()
    assert code == 2
    lines = captured.err.splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err
    assert lines[0].startswith("arecall: error: ") and message in lines[0], lines[0]
    assert str(files) in lines[0]  # the file is named by its path
    assert not out.exists() and not rows.exists()
    assert captured.out == ""


@pytest.mark.long  # distributed tries the address for its whole 30 s connect timeout
def test_an_unreachable_scheduler_is_named_by_its_flag(files: Path, capsys) -> None:
    """The command line says ``--scheduler``, as the config says evaluation.engine.scheduler."""
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{s.getsockname()[1]}"
    argv = acl_args(files, "--engine", "dask", "--scheduler", address)
    assert evaluate_main(argv) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(
        f"arecall: error: --scheduler: cannot reach the Dask scheduler at {address}"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--k", "0,5"], "--k: '0' is not a positive integer"),
        (["--resamples", "2"], "--resamples: must be at least 40 for a 95% interval"),
        (["--principals", "alice"], "--principals needs --acl"),
        (["--placement", "pre"], "--placement needs --acl"),
        (["--format", "xml"], "invalid choice: 'xml'"),
    ],
)
def test_bad_options_are_one_line_too(files: Path, capsys, argv, message) -> None:
    assert evaluate_main(args(files, *argv)) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and message in err[0]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--smoothing", "0.5"], "--smoothing must be at least 1"),
        (["--weights", "1"], "1 weights for 2 runs"),
        (["--weights", "1,-2"], "negative"),
        (["--limit", "0"], "--limit must be a positive integer"),
    ],
)
def test_bad_fuse_options_are_errors_and_write_nothing(files: Path, capsys, argv, message):
    fused = files / "fused.trec"
    code = fuse_main(
        [str(files / "run.trec"), str(files / "run2.trec"), "--out", str(fused), *argv]
    )
    err = capsys.readouterr().err.splitlines()
    assert code == 2 and len(err) == 1 and message in err[0]
    assert not fused.exists()


def test_fusing_a_malformed_run_names_its_file_and_line(files: Path, capsys) -> None:
    (files / "run2.trec").write_text(RUN2 + "q9 Q0 z 1 nan bm25\n")
    assert (
        fuse_main(
            [str(files / "run.trec"), str(files / "run2.trec"), "--out", str(files / "fused.trec")]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert f"{files / 'run2.trec'}: line 5: score is nan" in err
    assert not (files / "fused.trec").exists()
