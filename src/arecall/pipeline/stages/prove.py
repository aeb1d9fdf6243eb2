"""DVC stage `prove`: check the seed's claims on random inputs and on this run."""

from arecall.pipeline.stages import run_stage

if __name__ == "__main__":
    raise SystemExit(run_stage("prove"))
