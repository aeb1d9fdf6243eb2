"""The bring-your-own guide (docs/guides/bring-your-own.md) as a user runs it: its Python lines
write what ``retriever=embeddings`` reads, and each of its commands runs as written on a corpus
in the seed's layout with an ACL, a tiny model2vec model built here (no download) and a
stand-in for sentence-transformers (so no torch). The commands take minutes on these machines
(whole processes, Milvus Lite among them): they run under the ``long`` marker."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from arecall.io.vectors import read_vectors

from tests._docs import documented, link_venv, sh, shell_env
from tests.helpers import ROOT, tiny_model, write_seed_dir

GUIDE = ROOT / "docs" / "guides" / "bring-your-own.md"

#: sentence-transformers' interface, its vectors a seeded function of each text's words
STUB = """
import numpy as np

class SentenceTransformer:
    def __init__(self, name):
        self.name = name

    def encode(self, texts, batch_size=32):
        def word(w):
            seed = int.from_bytes(w.encode()[:8].ljust(8, b"\\0"), "little")
            return np.random.default_rng(seed).normal(size=16)
        return np.stack([sum((word(w) for w in t.lower().split()), np.ones(16)) for t in texts])
"""


def python_block(text: str, marker: str) -> str:
    """The ```python block of ``text`` that contains ``marker``."""
    blocks = re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)
    (block,) = [b for b in blocks if marker in b]
    return block


def new_run(work: Path, before: set[Path]) -> Path:
    """The one run directory a command added under outputs/."""
    (added,) = {p.parent for p in (work / "outputs").rglob("metrics.json")} - before
    return added


def runs(work: Path) -> set[Path]:
    return {p.parent for p in (work / "outputs").rglob("metrics.json")}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A user's directory after the guide's first two steps: a corpus run, then its texts
    encoded by the guide's sentence-transformers lines (against the stand-in)."""
    work = link_venv(tmp_path_factory.mktemp("byo"))
    write_seed_dir(work / "my_corpus", 11)
    sh(
        work,
        ".venv/bin/arecall run corpus=seed_json corpus.path=my_corpus hydra.run.dir=outputs/mine",
    )
    docs = pd.read_parquet(work / "outputs/mine/data/corpus/documents.parquet")["doc_id"].tolist()
    # alice: a third of the documents; staff (bob, carol): another third; dave: one document
    lines = ["doc_id\tprincipal"]
    lines += [f"{d}\talice" for d in docs[::3]]
    lines += [f"{d}\tstaff" for d in docs[1::3]]
    lines += [f"{docs[2]}\tdave"]
    (work / "acl.tsv").write_text("\n".join(lines) + "\n")
    (work / "groups.tsv").write_text("bob\tstaff\ncarol\tstaff\n")
    tiny_model(work / "my_model")
    stub = work / "stub" / "sentence_transformers"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text(STUB)
    (work / "encode.py").write_text(python_block(GUIDE.read_text(), "SentenceTransformer"))
    proc = subprocess.run(
        [str(work / ".venv" / "bin" / "python"), "encode.py"],
        cwd=work,
        env=shell_env(PYTHONPATH=str(work / "stub")),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return work


def test_the_guides_sentence_transformers_lines_write_what_retriever_embeddings_reads(
    stack: Path,
) -> None:
    import sys

    sys.path.insert(0, str(stack / "stub"))
    try:
        from sentence_transformers import SentenceTransformer  # the stand-in
    finally:
        sys.path.remove(str(stack / "stub"))
    model = SentenceTransformer("any")
    corpus = stack / "outputs/mine/data/corpus"
    for side, key in (("documents", "doc_id"), ("queries", "query_id")):
        frame = pd.read_parquet(corpus / f"{side}.parquet")
        found = read_vectors(stack / f"{side}.parquet")
        assert found.ids.to_pylist() == frame[key].astype(str).tolist()
        expected = model.encode(frame["text"].tolist()).astype(np.float32)
        np.testing.assert_array_equal(np.asarray(found.vectors), expected)


@pytest.mark.long
def test_your_vectors_and_acl_run_every_stage_and_a_milvus_index_as_the_guide_shows(
    stack: Path,
) -> None:
    before = runs(stack)
    sh(
        stack,
        ".venv/bin/arecall run corpus=seed_json corpus.path=my_corpus retriever=embeddings "
        "retriever.documents=documents.parquet retriever.queries=queries.parquet "
        "profiles=acl_file profiles.path=acl.tsv profiles.groups=groups.tsv",
    )
    ranked = new_run(stack, before)
    assert "retriever `embeddings`" in (ranked / "tables.md").read_text()
    assert (ranked / "proof.json").is_file()
    before = runs(stack)
    sh(
        stack,
        ".venv/bin/arecall run corpus=seed_json corpus.path=my_corpus retriever=embeddings "
        "retriever.documents=documents.parquet retriever.queries=queries.parquet "
        "profiles=acl_file profiles.path=acl.tsv profiles.groups=groups.tsv "
        "index=hnsw index.store=milvus 'index.placements=[post,pushdown,pre]'",
        timeout=900,
    )
    indexed = pd.read_csv(new_run(stack, before) / "index_search.csv")
    assert sorted(set(indexed["principal"])) == ["alice", "bob", "carol", "dave"]
    assert indexed.groupby("principal")["mode"].apply(list).map(tuple).unique().tolist() == [
        ("post", "pushdown", "pre")
    ]
    assert (indexed[indexed["mode"] == "pre"]["recall"] == 1.0).all()
    np.testing.assert_allclose(
        indexed["gls"] * indexed["selectivity"], 1 - indexed["u_at_k"], atol=1e-12
    )


@pytest.mark.long
def test_model2vec_encodes_once_then_reads_its_cache_as_the_guide_shows(stack: Path) -> None:
    command = documented(
        ".venv/bin/arecall run corpus=seed_json corpus.path=my_corpus retriever=model2vec "
        "retriever.model=my_model"
    )
    sh(stack, command)
    cached = sorted((stack / "data" / "embeddings").rglob("*.parquet"))
    assert len(cached) == 2, cached  # documents and queries
    stamps = [p.stat().st_mtime_ns for p in cached]
    sh(stack, command)
    assert sorted((stack / "data" / "embeddings").rglob("*.parquet")) == cached
    assert [p.stat().st_mtime_ns for p in cached] == stamps  # read, not encoded again


@pytest.mark.long
def test_the_vector_experiment_measures_your_principals_and_three_stores_as_the_guide_shows(
    stack: Path,
) -> None:
    before = runs(stack)
    sh(
        stack,
        ".venv/bin/arecall run vector_search.enabled=true "
        "vector_search.corpus.documents=documents.parquet "
        "vector_search.corpus.queries=queries.parquet vector_search.corpus.acl=acl.tsv "
        "vector_search.corpus.groups=groups.tsv "
        "'vector_search.corpus.audit=[lancedb,chroma,milvus]'",
        timeout=900,
    )
    written = new_run(stack, before)
    table = pd.read_csv(written / "vector_search.csv")
    assert sorted(set(table["principal"])) == ["alice", "bob", "carol", "dave"]
    modes = ["post", "pushdown", "pre", "auto"] + [
        f"{s}/{m}" for s in ("lancedb", "chroma", "milvus") for m in ("post", "pushdown")
    ]
    assert table[table["principal"] == "alice"]["mode"].tolist() == modes
    assert (table[table["mode"] == "pre"]["recall"] == 1.0).all()
    markdown = (written / "vector_search.md").read_text()
    assert "| principal | selectivity | GLS |" in markdown
    assert "(documents.parquet)" in markdown and "4 principals (acl.tsv)" in markdown


@pytest.mark.long
def test_the_vector_experiment_runs_on_milvus_lite_as_the_stores_page_shows(
    tmp_path: Path,
) -> None:
    work = link_venv(tmp_path)
    sh(
        work,
        ".venv/bin/arecall run vector_search.enabled=true vector_search.index.store=milvus "
        "'vector_search.index.placements=[post,pushdown,pre]'",
        timeout=900,
    )
    (written,) = {p.parent for p in (work / "outputs").rglob("vector_search.csv")}
    table = pd.read_csv(written / "vector_search.csv")
    assert table.groupby("selectivity")["mode"].apply(tuple).unique().tolist() == [
        ("post", "pushdown", "pre")
    ]
    # the page's finding: Milvus Lite filters inside its graph walk, which starves at 1% as
    # faiss's does (recall far below the scan's), and post-filtering falls short below 100%
    pushdown = table[table["mode"] == "pushdown"].set_index("selectivity")
    assert pushdown.loc[0.01, "recall"] < 0.9
    post = table[(table["mode"] == "post") & (table["selectivity"] < 1.0)]
    assert (post["short"] > 0).all()
