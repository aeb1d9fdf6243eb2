"""DVC stage `generate`: build the corpus and apply the authorization model."""

from arecall.pipeline.stages import run_stage

if __name__ == "__main__":
    raise SystemExit(run_stage("generate"))
