"""The benchmark harness runs end to end at a toy size and checks its own targets."""

from __future__ import annotations

import importlib.util
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arecall.vector.bench import render_benchmark, run_benchmark
from arecall.vector.generator import generate_lowrank
from arecall.vector.index import Hits, VectorIndex, build_index
from arecall.vector.placement import auto, calibrate_auto

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


def _load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(
        f"{name}_test", ROOT / "benchmarks" / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0, 1), st.floats(-10, 10, allow_subnormal=False)),
        min_size=5,
        max_size=300,
    )
)
def test_the_strata_split_the_recall_spread_into_within_and_between_them(
    pairs: list[tuple[float, float]],
) -> None:
    # The claim the planner page rests on: σ² = within² + between² (population spreads), so
    # the spread within the strata is never more than the whole.
    bench = _load("bench_strata_spread")
    recall, kth = (np.array(v) for v in zip(*pairs, strict=True))
    out = bench.strata_spread(recall, kth, 0.05, 0.01)
    assert out["sigma"] ** 2 == pytest.approx(out["within"] ** 2 + out["between"] ** 2, abs=1e-9)
    assert out["within"] <= out["sigma"] + 1e-9
    assert sum(share for share, _, _ in out["strata"]) == pytest.approx(1.0)
    mean = sum(share * m for share, m, _ in out["strata"])
    assert mean == pytest.approx(float(recall.mean()), abs=1e-9)


def test_the_strata_spread_benchmark_measures_a_walked_cell_at_a_toy_size(capsys) -> None:
    bench = _load("bench_strata_spread")
    argv = [
        "--n",
        "3000",
        "--corpora",
        "lowrank-uniform",
        "--selectivities",
        "1",
        "--calibration-queries",
        "100",
        "--spread-queries",
        "300",
        "--graph-cost",
        "1",  # walks priced at one scan distance: at 3,000 documents auto scans otherwise
    ]
    assert bench.main(argv) == 0
    rows = [r for r in capsys.readouterr().out.splitlines() if r.startswith("| lowrank-uniform")]
    assert len(rows) == 1
    cells = [c.strip() for c in rows[0].split("|")[1:-1]]
    sigma, within, between = (float(c) for c in cells[4:7])
    assert within <= sigma and sigma**2 == pytest.approx(within**2 + between**2, abs=2e-4)


def test_the_direct_plan_benchmark_refuses_lists_no_deeper_in_one_line(capsys) -> None:
    bench = _load("bench_direct_plan")
    with pytest.raises(SystemExit) as stopped:
        bench.main(["--deeper-lists", "1.5,0.5"])
    assert stopped.value.code == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .splitlines()[-1]
        .endswith("--deeper-lists=[1.5, 0.5]: each multiple must be above 1")
    )


def test_the_bookkeeping_benchmark_splits_autos_time_beyond_its_searches_into_parts(
    capsys,
) -> None:
    bench = _load("bench_bookkeeping")
    argv = [
        "--n",
        "3000",
        "--corpora",
        "lowrank-uniform",
        "--selectivities",
        "1",
        "--calibration-queries",
        "100",
        "--graph-cost",
        "1",  # walks priced at one scan distance: at 3,000 documents auto scans otherwise
        "--min-calls",
        "2",
        "--min-time",
        "0",
        "--parts-calls",
        "3",
    ]
    assert bench.main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    header = next(r for r in out if r.startswith("| corpus"))
    rows = [r for r in out if r.startswith("| lowrank-uniform")]
    assert len(rows) == 1
    names = [c.strip() for c in header.split("|")[1:-1]]
    cells = dict(zip(names, (c.strip() for c in rows[0].split("|")[1:-1]), strict=True))
    assert cells["plan"].startswith("pushdown")
    auto, searches = float(cells["auto"]), float(cells["searches"])
    assert float(cells["bookkeeping"]) == pytest.approx(auto - searches, abs=0.011)
    # The landmark test runs inside the audit (for its deep rows, if any); a walked batch
    # is counted, audited and settled.
    audit, landmark = float(cells["audit"]), float(cells["landmark test (in the audit)"])
    assert audit > 0 and landmark <= audit
    assert float(cells["count the filter"]) > 0 and float(cells["settle"]) > 0
    # The bookkeeping alone (auto with its searches answered from a recording): no search in
    # it, so less than auto's whole call, cold or warm.
    cold, warm = float(cells["bookkeeping alone, cold"]), float(cells["alone, warm"])
    assert 0 < cold < auto and 0 < warm < auto


def test_auto_answered_from_its_recording_makes_no_search_and_refuses_a_call_that_strays(
    monkeypatch,
) -> None:
    bench = _load("bench_bookkeeping")
    data = generate_lowrank(3000, 16, 40, seed=3)
    index = build_index(data.vectors)
    planner = calibrate_auto(index, 10, queries=data.calibration_queries(100), graph_cost=1.0)
    mask = np.arange(3000) % 2 == 0
    call = partial(auto, index, data.queries, 10, mask, planner)
    hits, plan = call()
    again = bench.answered_from_recording(index, call)
    searched: list[str] = []
    for name in ("_walk", "_scan_ids", "_scan_masked"):  # where every search goes through
        monkeypatch.setattr(VectorIndex, name, _counted(searched, getattr(VectorIndex, name)))
    got, got_plan = again()
    assert not searched, searched  # every answer came from the recording
    assert str(got_plan) == str(plan) and np.array_equal(got.ids, hits.ids)
    # A call that takes another path than its recording's (here: says another plan) is refused.
    said = iter(range(3))

    def strays() -> tuple[Hits, str]:
        return index._walk(data.queries, 10, 16), f"call {next(said)}"

    with pytest.raises(RuntimeError, match="differs"):
        bench.answered_from_recording(index, strays)


def _counted(calls: list[str], method: Any) -> Any:
    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(method.__name__)
        return method(*args, **kwargs)

    return counted


def test_the_bookkeeping_benchmark_refuses_no_parts_calls_in_one_line(capsys) -> None:
    bench = _load("bench_bookkeeping")
    with pytest.raises(SystemExit) as stopped:
        bench.main(["--parts-calls", "0"])
    assert stopped.value.code == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .splitlines()[-1]
        .endswith("--parts-calls=0: must be at least 1")
    )
