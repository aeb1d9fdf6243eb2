"""retriever=model2vec: a model built here (no download) encodes through arecall exactly as
model2vec encodes directly, the cache is reused and invalidated as it should be, and a model
that cannot be loaded is one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from arecall.core.errors import ArecallError
from arecall.io.vectors import read_vectors
from arecall.retrievers import fit_on, make_retriever, query_inputs
from arecall.retrievers.model2vec import Model2Vec, load_model

from tests.helpers import WORDS, tiny_model, write_seed_dir


def corpus(
    n_docs: int = 40, n_queries: int = 6, seed: int = 1
) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    docs = pd.DataFrame(
        {
            "doc_id": [f"d{i:03d}" for i in range(n_docs)],
            "text": [" ".join(rng.choice(WORDS, rng.integers(2, 9))) for _ in range(n_docs)],
        }
    )
    queries = pd.DataFrame(
        {
            "query_id": [f"q{i}" for i in range(n_queries)],
            "text": [" ".join(rng.choice(WORDS, 3)) for _ in range(n_queries)],
        }
    )
    return docs, queries


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return tiny_model(tmp_path / "model")


def retriever(model: Path, cache: Path, **extra: Any) -> Model2Vec:
    r = make_retriever(
        {"name": "model2vec", "model": str(model), "cache": str(cache), "batch_size": 7, **extra}
    )
    assert isinstance(r, Model2Vec)
    return r


def test_encoding_through_arecall_equals_encoding_with_model2vec_directly(
    model: Path, tmp_path: Path
) -> None:
    from model2vec import StaticModel

    docs, queries = corpus()
    r = fit_on(retriever(model, tmp_path / "cache"), docs, queries)
    direct = StaticModel.from_pretrained(str(model))
    want_docs = direct.encode(docs["text"].tolist())
    want_queries = direct.encode(queries["text"].tolist())
    unit = want_docs / np.linalg.norm(want_docs, axis=1, keepdims=True)
    np.testing.assert_allclose(r.embed_documents(), unit, rtol=1e-6)  # cosine: unit rows
    cached = read_vectors(r.sources["documents"][1])
    assert cached.ids.to_pylist() == docs["doc_id"].tolist()
    np.testing.assert_array_equal(cached.vectors, want_docs)  # batches of 7 = one call
    got = r.score(query_inputs(r, queries)).toarray()
    cosine = (want_queries / np.linalg.norm(want_queries, axis=1, keepdims=True)).astype(
        np.float64
    ) @ (want_docs / np.linalg.norm(want_docs, axis=1, keepdims=True)).astype(np.float64).T
    np.testing.assert_allclose(got, cosine, atol=1e-6)


def test_the_cache_is_reused_and_a_changed_model_or_corpus_encodes_again(
    model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from model2vec import StaticModel

    calls: list[int] = []
    encode = StaticModel.encode

    def counted(self: Any, sentences: Any, **kwargs: Any) -> Any:
        calls.append(len(sentences))
        return encode(self, sentences, **kwargs)

    monkeypatch.setattr(StaticModel, "encode", counted)
    cache = tmp_path / "cache"
    docs, queries = corpus()
    first = fit_on(retriever(model, cache), docs, queries)
    assert sum(calls) == len(docs) + len(queries) and max(calls) <= 7  # in batches
    assert {s for s, _ in first.sources.values()} == {"encoded"}
    calls.clear()
    moved = tmp_path / "elsewhere"
    model.rename(moved)  # the same model under another name: its identity is its content
    second = fit_on(retriever(moved, cache), docs, queries)
    assert calls == [] and {s for s, _ in second.sources.values()} == {"cached"}
    np.testing.assert_array_equal(first.embed_documents(), second.embed_documents())
    changed = queries.assign(text=queries["text"].str.upper().str.replace("A", "a"))
    changed.loc[0, "text"] = "alpha beta"
    fit_on(retriever(moved, cache), docs, changed)
    assert sum(calls) == len(queries)  # only the queries changed: only they are encoded
    calls.clear()
    other = tiny_model(tmp_path / "other", seed=9)
    fit_on(retriever(other, cache), docs, queries)
    assert sum(calls) == len(docs) + len(queries)
    # a damaged entry is encoded again, never used
    calls.clear()
    path = second.sources["documents"][1]
    path.write_bytes(b"not parquet")
    fit_on(retriever(moved, cache), docs, queries)
    assert sum(calls) == len(docs)
    assert read_vectors(path).vectors.shape == (len(docs), 8)


def test_a_model_that_cannot_be_loaded_is_one_line(tmp_path: Path, arecall: Any) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(
        ArecallError, match=rf"^retriever.model={empty}: cannot load a model2vec model: "
    ):
        load_model(str(empty))
    broken = tiny_model(tmp_path / "broken")
    (broken / "model.safetensors").write_bytes(b"\0" * 16)
    with pytest.raises(ArecallError, match=r"cannot load a model2vec model"):
        load_model(str(broken))
    proc = arecall(
        "run",
        "retriever=model2vec",
        f"retriever.model={empty}",
        f"hydra.run.dir={tmp_path / 'out'}",
        "tracking.enabled=false",
    )
    assert proc.returncode == 2
    assert (
        proc.stderr.strip().splitlines()
        == [
            line
            for line in proc.stderr.strip().splitlines()
            if line.startswith("arecall: error: retriever.model=")
        ]
        and len(proc.stderr.strip().splitlines()) == 1
    ), proc.stderr


def test_a_text_the_model_cannot_encode_under_cosine_is_named(model: Path, tmp_path: Path) -> None:
    docs, queries = corpus()
    queries.loc[2, "text"] = "zzz qqq"  # no token in the vocabulary: the zero vector
    with pytest.raises(
        ArecallError, match=r"^retriever=model2vec: query 'q2' encodes to the zero vector"
    ):
        fit_on(retriever(model, tmp_path / "cache"), docs, queries)
    r = fit_on(retriever(model, tmp_path / "cache", metric="ip"), docs, queries)
    assert not r.score(["q2"]).toarray().any()  # under ip it scores 0 everywhere


@pytest.mark.slow
def test_arecall_run_ranks_with_model2vec_and_a_second_run_reads_the_cache(
    model: Path, tmp_path: Path, arecall: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    seed = write_seed_dir(tmp_path / "seed", 5)  # texts from the model's words
    args = [
        "run",
        "corpus=seed_json",
        f"corpus.path={seed}",
        "retriever=model2vec",
        f"retriever.model={model}",
        "retriever.metric=ip",
        "tracking.enabled=false",
        "evaluation.proof.max_examples=5",
        "vector_search.corpus.n_docs=300",
        "vector_search.corpus.n_queries=5",
    ]
    first = arecall(*args, "hydra.run.dir=out1")
    assert first.returncode == 0, first.stderr
    entries = sorted((tmp_path / "data" / "embeddings").glob("*.parquet"))
    assert len(entries) == 2  # documents and queries, under data/ of the working directory
    stamps = [p.stat().st_mtime_ns for p in entries]
    second = arecall(*args, "hydra.run.dir=out2")
    assert second.returncode == 0, second.stderr
    assert [p.stat().st_mtime_ns for p in entries] == stamps
    assert (tmp_path / "out1" / "metrics.json").read_bytes() == (
        tmp_path / "out2" / "metrics.json"
    ).read_bytes()
    assert "retriever `model2vec`" in (tmp_path / "out1" / "tables.md").read_text()


def test_the_install_stays_light_no_torch_in_what_make_install_resolves() -> None:
    """model2vec encodes with numpy: nothing ``make install`` asks for (arecall with the extras
    the Makefile names, and everything those require in turn) is torch, CUDA or
    sentence-transformers."""
    import re
    from importlib.metadata import PackageNotFoundError, distribution

    from packaging.requirements import Requirement

    from tests.helpers import ROOT

    extras = re.search(r"-e '\.\[([a-z,]+)\]'", (ROOT / "Makefile").read_text())
    assert extras, "the Makefile's install line"
    seen: set[str] = set()
    todo = [("arecall", frozenset(extras.group(1).split(",")))]
    while todo:
        name, wanted = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen:
            continue
        seen.add(key)
        try:
            requires = distribution(name).requires or []
        except PackageNotFoundError:
            continue  # an optional requirement of a dependency, not installed
        for line in requires:
            req = Requirement(line)
            markers = [{"extra": e} for e in wanted] or [{"extra": ""}]
            if req.marker is None or any(req.marker.evaluate(m) for m in markers):
                todo.append((req.name, frozenset(req.extras)))
    assert "model2vec" in seen and "pymilvus" in seen  # the walk does reach the extras
    heavy = {k for k in seen if k in {"torch", "sentence-transformers"} or k.startswith("nvidia-")}
    assert heavy == set(), heavy
