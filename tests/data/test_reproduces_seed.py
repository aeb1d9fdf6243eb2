"""arecall reproduces authorized-recall 0.1.0's numbers: its corpus, its retriever, its table.

The seed package is installed as a dev-only oracle; where the claim is about its command line
(``--json DIR --emit``) it runs the function behind that option, `run(from_json=DIR)`, and
`arecall run` runs in-process (the `arecall` fixture).
"""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest
from authorized_recall import TfIdfIndex
from authorized_recall.corpus import build
from authorized_recall.experiment import _document
from authorized_recall.experiment import run as seed_run

from arecall.core.ranking import rank_scores
from arecall.core.scoring import SEED_K_KEYS
from arecall.data.sources.discovery import discovery_records
from arecall.data.sources.seed_json import document_text, read_seed_json
from arecall.pipeline.run import run_in_memory
from arecall.retrievers import make_retriever

from tests.helpers import FAST_PROOF, fast_config, write_seed_dir


def assert_same_numbers(ours: dict, theirs: dict) -> None:
    for key in ("datasets", "queries", "profiles", "pairs"):
        assert ours[key] == theirs[key], key
    assert ours["mrr"] == pytest.approx(theirs["mrr"], abs=1e-12)
    for k, row in theirs["k"].items():
        for key in SEED_K_KEYS:
            assert ours["k"][str(k)][key] == pytest.approx(row[key], abs=1e-12), (k, key)


def test_discovery_records_are_the_seed_corpus_record_for_record():
    assert discovery_records() == build()


def test_document_text_is_the_seed_document_text():
    for d in build()[0]:
        assert document_text(d) == _document(d)


@pytest.mark.parametrize("retriever", ["tfidf", "sklearn_tfidf"])
def test_both_retrievers_reproduce_the_seed_table(retriever):
    out = run_in_memory(fast_config(f"retriever={retriever}"))
    seed = seed_run()
    assert_same_numbers(out["metrics"], {**seed, "k": {str(k): v for k, v in seed["k"].items()}})
    assert out["metrics"]["unauthorized_relevant"] == 330
    assert out["metrics"]["total_relevant"] == 480
    # the headline figures, as printed
    five = out["metrics"]["k"]["5"]
    assert (
        f"{five['arecall_post_nonempty']:.3f}",
        f"{five['arecall_pre_nonempty']:.3f}",
        f"{five['gap_nonempty']:+.3f}",
        f"{five['recall']:.3f}",
    ) == ("0.853", "0.960", "+0.107", "0.867")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_builtin_tfidf_scores_equal_the_seed_index_scores(tmp_path, seed):
    d = write_seed_dir(tmp_path, seed)
    collection = read_seed_json(d)
    datasets = json.loads((d / "corpus.json").read_text())["datasets"]
    index = TfIdfIndex({x["dataset"]: _document(x) for x in datasets})
    r = make_retriever({"name": "tfidf"}).fit(collection.documents["text"].tolist())
    scores = r.score(collection.queries["text"].tolist()).toarray()
    ranking = rank_scores(r.score(collection.queries["text"].tolist())).padded()
    for qi, text in enumerate(collection.queries["text"]):
        expected = index.rank(text, k=len(datasets))
        got = [collection.doc_ids[j] for j in ranking[qi] if j >= 0]
        assert got == expected
        q_vec = index._vector(Counter(re.findall(r"[a-z0-9]+", text.lower())))
        for j, doc in enumerate(collection.doc_ids):
            d_vec = index._vector(index._docs[doc])
            ref = sum(w * d_vec.get(t, 0.0) for t, w in q_vec.items())
            assert scores[qi, j] == pytest.approx(ref, abs=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [11, 12])
def test_arecall_run_on_seed_json_gives_the_seed_clis_numbers(tmp_path, seed, arecall):
    d = write_seed_dir(tmp_path / "corpus", seed, n_docs=40, n_queries=12, n_profiles=5)
    out = tmp_path / "out"
    proc = arecall(
        "run",
        "corpus=seed_json",
        f"corpus.path={d}",
        f"hydra.run.dir={out}",
        "tracking.enabled=false",
        FAST_PROOF,
    )
    assert proc.returncode == 0, proc.stderr
    assert_same_numbers(json.loads((out / "metrics.json").read_text()), seed_run(from_json=d))
