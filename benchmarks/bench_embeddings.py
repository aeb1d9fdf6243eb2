"""`arecall run retriever=embeddings` end to end against the same ranking in plain numpy.

    python benchmarks/bench_embeddings.py                 # 10,000 documents × 384 dims (~2 min)
    python benchmarks/bench_embeddings.py --docs 2000 --repeat 1

The corpus is `bench_pipeline.py seed`'s synthetic one (10,000 documents, 200 queries, 8
principals, K = 1, 3, 5, 10) in the seed's JSON layout. Its vectors stand in for a user's
encoder: TF-IDF of each text projected onto ``--dims`` Gaussian directions (seeded), written
as Parquet (``id``, ``vector``) keyed by the corpus's ids, documents' rows shuffled, as
`arecall.io.vectors` reads them.

Every time is a whole process, start to exit, best of ``--repeat``:

* ``numpy``: a script that reads the two Parquet files with pyarrow, scores every document for
  every query by cosine (float64, rounded to the vectors' float32) and sorts each query's
  documents, ties by id — the ranking and nothing else, the least any tool must do;
* ``arecall run retriever=embeddings`` untracked and tracked (a fresh MLflow sqlite store made
  beforehand): the same ranking, then filter, score, prove and report with the corpus's
  principals (the vector experiment's cache warm, as on a user's second run);
* ``arecall run retriever=tfidf``: the built-in sparse retriever on the same corpus, for scale.

The numpy script's full ranking and arecall's (``data/rank/ranking.npz``) are asserted identical
query by query before any figure is printed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_pipeline import seed_overrides
from bench_run import ENV, arecall_run, best, tracked_env, write_seed_layout

#: The plain-numpy ranking: read, score by cosine, sort every query's documents (ties by id).
NUMPY_RANK = """
import sys
import numpy as np
import pyarrow.parquet as pq

def read(path):
    table = pq.read_table(path)
    ids = np.asarray(table.column("id").to_pylist())
    vectors = np.stack(table.column("vector").to_numpy(zero_copy_only=False)).astype(np.float64)
    return ids, vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

doc_ids, docs = read(sys.argv[1])
query_ids, queries = read(sys.argv[2])
by_id = np.argsort(doc_ids, kind="stable")  # ties go to the lower id
doc_ids, docs = doc_ids[by_id], docs[by_id]
scores = np.round((queries @ docs.T).astype(np.float32).astype(np.float64), 12)
rows = np.arange(len(doc_ids))
ranking = np.stack([np.lexsort((rows, -s)) for s in scores])
np.save(sys.argv[3], ranking)
"""


def write_vectors_for(directory: Path, seed_dir: Path, dims: int) -> tuple[Path, Path]:
    """The corpus's documents and queries as TF-IDF projected to ``dims`` Gaussian directions."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    from arecall.data.collection import Collection
    from arecall.io.vectors import write_vectors
    from arecall.pipeline.config import default_config
    from arecall.pipeline.layout import Layout
    from arecall.pipeline.stages.generate import generate

    layout = Layout.run(directory / "corpus")
    generate(default_config(["corpus=seed_json", f"corpus.path={seed_dir}"]), layout)
    collection = Collection.load(layout.corpus)
    tfidf = TfidfVectorizer().fit(collection.documents["text"])
    rng = np.random.default_rng(7)
    project = rng.normal(size=(len(tfidf.vocabulary_), dims)) / np.sqrt(dims)
    docs = np.asarray(tfidf.transform(collection.documents["text"]) @ project, dtype=np.float32)
    queries = np.asarray(tfidf.transform(collection.queries["text"]) @ project, dtype=np.float32)
    order = rng.permutation(len(docs))
    doc_ids = [str(collection.doc_ids[i]) for i in order]
    write_vectors(directory / "docs.parquet", doc_ids, docs[order])
    write_vectors(directory / "queries.parquet", [str(q) for q in collection.query_ids], queries)
    return directory / "docs.parquet", directory / "queries.parquet"


def arecall_ranking(run_dir: Path) -> np.ndarray:
    from arecall.core.ranking import Ranking
    from arecall.pipeline.layout import Layout

    r = Ranking.load(Layout.run(run_dir).ranking)
    return np.stack([r.doc_index[r.indptr[i] : r.indptr[i + 1]] for i in range(r.n_queries)])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--principals", type=int, default=8)
    parser.add_argument("--dims", type=int, default=384)
    args = parser.parse_args()
    from arecall.pipeline.config import default_config

    rows: list[tuple[str, float]] = []

    def row(what: str, seconds: float) -> None:
        rows.append((what, seconds))
        print(f"  {what}: {seconds:.2f} s", file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="arecall-bench-") as tmp:
        work = Path(tmp)
        ENV["ARECALL_CACHE_DIR"] = str(work / "cache")
        seed_dir = work / "seed"
        write_seed_layout(
            default_config(seed_overrides(args.docs, args.queries, args.principals)), seed_dir
        )
        docs, queries = write_vectors_for(work, seed_dir, args.dims)
        script = work / "numpy_rank.py"
        script.write_text(NUMPY_RANK)
        out = work / "numpy_ranking.npy"
        row(
            "numpy: read the Parquet files, cosine, sort (ties by id)",
            best(
                args.repeat,
                lambda i: [sys.executable, str(script), str(docs), str(queries), str(out)],
            ),
        )
        corpus = ("corpus=seed_json", f"corpus.path={seed_dir}", "evaluation.ks=[1,3,5,10]")
        embeddings = (
            "retriever=embeddings",
            f"retriever.documents={docs}",
            f"retriever.queries={queries}",
        )
        off = "tracking.enabled=false"
        subprocess.run(
            arecall_run(work / "warm", *corpus, *embeddings, off)(0),
            env=ENV,
            check=True,
            capture_output=True,
        )
        row(
            "`arecall run retriever=embeddings`, untracked",
            best(args.repeat, arecall_run(work / "e", *corpus, *embeddings, off)),
        )
        env = tracked_env(work / "mlflow.db")
        row(
            "`arecall run retriever=embeddings`, tracked",
            best(args.repeat, arecall_run(work / "t", *corpus, *embeddings), env=env),
        )
        row(
            "`arecall run retriever=tfidf`, untracked",
            best(args.repeat, arecall_run(work / "f", *corpus, "retriever=tfidf", off)),
        )
        mine, theirs = arecall_ranking(work / "e" / "0"), np.load(out)
        assert mine.shape == theirs.shape and np.array_equal(mine, theirs), "rankings differ"
        metrics = json.loads((work / "e" / "0" / "metrics.json").read_text(encoding="utf-8"))

    numpy_seconds = rows[0][1]
    print(
        f"corpus: synthetic, {args.docs:,} documents, {args.queries} queries, {args.principals} "
        f"principals, K = 1, 3, 5, 10, vectors of {args.dims} dimensions; arecall's ranking "
        f"identical to numpy's for every query ({theirs.shape[0]} × {theirs.shape[1]}); "
        f"MRR {metrics['mrr']:.4f}; best of {args.repeat}\n"
    )
    print("| process | wall time | vs numpy |")
    print("|---|--:|--:|")
    for what, seconds in rows:
        print(f"| {what} | {seconds:.2f} s | {seconds / numpy_seconds:.1f}× |")


if __name__ == "__main__":
    main()
