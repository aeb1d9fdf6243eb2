"""DVC stage `rank`: fit the retriever and rank every query."""

from arecall.pipeline.stages import run_stage

if __name__ == "__main__":
    raise SystemExit(run_stage("rank"))
