"""Benchmarks of the Authorized Recall engine (issue 3). Figures go to the README.

    python benchmarks/bench_pipeline.py seed        # seed reference vs arecall, 10k docs
    python benchmarks/bench_pipeline.py scale       # the full pipeline at 1M docs

``seed``: the same synthetic corpus (10,000 documents, 200 queries, 8 principals, K = 1, 3, 5,
10) through the seed's reference algorithm (authorized-recall 0.1.0's own TF-IDF index and
metric loop) and through arecall's rank → filter → score, in one process. The metrics must be
identical; the speed-up is the ratio of the two wall times.

``scale``: every DVC stage as its own process (as `dvc repro` runs them) on a synthetic corpus of
1,000,000 documents × 10,000 queries × 100 principals, K up to 100; each stage's wall time and
peak RSS (from ``wait4``), and the total, then how the rank stage stored the ranking (its
``rank.json``: head + tails or ranked to the needed depth). ``--corpus realistic`` (default) is
the generator's own defaults at that size; ``--corpus legacy`` is the corpus of the README's
earlier figures (1,000 domains of 1,000 documents, 20 granted per principal, 200,000 words).
``--stages rank,filter`` times only those (the earlier ones run first, untimed).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from seed_reference import seed_reference

from arecall.core.placed_lists import place_all
from arecall.core.ranking import rank_queries
from arecall.core.scoring import SEED_K_KEYS, score_pairs, summarise
from arecall.data.authorization import apply_profiles
from arecall.data.sources import load_corpus
from arecall.pipeline.config import default_config, ks_of
from arecall.pipeline.run import STAGES
from arecall.retrievers import make_retriever

COMPARED = tuple(k for k in SEED_K_KEYS if not k.startswith("gap"))  # gaps follow


def seed_overrides(n_docs: int, n_queries: int, n_principals: int) -> list[str]:
    domains = 8
    return [
        "corpus=synthetic",
        f"corpus.n_docs={n_docs}",
        f"corpus.n_domains={domains}",
        f"corpus.queries_per_domain={n_queries // domains}",
        f"corpus.n_principals={n_principals}",
        "corpus.vocab_size=4000",
        "evaluation.ks=[1,3,5,10]",
    ]


def arecall_metrics(cfg: Any) -> tuple[dict, float]:
    """rank + filter + score in memory; returns the summary and the wall time."""
    collection = apply_profiles(load_corpus(cfg.corpus), cfg.profiles)
    ks = ks_of(cfg)
    start = time.perf_counter()
    retriever = make_retriever(cfg.retriever).fit(collection.documents["text"].tolist())
    acl, rel = collection.acl_matrix(), collection.relevance_matrix()
    ranking = rank_queries(
        [retriever.score(collection.queries["text"].tolist())],
        n_queries=len(collection.queries),
        depth=cfg.retriever.depth,
        acl=acl,
        k_max=max(ks),
        relevance=rel,
    )
    lists = place_all(ranking, acl, max(ks))
    summary = summarise(
        score_pairs(ranking, lists, rel, acl, ks), n_documents=len(collection.documents)
    )
    return summary, time.perf_counter() - start


def compare(ours: dict, theirs: dict) -> None:
    assert abs(ours["mrr"] - theirs["mrr"]) <= 1e-12, ("mrr", ours["mrr"], theirs["mrr"])
    for k, row in theirs["k"].items():
        for key in COMPARED:
            a, b = ours["k"][k][key], row[key]
            same = a == b if a is None or b is None else abs(a - b) <= 1e-12
            assert same, (k, key, a, b)


def bench_seed(args: argparse.Namespace) -> None:
    arecall_metrics(default_config(seed_overrides(200, 16, 2)))  # warm up: imports, caches
    cfg = default_config(seed_overrides(args.docs, args.queries, args.principals))
    ours, t_ours = arecall_metrics(cfg)
    collection = apply_profiles(load_corpus(cfg.corpus), cfg.profiles)
    start = time.perf_counter()
    theirs = seed_reference(collection, ks_of(cfg))
    t_seed = time.perf_counter() - start
    compare(ours, theirs)
    print(
        f"corpus: synthetic, {args.docs:,} documents, {len(collection.queries)} queries, "
        f"{args.principals} principals, K = 1, 3, 5, 10 — metrics identical (|Δ| ≤ 1e-12)\n"
    )
    print("| implementation | rank + filter + score | speed-up |")
    print("|---|--:|--:|")
    print(f"| seed reference (authorized-recall 0.1.0) | {t_seed:.2f} s | 1× |")
    print(f"| arecall | {t_ours:.3f} s | {t_seed / t_ours:.0f}× |")


def _run_stage(name: str, cwd: Path) -> tuple[float, float]:
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", f"arecall.pipeline.stages.{name}"],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"stage {name} failed with status {proc.returncode}")
    return time.perf_counter() - start, usage.ru_maxrss / 1024**2  # KiB → GiB


def scale_overrides(args: argparse.Namespace) -> list[str]:
    """The ``scale`` corpus: the generator's defaults (realistic) or the earlier figures'."""
    if args.corpus == "realistic":
        domains = default_config(["corpus=synthetic"]).corpus.n_domains
        corpus = [
            f"corpus.n_docs={args.docs}",
            f"corpus.queries_per_domain={max(1, args.queries // domains)}",
            f"corpus.n_principals={args.principals}",
        ]
    else:
        domains = args.docs // 1000
        corpus = [
            f"corpus.n_docs={args.docs}",
            f"corpus.n_domains={domains}",
            f"corpus.queries_per_domain={max(1, args.queries // domains)}",
            f"corpus.n_principals={args.principals}",
            f"corpus.domains_per_principal={min(args.grants, domains)}",
            f"corpus.vocab_size={args.vocab}",
            "corpus.relevance=domain",
        ]
    return [
        "corpus=synthetic",
        *corpus,
        f"evaluation.ks=[1,5,10,{args.kmax}]",
        f"retriever.name={args.retriever}",
        f"retriever.depth={args.kmax}",
        "tracking.enabled=false",
    ]


def bench_scale(args: argparse.Namespace) -> None:
    cfg = default_config(scale_overrides(args)).params()
    cfg["retriever"]["name"] = args.retriever
    timed = set(args.stages.split(",")) if args.stages else set(STAGES)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.workdir) if args.workdir else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        (work / "params.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        rows, total_t, peak = [], 0.0, 0.0
        for name in STAGES:
            if not timed & set(list(STAGES)[list(STAGES).index(name) :]):
                break  # nothing timed from here on
            seconds, gib = _run_stage(name, work)
            if name not in timed:
                continue
            rows.append((name, seconds, gib))
            total_t, peak = total_t + seconds, max(peak, gib)
            print(f"  {name}: {seconds:.1f} s, {gib:.2f} GiB", file=sys.stderr, flush=True)
        rep_path = work / "data" / "rank" / "rank.json"
        rep = yaml.safe_load(rep_path.read_text())["representation"] if rep_path.is_file() else None
        metrics_path = work / "reports" / "metrics.json"
        if not metrics_path.is_file():
            _table(rows, total_t, peak)
            _representation(rep)
            return
        metrics = yaml.safe_load(metrics_path.read_text())
    print(
        f"corpus: synthetic, {args.docs:,} documents, {metrics['queries']:,} queries, "
        f"{metrics['profiles']} principals ({metrics['pairs']:,} pairs), K up to {args.kmax}, "
        f"retriever {args.retriever}\n"
    )
    _table(rows, total_t, peak)
    k = metrics["k"][str(args.kmax)]
    print(
        f"\nARecall@{args.kmax} post {k['arecall_post_nonempty']:.3f} → pre "
        f"{k['arecall_pre_nonempty']:.3f} on the {k['n_nonempty']:,} pairs with R_A ≠ ∅."
    )
    _representation(rep)


def _table(rows: list[tuple[str, float, float]], total_t: float, peak: float) -> None:
    print("| stage | wall time | peak RSS |")
    print("|---|--:|--:|")
    for name, seconds, gib in rows:
        print(f"| {name} | {seconds:.1f} s | {gib:.2f} GiB |")
    print(f"| **total** | **{total_t / 60:.1f} min** | **{peak:.2f} GiB** |")


def _representation(rep: dict | None) -> None:
    if rep is not None:
        print(
            f"\nrank: {rep['chosen']}, {rep['entries']:,} entries stored (head + tails "
            f"everywhere: {rep['if_head_and_tails']:,}; ranked to the needed depth everywhere: "
            f"{rep['if_ranked_to_needed_depth']:,})."
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="which", required=True)
    seed = sub.add_parser("seed", help="seed reference vs arecall on one synthetic corpus")
    seed.add_argument("--docs", type=int, default=10_000)
    seed.add_argument("--queries", type=int, default=200)
    seed.add_argument("--principals", type=int, default=8)
    scale = sub.add_parser("scale", help="the full pipeline, stage by stage")
    scale.add_argument("--docs", type=int, default=1_000_000)
    scale.add_argument("--queries", type=int, default=10_000)
    scale.add_argument("--principals", type=int, default=100)
    scale.add_argument("--grants", type=int, default=20, help="domains granted per principal")
    scale.add_argument("--vocab", type=int, default=200_000)
    scale.add_argument("--kmax", type=int, default=100)
    scale.add_argument("--retriever", default="tfidf")
    scale.add_argument("--corpus", choices=("realistic", "legacy"), default="realistic")
    scale.add_argument("--stages", default="", help="comma-separated stages to time (all)")
    scale.add_argument("--workdir", default="", help="keep the run here (default: a temp dir)")
    args = parser.parse_args()
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    {"seed": bench_seed, "scale": bench_scale}[args.which](args)


if __name__ == "__main__":
    main()
