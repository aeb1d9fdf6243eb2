"""The default table (verity's settings on faiss) has the shape issue 4 requires, reproducibly."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from arecall.vector.measurement import (
    TABLE_COLUMNS,
    deterministic_columns,
    experiment,
    plot_experiment,
    render_markdown,
)


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return experiment()


def rows(df: pd.DataFrame, mode: str) -> pd.DataFrame:
    return df[df["mode"] == mode].set_index("selectivity")


def test_columns_and_rows(table: pd.DataFrame) -> None:
    assert tuple(table.columns) == TABLE_COLUMNS
    assert table.attrs["k"] == 10
    assert table["matching"].unique().tolist() == [21, 79, 228, 611, 2000]
    assert table["mode"].tolist()[:4] == ["post", "pushdown", "pre", "auto"]
    assert len(table) == 20


def test_post_under_returns_below_full_selectivity(table: pd.DataFrame) -> None:
    post = rows(table, "post")
    assert (post.loc[[0.01, 0.03, 0.10, 0.30], "returned"] < 10).all()
    assert (post.loc[[0.01, 0.03, 0.10, 0.30], "short"] == 1.0).all()
    # Same order of magnitude as verity's own graph (0.12, 0.36, 1.10, 3.14).
    assert post["returned"].round(2).tolist() == [0.10, 0.38, 1.14, 3.18, 10.00]
    assert post.loc[1.0, "short"] == 0.0


def test_pre_is_perfect_everywhere(table: pd.DataFrame) -> None:
    pre = rows(table, "pre")
    assert (pre["returned"] == 10).all() and (pre["recall"] == 1.0).all()
    assert (pre["short"] == 0).all() and (pre["arecall"] == 1.0).all()


def test_auto_returns_k_with_target_recall(table: pd.DataFrame) -> None:
    auto = rows(table, "auto")
    assert (auto["returned"] == 10).all()
    assert (auto["recall"] >= 0.95).all()
    assert (auto["short"] == 0).all()


def test_pushdown_starves_only_at_one_percent(table: pd.DataFrame) -> None:
    push = rows(table, "pushdown")
    assert push.loc[0.01, "returned"] == pytest.approx(9.54)
    assert push.loc[0.01, "recall"] == pytest.approx(0.658)
    assert (push.loc[[0.03, 0.10, 0.30, 1.0], "returned"] == 10).all()


def test_arecall_and_unusable(table: pd.DataFrame) -> None:
    assert (table["arecall"] == table["recall"]).all()  # R_A = the oracle's top-k
    u = table.groupby("selectivity")["u_at_k"].nunique()
    assert (u == 1).all()  # U@K belongs to the principal, not the placement
    post = rows(table, "post")
    # post keeps about the authorized share of its top-k
    assert (abs(post["returned"] / 10 - (1 - post["u_at_k"])) < 0.05).all()


def test_markdown_layout(table: pd.DataFrame) -> None:
    md = render_markdown(table)
    lines = md.splitlines()
    assert lines[0].startswith("| selectivity | matching | mode | returned / 10 | recall | short")
    assert "| 1% | 21 | `post` | 0.10 | 0.010 | 100% ⚠️ |" in md
    assert "| 100% | 2000 | `pre` | 10.00 | 1.000 | 0% | 1.000 | 0.000 | scan |" in md
    assert "QPS" not in md and "QPS" in render_markdown(table, include_qps=True)
    assert len(lines) == 22


def test_table_and_plot_are_byte_identical_across_runs(table: pd.DataFrame, tmp_path: Path) -> None:
    again = experiment()
    pd.testing.assert_frame_equal(deterministic_columns(table), deterministic_columns(again))
    assert render_markdown(table) == render_markdown(again)
    assert "qps" not in deterministic_columns(table).columns
    plot_experiment(table, tmp_path / "a.png")
    plot_experiment(again, tmp_path / "b.png")
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "b.png").read_bytes()
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # atomic: no temp left


def test_exact_index_and_small_config() -> None:
    df = experiment(n_docs=400, dims=8, n_queries=6, selectivities=[0.01, 0.5], index="exact")
    assert df["selectivity"].unique().tolist() == [0.5]  # 1% of 400 < k: skipped, as verity does
    assert (df[df["mode"] != "post"]["recall"] == 1.0).all()
    assert set(df["plan"]) == {"scan"}
