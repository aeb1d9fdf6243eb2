"""The comparison drawn for the user: one Markdown table and one figure.

The table has one block of rows per K and one row per run in each block: the runs' config
choices side by side (only the keys that differ, and always ``retriever.name``), then Recall,
ARecall post and pre, the gap and the restricted gap with its confidence interval. In each K
block the best value of each column is bold: the highest Recall and ARecall, the smallest gap
(least lost by filtering after truncation). It is padded to read as well in a terminal as
rendered, and has at most `MAX_COLUMNS` columns.

The figure draws ARecall@K pre (filter, then top K) and post (top K, then filter) against K, one
line per run in both panels, with the run's Recall@K dashed in the same colour.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from arecall.compare.points import Point, split_overrides

__all__ = ["MAX_COLUMNS", "MEASURES", "differing", "figure", "table"]

#: The widest table a screen shows whole.
MAX_COLUMNS = 25
#: The headline's columns: headline.json key → header, and whether higher is better.
MEASURES: dict[str, tuple[str, bool]] = {
    "recall": ("Recall", True),
    "arecall_post": ("ARecall post", True),
    "arecall_pre": ("ARecall pre", True),
    "gap": ("gap", False),
    "gap_nonempty": ("gap R_A≠∅ [CI]", False),
}
#: Group choices, shown first (by their group's name); ``retriever.name`` always.
_GROUPS = ("corpus.name", "retriever.name", "profiles.name", "index.name")


def differing(points: Sequence[Point]) -> list[str]:
    """The config keys whose values differ between ``points`` (``retriever.name`` always),
    group choices first.

    Examples
    --------
    >>> a = Point("a", {"retriever.name": "tfidf", "corpus.name": "x", "evaluation.ks": "[1]"})
    >>> b = Point("b", {"retriever.name": "tfidf", "corpus.name": "y", "evaluation.ks": "[1]"})
    >>> differing([a, b])
    ['corpus.name', 'retriever.name']
    >>> c = Point("c", {"retriever.name": "bm25", "retriever.k1": "1.5", "corpus.name": "x",
    ...                 "evaluation.ks": "[1]"})
    >>> differing([a, c])  # k1 is bm25's own: the retriever column says it
    ['retriever.name']
    """
    keys: dict[str, None] = {}
    for point in points:
        keys.update(dict.fromkeys(point.choices))
    varied = [k for k in keys if len({p.choices.get(k, "–") for p in points}) > 1]
    # an option's own keys (bm25's k1) differ because the option does: the option says it
    implied = {
        k
        for k in varied
        if f"{k.split('.')[0]}.name" in varied and any(k not in p.choices for p in points)
    }
    ordered = [k for k in _GROUPS if k in varied or k == "retriever.name"]
    return ordered + [k for k in varied if k not in ordered and k not in implied]


def _header(key: str) -> str:
    return key.removesuffix(".name") if key in _GROUPS else key


def _ks(points: Sequence[Point]) -> list[str]:
    ks = {k for p in points for k in (p.headline.get("k") or {})}
    return sorted(ks, key=int)


def _confidence(points: Sequence[Point]) -> str:
    """``95% `` when every run used that confidence level, else nothing."""
    levels = {p.config.get("evaluation.significance.confidence") for p in points}
    if len(levels) == 1 and None not in levels:
        (level,) = levels
        try:
            return f"{float(str(level)):.0%} "
        except ValueError:
            pass
    return ""


def _cell(key: str, row: Mapping[str, Any], ci: bool = True) -> str:
    value = row.get(key)
    if value is None:
        return "–"
    if key.startswith("gap"):
        text = f"{value:+.3f}"
        low, high = row.get(f"{key}_low"), row.get(f"{key}_high")
        if ci and low is not None and high is not None:
            text += f" [{low:+.3f}, {high:+.3f}]"
        return text
    return f"{value:.3f}"


def _best(values: Sequence[float | None], higher: bool) -> set[int]:
    """Rows holding a column's best value (none when every row has the same value)."""
    known = [v for v in values if v is not None]
    if len(set(known)) < 2:
        return set()
    best = max(known) if higher else min(known)
    return {i for i, v in enumerate(values) if v == best}


#: The measures' short headers, for a table drawn to fit a terminal.
_SHORT = {"arecall_post": "post", "arecall_pre": "pre", "gap_nonempty": "gap≠∅ [CI]"}
#: What each narrower layout gives up, tried in turn until the table fits: the long headers,
#: the all-pairs gap (it is pre − post), the restricted gap's interval (comparison.md keeps
#: it), then the choice columns every row's label already states (a sweep point's name).
_NARROWER = (
    "Narrowed to the terminal: post and pre are ARecall@K's, gap≠∅ the gap over R_A≠∅.",
    "The all-pairs gap (pre − post) is left out.",
    "The gap's confidence interval is in comparison.md (--out DIR).",
    "Choices that every row shares, or that each label states, are not repeated.",
)


