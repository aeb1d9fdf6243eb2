"""DVC stage `score`: every metric for every query-principal pair, K and placement."""

from arecall.pipeline.stages import run_stage

if __name__ == "__main__":
    raise SystemExit(run_stage("score"))
