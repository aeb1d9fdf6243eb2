"""The `arecall` console script reaches every subcommand, and user errors stay one line."""

from __future__ import annotations

import json
import subprocess

from conftest import VENV_BIN


def arecall(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(VENV_BIN / "arecall"), *args], capture_output=True, text=True)


def test_fuse_then_evaluate_round_trips_through_the_console_script(tmp_path):
    a, b, qrels = tmp_path / "a.run", tmp_path / "b.run", tmp_path / "qrels"
    a.write_text("q1 Q0 d1 1 3.0 A\nq1 Q0 d2 2 2.0 A\nq1 Q0 d3 3 1.0 A\n")
    b.write_text("q1 Q0 d3 1 9.0 B\nq1 Q0 d1 2 8.0 B\n")
    qrels.write_text("q1 0 d3 1\nq1 0 d2 1\n")
    fused = tmp_path / "fused.run"
    proc = arecall("fuse", str(a), str(b), "--out", str(fused))
    assert proc.returncode == 0, proc.stderr
    assert fused.read_text().splitlines()[0].split()[2] in {"d1", "d3"}
    proc = arecall(
        "evaluate", "--run", str(fused), "--qrels", str(qrels), "--k", "1,3", "--format", "json"
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert "recall" in json.dumps(report)


def test_evaluate_on_a_malformed_run_is_one_line_and_exit_two(tmp_path):
    run, qrels = tmp_path / "r.run", tmp_path / "qrels"
    run.write_text("q1 Q0 d1 1 3.0 A\nq1 Q0 d2 two 2.0 A\n")
    qrels.write_text("q1 0 d1 1\n")
    proc = arecall("evaluate", "--run", str(run), "--qrels", str(qrels))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "r.run" in lines[0] and "line 2" in lines[0], lines


def test_unknown_command_and_bare_invocation_fail_with_usage():
    assert arecall("frobnicate").returncode == 2
    proc = arecall()
    assert proc.returncode == 2 and "usage: arecall" in proc.stdout