def table(points: Sequence[Point], *, what: str = "run", width: int | None = None) -> str:
    """The comparison as one Markdown table, a legend, and any keys left out.

    ``width``: the terminal's columns. A table wider than that is drawn narrower, one step at
    a time (`_NARROWER`), and its legend says what each step gave up; every layout keeps
    every run, K, ARecall@K post and pre and the restricted gap.

    Examples
    --------
    >>> a = Point("a", {"retriever.name": "tfidf"}, {"k": {"5": {"recall": 0.8,
    ...     "arecall_post": 0.5, "arecall_pre": 0.9, "gap": 0.4, "gap_nonempty": 0.4,
    ...     "gap_nonempty_low": 0.3, "gap_nonempty_high": 0.5}}})
    >>> b = Point("b", {"retriever.name": "bm25"}, {"k": {"5": {"recall": 0.8,
    ...     "arecall_post": 0.7, "arecall_pre": 0.9, "gap": 0.2, "gap_nonempty": 0.2,
    ...     "gap_nonempty_low": 0.1, "gap_nonempty_high": 0.3}}})
    >>> print(table([a, b]).split("\\n\\n")[0])  # doctest: +NORMALIZE_WHITESPACE
    | run | retriever |   K | Recall | ARecall post | ARecall pre |        gap |              gap R_A≠∅ [CI] |
    |:----|:----------|----:|-------:|-------------:|------------:|-----------:|----------------------------:|
    | a   | tfidf     |   5 |  0.800 |        0.500 |       0.900 |     +0.400 |     +0.400 [+0.300, +0.500] |
    | b   | bm25      |   5 |  0.800 |    **0.700** |       0.900 | **+0.200** | **+0.200 [+0.100, +0.300]** |
    >>> print(table([a, b], width=70).split("\\n\\n")[0])  # doctest: +NORMALIZE_WHITESPACE
    | run | retriever |   K | Recall |      post |   pre |      gap≠∅ |
    |:----|:----------|----:|-------:|----------:|------:|-----------:|
    | a   | tfidf     |   5 |  0.800 |     0.500 | 0.900 |     +0.400 |
    | b   | bm25      |   5 |  0.800 | **0.700** | 0.900 | **+0.200** |
    """  # noqa: E501 (a doctest's expected table)
    keys = differing(points)
    room = MAX_COLUMNS - 2 - len(MEASURES)  # the run, K and the measures
    shown, left = keys[:room], keys[room:]
    lines = _lines(points, what, shown, list(MEASURES), {}, ci=True)
    given_up: list[str] = []
    for step, note in enumerate(_NARROWER):
        if width is None or max(len(line) for line in lines) <= width:
            break
        measures = [m for m in MEASURES if not (step >= 1 and m == "gap")]
        short = {**_SHORT, "gap_nonempty": "gap≠∅"} if step >= 2 else _SHORT
        if step >= 3:
            shown = [k for k in shown if not _stated(points, k)]
        lines = _lines(points, what, shown, measures, short, ci=step < 2)
        given_up.append(note)
    legend = textwrap.fill(
        "Recall@K is authorization-blind; ARecall@K post filters after truncating to K, pre "
        "before; gap = pre − post over all query-principal pairs, and over the pairs with "
        f"anything relevant authorized (R_A≠∅) with its {_confidence(points)}confidence "
        "interval. **Bold**: the best in its K block (highest Recall and ARecall, smallest "
        "gap). " + " ".join(given_up),
        width=min(100, width or 100),
    )
    text = "\n".join(lines) + "\n\n" + legend + "\n"
    if left:
        text += f"\nAlso differing (not shown): {', '.join(left)}.\n"
    return text


def _stated(points: Sequence[Point], key: str) -> bool:
    """Whether a choice column tells nothing the rest does not: ``key`` has one value in all
    ``points`` (``retriever.name`` is a column even then), or each label says it
    (``profiles=corpus``, a sweep point's name).

    Examples
    --------
    >>> points = [Point("profiles=corpus", {"profiles.name": "corpus", "retriever.name": "x"}),
    ...           Point("profiles=random", {"profiles.name": "random", "retriever.name": "x"})]
    >>> _stated(points, "profiles.name"), _stated(points, "retriever.name")
    (True, True)
    >>> _stated([Point("a", {"profiles.name": "corpus"}), Point("b", {})], "profiles.name")
    False
    """
    if len({p.choices.get(key, "–") for p in points}) == 1:
        return True
    short = key.removesuffix(".name")
    return all(
        {f"{key}={p.choices.get(key, '–')}", f"{short}={p.choices.get(key, '–')}"}
        & set(split_overrides(p.label))
        for p in points
    )


