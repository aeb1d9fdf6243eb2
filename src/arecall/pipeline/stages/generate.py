"""Stage `generate`: build the corpus from its source and apply the authorization model."""

from __future__ import annotations

from typing import TYPE_CHECKING

from arecall.data.authorization import apply_profiles
from arecall.data.collection import Collection
from arecall.data.sources import load_corpus
from arecall.pipeline.layout import Layout
from arecall.pipeline.stages import run_stage

if TYPE_CHECKING:
    from arecall.pipeline.schema import ExperimentConfig

__all__ = ["generate"]


def generate(cfg: ExperimentConfig, layout: Layout) -> Collection:
    """Build the corpus and apply the authorization model; write the collection."""
    collection = apply_profiles(load_corpus(cfg.corpus), cfg.profiles)
    collection.save(layout.corpus)
    return collection


if __name__ == "__main__":
    raise SystemExit(run_stage(generate))
