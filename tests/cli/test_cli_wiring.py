"""The `arecall` command reaches every subcommand, and user errors stay one line.

One test runs the installed console script (entry point, exit status and stderr of a real
process); the others call the same `main` in-process through the `arecall` fixture.
"""

from __future__ import annotations

import json
import subprocess

from tests.helpers import VENV_BIN


def test_fuse_then_evaluate_round_trips(tmp_path, arecall):
    a, b, qrels = tmp_path / "a.run", tmp_path / "b.run", tmp_path / "qrels"
    a.write_text("q1 Q0 d1 1 3.0 A\nq1 Q0 d2 2 2.0 A\nq1 Q0 d3 3 1.0 A\n")
    b.write_text("q1 Q0 d3 1 9.0 B\nq1 Q0 d1 2 8.0 B\n")
    qrels.write_text("q1 0 d3 1\nq1 0 d2 1\n")
    fused = tmp_path / "fused.run"
    proc = arecall("fuse", str(a), str(b), "--out", str(fused))
    assert proc.returncode == 0, proc.stderr
    # RRF (k = 60): d1 = 1/61 + 1/62 > d3 = 1/63 + 1/61 > d2 = 1/62
    assert [line.split()[2] for line in fused.read_text().splitlines()] == ["d1", "d3", "d2"]
    proc = arecall(
        "evaluate", "--run", str(fused), "--qrels", str(qrels), "--k", "1,3", "--format", "json"
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert (report["k"]["1"]["recall"], report["k"]["3"]["recall"]) == (0.0, 1.0)


def test_the_console_script_turns_a_malformed_run_into_one_line_and_exit_two(tmp_path):
    run, qrels = tmp_path / "r.run", tmp_path / "qrels"
    run.write_text("q1 Q0 d1 1 3.0 A\nq1 Q0 d2 two 2.0 A\n")
    qrels.write_text("q1 0 d1 1\n")
    proc = subprocess.run(
        [str(VENV_BIN / "arecall"), "evaluate", "--run", str(run), "--qrels", str(qrels)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "r.run" in lines[0] and "line 2" in lines[0], lines


def test_unknown_command_and_bare_invocation_fail_with_usage(arecall):
    proc = arecall("frobnicate")
    assert proc.returncode == 2 and "unknown command 'frobnicate'" in proc.stderr
    proc = arecall()
    assert proc.returncode == 2 and proc.stdout.startswith("usage: arecall")
