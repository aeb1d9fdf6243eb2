"""DVC stage `filter`: apply the post and pre placements for every principal."""

from arecall.pipeline.stages import run_stage

if __name__ == "__main__":
    raise SystemExit(run_stage("filter"))
