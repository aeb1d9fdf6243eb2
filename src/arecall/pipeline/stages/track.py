"""DVC stage `track`: log this execution to MLflow (runs on every dvc repro)."""

from arecall.pipeline.stages import run_stage

if __name__ == "__main__":
    raise SystemExit(run_stage("track"))
