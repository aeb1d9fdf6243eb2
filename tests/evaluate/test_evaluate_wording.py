"""What `arecall evaluate` says about its inputs reads right: counts agree in number, and the
help names every qrels format the reader takes."""

from __future__ import annotations

from pathlib import Path


def test_one_query_one_principal_is_one_pair_not_1_pairs(tmp_path: Path, arecall):
    (tmp_path / "r.run").write_text("q1 Q0 d1 1 2.0 x\nq1 Q0 d2 2 1.0 x\n")
    (tmp_path / "q.qrels").write_text("q1 0 d2 1\n")
    (tmp_path / "acl.tsv").write_text("d1\talice\n")
    out = arecall(
        "evaluate",
        "--run",
        str(tmp_path / "r.run"),
        "--qrels",
        str(tmp_path / "q.qrels"),
        "--acl",
        str(tmp_path / "acl.tsv"),
        "--resamples",
        "199",
    )
    assert out.returncode == 0, out.stderr
    assert "authorized view: 1 principal × 1 query = 1 pair; placement post; " in out.stdout
    assert "1 pair with nothing relevant authorized scores ARecall 1" in out.stdout
    assert "1 pairs" not in out.stdout and "1 principals" not in out.stdout


def test_more_than_one_keeps_the_plural(tmp_path: Path, arecall):
    (tmp_path / "r.run").write_text("q1 Q0 d1 1 2.0 x\nq2 Q0 d2 1 1.0 x\n")
    (tmp_path / "q.qrels").write_text("q1 0 d1 1\nq2 0 d2 1\n")
    (tmp_path / "acl.tsv").write_text("d1\talice\nd2\tbob\n")
    out = arecall(
        "evaluate",
        "--run",
        str(tmp_path / "r.run"),
        "--qrels",
        str(tmp_path / "q.qrels"),
        "--acl",
        str(tmp_path / "acl.tsv"),
        "--resamples",
        "199",
    )
    assert "authorized view: 2 principals × 2 queries = 4 pairs;" in out.stdout
    assert "2 pairs with nothing relevant authorized score ARecall 1" in out.stdout


def test_the_qrels_help_names_trec_and_beir(arecall):
    out = arecall("evaluate", "--help")
    assert out.returncode == 0
    options = out.stdout.split("\noptions:", 1)[1]
    qrels = " ".join(options.split("--qrels QRELS", 1)[1].split("--acl", 1)[0].split())
    assert "TREC" in qrels and "BEIR" in qrels
