"""The benchmark harness runs end to end at a toy size and checks its own targets."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from arecall.vector.bench import render_benchmark, run_benchmark

ROOT = Path(__file__).resolve().parents[2]


def test_benchmark_rows_and_targets() -> None:
    result = run_benchmark(
        n_docs=3000,
        dims=16,
        n_queries=30,
        selectivities=[0.001, 0.1, 1.0],
        threads=None,
        dataset="lowrank",
        repeats=1,
    )
    table = result.table
    # 0.1% of 3,000 is fewer than k documents: skipped.
    assert sorted(table["selectivity"].unique()) == [0.1, 1.0]
    assert table["mode"].tolist()[:4] == ["post", "pushdown", "auto", "pre"]
    auto = table[table["mode"] == "auto"]
    assert (auto["recall"] >= 0.95).all() and (auto["returned"] == 10).all()
    assert (table[table["mode"] == "pre"]["speedup"] == 1.0).all()
    text = render_benchmark(result)
    assert "auto recall@10 ≥ 0.95 at every selectivity: met" in text
    assert "auto QPS ≥ 10× exact pre at selectivity ≥ 10%" in text


def test_cli_reports_bad_input_in_one_line(capsys) -> None:
    spec = importlib.util.spec_from_file_location(
        "bench_vector", ROOT / "benchmarks" / "bench_vector.py"
    )
    bench_vector = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench_vector)
    argv = ["--n-docs", "500", "--selectivities", "0.5,2", "--data", "verity"]
    assert bench_vector.main(argv) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "bench_vector: selectivities=2.0: must be in (0, 1] (a fraction of the corpus)"
    ]


def test_scan_benchmark_runs_and_its_two_scans_agree(tmp_path, monkeypatch) -> None:
    # The script stops unless the threshold and argpartition scans return the same ids and
    # scores; 30,000 documents reach both top-k paths (0.1% is 30 columns: argpartition).
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location(
        "bench_scan", ROOT / "benchmarks" / "bench_scan.py"
    )
    assert spec is not None and spec.loader is not None
    bench_scan = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench_scan)
    out = tmp_path / "scan.md"
    argv = ["--n", "30000", "--queries", "5", "--shares", "0.001,0.3,1", "--min-time", "0.01"]
    assert bench_scan.main([*argv, "--min-calls", "1", "--output", str(out)]) == 0
    text = out.read_text()
    assert "| 0.1% | " in text and "| 30.0% | " in text and "| 100.0% | 30,000 |" in text
