"""corpus=beir: BEIR directories and TREC qrels read strictly, deny by default, errors by line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arecall.core.errors import ArecallError
from arecall.data.sources import load_corpus
from arecall.data.sources.beir import read_beir, read_qrels
from arecall.pipeline.config import default_config
from arecall.pipeline.run import run_in_memory

from tests.helpers import assert_proved_on_every_pair

DOCS = [
    {"_id": "d3", "title": "Chromatography", "text": "column peak resolution"},
    {"_id": "d1", "title": "", "text": "bioreactor titer feed"},
    {"_id": "d2", "text": "potency assay release"},
    {"_id": "d4", "title": "Clinical", "text": "adverse events in the dose cohort"},
]
QUERIES = [
    {"_id": "q1", "text": "peak resolution"},
    {"_id": "q2", "text": "titer feed"},
    {"_id": "q3", "text": "dose cohort"},
    {"_id": "q9", "text": "a query of another split"},
]
QRELS = "query-id\tcorpus-id\tscore\nq1\td3\t2\nq1\td2\t0\nq2\td1\t1\nq3\td4\t1\nq3\td3\t1\n"
ACL = "doc_id\tprincipal\nd3\talice\nd1\tstaff\nd4\tbob\n"
GROUPS = "principal\tgroup\nalice\tstaff\ncarol\tstaff\n"


def _jsonl(rows) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def write_beir(root: Path, *, docs=DOCS, queries=QUERIES, qrels=QRELS, acl=ACL, groups=GROUPS):
    (root / "qrels").mkdir(parents=True, exist_ok=True)
    (root / "corpus.jsonl").write_text(docs if isinstance(docs, str) else _jsonl(docs))
    (root / "queries.jsonl").write_text(queries if isinstance(queries, str) else _jsonl(queries))
    (root / "qrels" / "test.tsv").write_text(qrels)
    if acl is not None:
        (root / "acl.tsv").write_text(acl)
    if groups is not None:
        (root / "groups.tsv").write_text(groups)
    return root


@pytest.fixture
def beir_dir(tmp_path: Path) -> Path:
    return write_beir(tmp_path / "beir")


def _grants(c) -> set[tuple[str, str]]:
    return set(zip(c.acl["principal"].astype(str), c.acl["doc_id"].astype(str), strict=True))


def test_reads_documents_queries_qrels_and_acl(beir_dir):
    c = load_corpus(
        {"name": "beir", "path": str(beir_dir), "acl": "acl.tsv", "groups": "groups.tsv"}
    )
    assert c.doc_ids.tolist() == ["d1", "d2", "d3", "d4"], "sorted by id"
    assert c.documents["text"].tolist() == [
        "bioreactor titer feed",
        "potency assay release",
        "Chromatography column peak resolution",
        "Clinical adverse events in the dose cohort",
    ]
    assert c.query_ids.tolist() == ["q1", "q2", "q3"], "judged queries, in queries.jsonl order"
    rel = {(q, d): r for q, d, r in c.qrels[["query_id", "doc_id", "relevance"]].values}
    assert rel == {("q1", "d3"): 2.0, ("q2", "d1"): 1.0, ("q3", "d4"): 1.0, ("q3", "d3"): 1.0}
    assert c.principal_names.tolist() == ["alice", "bob", "carol"]
    assert _grants(c) == {("alice", "d3"), ("alice", "d1"), ("carol", "d1"), ("bob", "d4")}


def test_documents_absent_from_the_acl_are_authorized_to_nobody(beir_dir):
    c = read_beir(beir_dir, acl=beir_dir / "acl.tsv")
    acl = c.acl_matrix().toarray()
    assert not acl[:, c.doc_ids.tolist().index("d2")].any()
    assert acl.sum() == 3


def test_without_an_acl_the_one_principal_is_granted_nothing(beir_dir):
    c = read_beir(beir_dir)
    assert c.principal_names.tolist() == ["anonymous"] and len(c.acl) == 0


def test_zero_score_rows_are_judgments_of_non_relevance(beir_dir):
    c = read_beir(beir_dir)
    assert ("q1", "d2") not in set(zip(c.qrels["query_id"], c.qrels["doc_id"], strict=True))
    only_zero = QRELS.replace("q2\td1\t1", "q2\td1\t0")
    c = read_beir(write_beir(beir_dir, qrels=only_zero))
    assert "q2" not in c.query_ids.tolist(), "nothing to recall: not evaluated"


def test_trec_qrels_are_detected_and_read(beir_dir):
    trec = "q1 0 d3 2\nq1  0  d2  0\n\nq2\t0\td1\t1\nq3 0 d4 1\n"
    c = read_beir(write_beir(beir_dir, qrels=trec))
    assert c.query_ids.tolist() == ["q1", "q2", "q3"]
    assert sorted(zip(c.qrels["query_id"], c.qrels["doc_id"], strict=True)) == [
        ("q1", "d3"),
        ("q2", "d1"),
        ("q3", "d4"),
    ]


def test_a_qrels_file_without_header_is_read_as_beir(tmp_path):
    p = tmp_path / "q.tsv"
    p.write_text("q1\td1\t1\n")
    assert read_qrels(p)[["query_id", "doc_id", "relevance"]].values.tolist() == [["q1", "d1", 1.0]]


def test_split_and_qrels_choose_the_judgments(beir_dir):
    (beir_dir / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\nq9\td2\t1\n")
    dev = load_corpus({"name": "beir", "path": str(beir_dir), "split": "dev"})
    assert dev.query_ids.tolist() == ["q9"]
    (beir_dir / "mine.trec").write_text("q2 0 d2 1\n")
    mine = load_corpus({"name": "beir", "path": str(beir_dir), "qrels": "mine.trec"})
    assert mine.query_ids.tolist() == ["q2"]


def test_domain_and_sensitivity_fields_are_kept_so_abac_models_work(tmp_path):
    docs = [
        {**d, "domain": "a" if i % 2 else "b", "sensitivity": "internal"}
        for i, d in enumerate(DOCS)
    ]
    c = read_beir(write_beir(tmp_path / "b", docs=docs))
    assert set(c.documents["domain"]) == {"a", "b"}
    assert set(c.documents["sensitivity"]) == {"internal"}


def _bad_line(fn, *args, **kwargs) -> str:
    with pytest.raises(ArecallError) as err:
        fn(*args, **kwargs)
    text = str(err.value)
    assert "\n" not in text, text
    return text


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"docs": _jsonl(DOCS[:2]) + "{not json\n"}, "corpus.jsonl: line 3: invalid JSON"),
        ({"docs": _jsonl(DOCS[:1]) + "[1, 2]\n"}, "corpus.jsonl: line 2: must be a JSON object"),
        ({"docs": _jsonl([*DOCS, {"text": "no id"}])}, "corpus.jsonl: line 5: missing field '_id'"),
        ({"docs": _jsonl([*DOCS, {"_id": ""}])}, "corpus.jsonl: line 5: _id must be a non-empty"),
        ({"docs": _jsonl([*DOCS, {"_id": "d9"}])}, "corpus.jsonl: line 5: missing field 'text'"),
        (
            {"docs": _jsonl([*DOCS, {"_id": "d9", "text": 7}])},
            "corpus.jsonl: line 5: text must be a string",
        ),
        (
            {"docs": _jsonl([*DOCS, {"_id": "d1", "text": "again"}])},
            "corpus.jsonl: line 5: duplicate document _id 'd1' (first at line 2)",
        ),
        (
            {"queries": _jsonl([*QUERIES, {"_id": "q1", "text": "x"}])},
            "queries.jsonl: line 5: duplicate query _id 'q1' (first at line 1)",
        ),
        (
            {"queries": _jsonl([*QUERIES, {"_id": "q5", "text": "  "}])},
            "queries.jsonl: line 5: empty query text",
        ),
        ({"qrels": QRELS + "q7\td1\t1\n"}, "test.tsv: line 7: 'q7' is not a query id"),
        ({"qrels": QRELS + "q1\td7\t0\n"}, "test.tsv: line 7: 'd7' is not a document id"),
        ({"qrels": QRELS + "q1\td1\n"}, "test.tsv: line 7: expected 3 tab-separated fields"),
        (
            {"qrels": QRELS + "q1\td1\thigh\n"},
            "test.tsv: line 7: relevance 'high' is not an integer",
        ),
        (
            {"qrels": QRELS + "q1\td3\t1\n"},
            "test.tsv: line 7: duplicate judgment: document 'd3' is judged more than once for "
            "query 'q1' (first at line 2)",
        ),
        (
            {"qrels": "q1 0 d3 1\nq1 0 d1\n"},
            "test.tsv: line 2: expected 4 fields (qid 0 docid rel)",
        ),
        ({"qrels": "q1 d3\n"}, "test.tsv: line 1: neither BEIR qrels"),
        (
            {"qrels": "query-id\tcorpus-id\tscore\nq1\td2\t0\n"},
            "test.tsv: no query has a relevant document",
        ),
    ],
)
def test_malformed_input_is_refused_naming_file_and_line(tmp_path, files, message):
    root = write_beir(tmp_path / "b", **files)
    text = _bad_line(read_beir, root)
    assert message in text, text


@pytest.mark.parametrize(
    ("acl", "groups", "message"),
    [
        ("d1\talice\nd8\tbob\n", None, "acl.tsv: line 2: 'd8' is not a document id"),
        ("doc_id\tprincipal\nd1\n", None, "acl.tsv: line 2: expected 2 tab-separated fields"),
        ("d1\tstaff\n", "alice\tstaff\nstaff\tall\n", "groups.tsv: line 2: 'staff' is both"),
    ],
)
def test_bad_acl_and_groups_lines_are_refused_naming_file_and_line(tmp_path, acl, groups, message):
    root = write_beir(tmp_path / "b", acl=acl, groups=groups)
    text = _bad_line(
        read_beir, root, acl="acl.tsv", groups="groups.tsv" if groups is not None else None
    )
    assert message in text, text


def test_missing_path_and_files_are_named(tmp_path):
    assert _bad_line(load_corpus, {"name": "beir"}).startswith("corpus.path: required")
    assert "not a directory" in _bad_line(read_beir, tmp_path / "nope")
    root = write_beir(tmp_path / "b")
    (root / "queries.jsonl").unlink()
    assert _bad_line(read_beir, root) == f"{root / 'queries.jsonl'}: file not found"
    assert _bad_line(read_beir, write_beir(root), split="train").endswith(
        "train.tsv: file not found"
    )
    assert _bad_line(read_beir, root, groups="groups.tsv").startswith(
        "corpus.groups: needs corpus.acl"
    )


def test_the_pipeline_runs_end_to_end_on_beir(beir_dir):
    overrides = [
        "corpus=beir",
        f"corpus.path={beir_dir}",
        "corpus.acl=acl.tsv",
        "corpus.groups=groups.tsv",
        "evaluation.ks=[1,2]",
        "evaluation.proof.max_examples=5",
    ]
    out = run_in_memory(default_config(overrides))
    assert_proved_on_every_pair(out)
    m = out["metrics"]
    assert (m["datasets"], m["queries"], m["profiles"]) == (4, 3, 3)
    assert m["mrr"] == 1.0
