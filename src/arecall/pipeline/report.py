"""The seed's two tables, as Markdown, and the ARecall@K-per-placement curve.

Rendering is a pure function of ``metrics.json`` (and the config for the caption), so the
tables in reports/, in MLflow and in the README are the same bytes from the same numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

__all__ = ["curve_frame", "main_table", "render_tables", "restricted_table"]


def _f(x: float | None, spec: str = ".3f") -> str:
    return "–" if x is None else format(x, spec)


def _interval(row: Mapping[str, Any], key: str) -> str:
    sig = row.get("significance", {}).get(key)
    if not sig:
        return "–"
    return f"[{sig['low']:+.3f}, {sig['high']:+.3f}]"


def _p(row: Mapping[str, Any], key: str) -> str:
    sig = row.get("significance", {}).get(key)
    return "–" if not sig else f"{sig['p_value']:.3g}"


def main_table(metrics: Mapping[str, Any]) -> pd.DataFrame:
    """Per-K means over all query-principal pairs (R_A = ∅ counts as ARecall 1, as the seed)."""
    rows = []
    for k, v in metrics["k"].items():
        rows.append(
            {
                "K": int(k),
                "Recall": v["recall"],
                "ARecall post": v["arecall_post"],
                "ARecall pre": v["arecall_pre"],
                "gap": v["gap"],
                "P@K": v["precision"],
                "nDCG": v["ndcg"],
                "unusable in top-K": v["unusable"],
                "post returned/K": v["returned_post"],
            }
        )
    return pd.DataFrame(rows)


def restricted_table(metrics: Mapping[str, Any]) -> pd.DataFrame:
    """Per-K means over pairs with R_A ≠ ∅ only (the excluded convention)."""
    rows = []
    for k, v in metrics["k"].items():
        rows.append(
            {
                "K": int(k),
                "ARecall post": v["arecall_post_nonempty"],
                "ARecall pre": v["arecall_pre_nonempty"],
                "gap": v["gap_nonempty"],
            }
        )
    return pd.DataFrame(rows)


def curve_frame(metrics: Mapping[str, Any]) -> pd.DataFrame:
    """ARecall@K per placement (the DVC plot's data), plus Recall@K for reference."""
    return pd.DataFrame(
        [
            {
                "k": int(k),
                "arecall_post": round(v["arecall_post"], 6),
                "arecall_pre": round(v["arecall_pre"], 6),
                "recall": round(v["recall"], 6),
            }
            for k, v in metrics["k"].items()
        ]
    )


def render_tables(metrics: Mapping[str, Any], cfg: Mapping[str, Any]) -> str:
    """Markdown for the header lines and both tables.

    Examples
    --------
    >>> from arecall.pipeline.run import run_in_memory
    >>> text = render_tables(run_in_memory()["metrics"], {"corpus": {"name": "discovery"},
    ...                      "retriever": {"name": "tfidf"}, "profiles": {"name": "corpus"}})
    >>> "330/480 (68.8%)" in text
    True
    """
    m = metrics
    share = m["unauthorized_relevant"] / m["total_relevant"] if m["total_relevant"] else 0.0
    first = next(iter(m["k"].values()))
    lines = [
        f"corpus `{cfg['corpus']['name']}` · retriever `{cfg['retriever']['name']}` · "
        f"profiles `{cfg['profiles']['name']}`: {m['datasets']} documents, {m['queries']} queries, "
        f"{m['profiles']} principals ({m['pairs']} query-principal pairs)",
        "",
        f"- relevant-but-unauthorized pairs: {m['unauthorized_relevant']}/{m['total_relevant']} "
        f"({share:.1%})",
        f"- MRR (authorization-blind): {m['mrr']:.3f}",
        "",
        "| K | Recall | ARecall post | ARecall pre | gap | gap 95% CI | p | P@K | nDCG "
        "| unusable in top-K | post returned/K |",
        "|--:|--:|--:|--:|--:|:-:|--:|--:|--:|--:|--:|",
    ]
    for k, v in m["k"].items():
        lines.append(
            f"| {k} | {v['recall']:.3f} | {v['arecall_post']:.3f} | {v['arecall_pre']:.3f} "
            f"| {v['gap']:+.3f} | {_interval(v, 'gap')} | {_p(v, 'gap')} "
            f"| {v['precision']:.3f} | {v['ndcg']:.3f} | {v['unusable']:.1%} "
            f"| {v['returned_post']:.3f} |"
        )
    lines += [
        "",
        f"Excluding query-principal pairs where nothing relevant is authorized "
        f"(n={first['n_nonempty']} of {m['pairs']}; {first['n_excluded']} excluded):",
        "",
        "| K | ARecall post | ARecall pre | gap | gap 95% CI | p |",
        "|--:|--:|--:|--:|:-:|--:|",
    ]
    for k, v in m["k"].items():
        lines.append(
            f"| {k} | {_f(v['arecall_post_nonempty'])} | {_f(v['arecall_pre_nonempty'])} "
            f"| {_f(v['gap_nonempty'], '+.3f')} | {_interval(v, 'gap_nonempty')} "
            f"| {_p(v, 'gap_nonempty')} |"
        )
    return "\n".join(lines) + "\n"
