"""``evaluate``'s summary as fixed-width text, in the layout of the seed's table.

Why a module: the table is what a person reads (``arecall evaluate``'s default output); its
layout changes for readers, the numbers never do, so it is kept apart from the code that
computes them (`arecall.evaluate.result.Evaluation.table` calls it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from arecall.core.measures import EVALUATE, shown
from arecall.evaluate.kernels import STANDARD_MEASURES

__all__ = ["format_table"]


def _count(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun`` in agreement.

    Examples
    --------
    >>> _count(1, "pair"), _count(2, "query", "queries")
    ('1 pair', '2 queries')
    """
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def format_table(s: Mapping[str, Any]) -> str:
    """The summary dict of `arecall.evaluate.result.Evaluation.summary` as a table."""
    lines = [
        f"run: {s['run']}  queries: {s['queries']} judged "
        f"({s['queries_without_relevant']} without relevant documents and "
        f"{s['queries_missing_from_run']} missing from the run, scored 0 as ranx/trec_eval do; "
        f"{s['run_queries_not_judged']} run queries without judgments ignored)",
        "",
        f"{'K':>5} " + " ".join(f"{EVALUATE[m].heading():>8}" for m in STANDARD_MEASURES),
    ]
    for k, r in s["k"].items():
        lines.append(f"{k:>5} " + " ".join(f"{shown(r[m], '.4f'):>8}" for m in STANDARD_MEASURES))
    if "principals" in s:
        empty = s["pairs_without_authorized_relevant"]
        lines += [
            "",
            f"authorized view: {_count(len(s['principals']), 'principal')} × "
            f"{_count(s['queries'], 'query', 'queries')} = {_count(s['pairs'], 'pair')}; "
            f"placement {s['placement']}; {_count(empty, 'pair')} with nothing relevant "
            f"authorized {'scores' if empty == 1 else 'score'} ARecall 1",
            "",
            f"{'K':>5} {'ARecall':>8} {'post':>8} {'pre':>8} {'gap':>8} {'95% CI of gap':>19} "
            f"{'p':>7} {'U@K':>7} {'deeper':>7}",
        ]
        for k, r in s["k"].items():
            lines.append(_gap_line(k, r, "", show_u=True))
        lines += [
            "",
            "excluding pairs where nothing relevant is authorized "
            f"(n={next(iter(s['k'].values()))['n_nonempty']} of {s['pairs']}):",
            f"{'K':>5} {'ARecall':>8} {'post':>8} {'pre':>8} {'gap':>8} {'95% CI of gap':>19} "
            f"{'p':>7}",
        ]
        for k, r in s["k"].items():
            lines.append(_gap_line(k, r, "_nonempty", show_u=False))
    return "\n".join(lines) + "\n"


def _gap_line(k: str, r: Mapping[str, Any], suffix: str, *, show_u: bool) -> str:
    sig = (r.get("significance") or {}).get(f"gap{suffix}")
    ci = f"[{sig['low']:+.4f}, {sig['high']:+.4f}]" if sig else "–"
    p = f"{sig['p_value']:.3g}" if sig else "–"
    gap = r.get(f"gap{suffix}")
    cells = [
        f"{k:>5}",
        f"{shown(r.get(f'arecall{suffix}'), '.4f'):>8}",
        f"{shown(r.get(f'arecall_post{suffix}'), '.4f'):>8}",
        f"{shown(r.get(f'arecall_pre{suffix}'), '.4f'):>8}",
        f"{shown(gap, '+.4f'):>8}",
        f"{ci:>19}",
        f"{p:>7}",
    ]
    if show_u:
        cells += [f"{shown(r.get('unusable'), '.4f'):>7}", f"{r.get('n_deeper', 0):>7}"]
    return " ".join(cells)
