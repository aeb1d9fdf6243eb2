"""DVC stage `report`: render the tables and the ARecall@K curve."""

from arecall.pipeline.stages import run_stage

if __name__ == "__main__":
    raise SystemExit(run_stage("report"))