def _lines(
    points: Sequence[Point],
    what: str,
    shown: Sequence[str],
    measures: Sequence[str],
    short: Mapping[str, str],
    *,
    ci: bool,
) -> list[str]:
    """The table's lines: header, rule and one row per run in each K block."""
    headers = [short.get(key, MEASURES[key][0]) for key in measures]
    header = [what, *(_header(k) for k in shown), "K", *headers]
    rows: list[list[str]] = []
    for k in _ks(points):
        per_run = [p.headline["k"].get(k, {}) for p in points]
        marked = {
            key: _best([values.get(key) for values in per_run], MEASURES[key][1])
            for key in measures
        }
        for i, (point, values) in enumerate(zip(points, per_run, strict=True)):
            cells = [point.label, *(point.choices.get(key, "–") for key in shown), k]
            for key in measures:
                text = _cell(key, values, ci)
                cells.append(f"**{text}**" if i in marked[key] else text)
            rows.append(cells)
    right = len(header) - len(measures) - 1  # K and the numbers align right
    widths = [max(len(c) for c in column) for column in zip(header, *rows, strict=True)]
    widths = [max(w, 3) for w in widths]

    def line(cells: Sequence[str]) -> str:
        padded = [
            c.rjust(w) if i >= right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "| " + " | ".join(padded) + " |"

    rule = (
        "|"
        + "|".join(
            (f"{'-' * (w + 1)}:" if i >= right else f":{'-' * (w + 1)}")
            for i, w in enumerate(widths)
        )
        + "|"
    )
    return [line(header), rule, *(line(r) for r in rows)]


def _label(point: Point, keys: Sequence[str]) -> str:
    """A run's name in the figure: with its differing choices when its name does not say them."""
    choices = ", ".join(f"{_header(k)}={point.choices.get(k, '–')}" for k in keys)
    if not choices or all(point.choices.get(k, "–") in point.label for k in keys):
        return point.label
    return f"{point.label} ({choices})"


def figure(points: Sequence[Point], path: str | Path) -> None:
    """ARecall@K pre and post against K, one line per run; each run's Recall@K dashed.

    Drawn on matplotlib's Agg canvas (no pyplot, no global backend); the PNG carries no
    software tag, so equal comparisons give equal bytes.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    keys = [k for k in differing(points) if len({p.choices.get(k) for p in points}) > 1]
    fig = Figure(figsize=(10, 4.4), dpi=100)
    FigureCanvasAgg(fig)
    panels = fig.subplots(1, 2, sharey=True)
    colours = [f"C{i % 10}" for i in range(len(points))]
    markers = "osD^v<>ph*"
    for ax, key, title in (
        (panels[0], "arecall_pre", "ARecall@K, pre (filter, then top K)"),
        (panels[1], "arecall_post", "ARecall@K, post (top K, then filter)"),
    ):
        for i, point in enumerate(points):
            ks = sorted(point.headline.get("k", {}), key=int)
            rows = [point.headline["k"][k] for k in ks]
            x = [int(k) for k in ks]
            ax.plot(
                x,
                [r.get(key) for r in rows],
                color=colours[i],
                marker=markers[i % len(markers)],
                markerfacecolor="none",
                label=_label(point, keys),
            )
            ax.plot(x, [r.get("recall") for r in rows], color=colours[i], linestyle="--", alpha=0.6)
        ax.set_title(title, fontsize=10)
        ax.set_xticks([int(k) for k in _ks(points)])
        ax.set_xlabel("K")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    panels[0].set_ylabel("mean over query-principal pairs")
    handles, labels = panels[0].get_legend_handles_labels()
    style = [
        Line2D([], [], color="grey", label="ARecall@K"),
        Line2D([], [], color="grey", linestyle="--", alpha=0.6, label="Recall@K (blind)"),
    ]
    fig.legend(
        [*handles, *style],
        [*labels, "ARecall@K", "Recall@K (blind)"],
        loc="lower center",
        ncol=min(4, len(handles) + 2),
        fontsize=8,
        frameon=False,
    )
    rows_of_legend = -(-(len(handles) + 2) // min(4, len(handles) + 2))
    fig.tight_layout(rect=(0, 0.06 * rows_of_legend + 0.02, 1, 1))
    fig.savefig(path, format="png", metadata={"Software": None})
