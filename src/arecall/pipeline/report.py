"""The seed's two tables, as Markdown, and the ARecall@K-per-placement curve.

Rendering is a pure function of ``metrics.json`` (and the config for the caption), so the
tables in reports/ and in the README are the same bytes from the same numbers; their columns are
those of `arecall.core.tables`, whose frames MLflow holds. Column headers are the registry's
(`arecall.core.measures.PIPELINE`); its measures follow the seed's ``vacuous`` convention
(Recall and ARecall are 1 where nothing (authorized) is relevant).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pandas as pd

from arecall.core.measures import PIPELINE, shown
from arecall.core.tables import MAIN, RESTRICTED

if TYPE_CHECKING:
    from arecall.pipeline.schema import ExperimentConfig

__all__ = ["curve_frame", "render_tables"]


def _interval(row: Mapping[str, Any], key: str) -> str:
    sig = row.get("significance", {}).get(key)
    if not sig:
        return "–"
    return f"[{sig['low']:+.3f}, {sig['high']:+.3f}]"


def _p(row: Mapping[str, Any], key: str) -> str:
    sig = row.get("significance", {}).get(key)
    return "–" if not sig else f"{sig['p_value']:.3g}"


def _markdown_header(names: tuple[str, ...], align: str) -> list[str]:
    """The header and alignment rows of a Markdown table: K, the measures, the gap's CI and p."""
    headings = [PIPELINE[name].heading() for name in names]
    at = headings.index(PIPELINE["gap"].heading()) + 1
    headings[at:at] = ["gap 95% CI", "p"]
    return ["| K | " + " | ".join(headings) + " |", align]


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


def render_tables(metrics: Mapping[str, Any], cfg: ExperimentConfig) -> str:
    """Markdown for the header lines and both tables.

    Examples
    --------
    >>> from arecall.pipeline.config import default_config
    >>> from arecall.pipeline.run import run_in_memory
    >>> cfg = default_config(["evaluation.proof.max_examples=5"])
    >>> text = render_tables(run_in_memory(cfg)["metrics"], cfg)
    >>> "330/480 (68.8%)" in text
    True
    """
    m = metrics
    share = m["unauthorized_relevant"] / m["total_relevant"] if m["total_relevant"] else 0.0
    first = next(iter(m["k"].values()))
    lines = [
        f"corpus `{cfg.corpus.name}` · retriever `{cfg.retriever.name}` · "
        f"profiles `{cfg.profiles.name}`: {m['datasets']} documents, {m['queries']} queries, "
        f"{m['profiles']} principals ({m['pairs']} query-principal pairs)",
        "",
        f"- relevant-but-unauthorized pairs: {m['unauthorized_relevant']}/{m['total_relevant']} "
        f"({share:.1%})",
        f"- MRR (authorization-blind): {m['mrr']:.3f}",
        "",
        *_markdown_header(
            (*MAIN, "returned_post"), "|--:|--:|--:|--:|--:|:-:|--:|--:|--:|--:|--:|"
        ),
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
        *_markdown_header(RESTRICTED, "|--:|--:|--:|--:|:-:|--:|"),
    ]
    for k, v in m["k"].items():
        lines.append(
            f"| {k} | {shown(v['arecall_post_nonempty'])} | {shown(v['arecall_pre_nonempty'])} "
            f"| {shown(v['gap_nonempty'], '+.3f')} | {_interval(v, 'gap_nonempty')} "
            f"| {_p(v, 'gap_nonempty')} |"
        )
    return "\n".join(lines) + "\n"
