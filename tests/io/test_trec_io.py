"""TREC runs and qrels: the order rules, round trips, and strict errors that name file and line."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arecall.core.errors import ArecallError
from arecall.io.trec import Qrels, Run, load_qrels, load_run, save_qrels, save_run

DOC = st.sampled_from([f"d{i}" for i in range(12)] + ["D1", "é1", "a_b", "z"])
SCORE = st.sampled_from([0.0, 0.5, 1.0, 2.0, -1.25, 1e-7, 3.141592653589793])
RUN = st.dictionaries(
    st.sampled_from(["q1", "q2", "q10", "Q3"]),
    st.dictionaries(DOC, SCORE, min_size=1, max_size=8),
    min_size=1,
)


@settings(max_examples=40, deadline=None)
@given(run=RUN)
def test_run_round_trips_through_a_trec_file_with_the_same_order_and_scores(run, tmp_path_factory):
    path = tmp_path_factory.mktemp("rt") / "run.trec"
    ours = Run.from_dict(run, name="sys")
    save_run(ours, path)
    back = load_run(path)
    assert back.to_dict() == ours.to_dict()
    assert all(back.ranking(qid) == ours.ranking(qid) for qid in run)
    assert back.name == "sys"


@settings(max_examples=40, deadline=None)
@given(run=RUN)
def test_ranking_is_score_descending_with_ties_by_doc_id(run):
    ranked = Run.from_dict(run)
    reverse = Run.from_dict(run, ties="trec_eval")
    for qid, results in run.items():
        assert ranked.ranking(qid) == sorted(results, key=lambda d: (-results[d], d))
        # trec_eval's comp_sim_docno: strcmp(ptr2, ptr1), i.e. doc id descending on ties
        assert reverse.ranking(qid) == sorted(
            results, key=lambda d: (-results[d], [-b for b in d.encode()] + [1])
        )


def test_rank_column_is_ignored_and_lines_may_come_in_any_order(tmp_path: Path) -> None:
    path = tmp_path / "run.trec"
    path.write_text("q2 Q0 c 1 0.1 t\nq1 Q0 a 1 0.2 t\nq2 Q0 d 2 0.9 t\nq1 Q0 b 2 0.2 t\n")
    run = load_run(path)
    assert run.ranking("q1") == ["a", "b"]
    assert run.ranking("q2") == ["d", "c"]
    assert load_run(path, ties="trec_eval").ranking("q1") == ["b", "a"]


def test_fast_and_strict_readers_give_the_same_run(tmp_path: Path) -> None:
    lines = [f"q{i % 3} Q0 d{i} {i} {(i * 7) % 5}.5 tag" for i in range(40)]
    single = tmp_path / "single.trec"
    single.write_text("\n".join(lines) + "\n")  # single spaces: pyarrow
    mixed = tmp_path / "mixed.trec"
    mixed.write_text("\n".join(x.replace(" ", " \t ", 2) for x in lines) + "\n\n")  # Python
    tabs = tmp_path / "tabs.trec"
    tabs.write_text("\n".join(x.replace(" ", "\t") for x in lines) + "\n")
    expected = load_run(single).to_dict()
    assert load_run(mixed).to_dict() == expected
    assert load_run(tabs).to_dict() == expected


def test_qrels_keep_graded_zero_and_negative_judgments(tmp_path: Path) -> None:
    qrels = Qrels.from_dict({"q1": {"a": 3, "b": 0, "c": -1}, "q2": {"d": 1}})
    save_qrels(qrels, tmp_path / "qrels.txt")
    assert (tmp_path / "qrels.txt").read_text().splitlines()[0] == "q1 0 a 3"
    assert load_qrels(tmp_path / "qrels.txt").to_dict() == qrels.to_dict()


def test_from_rankings_keeps_the_given_order() -> None:
    run = Run.from_rankings({"q": ["z", "a", ("m", 0.0)][:2], "p": [("x", 2.0), ("y", 2.0)]})
    assert run.ranking("q") == ["z", "a"]
    assert run.ranking("p") == ["x", "y"]
    with pytest.raises(ArecallError, match="listed twice"):
        Run.from_rankings({"q": ["a", "a"]})
    with pytest.raises(ArecallError, match="higher than the one before"):
        Run.from_rankings({"q": [("a", 1.0), ("b", 2.0)]})


def test_dict_inputs_are_checked() -> None:
    with pytest.raises(ArecallError, match=r"run\['q'\]\['a'\]: score is nan"):
        Run.from_dict({"q": {"a": float("nan")}})
    with pytest.raises(ArecallError, match=r"relevance 1\.5 is not an integer"):
        Qrels.from_dict({"q": {"a": 1.5}})


def test_ids_with_whitespace_cannot_be_written(tmp_path: Path) -> None:
    with pytest.raises(ArecallError, match="document id 'a b'"):
        save_run(Run.from_dict({"q": {"a b": 1.0}}), tmp_path / "run.trec")
    assert not (tmp_path / "run.trec").exists()


RUN_ERRORS = {
    "wrong column count": ("q1 Q0 a 1 0.5 t\nq1 Q0 b 2 0.4\n", 2, "expected 6 fields"),
    "too many columns": ("q1 Q0 a 1 0.5 t\nq1 Q0 b 2 0.4 t x\n", 2, "expected 6 fields"),
    "non-numeric score": ("q1 Q0 a 1 0.5 t\nq1 Q0 b 2 high t\n", 2, "score 'high' is not"),
    "non-numeric rank": ("q1 Q0 a one 0.5 t\n", 1, "rank 'one' is not an integer"),
    "fractional rank": ("q1 Q0 a 1 0.5 t\nq1 Q0 b 2.5 0.4 t\n", 2, "rank '2.5' is not an integer"),
    "NaN score": ("q1 Q0 a 1 0.5 t\nq1 Q0 b 2 nan t\n", 2, "score is nan"),
    "infinite score": ("q1 Q0 a 1 inf t\n", 1, "score is inf"),
    "duplicate pair": (
        "q1 Q0 a 1 0.5 t\nq2 Q0 a 1 0.5 t\nq1 Q0 a 2 0.4 t\n",
        3,
        "document 'a' appears more than once for query 'q1'",
    ),
    "duplicate after a blank line": ("q1 Q0 a 1 0.5 t\n\nq1 Q0 a 2 0.4 t\n", 3, "duplicate"),
    "empty file": ("", 1, "no results"),
    "only blank lines": ("\n  \n", 1, "no results"),
    "invalid UTF-8": (b"q1 Q0 a 1 0.5 t\nq1 Q0 \xff 2 0.4 t\n", 2, "not valid UTF-8"),
}


@pytest.mark.parametrize("case", sorted(RUN_ERRORS))
def test_malformed_run_files_are_errors_naming_file_and_line(tmp_path: Path, case: str) -> None:
    content, line, message = RUN_ERRORS[case]
    path = tmp_path / "bad.trec"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    with pytest.raises(ArecallError) as info:
        load_run(path)
    assert str(info.value).startswith(f"{path}: line {line}: ")
    assert message in str(info.value)


QRELS_ERRORS = {
    "wrong column count": ("q1 0 a 1\nq1 0 b\n", 2, "expected 4 fields"),
    "non-numeric relevance": ("q1 0 a high\n", 1, "relevance 'high' is not an integer"),
    "fractional relevance": ("q1 0 a 1\nq1 0 b 0.5\n", 2, "relevance '0.5' is not an integer"),
    "relevance 1.5": ("q1 0 a 1\nq1 0 b 1.5\n", 2, "relevance '1.5' is not an integer"),
    "BEIR relevance 1.5": (
        "query-id\tcorpus-id\tscore\nq1\ta\t1.5\n",
        2,
        "relevance '1.5' is not an integer",
    ),
    "duplicate pair": ("q1 0 a 1\nq1 0 a 0\n", 2, "judged more than once"),
    "empty file": ("", 1, "no judgments"),
}


@pytest.mark.parametrize("case", sorted(QRELS_ERRORS))
def test_malformed_qrels_files_are_errors_naming_file_and_line(tmp_path: Path, case: str) -> None:
    content, line, message = QRELS_ERRORS[case]
    path = tmp_path / "bad.qrels"
    path.write_text(content)
    with pytest.raises(ArecallError) as info:
        load_qrels(path)
    assert str(info.value).startswith(f"{path}: line {line}: ")
    assert message in str(info.value)


def test_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ArecallError, match="file not found"):
        load_run(tmp_path / "nope.trec")
